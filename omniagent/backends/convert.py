"""Pure conversion from the environment's chat messages to Qwen-Omni processor inputs (every family of
:mod:`omniagent.families`: Qwen2.5-Omni, Qwen3-Omni).

The environment speaks the format of :mod:`envs.messages`: text parts and media parts holding raw
numpy arrays, each media part preceded by a text label with its absolute time. A Qwen-Omni processor
wants something else: a prompt string with one placeholder per media item (rendered by the chat
template), and the media in separate lists, in the order the placeholders appear.

:func:`plan_messages` does the model-independent half (no processor, no torch): it walks the parts
in order, keeps every text part exactly where the environment put it (so each timestamp label stays
right before its frame's vision tokens), and collects images, videos and audio. It also decides the
two things the processor cannot work out by itself:

* **Video timing.** The processor's only timing input is one ``fps`` per call
  (``seconds_per_temporal_grid = temporal_patch_size / fps``); there is no per-frame timestamp. The
  fps is computed from the part's ``timestamps`` (mean frame rate over the clip), falling back to
  its ``fps`` field. An odd frame count is padded here by repeating the last frame -- exactly what
  the processor would do silently -- and the padding is recorded in :attr:`VideoItem.padded_frames`.
* **Audio in video.** A ``video`` part with its own ``audio`` is sent with Qwen's audio-in-video
  interleaving inside one vision block that opens with the audio start token (Qwen2.5-Omni: 2-second
  chunks, the chunk's video tokens then its audio tokens; Qwen3-Omni: frames and audio ordered by
  their temporal position). The processor's flag is
  per call, not per video, so interleaving is used only when *every* video in the context carries
  audio and all share one fps; otherwise each clip's audio becomes an ordinary audio part right after
  its video (same information, no interleaving) and :attr:`ConvertedMessages.notes` says why.

:func:`processor_call_kwargs` and :func:`build_model_inputs` do the processor half. Frame sizes are
passed on every call (``images_kwargs`` / ``videos_kwargs`` ``size``) because the Omni processor's
class defaults (128-768 x 28² pixels per video frame) silently override a size set on the video
processor itself. ``use_audio_in_video`` and ``fps`` go inside ``videos_kwargs`` (transformers 4.57
drops top-level ones when a ``videos_kwargs`` dict is given; 5.x raises if both are given). The
processor output does not carry ``use_audio_in_video``, so :func:`build_model_inputs` returns it
separately: it must also reach ``generate``/``forward`` or positions are silently different. What
differs between families (whether the installed processor takes the flag, model-config values the
processor must share) comes from the processor's family (:func:`omniagent.families.family_for_processor`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from envs.messages import SAMPLE_RATE, Message
from omniagent.families import family_for_processor

logger = logging.getLogger(__name__)

# Qwen-Omni vision encoders group this many frames into one temporal patch (the processor's own value
# is used when it has one).
TEMPORAL_PATCH_SIZE = 2
DEFAULT_FPS = 2.0


@dataclass
class VideoItem:
    """One video as the processor receives it."""

    frames: np.ndarray  # (T, H, W, 3) uint8, T a multiple of the temporal patch size
    fps: float
    timestamps: list[float]  # of the real frames, as the environment gave them
    padded_frames: int = 0  # copies of the last frame appended to fill the last temporal patch
    audio: np.ndarray | None = None  # set when this clip's audio is interleaved with its frames


@dataclass
class ConvertedMessages:
    """The model-independent result of :func:`plan_messages`.

    ``conversation`` is what the chat template renders: the original messages with every media part
    replaced by a bare ``{"type": "image" | "video" | "audio"}`` placeholder (so a template that
    dispatches on key presence cannot mistake a video's ``audio`` array for an audio part).
    ``audios`` is in the order the processor consumes audio lengths: text order, where an
    interleaved video's audio counts at the video's position.
    """

    conversation: list[dict[str, Any]]
    images: list[np.ndarray] = field(default_factory=list)
    videos: list[VideoItem] = field(default_factory=list)
    audios: list[np.ndarray] = field(default_factory=list)
    use_audio_in_video: bool = False
    notes: list[str] = field(default_factory=list)

    @property
    def video_fps(self) -> float | None:
        """The single fps handed to the processor (it takes one per call); ``None`` without videos."""
        return self.videos[0].fps if self.videos else None

    @property
    def fps_uniform(self) -> bool:
        return len({round(v.fps, 6) for v in self.videos}) <= 1


# --------------------------------------------------------------------------------------------------
# Media helpers
# --------------------------------------------------------------------------------------------------


def fps_from_timestamps(timestamps: list[float] | np.ndarray | None, fallback: float | None = None) -> float:
    """Mean frame rate of a clip from its frame timestamps (seconds).

    ``(n - 1) / (last - first)``: the processor assumes evenly spaced frames, and the mean rate makes
    the clip's first and last temporal positions land at the right distance. Falls back to
    ``fallback`` (then :data:`DEFAULT_FPS`) for a single frame or timestamps that do not increase.
    """
    ts = np.asarray(timestamps if timestamps is not None else [], dtype=np.float64)
    if ts.size >= 2:
        span = float(ts[-1] - ts[0])
        if span > 0 and np.all(np.diff(ts) > 0):
            return (ts.size - 1) / span
    if fallback is not None and fallback > 0:
        return float(fallback)
    return DEFAULT_FPS


def pad_frames(frames: np.ndarray, multiple: int = TEMPORAL_PATCH_SIZE) -> tuple[np.ndarray, int]:
    """Repeat the last frame until the frame count is a multiple of ``multiple``.

    This is what the Qwen2-VL video processor does on its own; doing it here makes it visible (the
    returned count) and keeps the vLLM path identical.
    """
    pad = -frames.shape[0] % multiple
    if pad:
        frames = np.concatenate([frames, np.repeat(frames[-1:], pad, axis=0)], axis=0)
    return frames, pad


def _as_image(array: Any) -> np.ndarray:
    image = np.asarray(array)
    if image.ndim != 3 or image.shape[-1] != 3:
        raise ValueError(f"image part must be an (H, W, 3) array, got shape {image.shape}")
    if image.dtype != np.uint8:
        raise TypeError(f"image part must be uint8, got {image.dtype}")
    return image


def _as_video(array: Any) -> np.ndarray:
    video = np.asarray(array)
    if video.ndim != 4 or video.shape[-1] != 3 or video.shape[0] == 0:
        raise ValueError(f"video part must be a (T>0, H, W, 3) array, got shape {video.shape}")
    if video.dtype != np.uint8:
        raise TypeError(f"video part must be uint8, got {video.dtype}")
    return video


def _as_audio(array: Any, sampling_rate: int | None) -> np.ndarray:
    if sampling_rate is not None and int(sampling_rate) != SAMPLE_RATE:
        raise ValueError(f"audio must be sampled at {SAMPLE_RATE} Hz, got {sampling_rate} Hz")
    audio = np.asarray(array, dtype=np.float32)
    if audio.ndim == 2:  # (channels, n) or (n, channels): mix down to mono
        audio = audio.mean(axis=0 if audio.shape[0] < audio.shape[1] else 1)
    if audio.ndim != 1 or audio.size == 0:
        raise ValueError(f"audio must be a non-empty mono array, got shape {np.shape(array)}")
    return audio


# --------------------------------------------------------------------------------------------------
# Planning (no processor needed)
# --------------------------------------------------------------------------------------------------


def plan_messages(
    messages: list[Message],
    *,
    allow_audio_in_video: bool = True,
    temporal_patch_size: int = TEMPORAL_PATCH_SIZE,
) -> ConvertedMessages:
    """Split chat messages into a template-ready conversation and media lists (see module docs)."""
    videos_with_audio: list[bool] = []
    video_fps: list[float] = []
    for message in messages:
        for part in _parts(message):
            if part.get("type") == "video":
                videos_with_audio.append(part.get("audio") is not None)
                video_fps.append(fps_from_timestamps(part.get("timestamps"), part.get("fps")))

    notes: list[str] = []
    interleave = allow_audio_in_video and bool(videos_with_audio) and all(videos_with_audio)
    if interleave and len({round(f, 6) for f in video_fps}) > 1:
        interleave = False
        notes.append(
            "videos with audio have different frame rates; the processor takes one fps per call, so "
            "their audio is sent as separate audio parts instead of interleaved"
        )
    elif allow_audio_in_video and any(videos_with_audio) and not all(videos_with_audio):
        notes.append(
            "only some videos carry audio; audio-in-video is one flag per call, so their audio is "
            "sent as separate audio parts after each video"
        )
    elif not allow_audio_in_video and any(videos_with_audio):
        notes.append("audio-in-video disabled: clip audio is sent as separate audio parts")

    out = ConvertedMessages(conversation=[], use_audio_in_video=interleave, notes=notes)
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            out.conversation.append({"role": message["role"], "content": content})
            continue
        parts: list[dict[str, Any]] = []
        for part in content:
            kind = part.get("type")
            if kind == "text":
                parts.append({"type": "text", "text": part["text"]})
            elif kind == "image":
                out.images.append(_as_image(part["image"]))
                parts.append({"type": "image"})
            elif kind == "audio":
                out.audios.append(_as_audio(part["audio"], part.get("sampling_rate")))
                parts.append({"type": "audio"})
            elif kind == "video":
                frames, pad = pad_frames(_as_video(part["video"]), temporal_patch_size)
                timestamps = [float(t) for t in (part.get("timestamps") or [])]
                item = VideoItem(
                    frames=frames,
                    fps=fps_from_timestamps(timestamps, part.get("fps")),
                    timestamps=timestamps,
                    padded_frames=pad,
                )
                out.videos.append(item)
                parts.append({"type": "video"})
                if part.get("audio") is not None:
                    audio = _as_audio(part["audio"], part.get("sampling_rate"))
                    out.audios.append(audio)
                    if interleave:
                        item.audio = audio
                    else:
                        parts.append({"type": "audio"})
            else:
                raise ValueError(f"unknown content part type {kind!r}")
        out.conversation.append({"role": message["role"], "content": parts})
    for note in notes:
        logger.info(note)
    return out


def _parts(message: Message) -> list[dict[str, Any]]:
    content = message.get("content")
    return [] if isinstance(content, str) or content is None else list(content)


# --------------------------------------------------------------------------------------------------
# Processor half
# --------------------------------------------------------------------------------------------------


def render_prompt(
    processor: Any, conversation: list[dict[str, Any]], add_generation_prompt: bool = True
) -> str:
    """The prompt string with one placeholder per media item, via the checkpoint's chat template."""
    templater = (
        processor if getattr(processor, "chat_template", None) else getattr(processor, "tokenizer", None)
    )
    if templater is None or not getattr(templater, "chat_template", None):
        raise ValueError("the processor has no chat template; a Qwen-Omni checkpoint ships one")
    return templater.apply_chat_template(
        conversation, tokenize=False, add_generation_prompt=add_generation_prompt
    )


def _size(pixels: tuple[int, int] | None, sub_processor: Any) -> dict[str, int]:
    """``{"shortest_edge": min_pixels, "longest_edge": max_pixels}`` from an override or the checkpoint."""
    if pixels is not None:
        lo, hi = pixels
    else:
        size = sub_processor.size
        get = size.get if isinstance(size, dict) else lambda k: getattr(size, k, None)
        lo = get("shortest_edge") or getattr(sub_processor, "min_pixels", None)
        hi = get("longest_edge") or getattr(sub_processor, "max_pixels", None)
        if lo is None or hi is None:
            raise ValueError(f"cannot read min/max pixels from {type(sub_processor).__name__}.size={size!r}")
    return {"shortest_edge": int(lo), "longest_edge": int(hi)}


def supports_use_audio_in_video(processor: Any) -> bool:
    """Whether the installed processor of ``processor``'s family takes ``use_audio_in_video`` in
    ``videos_kwargs`` (Qwen2.5-Omni: transformers 4.52-5.10; Qwen3-Omni: 4.57 on). Where it does not,
    the clip audio falls back to separate audio parts."""
    return family_for_processor(processor).supports_audio_in_video()


@dataclass
class ProcessorInputs:
    """Everything one processor call needs, plus what must travel on to ``generate``."""

    plan: ConvertedMessages
    text: str
    call_kwargs: dict[str, Any]

    @property
    def use_audio_in_video(self) -> bool:
        return self.plan.use_audio_in_video


def processor_call_kwargs(
    messages: list[Message],
    processor: Any,
    *,
    image_pixels: tuple[int, int] | None = None,
    video_pixels: tuple[int, int] | None = None,
    allow_audio_in_video: bool = True,
    add_generation_prompt: bool = True,
    video_kwargs: dict[str, Any] | None = None,
    completion: str = "",
) -> ProcessorInputs:
    """Build the keyword arguments of ``processor(**kwargs)`` for one context.

    ``image_pixels`` / ``video_pixels`` are ``(min_pixels, max_pixels)`` per image / frame; by default
    the sizes configured on the checkpoint's image and video processors are used -- and passed
    explicitly, since the Omni processor's class defaults would override the video one.
    ``video_kwargs``: more ``videos_kwargs`` for every call with videos (the model-config values a
    family's processor must share, :func:`model_video_kwargs`). ``completion``: text appended after the
    rendered prompt, as the caller wrote it (an SFT target after the generation prompt); the returned
    ``text`` is the rendered prompt alone.
    """
    allow = allow_audio_in_video and supports_use_audio_in_video(processor)
    plan = plan_messages(
        messages,
        allow_audio_in_video=allow,
        temporal_patch_size=getattr(processor.video_processor, "temporal_patch_size", TEMPORAL_PATCH_SIZE),
    )
    if allow_audio_in_video and not allow and any(v.audio is not None for v in plan.videos):
        plan.notes.append("installed transformers has no use_audio_in_video; audio sent separately")
    text = render_prompt(processor, plan.conversation, add_generation_prompt=add_generation_prompt)
    kwargs: dict[str, Any] = {"text": [text + completion], "return_tensors": "pt"}
    if plan.images:
        kwargs["images"] = plan.images
        kwargs["images_kwargs"] = {"size": _size(image_pixels, processor.image_processor)}
    if plan.videos:
        kwargs["videos"] = [v.frames for v in plan.videos]
        videos_kwargs: dict[str, Any] = {
            "size": _size(video_pixels, processor.video_processor),
            "fps": plan.video_fps,
        }
        if allow:
            videos_kwargs["use_audio_in_video"] = plan.use_audio_in_video
        kwargs["videos_kwargs"] = {**videos_kwargs, **(video_kwargs or {})}
    if plan.audios:
        kwargs["audio"] = plan.audios
        feature_extractor = processor.feature_extractor
        limit = getattr(feature_extractor, "n_samples", None)
        for i, audio in enumerate(plan.audios):
            if limit and audio.size > limit:
                logger.warning(
                    "audio %d is %.1f s; the feature extractor keeps only the first %.1f s",
                    i,
                    audio.size / SAMPLE_RATE,
                    limit / SAMPLE_RATE,
                )
    return ProcessorInputs(plan=plan, text=text, call_kwargs=kwargs)


def build_model_inputs(
    messages: list[Message],
    processor: Any,
    *,
    image_pixels: tuple[int, int] | None = None,
    video_pixels: tuple[int, int] | None = None,
    allow_audio_in_video: bool = True,
    add_generation_prompt: bool = True,
    video_kwargs: dict[str, Any] | None = None,
    completion: str = "",
) -> tuple[Any, ProcessorInputs]:
    """Run the processor on a context. Returns ``(batch, prepared)``.

    ``batch`` is the processor's :class:`~transformers.BatchFeature` with ``use_audio_in_video`` added
    when a clip's audio is interleaved (pass ``**batch`` to ``generate``/``forward`` and it arrives).
    When videos with different frame rates are sent without interleaving, their
    ``video_second_per_grid`` is corrected per video (the processor computes it from one fps).
    """
    prepared = processor_call_kwargs(
        messages,
        processor,
        image_pixels=image_pixels,
        video_pixels=video_pixels,
        allow_audio_in_video=allow_audio_in_video,
        add_generation_prompt=add_generation_prompt,
        video_kwargs=video_kwargs,
        completion=completion,
    )
    batch = processor(**prepared.call_kwargs)
    plan = prepared.plan
    if plan.videos and not plan.fps_uniform and "video_second_per_grid" in batch:
        import torch

        tps = getattr(processor.video_processor, "temporal_patch_size", TEMPORAL_PATCH_SIZE)
        old = batch["video_second_per_grid"]
        batch["video_second_per_grid"] = torch.as_tensor(
            [tps / v.fps for v in plan.videos], dtype=old.dtype if hasattr(old, "dtype") else None
        )
    if plan.use_audio_in_video:
        batch["use_audio_in_video"] = True
    return batch, prepared


def model_video_kwargs(processor: Any, model_config: Any) -> dict[str, Any]:
    """The model-config values ``processor``'s family hands to the processor on every call with
    videos (Qwen3-Omni: ``position_id_per_seconds``, so that the processor orders interleaved frames
    and audio by the positions the model computes; its own default may differ from the config's)."""
    family = family_for_processor(processor)
    names = family.processor.video_kwargs_from_config
    return {
        name: getattr(model_config, name) for name in names if getattr(model_config, name, None) is not None
    }
