"""A fake OpenAI-compatible server on 127.0.0.1 (http.server in a thread) for backend tests."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ANSWER_TURN = json.dumps(
    {"observation": "none", "thought": "guess", "action": {"type": "answer", "content": "B"}}
)
TOPS = [-0.2, -2.5, -3.0]  # top-3 log-probs of every generated token in the fake replies (mass 0.95)


class _Handler(BaseHTTPRequestHandler):
    """Replies as the :class:`FakeServer` it belongs to (``self.server.fake``) says."""

    server: Any

    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, code: int, body: bytes, ctype: str = "application/json") -> None:
        self.send_response(code)
        self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        try:
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (time-out test)
            pass

    def do_GET(self) -> None:
        if self.path.endswith("/models"):
            self._send(
                200,
                json.dumps(
                    {
                        "object": "list",
                        "data": [
                            {"id": "fake-omni", "object": "model", "owned_by": self.server.fake.owned_by}
                        ],
                    }
                ).encode(),
            )
        else:
            self._send(404, b'{"error": {"message": "not found"}}')

    def _trickle(self) -> None:
        """Headers at once, then one byte of body every 0.2 s: never idle long enough for a
        per-read time-out to fire (stops after 30 s or when the client hangs up)."""
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", "100000")
        self.end_headers()
        t_end = time.monotonic() + 30
        try:
            while time.monotonic() < t_end:
                self.wfile.write(b" ")
                self.wfile.flush()
                time.sleep(0.2)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _cut(self) -> None:
        """Headers and the start of a body, then the connection is closed (a server that dies mid-reply)."""
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", "5000")
        self.end_headers()
        try:
            self.wfile.write(b'{"id": "chatcmpl-cut", "choices": [{"index": 0, "mess')
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass
        self.close_connection = True

    def do_POST(self) -> None:
        server = self.server.fake
        server.auth.append(self.headers.get("authorization"))
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
        server.requests.append(body)
        if server.delay:
            time.sleep(server.delay)
        mode = server.mode
        if mode == "trickle":
            return self._trickle()
        if mode == "cut":
            return self._cut()
        if mode == "garbage":
            return self._send(200, b"<html>this is not an API</html>", "text/html")
        if mode == "badjson":
            return self._send(200, b"{not json at all")
        if mode == "nochoices":
            return self._send(
                200, json.dumps({"id": "x", "object": "chat.completion", "choices": []}).encode()
            )
        if mode == "500":
            return self._send(500, b'{"error": {"message": "engine died"}}')
        if mode == "404":
            return self._send(404, b'{"error": {"message": "The model `nope` does not exist."}}')
        if mode == "no-logprobs-allowed" and body.get("logprobs"):
            return self._send(400, b'{"error": {"message": "logprobs are not supported by this model"}}')
        self._send(200, json.dumps(server.completion(body)).encode())


class FakeServer:
    """A minimal /v1/chat/completions + /v1/models server. ``mode`` picks the reply."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.mode = "turn"
        self.text = ANSWER_TURN
        self.delay = 0.0
        self.auth: list[str | None] = []  # Authorization header of each chat request
        self.owned_by = "vllm"  # what /models says: vLLM by default, anything else is a generic server
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.httpd.fake = self  # type: ignore[attr-defined]
        self.url = f"http://127.0.0.1:{self.httpd.server_port}/v1"
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()

    def completion(self, body: dict[str, Any]) -> dict[str, Any]:
        tokens = ["{", '"obs', "}"]
        logprobs = None
        if body.get("logprobs"):
            k = body.get("top_logprobs") or 0
            logprobs = {
                "content": [
                    {
                        "token": t,
                        "logprob": TOPS[0],
                        "bytes": None,
                        "top_logprobs": [  # the chosen token is the most likely one
                            {"token": t if i == 0 else f"t{i}", "logprob": lp, "bytes": None}
                            for i, lp in enumerate(TOPS[:k])
                        ],
                    }
                    for t in tokens
                ]
            }
        return {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": 0,
            "model": body.get("model"),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": self.text},
                    "finish_reason": "stop",
                    "logprobs": logprobs,
                }
            ],
            "usage": {
                "prompt_tokens": 123,
                "completion_tokens": len(tokens),
                "total_tokens": 123 + len(tokens),
            },
        }

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
