"""What differs between omni model families, declared once per family.

A :class:`ModelFamily` names everything a backend, the checkpoint checker, the tiny test model or the
training side would otherwise branch on: the transformers classes, the placeholder tokens, how many
tokens a medium becomes, the processor's arguments, the chat template's quirks, how a thinking variant
writes its reasoning, and which verl/vLLM patches apply. Each family lives in one module of this package
(``qwen2_5_omni.py``, ``qwen3_omni.py``) and registers itself in :mod:`omniagent.families`.

This module imports nothing heavy: transformers classes are named here and resolved only when asked
(:meth:`ModelFamily.transformers_class`).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class MediaTokens:
    """The placeholder and boundary tokens of one family, as its tokenizer spells them."""

    image: str
    video: str
    audio: str
    vision_start: str
    vision_end: str
    audio_start: str
    audio_end: str

    def block(self, kind: str) -> str:
        """What the chat template writes for one image, video or audio part (before expansion)."""
        if kind == "audio":
            return self.audio_start + self.audio + self.audio_end
        if kind in ("image", "video"):
            return self.vision_start + getattr(self, kind) + self.vision_end
        raise ValueError(f"no media block for {kind!r}; expected image, video or audio")

    def all(self) -> tuple[str, ...]:
        """Every placeholder and boundary token: none of them may appear in generated text."""
        return (
            self.image,
            self.video,
            self.audio,
            self.vision_start,
            self.vision_end,
            self.audio_start,
            self.audio_end,
        )


@dataclass(frozen=True)
class Thinking:
    """How a thinking variant writes its reasoning before the answer: ``<think>...</think>`` then text.

    The environment's parser never sees the reasoning: :meth:`split` cuts it off and the episode loop
    records it in the turn record's ``thinking`` field. ``opened_by_template``: the chat template's
    generation prompt already holds the open tag, so the output starts inside the reasoning.
    """

    open_tag: str = "<think>"
    close_tag: str = "</think>"
    opened_by_template: bool = False

    def split(self, text: str) -> tuple[str | None, str]:
        """``(reasoning, rest)``; ``(None, text)`` when ``text`` holds no complete reasoning block.

        An unclosed block (the token budget ran out mid-thought) stays in ``rest`` whole, so the
        environment rejects the turn with a precise format error instead of seeing half a thought.
        """
        head = text.lstrip()
        if head.startswith(self.open_tag):
            head = head[len(self.open_tag) :]
        elif not (self.opened_by_template or self.close_tag in text):
            return None, text
        reasoning, sep, rest = head.partition(self.close_tag)
        if not sep:
            return None, text
        return reasoning.strip(), rest.strip()

    def join(self, reasoning: str, text: str) -> str:
        """What the model writes for a turn with ``reasoning`` before ``text``, after the generation
        prompt (the inverse of :meth:`split`): the training target of a thinking turn."""
        opener = "" if self.opened_by_template else self.open_tag
        return f"{opener}\n{reasoning.strip()}\n{self.close_tag}\n\n{text.strip()}"

    def grammar(self, max_chars: int | None) -> str:
        """EBNF of the reasoning block a constrained decoder allows before the turn's JSON: any text
        without ``<`` (so it cannot open a tag), at most ``max_chars`` characters when given."""
        body = "[^<]*" if max_chars is None else f"[^<]{{0,{int(max_chars)}}}"
        opener = "" if self.opened_by_template else _ebnf_literal(self.open_tag) + " "
        return f"root ::= {opener}{body} {_ebnf_literal(self.close_tag)} [ \\n]*"


def _ebnf_literal(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


@dataclass(frozen=True)
class Variant:
    """One released variant of a family (same architecture, different post-training)."""

    name: str
    thinking: bool = False  # writes a reasoning block before its answer
    agent: bool = True  # can follow the environment's turn format (a captioner cannot)
    hub_ids: tuple[str, ...] = ()
    note: str = ""


@dataclass(frozen=True)
class Classes:
    """transformers class names of one family (resolved lazily, see :meth:`ModelFamily.transformers_class`)."""

    thinker: str
    full: str
    thinker_config: str
    processor: str
    processor_module: str  # where the processor's videos-kwargs class lives
    videos_kwargs: str  # the TypedDict whose keys the processor accepts in ``videos_kwargs``
    modeling_module: str  # where the class owning ``get_rope_index`` lives
    rope_index: str  # that class (its methods compute positions from a thinker config alone)
    text_model: str  # the thinker's decoder stack (what verl's Ulysses input slicing wraps)


@dataclass(frozen=True)
class ProcessorArgs:
    """The processor's arguments and geometry for one family."""

    patch_size: int  # pixels per vision patch side
    merge_size: int = 2  # patches merged per LLM token side
    temporal_patch_size: int = 2  # frames per temporal patch (an odd count is padded)
    sampling_rate: int = 16_000
    mel_hop: int = 160  # audio samples per mel frame
    mel_bins: int = 128
    position_id_per_seconds: int = 25  # temporal RoPE positions per second of media
    audio_in_video: bool = True  # interleaves a clip's audio with its frames (``use_audio_in_video``)
    # model-config attributes handed to the processor on every call, so that its placeholder order
    # matches the positions the model computes (``videos_kwargs`` keys)
    video_kwargs_from_config: tuple[str, ...] = ()

    @property
    def pixels_per_token(self) -> int:
        """Side in pixels of the square one visual LLM token covers."""
        return self.patch_size * self.merge_size


