"""A tiny, randomly initialised Qwen2.5-Omni thinker that builds offline in well under a second.

The model is a real :class:`~transformers.Qwen2_5OmniThinkerForConditionalGeneration` (vision tower,
audio encoder, multimodal RoPE, the whole processor pipeline) shrunk to ~0.3 M parameters, with a
byte-level BPE tokenizer trained here on a small built-in corpus. It exists so that tests, CI and
local smoke runs exercise exactly the code path a real checkpoint takes -- chat template, placeholder
expansion, audio-in-video interleaving, ``generate`` -- without downloading any weights.

**Its outputs are noise.** The weights are random; nothing it generates means anything. Use it to
check plumbing (shapes, token counts, positions, timing), never to judge behaviour.

``build_tiny_thinker`` saves the artefacts with ``save_pretrained`` into a cache directory and
reloads them from there, so the same directory also loads by path like a checkpoint::

    model, processor = build_tiny_thinker(seed=0, out_dir="/tmp/tiny")
    TransformersPolicy(model="/tmp/tiny")  # loads the same weights and processor
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import uuid
from pathlib import Path
from typing import Any

# Bump when anything below changes what gets built, so stale caches are not reused.
BUILD_VERSION = 1

SPECIAL_TOKENS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|AUDIO|>",
    "<|audio_bos|>",
    "<|audio_eos|>",
    "<|vision_bos|>",
    "<|vision_eos|>",
    "<|vision_pad|>",
    "<|IMAGE|>",
    "<|VIDEO|>",
)
VOCAB_SIZE = 640

# Pixels per image / video frame after resizing: 4..16 patches of 28x28, so a 64x64 frame becomes a
# 56x56 input -> a 4x4 patch grid -> 4 LLM tokens after the 2x2 spatial merge.
MIN_PIXELS = 4 * 28 * 28
MAX_PIXELS = 16 * 28 * 28
# Whisper pads every clip to ``chunk_length`` seconds; the real model uses 300 s. The tiny model pads
# to 30 s to keep the log-mel cheap, so clips longer than 30 s are cut by its feature extractor.
AUDIO_CHUNK_SECONDS = 30

# A Qwen-style chat template. Parts dispatch on ``type`` only (a ``video`` part carrying an ``audio``
# array stays a video). With ``add_vision_id`` / ``add_audio_id`` media get "Picture n: " labels like
# the Qwen templates; a conversation without a system message gets a short default one.
CHAT_TEMPLATE = (
    "{% set image_count = namespace(value=0) %}"
    "{% set video_count = namespace(value=0) %}"
    "{% set audio_count = namespace(value=0) %}"
    "{% for message in messages %}"
    "{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
    "{% endif %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}"
    "{{ message['content'] }}"
    "{% else %}"
    "{% for part in message['content'] %}"
    "{% if part['type'] == 'text' %}"
    "{{ part['text'] }}"
    "{% elif part['type'] == 'image' %}"
    "{% set image_count.value = image_count.value + 1 %}"
    "{% if add_vision_id %}Picture {{ image_count.value }}: {% endif %}"
    "<|vision_bos|><|IMAGE|><|vision_eos|>"
    "{% elif part['type'] == 'video' %}"
    "{% set video_count.value = video_count.value + 1 %}"
    "{% if add_vision_id %}Video {{ video_count.value }}: {% endif %}"
    "<|vision_bos|><|VIDEO|><|vision_eos|>"
    "{% elif part['type'] == 'audio' %}"
    "{% set audio_count.value = audio_count.value + 1 %}"
    "{% if add_audio_id %}Audio {{ audio_count.value }}: {% endif %}"
    "<|audio_bos|><|AUDIO|><|audio_eos|>"
    "{% endif %}"
    "{% endfor %}"
    "{% endif %}"
    "<|im_end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

# Training text for the tokenizer: English prose about watching videos plus JSON-shaped agent replies,
# so that the merges cover braces, quotes, keys and numbers. Byte-level BPE can encode any string; this
# only decides which strings are short.
_CORPUS = [
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


def _default_cache_dir(seed: int) -> Path:
    root = Path(tempfile.gettempdir()) / "omniagent-cache"  # pass out_dir to put it elsewhere
    return root / f"tiny-thinker-v{BUILD_VERSION}-seed{seed}"


def _train_tokenizer(corpus: list[str] | None = None, vocab_size: int = VOCAB_SIZE) -> Any:
    """Train the byte-level BPE (deterministic: fixed corpus, single-threaded merges) and wrap it.

    ``corpus``/``vocab_size``: another corpus and size (``recipes/tiny_agent/model.py`` trains the agent's on the
    environment's own prompts, which makes its contexts several times shorter)."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import Qwen2Tokenizer

    # The same pre-tokenisation as Qwen2Tokenizer, so the learned merges apply identically there.
    from transformers.models.qwen2.tokenization_qwen2 import PRETOKENIZE_REGEX

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
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(_CORPUS * 4 if corpus is None else corpus, trainer=trainer)
    state = json.loads(bpe.to_str())["model"]
    vocab: dict[str, int] = state["vocab"]
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in state["merges"]]

    return Qwen2Tokenizer(
        vocab=vocab,
        merges=merges,
        unk_token=None,
        bos_token=None,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        extra_special_tokens=[t for t in SPECIAL_TOKENS if t not in ("<|endoftext|>", "<|im_end|>")],
        image_token="<|IMAGE|>",
        video_token="<|VIDEO|>",
        audio_token="<|AUDIO|>",
        vision_bos_token="<|vision_bos|>",
        vision_eos_token="<|vision_eos|>",
        audio_bos_token="<|audio_bos|>",
        audio_eos_token="<|audio_eos|>",
        model_max_length=32768,
        chat_template=CHAT_TEMPLATE,
    )


