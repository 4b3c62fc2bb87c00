"""A policy for any OpenAI-compatible chat endpoint (``vllm serve``, SGLang, hosted APIs).

Our chat messages (see :mod:`envs.messages`) are converted to OpenAI content parts:

- text parts stay text (adjacent text parts are merged into one, so servers that join parts with a
  separator render the same prompt as the in-process backends);
- an image becomes an ``image_url`` part holding a base64 data URL (JPEG quality 95 by default,
  ``image_format="png"`` for lossless);
- audio becomes an ``input_audio`` part holding a base64 16-bit PCM WAV at 16 kHz;
- a clip becomes a ``video_url`` part holding a base64 H.264 mp4 encoded here from the clip's frames
  at the clip frame rate. **Its sound** (``clip_audio``):

  - ``"separate"`` (default): the mp4 is silent and the clip's audio follows as an ``input_audio``
    part right after the video, and the request carries ``extra_body={"mm_processor_kwargs":
    {"use_audio_in_video": True}}``. This is how vLLM pairs a video with its audio for
    Qwen2.5-Omni (one audio item per video, in order), and it matches what the in-process
    backends feed the processor;
  - ``"muxed"``: the audio is muxed into the mp4 as AAC (no separate part), still with
    ``use_audio_in_video``; for servers that pull the sound out of the video container;
  - ``"drop"``: frames only.

  Video requests also carry ``media_io_kwargs={"video": {"num_frames": -1}}`` so vLLM keeps every
  frame we sent rather than re-sampling its own fixed count.

Log-probs: with ``top_logprobs`` > 0 (default 20, vLLM's default cap) the request asks for the top-k
log-probs of every generated token; the turn's entropy is the mean over tokens of the entropy of the
renormalised top-k distribution. That is a lower bound on the true entropy, hence
``entropy_is_estimate=True``. A server that refuses log-probs is asked again without them (once; the
policy remembers).

Every failure (no server, time-out, HTTP error, empty or malformed reply) raises
:class:`~omniagent.policy.PolicyError` with one line that says what to check.
"""

from __future__ import annotations

import base64
import io
import math
import time
from fractions import Fraction
from typing import Any, Literal

import numpy as np

from envs.messages import SAMPLE_RATE, Message
from omniagent.policy import Policy, PolicyError, TurnOutput, register_policy

DEFAULT_BASE_URL = "http://127.0.0.1:8000/v1"
ClipAudio = Literal["separate", "muxed", "drop"]


# ----------------------------------------------------------------------------------- media encoding
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


def to_openai_messages(
    messages: list[Message],
    *,
    image_format: str = "jpeg",
    jpeg_quality: int = 95,
    clip_audio: ClipAudio = "separate",
) -> tuple[list[dict[str, Any]], dict[str, bool]]:
    """Convert our chat messages to OpenAI chat messages.

    Returns ``(messages, flags)``; ``flags["video"]`` is True when a clip was sent and
    ``flags["audio_in_video"]`` when a clip's sound was sent with it.
    """
    flags = {"video": False, "audio_in_video": False}
    out: list[dict[str, Any]] = []
    for m in messages:
        parts: list[dict[str, Any]] = []
        for p in m["content"]:
            kind = p.get("type")
            if kind == "text":
                if parts and parts[-1]["type"] == "text":
                    parts[-1]["text"] += p["text"]
                else:
                    parts.append({"type": "text", "text": p["text"]})
            elif kind == "image":
                url = encode_image(p["image"], image_format, jpeg_quality)
                parts.append({"type": "image_url", "image_url": {"url": url}})
            elif kind == "audio":
                data = encode_wav(p["audio"], p.get("sampling_rate", SAMPLE_RATE))
                parts.append({"type": "input_audio", "input_audio": {"data": data, "format": "wav"}})
            elif kind == "video":
                sound = p.get("audio")
                has_sound = sound is not None and len(sound) > 0 and clip_audio != "drop"
                sr = p.get("sampling_rate", SAMPLE_RATE)
                mp4 = encode_mp4(
                    p["video"],
                    float(p.get("fps") or 2.0),
                    sound if has_sound and clip_audio == "muxed" else None,
                    sr,
                )
                url = "data:video/mp4;base64," + base64.b64encode(mp4).decode("ascii")
                parts.append({"type": "video_url", "video_url": {"url": url}})
                flags["video"] = True
                if has_sound:
                    flags["audio_in_video"] = True
                    if clip_audio == "separate":
                        parts.append(
                            {
                                "type": "input_audio",
                                "input_audio": {"data": encode_wav(sound, sr), "format": "wav"},
                            }
                        )
            else:
                raise ValueError(f"unknown content part type {kind!r}")
        if all(p["type"] == "text" for p in parts):
            content: Any = "".join(p["text"] for p in parts)
        else:
            content = parts
        out.append({"role": m["role"], "content": content})
    return out, flags


