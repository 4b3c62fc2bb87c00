"""The request path of the OpenAI-compatible backend: one event loop, one client per endpoint, and a
pool that spreads requests over several endpoints and takes failing ones out for a while.

**One loop, pooled connections.** Every request of the process runs on one background event loop
thread (:func:`run_on_loop`) with one ``AsyncOpenAI`` client per (endpoint, key): its keep-alive
connections are reused, and a worker thread only waits for its reply. Building a client and a TLS
context per request, as a loop per call would, costs milliseconds of CPU under the GIL, which caps an
evaluation with a hundred workers long before the server does.

**Several endpoints** (:class:`EndpointPool`, shared by every policy of the process that names the
same endpoints):

- a request goes to the endpoint with the fewest requests in flight (then the fewest sent);
- a connection error, time-out, HTTP 408/409/429 or 5xx takes the endpoint out for a cool-down that
  doubles with each failure in a row (1 s, 2 s, 4 s ... up to ``cooldown``) and the request is tried
  on another endpoint, within the request's deadline; once the cool-down ends, the next request probes
  it, and a success puts it back;
- a request never waits for a cool-down before its first try (with every endpoint out, its try is the
  probe); a retry with no fresh endpoint to turn to backs off first (0.5 s, doubling, at most 8 s, within
  the deadline), so one dead server is skipped at once while a single flaky one is not hammered;
- each change of health is logged (``omniagent.backends.openai_endpoints``), and :meth:`stats` gives
  per-endpoint counts for the run's summary.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from omniagent.openai_client import make_client

__all__ = [
    "Endpoint",
    "EndpointPool",
    "chat_completion",
    "client_for",
    "retriable",
    "run_on_loop",
    "shared_pool",
]

log = logging.getLogger(__name__)
T = TypeVar("T")
FIRST_COOLDOWN = 1.0  # seconds an endpoint is out after its first failure in a row
RETRY_PAUSE = 0.5  # a retry's first back-off when no other endpoint is up (doubling, at most MAX_PAUSE)
MAX_PAUSE = 8.0


class _Loop:
    """A daemon thread running an asyncio loop; recreated in a forked child."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.pid = os.getpid()
        self.thread = threading.Thread(target=self.loop.run_forever, name="openai-loop", daemon=True)
        self.thread.start()


_LOOP: _Loop | None = None
_LOOP_LOCK = threading.Lock()
_CLIENTS: dict[tuple[str, str], Any] = {}


def _loop() -> asyncio.AbstractEventLoop:
    global _LOOP
    with _LOOP_LOCK:
        if _LOOP is None or _LOOP.pid != os.getpid() or not _LOOP.thread.is_alive():
            _LOOP = _Loop()
            _CLIENTS.clear()  # clients belong to the loop they were made on
        return _LOOP.loop


def run_on_loop(make: Callable[[], Awaitable[T]], seconds: float) -> T:
    """Run ``make()`` on the shared loop, bounded by ``seconds`` in all (``TimeoutError`` past it)."""

    async def bounded() -> T:
        return await asyncio.wait_for(make(), seconds)

    return asyncio.run_coroutine_threadsafe(bounded(), _loop()).result()


def client_for(base_url: str, api_key: str) -> Any:
    """The process's ``AsyncOpenAI`` client for an endpoint, used only on the shared loop (retries are
    the pool's job, so the client makes none)."""
    _loop()  # first: a forked child gets a new loop and drops the parent's clients
    key = (base_url, api_key)
    with _LOOP_LOCK:
        client = _CLIENTS.get(key)
        if client is None:
            from openai import AsyncOpenAI

            client = make_client(AsyncOpenAI, api_key, base_url=base_url, max_retries=0)
            _CLIENTS[key] = client
    return client


def chat_completion(client: Any, kwargs: dict[str, Any]) -> Awaitable[Any]:
    """``client.chat.completions.create(**kwargs)``, the same request, reply and errors, without the
    client's walk over the request's every part and string to transform it (a chat request has nothing to
    transform; the walk cost about 40% of the client's CPU per request, under the GIL)."""
    from openai.types.chat import ChatCompletion

    body = {k: v for k, v in kwargs.items() if k != "extra_body"}
    body.update(kwargs.get("extra_body") or {})
    return client.post("/chat/completions", body=body, cast_to=ChatCompletion)


