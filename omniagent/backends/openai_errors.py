"""Reading the errors of the openai client: which endpoint failed, and whether the server hung up.

``openai`` wraps every transport failure in ``APIConnectionError``; the cause it chains says which:
``httpx.ConnectError`` is no server at all, while ``httpx.RemoteProtocolError`` or ``ReadError`` mean the
server took the request and closed the connection before its reply was complete (a crash, a restart,
a proxy limit). The backend words the two differently.
"""

from __future__ import annotations

from typing import Any

__all__ = ["causes", "connection_cut", "request_url", "root_cause", "server_message"]


def request_url(exc: Any) -> str | None:
    """The API root of the endpoint a failed request went to (from the request the error carries)."""
    request = getattr(exc, "request", None)
    url = str(getattr(request, "url", "") or "")
    for suffix in ("/chat/completions", "/models"):
        if suffix in url:
            return url.split(suffix)[0]
    return None


def causes(exc: BaseException) -> list[BaseException]:
    chain, seen = [], set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        chain.append(cur)
        cur = cur.__cause__ or cur.__context__
    return chain


def connection_cut(exc: BaseException) -> bool:
    """True when the server accepted the request and then hung up (a ``RemoteProtocolError`` or a
    ``ReadError`` such as a reset, from httpx or httpcore), not when there was no server at all
    (``ConnectError``). Matched by class name: the openai client may ship its own copy of httpx."""
    return any(type(c).__name__ in ("RemoteProtocolError", "ReadError") for c in causes(exc))


def root_cause(exc: BaseException) -> str:
    inner = causes(exc)[-1]
    return " ".join(f"{type(inner).__name__}: {inner}".split())[:160]


def server_message(exc: Any) -> str:
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
