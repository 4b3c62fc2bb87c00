"""A policy for any OpenAI-compatible chat endpoint (``vllm serve``, ``transformers serve``, hosted APIs).

Messages and media are converted by :mod:`omniagent.backends.openai_messages` (images as JPEG/PNG
data URLs, audio as WAV ``input_audio``, clips as H.264 mp4 ``video_url`` with their sound as a
separate ``input_audio`` part by default).

**Clips.** vLLM takes a clip as an inline mp4 (``video_url`` holding a data URL); most other
servers take no inline video (``transformers serve`` loads videos only from URLs or its own disk,
hosted APIs none at all), so there a clip goes as its labelled frames plus its sound
(``clip_as="auto"``, the default; ``"video"`` or ``"frames"`` force one).

**Server extras.** vLLM needs two request fields that other servers refuse (``transformers serve``
answers HTTP 422 to unknown fields): with a clip, ``mm_processor_kwargs={"use_audio_in_video":
...}`` (vLLM pairs each video with the audio item that follows it, as Qwen2.5-Omni expects) and
``media_io_kwargs={"video": {"num_frames": -1}}`` (keep every frame we sent). They are sent only to
a vLLM server: ``server="vllm"``, or ``"auto"`` (default) when the server's ``/models`` list says
``owned_by: "vllm"``; ``server="generic"`` never sends them. ``extra_body`` is always sent as given.

**Deadline.** ``timeout`` bounds the whole request, retries included: the request runs on an async
client under :func:`asyncio.wait_for`, so a server that trickles bytes cannot hold a turn longer
(httpx's own time-outs apply per read).

**Log-probs.** With ``top_logprobs`` > 0 (default 20, vLLM's default cap) the request asks for the
top-k log-probs of every generated token; the turn's entropy is the shared top-k estimate of
:mod:`omniagent.backends.entropy` (a lower bound; ``entropy_estimator="topk_lump"``). A server that
refuses log-probs is asked again without them (once; the policy remembers).

**Secrets.** ``api_key`` is a :class:`pydantic.SecretStr`: :meth:`Policy.config` and ``repr`` show
it masked, so recording a policy's configuration never writes the key.

Every failure (no server, time-out, HTTP error, empty or malformed reply) raises
:class:`~omniagent.policy.PolicyError` with one line that says what to check.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import time
from collections.abc import Awaitable, Callable
from typing import Any, Literal, TypeVar

import numpy as np
from pydantic import Field, SecretStr

from envs.messages import Message
from omniagent.backends.constrained import TurnSchemas
from omniagent.backends.entropy import TOPK_ESTIMATOR, topk_entropy
from omniagent.backends.openai_messages import ClipAs, ClipAudio, to_openai_messages
from omniagent.policy_base import Policy, PolicyError, PolicyParams, TurnOutput, register_policy

DEFAULT_BASE_URL = "http://127.0.0.1:8000/v1"
ServerKind = Literal["auto", "vllm", "generic"]
T = TypeVar("T")
LIST_TIMEOUT = 10.0  # most seconds a /models request may take


def api_key_or_env(key: str | None) -> str:
    """The key given, else ``$OPENAI_API_KEY`` (the openai library's own variable), else ``EMPTY``
    (what local vLLM and ``transformers serve`` accept): one rule for the agent and the judge."""
    return key or os.environ.get("OPENAI_API_KEY") or "EMPTY"


class OpenAIParams(PolicyParams):
    """Parameters of :class:`OpenAIPolicy`."""

    model: str | None = Field(None, description="model id as served (None: the first model the server lists)")
    base_url: str = Field(DEFAULT_BASE_URL, description="the API root, e.g. http://127.0.0.1:8000/v1")
    api_key: SecretStr | None = Field(
        SecretStr("EMPTY"), description="bearer token; local servers accept anything. Never recorded"
    )
    server: ServerKind = Field(
        "auto", description="vllm: send vLLM's request extras; generic: never; auto: detect"
    )
    temperature: float = Field(0.0, ge=0, description="0 is greedy")
    seed: int | None = Field(0, description="sampling seed sent with each request (None: not sent)")
    max_tokens: int = Field(1024, ge=1, description="cap on generated tokens per turn")
    top_p: float | None = Field(None, gt=0, le=1, description="nucleus mass (None: the server's default)")
    timeout: float = Field(
        300.0, gt=0, description="deadline in seconds for a whole request, retries included"
    )
    retries: int = Field(2, ge=0, description="automatic retries on connection errors, 408/409/429/5xx")
    top_logprobs: int = Field(20, ge=0, description="top-k log-probs per token for the entropy (0 disables)")
    image_format: Literal["jpeg", "jpg", "png"] = Field("jpeg", description="encoding of images")
    jpeg_quality: int = Field(95, ge=1, le=100, description="JPEG quality of images")
    clip_audio: ClipAudio = Field(
        "separate", description="a clip's sound: separate input_audio, muxed, or drop"
    )
    clip_as: Literal["auto", "video", "frames"] = Field(
        "auto", description="send a clip as a video, or as labelled frames + audio; auto: video to vLLM only"
    )
    extra_body: dict[str, Any] = Field(default_factory=dict, description="merged into every request body")
    constrained: bool = Field(
        False,
        description="send the environment's JSON schema of a valid turn as response_format (structured "
        "outputs: vLLM, SGLang, OpenAI); the last turn of the budget may only answer",
    )


# -------------------------------------------------------------------------------------- entropy
def _logprob_stats(choice: Any) -> tuple[list[float] | None, list[float] | None]:
    """Chosen-token log-probs and per-token entropy estimates of a choice (None when absent).

    The chosen token counts towards the known mass when it fell outside the top-k, as in the
    vLLM backend, so both give the same number for the same distribution.
    """
    lp = getattr(choice, "logprobs", None)
    content = getattr(lp, "content", None) if lp is not None else None
    if not content:
        return None, None
    token_lps, entropies = [], []
    for tok in content:
        token_lps.append(float(tok.logprob))
        tops = {t.token: float(t.logprob) for t in (getattr(tok, "top_logprobs", None) or [])}
        if tops:
            tops.setdefault(tok.token, float(tok.logprob))
            entropies.append(topk_entropy(tops.values()))
    return token_lps, (entropies or None)


def run_with_deadline(make: Callable[[], Awaitable[T]], seconds: float) -> T:
    """Run a coroutine to completion under a deadline for the whole of it (``TimeoutError`` past it).

    In a thread that already runs an event loop, the coroutine runs on a helper thread's loop.
    """

    async def bounded() -> T:
        return await asyncio.wait_for(make(), seconds)

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(bounded())
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, bounded()).result()


# ------------------------------------------------------------------------------------------ policy
@register_policy("openai")
class OpenAIPolicy(Policy):
    """Chat completions against an OpenAI-compatible server; parameters in :class:`OpenAIParams`."""

    name = "openai"
    Params = OpenAIParams

    def __init__(self, **kwargs: Any) -> None:
        p: OpenAIParams = self._init_params(kwargs)
        self.model = p.model
        self.base_url = p.base_url.rstrip("/")
        self.timeout = p.timeout
        self._logprobs_ok = p.top_logprobs > 0
        self._server: ServerKind = p.server
        self._listed: list[Any] | None = None
        self.episode = TurnSchemas() if p.constrained else None

    def reset(self, info: dict[str, Any]) -> None:
        if self.episode is not None:
            self.episode.reset(info)

    def response_format(self) -> dict[str, Any] | None:
        """The structured-output request for the coming turn, or None when not constrained."""
        if self.episode is None:
            return None
        schema = self.episode.current()
        return {"type": "json_schema", "json_schema": {"name": "turn", "schema": schema, "strict": True}}

    # ---------------------------------------------------------------- requests
    def _call(self, request: Callable[[Any], Awaitable[T]], seconds: float | None = None) -> T:
        """One request on a fresh async client, bounded by ``seconds`` (default: ``timeout``) in all."""
        from openai import AsyncOpenAI

        p: OpenAIParams = self.params  # type: ignore[assignment]
        seconds = self.timeout if seconds is None else seconds
        key = p.api_key.get_secret_value() if p.api_key is not None else ""

        async def go() -> T:
            client = AsyncOpenAI(
                base_url=self.base_url, api_key=key or "EMPTY", timeout=seconds, max_retries=p.retries
            )
            async with client:
                return await request(client)

        try:
            return run_with_deadline(go, seconds)
        except TimeoutError:
            raise PolicyError(
                f"{self._where()} did not answer within {seconds:g} s (a deadline for the whole request, "
                "retries included): check that it is not overloaded or stuck, or raise --timeout"
            ) from None

    def _models(self) -> list[Any]:
        """The server's model list (asked once; a failure raises the translated error)."""
        if self._listed is None:
            try:
                page = self._call(lambda c: c.models.list(), min(self.timeout, LIST_TIMEOUT))
            except PolicyError:
                raise
            except Exception as exc:
                raise self._translate(exc) from None
            self._listed = list(page.data)
        return self._listed

    def server_kind(self) -> Literal["vllm", "generic"]:
        """Which request extras this server takes: configured, or detected from ``/models``."""
        if self._server != "auto":
            return self._server
        try:
            listed = self._models()
        except PolicyError:
            return "generic"  # undecided: the chat request itself will say what is wrong
        vllm = any(getattr(m, "owned_by", None) == "vllm" for m in listed)
        self._server = "vllm" if vllm else "generic"
        return self._server

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
            return self._translate_status(exc)
        if isinstance(exc, openai.APIResponseValidationError):
            return PolicyError(f"{self._where()} sent a reply that is not a chat completion: {exc}")
        return PolicyError(f"request to {url} failed: {type(exc).__name__}: {exc}")

    def _translate_status(self, exc: Any) -> PolicyError:
        msg = _server_message(exc)
        code = exc.status_code
        if code in (401, 403):
            return PolicyError(f"{self._where()} refused the API key (HTTP {code}): check --api-key. {msg}")
        if code == 404:
            return PolicyError(
                f"{self._where()} answered 404 ({msg}): check that --base-url ends in /v1 and that "
                f"--model {self.model!r} is the name the server serves{self._served_hint()}"
            )
        if code in (400, 413, 422):
            return PolicyError(
                f"{self._where()} rejected the request (HTTP {code}): {msg}. Check that the served model "
                "accepts images/audio/video (vLLM: --limit-mm-per-prompt), that the context fits "
                "(--max-model-len), and the backend's `server` setting (vllm or generic)"
            )
        return PolicyError(f"{self._where()} failed with HTTP {code}: {msg}. Check the server log")

    def _served_hint(self) -> str:
        try:
            ids = [m.id for m in self._models()]
        except Exception:
            return ""
        return f" (served: {', '.join(ids)})" if ids else ""

    def _resolve_model(self) -> str:
        if self.model:
            return self.model
        ids = [m.id for m in self._models()]
        if not ids:
            raise PolicyError(f"{self._where()} serves no model: pass --model")
        self.model = ids[0]
        return self.model

    def request_body(self, messages: list[Message]) -> dict[str, Any]:
        """The keyword arguments of ``chat.completions.create`` for ``messages`` (for inspection)."""
        p: OpenAIParams = self.params  # type: ignore[assignment]
        has_clip = any(part.get("type") == "video" for m in messages for part in m["content"])
        vllm = has_clip and self.server_kind() == "vllm"
        clip_as: ClipAs = ("video" if vllm else "frames") if p.clip_as == "auto" else p.clip_as
        oa_messages, flags = to_openai_messages(
            messages,
            image_format=p.image_format,
            jpeg_quality=p.jpeg_quality,
            clip_audio=p.clip_audio,
            clip_as=clip_as,
        )
        extra = dict(p.extra_body)
        if flags["video"] and vllm:
            mm = dict(extra.get("mm_processor_kwargs") or {})
            mm.setdefault("use_audio_in_video", flags["audio_in_video"])
            from omniagent.backends.openai_omni import vllm_clip_kwargs  # fps, second_per_grid_ts

            for key, value in vllm_clip_kwargs(messages, flags["audio_in_video"]).items():
                mm.setdefault(key, value)
            extra["mm_processor_kwargs"] = mm
            io_kwargs = dict(extra.get("media_io_kwargs") or {})
            io_kwargs.setdefault("video", {"num_frames": -1})
            extra["media_io_kwargs"] = io_kwargs
        kwargs: dict[str, Any] = {
            "model": self.model or "",
            "messages": oa_messages,
            "temperature": p.temperature,
            "max_tokens": p.max_tokens,
        }
        if p.seed is not None:
            kwargs["seed"] = p.seed
        if p.top_p is not None:
            kwargs["top_p"] = p.top_p
        if self._logprobs_ok:
            kwargs["logprobs"] = True
            kwargs["top_logprobs"] = p.top_logprobs
        if extra:
            kwargs["extra_body"] = extra
        if (fmt := self.response_format()) is not None:
            kwargs["response_format"] = fmt
        return kwargs

    # -------------------------------------------------------------------- act
    def act(self, messages: list[Message]) -> TurnOutput:
        import openai

        self._resolve_model()
        kwargs = self.request_body(messages)
        if self.episode is not None:
            self.episode.advance()
        t0 = time.perf_counter()
        try:
            try:
                resp = self._call(lambda c: c.chat.completions.create(**kwargs))
            except openai.BadRequestError as exc:
                if not self._logprobs_ok or "logprob" not in _server_message(exc).lower():
                    raise
                self._logprobs_ok = False  # the server refuses log-probs: go on without entropy
                kwargs.pop("logprobs", None)
                kwargs.pop("top_logprobs", None)
                resp = self._call(lambda c: c.chat.completions.create(**kwargs))
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
        choices = getattr(resp, "choices", None)
        if not choices:
            raise PolicyError(
                f"{self._where()} returned no choices: check that --base-url points at an OpenAI-compatible "
                "API and the server log for errors"
            )
        choice = choices[0]
        text = getattr(getattr(choice, "message", None), "content", None)
        if not isinstance(text, str):
            raise PolicyError(
                f"{self._where()} returned a choice without text content (finish_reason="
                f"{getattr(choice, 'finish_reason', None)!r}): check the server log"
            )
        from omniagent.backends.openai_omni import split_reasoning  # a thinking variant's reasoning

        thinking, text = split_reasoning(choice.message, text, self.model)
        try:
            token_lps, entropies = _logprob_stats(choice)
        except (AttributeError, TypeError, ValueError):  # malformed log-probs: keep the text
            token_lps, entropies = None, None
        usage = getattr(resp, "usage", None)
        return TurnOutput(
            text=text,
            thinking=thinking,
            token_logprobs=token_lps,
            token_entropies=entropies,
            entropy=float(np.mean(entropies)) if entropies else None,
            entropy_estimator=TOPK_ESTIMATOR if entropies else None,
            prompt_tokens=getattr(usage, "prompt_tokens", None),
            completion_tokens=getattr(usage, "completion_tokens", None),
            model_seconds=seconds,
        )


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
