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

**Endpoints.** ``base_url`` may list several servers of the same model (a list, or one string with
commas: ``--base-url http://a:8000/v1,http://b:8000/v1``). Requests go to the least-loaded one; one
that fails or dies is taken out for a cool-down (up to ``cooldown`` seconds) and the request is tried
elsewhere within its deadline, so a run goes on while one endpoint lives
(:mod:`omniagent.backends.openai_endpoints`, which also holds the process's one event loop and its
pooled connections). :meth:`OpenAIPolicy.endpoint_stats` gives each endpoint's counts and health.

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

import time
from collections.abc import Awaitable, Callable
from typing import Any, Literal, TypeVar

import numpy as np
from pydantic import Field, SecretStr, field_validator

from envs.messages import Message
from omniagent.backends.constrained import TurnSchemas
from omniagent.backends.entropy import TOPK_ESTIMATOR, topk_entropy
from omniagent.backends.openai_endpoints import (
    EndpointPool,
    chat_completion,
    client_for,
    retriable,
    run_on_loop,
    shared_pool,
)
from omniagent.backends.openai_errors import connection_cut, request_url, root_cause, server_message
from omniagent.backends.openai_messages import ClipAs, ClipAudio, to_openai_messages
from omniagent.policy_base import Policy, PolicyError, PolicyParams, TurnOutput, register_policy

DEFAULT_BASE_URL = "http://127.0.0.1:8000/v1"
ServerKind = Literal["auto", "vllm", "generic"]
T = TypeVar("T")
LIST_TIMEOUT = 10.0  # most seconds a /models request may take


class OpenAIParams(PolicyParams):
    """Parameters of :class:`OpenAIPolicy`."""

    model: str | None = Field(None, description="model id as served (None: the first model the server lists)")
    base_url: str | list[str] = Field(
        DEFAULT_BASE_URL,
        description="the API root, e.g. http://127.0.0.1:8000/v1; several servers of one model as a list or "
        "comma-separated (requests go to the least loaded; a failing one is taken out for a while)",
    )
    cooldown: float = Field(
        30.0, gt=0, description="longest pause of a failing endpoint before it is tried again (seconds)"
    )
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
    top_k: int | None = Field(
        None, ge=1, description="sample from the k most likely tokens; sent as an extra field (vLLM, SGLang)"
    )
    timeout: float = Field(
        300.0, gt=0, description="deadline in seconds for a whole request, retries included"
    )
    retries: int = Field(
        2, ge=0, description="retries on connection errors, 408/409/429/5xx (plus one per extra endpoint)"
    )
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

    @field_validator("base_url")
    @classmethod
    def _urls(cls, value: str | list[str]) -> str | list[str]:
        urls = endpoint_urls(value)
        if not urls:
            raise ValueError("base_url names no server")
        return value


def endpoint_urls(value: str | list[str]) -> list[str]:
    """``"http://a/v1, http://b/v1"`` or ``["http://a/v1", ...]`` -> the distinct URLs, trailing ``/`` removed."""
    items = value.split(",") if isinstance(value, str) else [u for v in value for u in str(v).split(",")]
    urls: list[str] = []
    for item in items:
        url = item.strip().rstrip("/")
        if url and url not in urls:
            urls.append(url)
    return urls


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


# ------------------------------------------------------------------------------------------ policy
@register_policy("openai")
class OpenAIPolicy(Policy):
    """Chat completions against an OpenAI-compatible server; parameters in :class:`OpenAIParams`."""

    name = "openai"
    Params = OpenAIParams

    def __init__(self, **kwargs: Any) -> None:
        p: OpenAIParams = self._init_params(kwargs)
        self.model = p.model
        self.urls = endpoint_urls(p.base_url)
        self.base_url = self.urls[0]
        self.pool: EndpointPool = shared_pool(self.urls, p.cooldown)
        self.timeout = p.timeout
        self.seed = p.seed  # the eval runner sets a sample's own seed here per episode
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
        """One request, bounded by ``seconds`` (default: ``timeout``) in all, tries on other endpoints
        included; a failure raises the translated :class:`PolicyError` of its last try."""
        p: OpenAIParams = self.params  # type: ignore[assignment]
        seconds = self.timeout if seconds is None else seconds
        key = p.api_key.get_secret_value() if p.api_key is not None else ""
        deadline = time.monotonic() + seconds
        tried: set[str] = set()
        for attempt in range(p.retries + len(self.urls)):
            if attempt and not self.pool.has_fresh(tried):  # no other endpoint to turn to: back off
                time.sleep(max(0.0, min(self.pool.retry_pause(attempt), deadline - time.monotonic() - 0.05)))
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            ep = self.pool.acquire(tried)
            client = client_for(ep.url, key)
            try:
                result = run_on_loop(lambda c=client: request(c), remaining)
            except Exception as exc:
                again = retriable(exc)
                self.pool.release(ep, exc, take_out=again)
                tried.add(ep.url)
                last_try = attempt + 1 >= p.retries + len(self.urls) or time.monotonic() >= deadline
                if not again or last_try:
                    if isinstance(exc, TimeoutError):
                        raise self._deadline_error(seconds) from None
                    raise
                continue
            self.pool.release(ep)
            return result
        raise self._deadline_error(seconds)

    def _deadline_error(self, seconds: float) -> PolicyError:
        return PolicyError(
            f"{self._where()} did not answer within {seconds:g} s (a deadline for the whole request, "
            "retries included): check that it is not overloaded or stuck, or raise --timeout"
        )

    def endpoint_stats(self) -> dict[str, dict[str, Any]]:
        """Each endpoint's requests, successes, failures, times taken out and health (process-wide)."""
        return self.pool.stats()

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
    def _where(self, url: str | None = None) -> str:
        if url is None and len(self.urls) > 1:
            return f"the servers at {', '.join(self.urls)}"
        return f"the server at {url or self.base_url}"

    def _translate(self, exc: Exception) -> PolicyError:
        """One clear line for an exception raised by the openai client."""
        import openai

        url = request_url(exc) or self.base_url
        if isinstance(exc, openai.APITimeoutError):
            return PolicyError(
                f"{self._where(url)} did not answer within {self.timeout:g} s: check that it is not overloaded "
                "or stuck, or raise --timeout"
            )
        if isinstance(exc, openai.APIConnectionError) and connection_cut(exc):
            return PolicyError(
                f"{self._where(url)} closed the connection before its reply was complete ({root_cause(exc)}): "
                "it may have crashed, restarted or hit a limit; check its log"
            )
        if isinstance(exc, openai.APIConnectionError):
            more = f" (nor at {', '.join(u for u in self.urls if u != url)})" if len(self.urls) > 1 else ""
            return PolicyError(
                f"no server at {url}{more}: start one with `vllm serve {self.model or 'MODEL'} --port 8000` "
                "or pass --base-url"
            )
        if isinstance(exc, openai.APIStatusError):
            return self._translate_status(exc)
        if isinstance(exc, openai.APIResponseValidationError):
            return PolicyError(f"{self._where()} sent a reply that is not a chat completion: {exc}")
        return PolicyError(f"request to {url} failed: {type(exc).__name__}: {exc}")

    def _translate_status(self, exc: Any) -> PolicyError:
        msg = server_message(exc)
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
        if p.top_k is not None:
            extra.setdefault("top_k", p.top_k)
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
        if self.seed is not None:
            kwargs["seed"] = self.seed
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
                resp = self._call(lambda c: chat_completion(c, kwargs))
            except openai.BadRequestError as exc:
                if not self._logprobs_ok or "logprob" not in server_message(exc).lower():
                    raise
                self._logprobs_ok = False  # the server refuses log-probs: go on without entropy
                kwargs.pop("logprobs", None)
                kwargs.pop("top_logprobs", None)
                resp = self._call(lambda c: chat_completion(c, kwargs))
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
            # without usage, the log-probs still list one entry per generated token
            completion_tokens=getattr(usage, "completion_tokens", None)
            or (len(token_lps) if token_lps else None),
            model_seconds=seconds,
        )
