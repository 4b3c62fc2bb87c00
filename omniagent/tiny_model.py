"""Tiny, randomly initialised omni thinkers that build offline in about a second, one per model family.

Each is a real transformers thinker of its family (vision tower, audio encoder, multimodal RoPE, the
whole processor pipeline; for Qwen3-Omni the mixture of experts and DeepStack too) shrunk to well under
a million parameters, with a byte-level BPE tokenizer trained here on a small built-in corpus. It exists
so that tests, CI and local smoke runs exercise exactly the code path a real checkpoint takes -- chat
template, placeholder expansion, audio-in-video interleaving, ``generate`` -- without downloading weights.
What differs between families comes from :mod:`omniagent.families` (the family's ``tiny`` entry).

**Its outputs are noise.** The weights are random; nothing it generates means anything. Use it to
check plumbing (shapes, token counts, positions, timing), never to judge behaviour.

``build_tiny_thinker`` saves the artefacts with ``save_pretrained`` into a cache directory and
reloads them from there, so the same directory also loads by path like a checkpoint::

    model, processor = build_tiny_thinker(seed=0, out_dir="/tmp/tiny", family="qwen3-omni")
    TransformersPolicy(model="/tmp/tiny")  # loads the same weights and processor

From the command line (the folder passes ``python -m rl.checkpoint check``)::

    python -m omniagent.tiny_model --family qwen3-omni --out runs/tiny-qwen3-omni
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from omniagent.families import DEFAULT_FAMILY, FAMILIES, ModelFamily, family_for_model_type, get_family

# Bump when anything below changes what gets built, so stale caches are not reused.
BUILD_VERSION = 1

SPECIAL_TOKENS = DEFAULT_FAMILY.tiny.special_tokens  # Qwen2.5-Omni's, in id order
VOCAB_SIZE = 640

# Pixels per image / video frame after resizing: 4..16 LLM tokens, so a 64x64 frame becomes a 4x4 patch
# grid of 14 px (Qwen2.5-Omni: 56x56 input) or 16 px (Qwen3-Omni: 64x64) -> 4 tokens after the 2x2 merge.
MIN_TOKENS, MAX_TOKENS = 4, 16
MIN_PIXELS = MIN_TOKENS * DEFAULT_FAMILY.processor.pixels_per_token**2
MAX_PIXELS = MAX_TOKENS * DEFAULT_FAMILY.processor.pixels_per_token**2
# Whisper pads every clip to ``chunk_length`` seconds; the real models use 300 s. The tiny models pad
# to 30 s to keep the log-mel cheap, so clips longer than 30 s are cut by their feature extractor.
AUDIO_CHUNK_SECONDS = 30

CHAT_TEMPLATE = DEFAULT_FAMILY.tiny.chat_template

# Training text for the tokenizer: English prose about watching videos plus JSON-shaped agent replies,
# so that the merges cover braces, quotes, keys and numbers. Byte-level BPE can encode any string; this
# only decides which strings are short.
TOKENIZER_CORPUS = [
    "You are an agent answering questions about a long video. Ask for the frames, audio and clips you need.",
    "The video is 3600.0 seconds long. You may request frames, an audio clip or a short video clip.",
    "Each frame is labelled with its timestamp, for example [t=12.5s] or <frame t=00:01:23.400>.",
    "Question: What colour is the car that enters the scene after the speaker mentions the bridge?",
    "Options: (A) red (B) blue (C) green (D) white. Answer with the letter of the correct option.",
    "The speaker says the meeting starts at noon. A dog barks twice, then music plays in the background.",
    "I will look at the beginning of the video first, then listen to the audio around minute ten.",
    "Thinking: the answer is probably in the second half, where the narrator describes the experiment.",
    '{"action": "frames", "start": 0.0, "end": 60.0, "count": 8}',
    '{"action": "audio", "start": 120.5, "end": 150.5}',
    '{"action": "clip", "start": 300.0, "end": 310.0, "fps": 2.0, "with_audio": true}',
    '{"action": "answer", "answer": "B", "confidence": 0.85, "reason": "the car is blue"}',
    '{"tool": "request_frames", "arguments": {"timestamps": [1.0, 2.5, 4.0, 8.0]}}',
    '{"tool": "request_audio", "arguments": {"start": 42.0, "end": 57.25}}',
    '{"thought": "I need more context.", "action": {"type": "frames", "times": [10, 20, 30]}}',
    '[{"role": "user", "content": "Where is the key?"}, {"role": "assistant", "content": "On the table."}]',
    "<think>The frames at 10 s and 20 s show a kitchen; the audio mentions a recipe.</think>",
    "<answer>C</answer> <action>frames 100 200 4</action> <budget>remaining: 12 steps, 300 tokens</budget>",
    "0 1 2 3 4 5 6 7 8 9 10 11 12 15 20 25 30 45 60 90 120 180 240 300 600 900 1200 1800 3600",
    "true false null yes no none unknown start end time seconds minutes frame frames audio clip video",
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n<|im_start|>assistant\n",
    "The quick brown fox jumps over the lazy dog. A person walks into the room and opens the window.",
    "Subtitles: Hello everyone, welcome back to the channel. Today we are going to build a small robot.",
]


def _family(family: str | ModelFamily | None) -> ModelFamily:
    if family is None:
        return DEFAULT_FAMILY
    return family if isinstance(family, ModelFamily) else get_family(family)


def _default_cache_dir(seed: int, family: str | ModelFamily | None = None) -> Path:
    root = Path(tempfile.gettempdir()) / "omniagent-cache"  # pass out_dir to put it elsewhere
    fam = _family(family)
    name = "tiny-thinker" if fam is DEFAULT_FAMILY else f"tiny-{fam.name}"
    return root / f"{name}-v{BUILD_VERSION}-seed{seed}"


def train_tokenizer(
    corpus: list[str] | None = None, vocab_size: int = VOCAB_SIZE, family: str | ModelFamily | None = None
) -> Any:
    """Train the byte-level BPE (deterministic: fixed corpus, single-threaded merges) and wrap it.

    ``corpus``/``vocab_size``: another corpus and size (the tiny agent's recipe trains its tokenizer on the
    environment's own prompts, which makes its contexts several times shorter). ``family``: whose special
    tokens and placeholders the tokenizer declares (default Qwen2.5-Omni)."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import Qwen2Tokenizer

    # The same pre-tokenisation as Qwen2Tokenizer, so the learned merges apply identically there.
    from transformers.models.qwen2.tokenization_qwen2 import PRETOKENIZE_REGEX

    fam = _family(family)
    specials = list(fam.tiny.special_tokens)
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(PRETOKENIZE_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(TOKENIZER_CORPUS * 4 if corpus is None else corpus, trainer=trainer)
    state = json.loads(bpe.to_str())["model"]
    vocab: dict[str, int] = state["vocab"]
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in state["merges"]]

    t = fam.tokens
    tokenizer = Qwen2Tokenizer(
        vocab=vocab,
        merges=merges,
        unk_token=None,
        bos_token=None,
        eos_token="<|im_end|>",
        pad_token=fam.pad_token,
        extra_special_tokens=[s for s in specials if s not in (fam.pad_token, "<|im_end|>")],
        image_token=t.image,
        video_token=t.video,
        audio_token=t.audio,
        vision_bos_token=t.vision_start,
        vision_eos_token=t.vision_end,
        audio_bos_token=t.audio_start,
        audio_eos_token=t.audio_end,
        model_max_length=32768,
        chat_template=fam.tiny.chat_template,
    )
    if fam.tiny.added_tokens:  # ordinary tokens (e.g. <think>): decoding with skip_special_tokens keeps them
        tokenizer.add_tokens(list(fam.tiny.added_tokens))
    return tokenizer


def build_processor(tokenizer: Any, family: str | ModelFamily | None = None) -> Any:
    """The multimodal processor of ``family`` (default Qwen2.5-Omni) around ``tokenizer``: image and video
    processors bounded to ``MIN_TOKENS``..``MAX_TOKENS`` visual tokens per image, and a Whisper feature
    extractor reading ``AUDIO_CHUNK_SECONDS`` chunks. Deterministic; nothing is downloaded."""
    from transformers import Qwen2VLImageProcessor, Qwen2VLVideoProcessor, WhisperFeatureExtractor

    fam = _family(family)
    proc = fam.processor
    lo, hi = MIN_TOKENS * proc.pixels_per_token**2, MAX_TOKENS * proc.pixels_per_token**2
    geometry = dict(patch_size=proc.patch_size, merge_size=proc.merge_size)
    geometry["temporal_patch_size"] = proc.temporal_patch_size
    size = {"shortest_edge": lo, "longest_edge": hi}
    image_processor = Qwen2VLImageProcessor(size=dict(size), min_pixels=lo, max_pixels=hi, **geometry)
    video_processor = Qwen2VLVideoProcessor(size=dict(size), min_pixels=lo, max_pixels=hi, **geometry)
    feature_extractor = WhisperFeatureExtractor(
        feature_size=proc.mel_bins,
        sampling_rate=proc.sampling_rate,
        hop_length=proc.mel_hop,
        n_fft=400,
        chunk_length=AUDIO_CHUNK_SECONDS,
        return_attention_mask=True,
    )
    return fam.transformers_class("processor")(
        image_processor=image_processor,
        video_processor=video_processor,
        feature_extractor=feature_extractor,
        tokenizer=tokenizer,
        chat_template=fam.tiny.chat_template,
    )


def build_model(tokenizer: Any, seed: int, family: str | ModelFamily | None = None) -> Any:
    """A randomly initialised tiny thinker of ``family`` (default Qwen2.5-Omni) for ``tokenizer``'s
    vocabulary and special-token ids, in eval mode, with greedy generation that stops at ``<|im_end|>`` or pad.
    The weights are a pure function of ``seed`` (``torch.manual_seed`` is set, which also changes the global
    torch random state)."""
    import torch
    from transformers import GenerationConfig

    fam = _family(family)
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in fam.tiny.special_tokens}
    ids["user"] = tokenizer.encode("user", add_special_tokens=False)[0]
    config = fam.transformers_class("thinker_config")(**fam.tiny.thinker_config(ids, len(tokenizer)))
    torch.manual_seed(seed)
    model = fam.transformers_class("thinker")(config).eval()
    end, pad = ids["<|im_end|>"], ids[fam.pad_token]
    model.generation_config = GenerationConfig(eos_token_id=[end, pad], pad_token_id=pad, do_sample=False)
    return model


