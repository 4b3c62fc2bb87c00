"""Our chat messages as OpenAI chat messages, with media encoded inline (base64 data URLs).

- text parts stay text (adjacent text parts are merged into one, so servers that join parts with a
  separator render the same prompt as the in-process backends);
- an image becomes an ``image_url`` part holding a base64 data URL (JPEG quality 95 by default,
  ``image_format="png"`` for lossless);
- audio becomes an ``input_audio`` part holding a base64 16-bit PCM WAV at 16 kHz;
- a clip becomes a ``video_url`` part holding a base64 H.264 mp4 encoded here from the clip's frames
  at the clip frame rate. Its sound (``clip_audio``): ``"separate"`` (default) sends it as an
  ``input_audio`` part right after the video, ``"muxed"`` puts it into the mp4 as AAC, ``"drop"``
  sends frames only. ``clip_as="frames"`` sends a clip as its labelled frames plus its sound
  instead, for servers that take no inline video (``transformers serve`` loads videos only from
  URLs or local paths). Which request fields tell a server to pair them is the backend's business
  (:mod:`omniagent.backends.openai_backend`).
"""

from __future__ import annotations

import base64
import io
from fractions import Fraction
from typing import Any, Literal

import numpy as np

from envs.messages import SAMPLE_RATE, Message

ClipAudio = Literal["separate", "muxed", "drop"]
ClipAs = Literal["video", "frames"]


def encode_image(image: np.ndarray, fmt: str = "jpeg", quality: int = 95) -> str:
    """An RGB uint8 array as a ``data:image/...;base64,`` URL."""
    from PIL import Image

    fmt = fmt.lower()
    if fmt not in ("jpeg", "jpg", "png"):
        raise ValueError(f"image_format must be 'jpeg' or 'png', not {fmt!r}")
    buf = io.BytesIO()
    img = Image.fromarray(np.ascontiguousarray(image, dtype=np.uint8))
    if fmt == "png":
        img.save(buf, format="PNG", compress_level=1)
        mime = "image/png"
    else:
        img.save(buf, format="JPEG", quality=quality)
        mime = "image/jpeg"
    return f"data:{mime};base64,{base64.b64encode(buf.getvalue()).decode('ascii')}"


def encode_wav(samples: np.ndarray, sampling_rate: int = SAMPLE_RATE) -> str:
    """Mono float samples as base64 16-bit PCM WAV bytes (no data-URL prefix: ``input_audio.data``)."""
    import soundfile as sf

    buf = io.BytesIO()
    x = np.clip(np.asarray(samples, dtype=np.float32).reshape(-1), -1.0, 1.0)
    sf.write(buf, x, int(sampling_rate), format="WAV", subtype="PCM_16")
    return base64.b64encode(buf.getvalue()).decode("ascii")


def encode_mp4(
    frames: np.ndarray,
    fps: float,
    audio: np.ndarray | None = None,
    sampling_rate: int = SAMPLE_RATE,
    crf: int = 18,
) -> bytes:
    """Frames (T, H, W, 3) uint8 as an H.264 mp4 at ``fps`` (with AAC ``audio`` muxed in when given)."""
    import av

    frames = np.asarray(frames, dtype=np.uint8)
    if frames.ndim != 4 or frames.shape[-1] != 3 or len(frames) == 0:
        raise ValueError(f"frames must be (T, H, W, 3) with T >= 1, got {frames.shape}")
    h, w = frames.shape[1:3]
    if h % 2 or w % 2:  # yuv420p needs even sides: repeat the last row / column
        frames = np.pad(frames, ((0, 0), (0, h % 2), (0, w % 2), (0, 0)), mode="edge")
    buf = io.BytesIO()
    with av.open(buf, "w", format="mp4") as out:
        vs = out.add_stream("libx264", rate=Fraction(fps).limit_denominator(1001))
        vs.width, vs.height = frames.shape[2], frames.shape[1]
        vs.pix_fmt = "yuv420p"
        vs.options = {"preset": "ultrafast", "crf": str(crf)}
        as_ = None
        if audio is not None and len(audio):
            as_ = out.add_stream("aac", rate=int(sampling_rate))
            as_.layout = "mono"
        for img in frames:
            for pkt in vs.encode(av.VideoFrame.from_ndarray(img, format="rgb24")):
                out.mux(pkt)
        for pkt in vs.encode():
            out.mux(pkt)
        if as_ is not None:
            track = np.asarray(audio, dtype=np.float32).reshape(1, -1)
            step = 1024
            for k in range(0, track.shape[1], step):
                af = av.AudioFrame.from_ndarray(
                    np.ascontiguousarray(track[:, k : k + step]), format="fltp", layout="mono"
                )
                af.sample_rate = int(sampling_rate)
                af.pts = k
                for pkt in as_.encode(af):
                    out.mux(pkt)
            for pkt in as_.encode():
                out.mux(pkt)
    return buf.getvalue()