@dataclass(frozen=True)
class ChatQuirks:
    """What a family's chat template does that a caller must know."""

    default_system: str | None  # added when a conversation has no system message (None: nothing)
    drops_assistant_thinking: bool = False  # reasoning in past assistant turns is not rendered
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Patches:
    """Names of the patches each training/serving stack needs for this family (see docs/models.md), and
    what upstream verl cannot do for it yet: ``verl_gaps`` maps a training feature (``lora``) to one line
    naming what is missing; the launchers refuse the feature with that line before anything starts."""

    vllm: tuple[str, ...] = ()
    verl: tuple[str, ...] = ()
    verl_gaps: tuple[tuple[str, str], ...] = ()

    def verl_gap(self, feature: str) -> str | None:
        """What verl lacks for ``feature`` on this family, or None when nothing is known to be missing."""
        return dict(self.verl_gaps).get(feature)


@dataclass(frozen=True)
class TinyModel:
    """How the tiny random test model of this family is built (:mod:`omniagent.tiny_model`)."""

    chat_template: str  # Jinja, rendering this family's placeholder blocks
    special_tokens: tuple[str, ...]  # the tokenizer's special tokens, in id order
    added_tokens: tuple[str, ...]  # ordinary added tokens (kept by ``skip_special_tokens``)
    thinker_config: Callable[[Mapping[str, int], int], dict[str, Any]]  # (token ids, vocab) -> kwargs
    aliases: tuple[str, ...]  # ``--model`` names that build it


CHAT_SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")  # every Qwen chat tokenizer's first specials


def tiny_special_tokens(tokens: MediaTokens, audio: tuple[str, str, str]) -> tuple[str, ...]:
    """A tiny tokenizer's special tokens in id order: the chat markers, the family's three audio tokens in
    its own order (``audio``), then the vision tokens."""
    vision = (tokens.vision_start, tokens.vision_end, "<|vision_pad|>", tokens.image, tokens.video)
    return (*CHAT_SPECIALS, *audio, *vision)


def tiny_thinker_tokens(tokens: MediaTokens, ids: Mapping[str, int], placeholder_key: str) -> dict[str, Any]:
    """The token ids every family's tiny thinker config takes, and its weight scale. The three placeholders
    are named ``{image,video,audio}{placeholder_key}`` (``_token_index`` or ``_token_id``, as the family's
    config class spells them)."""
    return {
        **{f"{kind}{placeholder_key}": ids[getattr(tokens, kind)] for kind in ("audio", "image", "video")},
        "audio_start_token_id": ids[tokens.audio_start],
        "audio_end_token_id": ids[tokens.audio_end],  # read by vLLM's Qwen3 thinker, not declared there
        "vision_start_token_id": ids[tokens.vision_start],  # read by get_rope_index, not declared
        "vision_end_token_id": ids[tokens.vision_end],
        "user_token_id": ids["user"],
        "pad_token_id": ids["<|endoftext|>"],
        "eos_token_id": ids["<|im_end|>"],
        # Wider than the usual 0.02 so next-token distributions are peaked rather than uniform: greedy
        # decoding has clear winners and entropies vary from step to step.
        "initializer_range": 0.2,
    }