def _is_complete(path: Path) -> bool:
    return (path / "BUILD_OK").is_file()


def load_tiny_thinker(path: str | os.PathLike[str]) -> tuple[Any, Any]:
    """Load a tiny thinker saved by :func:`build_tiny_thinker` (model in eval mode, processor); its
    family comes from the folder's ``config.json``."""
    model_type = json.loads((Path(path) / "config.json").read_text()).get("model_type")
    fam = family_for_model_type(model_type)
    model = fam.transformers_class("thinker").from_pretrained(path).eval()
    processor = fam.transformers_class("processor").from_pretrained(path)
    return model, processor


def _check_cache(path: Path, seed: int, fam: ModelFamily) -> bool:
    """True when ``path`` holds this build; raises when it holds another one or something else."""
    if _is_complete(path):
        info = json.loads((path / "BUILD_OK").read_text())
        built = (info.get("seed"), info.get("version"), info.get("family", DEFAULT_FAMILY.name))
        if built == (seed, BUILD_VERSION, fam.name):
            return True
        raise ValueError(
            f"{path} holds a tiny thinker built with family={built[2]} seed={built[0]} version={built[1]}, "
            f"not family={fam.name} seed={seed} version={BUILD_VERSION}; pass another out_dir"
        )
    if path.is_dir() and any(path.iterdir()):
        raise ValueError(
            f"{path} is a non-empty folder without a tiny-thinker build; pass a new or empty folder"
        )
    return False


