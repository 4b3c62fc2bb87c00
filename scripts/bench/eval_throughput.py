"""Evaluation throughput: turns per second of the eval harness against a server with a fixed latency.

The harness is the real one (:func:`omniagent.eval.runner.run_eval` with the ``openai`` backend); the
model is a fake OpenAI-compatible server, run by this script in a process of its own, that answers every
request after ``--latencies`` seconds. Every episode plays the same :data:`WORKLOAD` on a generated video
with sound (frames, audio, frames, then an answer: each percept decoded, encoded and sent), so a rerun
measures the same work. For each latency and each worker count it prints

- **turns/s** measured, and the **ideal** ``workers / latency`` (a harness that costs nothing);
- the **decode-bound** ceiling, measured in the same run: the same episodes and workers with an in-process
  policy that answers at once (media decoding and the harness's own bookkeeping, no server, no encoding);
- **efficiency** = measured / min(ideal, decode-bound) (goal: >= 80% at every size);
- the **cpu limit** of a cell whose ceiling is the decode-bound one: the decode-only run's CPU per turn
  over the served run's (this process and the fake server, on the same cores). When both runs keep the
  cores busy, no harness reaches more than this fraction of the ceiling: it is the share of a served
  turn's CPU that decoding is, the rest being the work decoding does not do (encoding, HTTP);
- where a turn's time goes: harness CPU per turn (this process: decoding, encoding, HTTP, bookkeeping),
  the fake server's CPU per turn (on the same cores), the mean ``env.step`` (decode) and request-build
  (image/audio encoding) times, and the requests' round trip beyond the latency.

Other processes on the machine lower the figures: say what else was running when you report them.

    python scripts/bench/eval_throughput.py                                 # 100 ms and 1 s; 1, 8, 32, 128 workers
    python scripts/bench/eval_throughput.py --latencies 0.1 --workers 1,8 --episodes-per-worker 1
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

# One episode: (action type, start and end as fractions of the media's duration, frames).
WORKLOAD: list[tuple[str, float, float, int]] = [
    ("get_frames", 0.10, 0.40, 4),
    ("get_audio", 0.50, 0.55, 0),
    ("get_frames", 0.60, 0.70, 4),
    ("answer", 0.0, 0.0, 0),
]


def turn_text(turn: int, duration: float) -> str:
    """The model output of turn ``turn`` (0-based) of :data:`WORKLOAD` on media of ``duration`` seconds."""
    kind, a, b, num = WORKLOAD[min(turn, len(WORKLOAD) - 1)]
    if kind == "answer":
        action: dict[str, Any] = {"type": "answer", "content": "A"}
    else:
        action = {"type": kind, "start": round(a * duration, 2), "end": round(b * duration, 2)}
        if num:
            action["num"] = num
    return json.dumps({"observation": "noted", "thought": "fixed workload", "action": action})


# ------------------------------------------------------------------------------------- fake server
class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: the client's pooled connections are reused
    disable_nagle_algorithm = True  # else headers and body as two writes wait out the client's delayed ACK
    server: Any

    def log_message(self, *args: Any) -> None:
        pass

    def _reply(self, body: bytes) -> None:
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self._reply(
            json.dumps(
                {"object": "list", "data": [{"id": "bench", "object": "model", "owned_by": "bench"}]}
            ).encode()
        )

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("content-length", 0)))
        turn = raw.count(b'"assistant"')  # earlier turns in the context: no JSON parse of the media
        time.sleep(self.server.latency)
        text = turn_text(turn, self.server.duration)
        reply = {
            "id": "bench", "object": "chat.completion", "created": 0, "model": "bench",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": len(raw) // 4, "completion_tokens": 30, "total_tokens": len(raw) // 4 + 30},
        }  # fmt: skip
        self._reply(json.dumps(reply).encode())


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024  # the listen backlog: 128 workers connect at once


def serve(port: int, latency: float, duration: float) -> None:
    """Run the fake server until killed (``--serve``)."""
    httpd = _Server(("127.0.0.1", port), _Handler)
    httpd.latency, httpd.duration = latency, duration  # type: ignore[attr-defined]
    httpd.serve_forever(poll_interval=0.05)


class ServerProcess:
    """The fake server in a child process; :meth:`cpu_seconds` reads its CPU time from /proc."""

    def __init__(self, latency: float, duration: float) -> None:
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        cmd = [
            sys.executable,
            __file__,
            "--serve",
            str(self.port),
            "--latency",
            str(latency),
            "--duration",
            str(duration),
        ]
        self.proc = subprocess.Popen(cmd)
        self.url = f"http://127.0.0.1:{self.port}/v1"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("the fake server did not start")

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


# ------------------------------------------------------------------------------------------ runs
def make_tasks(media_dir: Path, n: int, width: int, height: int, fps: int, duration: float) -> list[Any]:
    """``n`` tasks (ids bench-0 ...) on one generated video with sound."""
    from envs.synth import SynthConfig, synthesize

    cfg = SynthConfig(seed=0, duration=duration, width=width, height=height, fps=fps)
    path = media_dir / f"bench_{width}x{height}_{fps}fps_{int(duration)}s.mp4"
    task = next(t for t in synthesize(cfg, path).tasks if t.task_type == "mcq")
    return [task.model_copy(update={"id": f"bench-{i}"}) for i in range(n)]


class InstantPolicy:
    """The workload's replies at once, in process (for the decode-bound ceiling)."""

    name = "instant"

    def __init__(self, duration: float) -> None:
        self.duration = duration
        self.turn = 0

    def reset(self, info: dict[str, Any]) -> None:
        self.turn = 0

    def act(self, messages: list[Any]) -> Any:
        from omniagent.policy import TurnOutput

        text = turn_text(self.turn, self.duration)
        self.turn += 1
        return TurnOutput(text=text)

    def close(self) -> None:
        pass