def _build_processor(tokenizer: Any) -> Any:
    from transformers import (
        Qwen2_5OmniProcessor,
        Qwen2VLImageProcessor,
        Qwen2VLVideoProcessor,
        WhisperFeatureExtractor,
    )

    size = {"shortest_edge": MIN_PIXELS, "longest_edge": MAX_PIXELS}
    image_processor = Qwen2VLImageProcessor(size=dict(size), min_pixels=MIN_PIXELS, max_pixels=MAX_PIXELS)
    video_processor = Qwen2VLVideoProcessor(size=dict(size), min_pixels=MIN_PIXELS, max_pixels=MAX_PIXELS)
    feature_extractor = WhisperFeatureExtractor(
        feature_size=128,
        sampling_rate=16000,
        hop_length=160,
        n_fft=400,
        chunk_length=AUDIO_CHUNK_SECONDS,
        return_attention_mask=True,
    )
    return Qwen2_5OmniProcessor(
        image_processor=image_processor,
        video_processor=video_processor,
        feature_extractor=feature_extractor,
        tokenizer=tokenizer,
        chat_template=CHAT_TEMPLATE,
    )


def _build_model(tokenizer: Any, seed: int) -> Any:
    import torch
    from transformers import (
        GenerationConfig,
        Qwen2_5OmniThinkerConfig,
        Qwen2_5OmniThinkerForConditionalGeneration,
    )

    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS}
    config = Qwen2_5OmniThinkerConfig(
        audio_config=dict(
            num_mel_bins=128,
            encoder_layers=2,
            encoder_attention_heads=2,
            encoder_ffn_dim=64,
            d_model=32,
            output_dim=64,
        ),
        vision_config=dict(
            depth=2,
            hidden_size=32,
            intermediate_size=64,
            num_heads=2,
            out_hidden_size=64,
            fullatt_block_indexes=[1],
        ),
        text_config=dict(
            vocab_size=len(tokenizer),
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=32768,
            rope_parameters={"rope_type": "default", "rope_theta": 1e6, "mrope_section": [2, 3, 3]},
            pad_token_id=ids["<|endoftext|>"],
            eos_token_id=ids["<|im_end|>"],
        ),
        audio_token_index=ids["<|AUDIO|>"],
        image_token_index=ids["<|IMAGE|>"],
        video_token_index=ids["<|VIDEO|>"],
        audio_start_token_id=ids["<|audio_bos|>"],
        audio_end_token_id=ids["<|audio_eos|>"],
        vision_start_token_id=ids["<|vision_bos|>"],
        vision_end_token_id=ids["<|vision_eos|>"],
        user_token_id=tokenizer.encode("user", add_special_tokens=False)[0],
        pad_token_id=ids["<|endoftext|>"],
        eos_token_id=ids["<|im_end|>"],
        # Wider than the usual 0.02 so next-token distributions are peaked rather than uniform: greedy
        # decoding has clear winners and entropies vary from step to step.
        initializer_range=0.2,
    )
    torch.manual_seed(seed)
    model = Qwen2_5OmniThinkerForConditionalGeneration(config).eval()
    model.generation_config = GenerationConfig(
        eos_token_id=[ids["<|im_end|>"], ids["<|endoftext|>"]],
        pad_token_id=ids["<|endoftext|>"],
        do_sample=False,
    )
    return model