@dataclass(frozen=True)
class ModelFamily:
    """Everything that differs between omni model families (see the module docstring)."""

    name: str  # the CLI name, e.g. "qwen2.5-omni"
    title: str
    thinker_model_type: str  # config.json model_type of a thinker-only checkpoint
    full_model_type: str  # ... of a full (thinker + talker) checkpoint
    classes: Classes
    tokens: MediaTokens
    audio_output_tokens: Callable[[int], int]  # mel frames of one clip -> LLM audio tokens
    processor: ProcessorArgs
    chat: ChatQuirks
    variants: tuple[Variant, ...]
    patches: Patches
    tiny: TinyModel
    thinking: Thinking | None = None
    eos_tokens: tuple[str, ...] = ("<|im_end|>", "<|endoftext|>")
    pad_token: str = "<|endoftext|>"
    notes: tuple[str, ...] = field(default=())

    @property
    def model_types(self) -> tuple[str, str]:
        return (self.thinker_model_type, self.full_model_type)

    # ------------------------------------------------------------------ media-token counting
    def audio_tokens(self, num_samples: int) -> int:
        """LLM tokens of one audio clip of ``num_samples`` samples at the family's sampling rate."""
        return int(self.audio_output_tokens(int(num_samples) // self.processor.mel_hop))

    def visual_tokens(self, grid_thw: tuple[int, int, int] | list[int]) -> int:
        """LLM tokens of one image or video given the processor's ``(t, h, w)`` patch grid."""
        t, h, w = (int(x) for x in grid_thw)
        return t * h * w // self.processor.merge_size**2

    def media_token_ids(self, tokenizer: Any) -> list[int]:
        """Ids of every placeholder and boundary token in ``tokenizer`` (those a model must never
        generate: a stray one has no features behind it and breaks the rope index's media count)."""
        ids = set()
        for token in self.tokens.all():
            tid = tokenizer.convert_tokens_to_ids(token)
            if isinstance(tid, int) and tid != getattr(tokenizer, "unk_token_id", None):
                ids.add(tid)
        return sorted(ids)

    # ------------------------------------------------------------------ variants
    def variant(self, model_id: str, thinking: bool | None = None) -> Variant:
        """The variant a checkpoint name denotes (``...-Thinking``, ``...-Captioner``; else the first,
        the instruct model). ``thinking`` overrides the name when given."""
        lowered = model_id.lower()
        named = [v for v in self.variants[1:] if v.name in lowered]
        base = named[0] if named else self.variants[0]
        if thinking is None or thinking == base.thinking:
            return base
        return next((v for v in self.variants if v.thinking == thinking and v.agent), base)

    # ------------------------------------------------------------------ transformers
    def transformers_class(self, which: str) -> type:
        """``thinker``, ``full``, ``thinker_config`` or ``processor`` as a transformers class."""
        import transformers

        return getattr(transformers, getattr(self.classes, which))

    def rope_index_class(self) -> type:
        """The class whose ``get_rope_index`` (with ``get_llm_pos_ids_for_vision``, ``get_chunked_index``)
        computes multimodal positions; its methods need only ``config`` and ``spatial_merge_size``."""
        return getattr(importlib.import_module(self.classes.modeling_module), self.classes.rope_index)

    def videos_kwargs_keys(self) -> set[str]:
        """Keys the installed processor accepts in ``videos_kwargs`` (empty when it is missing)."""
        try:
            module = importlib.import_module(self.classes.processor_module)
        except ImportError:
            return set()
        kwargs_cls = getattr(module, self.classes.videos_kwargs, None)
        return set(getattr(kwargs_cls, "__annotations__", {})) if kwargs_cls is not None else set()

    def supports_audio_in_video(self) -> bool:
        """Whether the installed processor interleaves a clip's audio (``use_audio_in_video``)."""
        return self.processor.audio_in_video and "use_audio_in_video" in self.videos_kwargs_keys()