def retriable(exc: BaseException) -> bool:
    """Whether another endpoint (or a later try) may succeed: connection errors, time-outs, HTTP 408,
    409, 429 and 5xx. A request the server rejected (other 4xx) or a reply that is not a completion is
    not retried: every endpoint would answer the same."""
    import openai

    if isinstance(exc, TimeoutError | openai.APIConnectionError):  # APITimeoutError is one
        return True
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code in (408, 409, 429) or exc.status_code >= 500
    return False


@dataclass
class Endpoint:
    url: str
    in_flight: int = 0
    requests: int = 0
    ok: int = 0
    failed: int = 0
    failures_in_a_row: int = 0
    times_down: int = 0
    down_until: float = 0.0  # time.monotonic() when it may be tried again
    last_error: str | None = None

    def up(self, now: float) -> bool:
        return self.down_until <= now


class EndpointPool:
    """Endpoints of one model server fleet; thread-safe (see the module docstring)."""

    def __init__(self, urls: Sequence[str], cooldown: float = 30.0) -> None:
        if not urls:
            raise ValueError("an endpoint pool needs at least one base_url")
        self.endpoints = [Endpoint(u) for u in urls]
        self.cooldown = cooldown
        self._lock = threading.Lock()

    def acquire(self, avoid: set[str] | frozenset[str] = frozenset()) -> Endpoint:
        """The endpoint for the next try: up and least loaded, preferring those not in ``avoid``
        (tried already by this request); when all are down, the one back soonest."""
        with self._lock:
            now = time.monotonic()
            up = [e for e in self.endpoints if e.up(now)]
            fresh = [e for e in up if e.url not in avoid]
            pick = (
                min(fresh or up, key=lambda e: (e.in_flight, e.requests))
                if up
                else min(self.endpoints, key=lambda e: e.down_until)
            )
            pick.in_flight += 1
            pick.requests += 1
            return pick

    def has_fresh(self, avoid: set[str] | frozenset[str] = frozenset()) -> bool:
        """Whether an endpoint is up that is not in ``avoid``."""
        with self._lock:
            now = time.monotonic()
            return any(e.up(now) and e.url not in avoid for e in self.endpoints)

    @staticmethod
    def retry_pause(attempt: int) -> float:
        """The back-off before retry number ``attempt`` (1-based) when no fresh endpoint is up."""
        return min(MAX_PAUSE, RETRY_PAUSE * 2 ** (attempt - 1))

    def release(self, ep: Endpoint, error: BaseException | None = None, take_out: bool = False) -> None:
        """Record a try's outcome; ``take_out`` (a retriable failure) starts the endpoint's cool-down."""
        with self._lock:
            ep.in_flight -= 1
            now = time.monotonic()
            if error is None:
                if ep.failures_in_a_row:
                    log.warning(
                        "endpoint %s answers again (after %d failure(s))", ep.url, ep.failures_in_a_row
                    )
                ep.ok += 1
                ep.failures_in_a_row = 0
                ep.down_until = 0.0
                return
            ep.failed += 1
            ep.last_error = f"{type(error).__name__}: {error}"[:300]
            if not take_out:
                return
            ep.failures_in_a_row += 1
            pause = min(self.cooldown, FIRST_COOLDOWN * 2 ** (ep.failures_in_a_row - 1))
            if ep.up(now):
                ep.times_down += 1
                log.warning("endpoint %s taken out for %.0f s: %s", ep.url, pause, ep.last_error)
            ep.down_until = now + pause

    def stats(self) -> dict[str, dict[str, Any]]:
        """Per endpoint: requests, ok, failed, times taken out, in flight, up now, last error."""
        with self._lock:
            now = time.monotonic()
            return {
                e.url: {
                    "requests": e.requests,
                    "ok": e.ok,
                    "failed": e.failed,
                    "times_down": e.times_down,
                    "in_flight": e.in_flight,
                    "up": e.up(now),
                    "last_error": e.last_error,
                }
                for e in self.endpoints
            }


_POOLS: dict[tuple[tuple[str, ...], float], EndpointPool] = {}
_POOLS_LOCK = threading.Lock()


def shared_pool(urls: Sequence[str], cooldown: float) -> EndpointPool:
    """The process's pool for these endpoints (so every worker's policy sees the same load and health)."""
    key = (tuple(urls), float(cooldown))
    with _POOLS_LOCK:
        pool = _POOLS.get(key)
        if pool is None:
            pool = _POOLS[key] = EndpointPool(urls, cooldown)
        return pool