# -------------------------------------------------------------------------------------- entropy
def topk_entropy(top_logprobs: list[float]) -> float:
    """Entropy (nats) of the top-k distribution renormalised to sum to one."""
    lps = np.asarray([lp for lp in top_logprobs if lp is not None and math.isfinite(lp)], dtype=np.float64)
    if lps.size == 0:
        return 0.0
    lps = lps - np.logaddexp.reduce(lps)
    return float(max(0.0, -(np.exp(lps) * lps).sum()))


def _logprob_stats(choice: Any) -> tuple[list[float] | None, list[float] | None]:
    lp = getattr(choice, "logprobs", None)
    content = getattr(lp, "content", None) if lp is not None else None
    if not content:
        return None, None
    token_lps, entropies = [], []
    for tok in content:
        token_lps.append(float(tok.logprob))
        tops = [float(t.logprob) for t in (getattr(tok, "top_logprobs", None) or [])]
        if tops:
            entropies.append(topk_entropy(tops))
    return token_lps, (entropies or None)


# ------------------------------------------------------------------------------------------ policy
@register_policy("openai")
class OpenAIPolicy(Policy):
    """Chat completions against an OpenAI-compatible server.

    Args:
        model: model id as served (``None``: the first model the server lists).
        base_url: the API root, e.g. ``http://127.0.0.1:8000/v1``.
        api_key: sent as the bearer token; local servers accept anything ("EMPTY").
        temperature, seed, max_tokens, top_p: sampling; temperature 0 is greedy.
        timeout: seconds per request; retries: automatic retries on connection errors, 408/409/429/5xx.
        top_logprobs: top-k log-probs per token for the entropy estimate (0 disables).
        image_format / jpeg_quality / clip_audio: media encoding, see the module docstring.
        extra_body: merged into every request body (e.g. ``{"top_k": 20}`` for vLLM).
    """

    name = "openai"

    def __init__(
        self,
        model: str | None = None,
        base_url: str = DEFAULT_BASE_URL,
        api_key: str | None = "EMPTY",
        temperature: float = 0.0,
        seed: int | None = 0,
        max_tokens: int = 1024,
        top_p: float | None = None,
        timeout: float = 300.0,
        retries: int = 2,
        top_logprobs: int = 20,
        image_format: str = "jpeg",
        jpeg_quality: int = 95,
        clip_audio: ClipAudio = "separate",
        extra_body: dict[str, Any] | None = None,
        **_: Any,
    ) -> None:
        from openai import OpenAI

        if clip_audio not in ("separate", "muxed", "drop"):
            raise ValueError(f"clip_audio must be 'separate', 'muxed' or 'drop', not {clip_audio!r}")
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.temperature = temperature
        self.seed = seed
        self.max_tokens = max_tokens
        self.top_p = top_p
        self.timeout = timeout
        self.top_logprobs = top_logprobs
        self.image_format = image_format
        self.jpeg_quality = jpeg_quality
        self.clip_audio: ClipAudio = clip_audio
        self.extra_body = dict(extra_body or {})
        self._logprobs_ok = top_logprobs > 0
        self.client = OpenAI(
            base_url=self.base_url, api_key=api_key or "EMPTY", timeout=timeout, max_retries=retries
        )

    # ---------------------------------------------------------------- helpers
    def _where(self) -> str:
        return f"the server at {self.base_url}"

    def _translate(self, exc: Exception) -> PolicyError:
        """One clear line for an exception raised by the openai client."""
        import openai

        url = self.base_url
        if isinstance(exc, openai.APITimeoutError):
            return PolicyError(
                f"{self._where()} did not answer within {self.timeout:g} s: check that it is not overloaded "
                "or stuck, or raise --timeout"
            )
        if isinstance(exc, openai.APIConnectionError):
            return PolicyError(
                f"no server at {url}: start one with `vllm serve {self.model or 'MODEL'} --port 8000` "
                "or pass --base-url"
            )
        if isinstance(exc, openai.APIStatusError):
            msg = _server_message(exc)
            code = exc.status_code
            if code in (401, 403):
                return PolicyError(
                    f"{self._where()} refused the API key (HTTP {code}): check --api-key. {msg}"
                )
            if code == 404:
                return PolicyError(
                    f"{self._where()} answered 404 ({msg}): check that --base-url ends in /v1 and that "
                    f"--model {self.model!r} is the name the server serves{self._served_hint()}"
                )
            if code in (400, 413, 422):
                return PolicyError(
                    f"{self._where()} rejected the request (HTTP {code}): {msg}. Check that the served model "
                    "accepts images/audio/video (vLLM: --limit-mm-per-prompt) and that the context fits "
                    "(--max-model-len)"
                )
            return PolicyError(f"{self._where()} failed with HTTP {code}: {msg}. Check the server log")
        if isinstance(exc, openai.APIResponseValidationError):
            return PolicyError(f"{self._where()} sent a reply that is not a chat completion: {exc}")
        return PolicyError(f"request to {url} failed: {type(exc).__name__}: {exc}")

    def _served_hint(self) -> str:
        try:
            ids = [m.id for m in self.client.with_options(max_retries=0, timeout=5).models.list().data]
        except Exception:
            return ""
        return f" (served: {', '.join(ids)})" if ids else ""

    def _resolve_model(self) -> str:
        if self.model:
            return self.model
        try:
            ids = [m.id for m in self.client.models.list().data]
        except Exception as exc:
            raise self._translate(exc) from None
        if not ids:
            raise PolicyError(f"{self._where()} serves no model: pass --model")
        self.model = ids[0]
        return self.model

    def request_body(self, messages: list[Message]) -> dict[str, Any]:
        """The keyword arguments of ``chat.completions.create`` for ``messages`` (for inspection)."""
        oa_messages, flags = to_openai_messages(
            messages,
            image_format=self.image_format,
            jpeg_quality=self.jpeg_quality,
            clip_audio=self.clip_audio,
        )
        extra = dict(self.extra_body)
        if flags["video"]:
            mm = dict(extra.get("mm_processor_kwargs") or {})
            mm.setdefault("use_audio_in_video", flags["audio_in_video"])
            extra["mm_processor_kwargs"] = mm
            io_kwargs = dict(extra.get("media_io_kwargs") or {})
            io_kwargs.setdefault("video", {"num_frames": -1})
            extra["media_io_kwargs"] = io_kwargs
        kwargs: dict[str, Any] = {
            "model": self.model or "",
            "messages": oa_messages,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
        }
        if self.seed is not None:
            kwargs["seed"] = self.seed
        if self.top_p is not None:
            kwargs["top_p"] = self.top_p
        if self._logprobs_ok:
            kwargs["logprobs"] = True
            kwargs["top_logprobs"] = self.top_logprobs
        if extra:
            kwargs["extra_body"] = extra
        return kwargs

    # -------------------------------------------------------------------- act
    def act(self, messages: list[Message]) -> TurnOutput:
        import openai

        self._resolve_model()
        kwargs = self.request_body(messages)
        t0 = time.perf_counter()
        try:
            try:
                resp = self.client.chat.completions.create(**kwargs)
            except openai.BadRequestError as exc:
                if not self._logprobs_ok or "logprob" not in _server_message(exc).lower():
                    raise
                self._logprobs_ok = False  # the server refuses log-probs: go on without entropy
                kwargs.pop("logprobs", None)
                kwargs.pop("top_logprobs", None)
                resp = self.client.chat.completions.create(**kwargs)
        except openai.OpenAIError as exc:
            raise self._translate(exc) from None
        except (ValueError, TypeError) as exc:  # a body that is not JSON (json.JSONDecodeError)
            raise PolicyError(
                f"{self._where()} sent a reply that is not JSON ({type(exc).__name__}: {exc}): check that "
                "--base-url points at an OpenAI-compatible API"
            ) from None
        seconds = time.perf_counter() - t0
        return self._parse_response(resp, seconds)

    def _parse_response(self, resp: Any, seconds: float) -> TurnOutput:
        if isinstance(resp, str | bytes) or resp is None:
            raise PolicyError(
                f"{self._where()} sent a reply that is not a chat completion ({str(resp)[:60]!r}): "
                "check that --base-url points at an OpenAI-compatible API"
            )
        try:
            choices = resp.choices
        except AttributeError:
            choices = None
        if not choices:
            raise PolicyError(
                f"{self._where()} returned no choices: check that --base-url points at an OpenAI-compatible "
                "API and the server log for errors"
            )
        choice = choices[0]
        try:
            text = choice.message.content
        except AttributeError:
            text = None
        if not isinstance(text, str):
            raise PolicyError(
                f"{self._where()} returned a choice without text content (finish_reason="
                f"{getattr(choice, 'finish_reason', None)!r}): check the server log"
            )
        try:
            token_lps, entropies = _logprob_stats(choice)
        except (AttributeError, TypeError, ValueError):  # malformed log-probs: keep the text
            token_lps, entropies = None, None
        usage = getattr(resp, "usage", None)
        return TurnOutput(
            text=text,
            token_logprobs=token_lps,
            token_entropies=entropies,
            entropy=float(np.mean(entropies)) if entropies else None,
            entropy_is_estimate=entropies is not None,
            prompt_tokens=getattr(usage, "prompt_tokens", None),
            completion_tokens=getattr(usage, "completion_tokens", None),
            model_seconds=seconds,
        )

    def close(self) -> None:
        try:
            self.client.close()
        except Exception:
            pass


def _server_message(exc: Any) -> str:
    """The error text a server put in its body (OpenAI and vLLM style), on one short line."""
    body = getattr(exc, "body", None)
    msg = None
    if isinstance(body, dict):
        err = body.get("error", body)
        msg = err.get("message") if isinstance(err, dict) else err
        msg = msg or body.get("message") or body.get("detail")
    if not msg:
        msg = getattr(exc, "message", None) or str(exc)
    return " ".join(str(msg).split())[:300]