def build_tiny_thinker(
    seed: int = 0, out_dir: str | os.PathLike[str] | None = None, family: str | ModelFamily | None = None
) -> tuple[Any, Any]:
    """Build (or load from cache) a tiny random thinker of ``family`` and its processor.

    Args:
        seed: seeds the weight initialisation; the same seed gives the same weights and the same
            tokenizer on every machine.
        out_dir: where the artefacts are saved with ``save_pretrained`` (and reloaded from on later
            calls). Defaults to the system temp dir, one folder per family, seed and build version. The
            folder loads by path like a real checkpoint.
        family: a name in :data:`omniagent.families.FAMILIES` (default ``qwen2.5-omni``).

    Returns:
        ``(model, processor)``: the family's thinker class in eval mode on CPU (float32) and its
        processor. The model's outputs are noise -- random weights; it is for plumbing tests only.
    """
    fam = _family(family)
    path = Path(out_dir) if out_dir is not None else _default_cache_dir(seed, fam)
    if _check_cache(path, seed, fam):
        return load_tiny_thinker(path)

    tokenizer = train_tokenizer(family=fam)
    processor = build_processor(tokenizer, fam)
    model = build_model(tokenizer, seed, fam)

    # Write into a private sibling folder and rename it into place, so concurrent builders (parallel
    # test workers) never see a half-written checkpoint.
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = path.parent / f".{path.name}.{uuid.uuid4().hex}.tmp"
    try:
        model.save_pretrained(staging)
        processor.save_pretrained(staging)
        marker = {"seed": seed, "version": BUILD_VERSION, "family": fam.name}
        (staging / "BUILD_OK").write_text(json.dumps(marker))
        if path.is_dir() and not any(path.iterdir()):
            path.rmdir()
        try:
            os.replace(staging, path)
        except OSError:
            if not _is_complete(path):  # not just another process finishing the same build first
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    # Reload from disk so the in-memory pair is exactly what loading by path gives.
    return load_tiny_thinker(path)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m omniagent.tiny_model",
        description="Write a complete random checkpoint folder of a model family (config, weights, processor, "
        "tokenizer, chat template), offline. Its outputs are noise: for plumbing checks only.",
    )
    parser.add_argument("--family", choices=sorted(FAMILIES), default=DEFAULT_FAMILY.name)
    parser.add_argument("--out", required=True, help="a new or empty folder")
    parser.add_argument("--seed", type=int, default=0, help="seeds the random weights")
    args = parser.parse_args(argv)
    try:
        build_tiny_thinker(seed=args.seed, out_dir=args.out, family=args.family)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(Path(args.out).resolve())
    return 0


if __name__ == "__main__":
    sys.exit(main())