def _append(parts: list[dict[str, Any]], part: dict[str, Any]) -> None:
    """Add a part, merging adjacent text parts into one."""
    if part["type"] == "text" and parts and parts[-1]["type"] == "text":
        parts[-1]["text"] += part["text"]
    else:
        parts.append(part)


def _wav_part(samples: np.ndarray, sampling_rate: int) -> dict[str, Any]:
    return {
        "type": "input_audio",
        "input_audio": {"data": encode_wav(samples, sampling_rate), "format": "wav"},
    }


def clip_parts(
    part: dict[str, Any], clip_audio: ClipAudio, clip_as: ClipAs, image_format: str, jpeg_quality: int
) -> tuple[list[dict[str, Any]], bool]:
    """A clip as OpenAI parts, and whether its sound went with it.

    ``clip_as="frames"`` sends the clip's frames as labelled images (the labels of a frames percept)
    and its sound as one ``input_audio`` part, for servers that take no inline video.
    """
    sound = part.get("audio")
    has_sound = sound is not None and len(sound) > 0 and clip_audio != "drop"
    sr = part.get("sampling_rate", SAMPLE_RATE)
    out: list[dict[str, Any]] = []
    if clip_as == "frames":
        for image, t in zip(part["video"], part.get("timestamps") or [], strict=False):
            _append(out, {"type": "text", "text": f"\nFrame at {float(t):.2f}s:"})
            out.append(
                {"type": "image_url", "image_url": {"url": encode_image(image, image_format, jpeg_quality)}}
            )
        return out + ([_wav_part(sound, sr)] if has_sound else []), has_sound
    mp4 = encode_mp4(
        part["video"],
        float(part.get("fps") or 2.0),
        sound if has_sound and clip_audio == "muxed" else None,
        sr,
    )
    out.append(
        {
            "type": "video_url",
            "video_url": {"url": "data:video/mp4;base64," + base64.b64encode(mp4).decode("ascii")},
        }
    )
    if has_sound and clip_audio == "separate":
        out.append(_wav_part(sound, sr))
    return out, has_sound


def to_openai_messages(
    messages: list[Message],
    *,
    image_format: str = "jpeg",
    jpeg_quality: int = 95,
    clip_audio: ClipAudio = "separate",
    clip_as: ClipAs = "video",
) -> tuple[list[dict[str, Any]], dict[str, bool]]:
    """Convert our chat messages to OpenAI chat messages.

    Returns ``(messages, flags)``; ``flags["video"]`` is True when a clip was sent as a video and
    ``flags["audio_in_video"]`` when that clip's sound was sent with it.
    """
    flags = {"video": False, "audio_in_video": False}
    out: list[dict[str, Any]] = []
    for m in messages:
        parts: list[dict[str, Any]] = []
        for p in m["content"]:
            kind = p.get("type")
            if kind == "text":
                _append(parts, {"type": "text", "text": p["text"]})
            elif kind == "image":
                url = encode_image(p["image"], image_format, jpeg_quality)
                parts.append({"type": "image_url", "image_url": {"url": url}})
            elif kind == "audio":
                parts.append(_wav_part(p["audio"], p.get("sampling_rate", SAMPLE_RATE)))
            elif kind == "video":
                clip, has_sound = clip_parts(p, clip_audio, clip_as, image_format, jpeg_quality)
                for c in clip:
                    _append(parts, c)
                if clip_as == "video":
                    flags["video"] = True
                    flags["audio_in_video"] = flags["audio_in_video"] or has_sound
            else:
                raise ValueError(f"unknown content part type {kind!r}")
        if all(p["type"] == "text" for p in parts):
            content: Any = "".join(p["text"] for p in parts)
        else:
            content = parts
        out.append({"role": m["role"], "content": content})
    return out, flags