def _is_complete(path: Path) -> bool:
    return (path / "BUILD_OK").is_file()


def load_tiny_thinker(path: str | os.PathLike[str]) -> tuple[Any, Any]:
    """Load a tiny thinker saved by :func:`build_tiny_thinker` (model in eval mode, processor)."""
    from transformers import Qwen2_5OmniProcessor, Qwen2_5OmniThinkerForConditionalGeneration

    model = Qwen2_5OmniThinkerForConditionalGeneration.from_pretrained(path).eval()
    processor = Qwen2_5OmniProcessor.from_pretrained(path)
    return model, processor


def build_tiny_thinker(seed: int = 0, out_dir: str | os.PathLike[str] | None = None) -> tuple[Any, Any]:
    """Build (or load from cache) a tiny random Qwen2.5-Omni thinker and its processor.

    Args:
        seed: seeds the weight initialisation; the same seed gives the same weights and the same
            tokenizer on every machine.
        out_dir: where the artefacts are saved with ``save_pretrained`` (and reloaded from on later
            calls). Defaults to ``$OMNIAGENT_CACHE`` or the system temp dir, one folder per seed and
            build version. The folder loads by path like a real checkpoint.

    Returns:
        ``(model, processor)``: a :class:`~transformers.Qwen2_5OmniThinkerForConditionalGeneration`
        in eval mode on CPU (float32) and a :class:`~transformers.Qwen2_5OmniProcessor`. The model's
        outputs are noise -- random weights; it is for plumbing tests only.
    """
    path = Path(out_dir) if out_dir is not None else _default_cache_dir(seed)
    marker = path / "BUILD_OK"
    if _is_complete(path):
        info = json.loads(marker.read_text())
        if info.get("seed") == seed and info.get("version") == BUILD_VERSION:
            return load_tiny_thinker(path)
        raise ValueError(
            f"{path} holds a tiny thinker built with seed={info.get('seed')} version={info.get('version')}, "
            f"not seed={seed} version={BUILD_VERSION}; pass another out_dir"
        )

    if path.is_dir() and any(path.iterdir()):
        raise ValueError(
            f"{path} is a non-empty folder without a tiny-thinker build; pass a new or empty folder"
        )

    tokenizer = _train_tokenizer()
    processor = _build_processor(tokenizer)
    model = _build_model(tokenizer, seed)

    # Write into a private sibling folder and rename it into place, so concurrent builders (parallel
    # test workers) never see a half-written checkpoint.
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = path.parent / f".{path.name}.{uuid.uuid4().hex}.tmp"
    try:
        model.save_pretrained(staging)
        processor.save_pretrained(staging)
        (staging / "BUILD_OK").write_text(json.dumps({"seed": seed, "version": BUILD_VERSION}))
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