@contextmanager
def timed_request_builds() -> Iterator[list[float]]:
    """Time every ``OpenAIPolicy.request_body`` call (message conversion: image and audio encoding)
    while the block runs; the yielded list gets one duration per call."""
    from omniagent.backends.openai_backend import OpenAIPolicy

    seconds: list[float] = []
    build = OpenAIPolicy.request_body

    def timed(self: Any, messages: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return build(self, messages)
        finally:
            seconds.append(time.perf_counter() - t0)

    OpenAIPolicy.request_body = timed  # type: ignore[method-assign]
    try:
        yield seconds
    finally:
        OpenAIPolicy.request_body = build  # type: ignore[method-assign]


def one_run(tasks: list[Any], workers: int, out: Path, factory: Any, policy: str) -> dict[str, Any]:
    """Play ``tasks`` with ``workers`` threads; turns, wall and CPU seconds, mean env and model seconds."""
    from omniagent.eval.config import EvalConfig
    from omniagent.eval.results import load_rows
    from omniagent.eval.runner import run_eval

    cfg = EvalConfig(
        out_dir=str(out), policy=policy, workers=workers, progress=False, max_consecutive_policy_errors=0
    )
    cpu0, t0 = time.process_time(), time.perf_counter()
    run_eval(tasks, cfg, policy_factory=factory)
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    rows = load_rows(out / "results.jsonl")
    bad = [r for r in rows if r["status"] != "ok" or not r["answered"]]
    if bad:  # counted and shown; their turns still count (a failed request ends its episode)
        print(f"  {len(bad)} episode(s) did not finish cleanly, first: {bad[0].get('error')}", flush=True)
    turns = max(1, sum(r["turns"] for r in rows))
    return {
        "failed": len(bad),
        "turns": turns,
        "wall": wall,
        "cpu": cpu,
        "env_ms": 1e3 * sum(r["env_seconds"] for r in rows) / turns,
        "model_ms": 1e3 * sum(r["model_seconds"] for r in rows) / turns,
    }


def episodes(args: argparse.Namespace, workers: int) -> int:
    return min(args.max_episodes, max(args.min_episodes, args.episodes_per_worker * workers))


def measure(args: argparse.Namespace, tasks: list[Any], work: Path) -> list[dict[str, Any]]:
    """Every (latency, workers) cell, each beside the decode-bound ceiling at its worker count."""
    from omniagent.backends.openai_backend import OpenAIPolicy

    duration = float(tasks[0].duration or args.duration)
    one_run(
        tasks[:1], 1, work / "warm-up", lambda: InstantPolicy(duration), "instant"
    )  # imports, first opens
    ceiling: dict[int, dict[str, Any]] = {}
    for w in args.workers:
        n = episodes(args, w)
        ceiling[w] = one_run(tasks[:n], w, work / f"decode-w{w}", lambda: InstantPolicy(duration), "instant")
    cells = []
    for latency in args.latencies:
        server = ServerProcess(latency, duration)
        try:
            warm = OpenAIPolicy(model="bench", base_url=server.url, retries=1, timeout=120)
            warm.act(
                [{"role": "user", "content": [{"type": "text", "text": "warm-up"}]}]
            )  # imports, connection
            for w in args.workers:
                n = episodes(args, w)
                s0 = server.cpu_seconds()
                factory = partial(OpenAIPolicy, model="bench", base_url=server.url, retries=1, timeout=120)
                with timed_request_builds() as builds:
                    r = one_run(tasks[:n], w, work / f"l{latency}-w{w}", factory, "openai")
                r.update(latency=latency, workers=w, server_cpu=server.cpu_seconds() - s0,
                         build_ms=1e3 * sum(builds) / max(len(builds), 1), ceiling=ceiling[w])  # fmt: skip
                cells.append(r)
                print(row_text(r), flush=True)
        finally:
            server.close()
    return cells


HEADER = (
    f"{'latency':>7} {'workers':>7} {'turns/s':>8} {'ideal':>7} {'decode':>7} {'eff.':>5}  "
    f"{'cpu ms/turn':>11} {'decode-run cpu':>14} {'server':>6} {'cpu limit':>9} {'env ms':>6} {'build ms':>8} "
    f"{'rtt-lat ms':>10} {'failed':>6}"
)


def row_text(r: dict[str, Any]) -> str:
    rate = r["turns"] / r["wall"]
    ideal = r["workers"] / r["latency"]
    decode = r["ceiling"]["turns"] / r["ceiling"]["wall"]
    eff = rate / min(ideal, decode)
    served_cpu = (r["cpu"] + r["server_cpu"]) / r["turns"]
    limit = (r["ceiling"]["cpu"] / r["ceiling"]["turns"]) / served_cpu if decode < ideal else None
    r.update(rate=rate, ideal=ideal, decode=decode, eff=eff, cpu_limit=limit)
    limit_text = f"{limit:>9.0%}" if limit is not None else f"{'-':>9}"
    return (
        f"{r['latency']:>6g}s {r['workers']:>7} {rate:>8.1f} {ideal:>7.0f} {decode:>7.1f} {eff:>5.0%}  "
        f"{1e3 * r['cpu'] / r['turns']:>11.1f} {1e3 * r['ceiling']['cpu'] / r['ceiling']['turns']:>14.1f} "
        f"{1e3 * r['server_cpu'] / r['turns']:>6.1f} {limit_text} {r['env_ms']:>6.1f} "
        f"{r['build_ms']:>8.1f} {r['model_ms'] - 1e3 * r['latency']:>10.1f} {r['failed']:>6}"
    )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--latencies", default="0.1,1.0", help="the fake server's seconds per request (comma list)"
    )
    p.add_argument("--workers", default="1,8,32,128", help="worker counts (comma list)")
    p.add_argument("--episodes-per-worker", type=int, default=2)
    p.add_argument("--min-episodes", type=int, default=6, help="at least this many episodes per cell")
    p.add_argument("--max-episodes", type=int, default=128, help="at most this many episodes per cell")
    p.add_argument("--width", type=int, default=640)
    p.add_argument("--height", type=int, default=360)
    p.add_argument("--fps", type=int, default=10)
    p.add_argument("--duration", type=float, default=120.0, help="seconds of the generated video")
    p.add_argument("--goal", type=float, default=0.8, help="least efficiency at every size")
    p.add_argument("--media-dir", help="where the generated video is kept (default: a temp dir)")
    p.add_argument("--serve", type=int, help=argparse.SUPPRESS)  # internal: run the fake server on this port
    p.add_argument("--latency", type=float, default=0.1, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.latencies = [float(x) for x in str(args.latencies).split(",") if x.strip()]
    args.workers = [int(x) for x in str(args.workers).split(",") if x.strip()]
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.serve:
        serve(args.serve, args.latency, args.duration)
        return 0
    work = Path(tempfile.mkdtemp(prefix="omniagent-throughput-"))
    media = Path(args.media_dir) if args.media_dir else work
    media.mkdir(parents=True, exist_ok=True)
    most = max(episodes(args, w) for w in args.workers)
    tasks = make_tasks(media, most, args.width, args.height, args.fps, args.duration)
    load = os.getloadavg()
    print(
        f"{len(WORKLOAD)} turns per episode on a {args.width}x{args.height} {args.fps} fps {args.duration:g} s video "
        f"with sound; {os.cpu_count()} CPU(s), load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at the start"
    )
    print(
        "turns/s measured; ideal = workers / latency; decode = the same episodes with an instant in-process "
        "policy; eff. = measured / min(ideal, decode)"
    )
    print(HEADER, flush=True)
    cells = measure(args, tasks, work)
    worst = min(cells, key=lambda c: c["eff"])
    verdict = "met" if worst["eff"] >= args.goal else "NOT met"
    print(
        f"\ngoal {args.goal:.0%} of min(ideal, decode) at every size: {verdict} (lowest {worst['eff']:.0%} at "
        f"{worst['workers']} workers, {worst['latency']:g} s); load average at the end "
        f"{os.getloadavg()[0]:.2f}; threads alive {threading.active_count()}"
    )
    for c in cells:
        if c["eff"] < args.goal:
            why = (
                f"decode-bound, cpu limit {c['cpu_limit']:.0%}"
                if c["cpu_limit"] is not None
                else "latency-bound: each turn waits beyond the latency"
            )
            print(f"  below the goal: {c['workers']} workers, {c['latency']:g} s: {c['eff']:.0%} ({why})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
