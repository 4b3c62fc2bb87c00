"""The evaluation-throughput benchmark's workload (scripts/bench/eval_throughput.py), played here for
correctness only (no timing): its fake server and its in-process policy give the same fixed episodes,
through the real eval harness and the OpenAI backend."""

from __future__ import annotations

from functools import partial
from pathlib import Path

from testkit import load_script

from omniagent.backends.openai_backend import OpenAIPolicy


def test_server_and_instant_policy_play_the_same_workload(tmp_path: Path) -> None:
    bench = load_script("scripts/bench/eval_throughput.py")
    tasks = bench.make_tasks(tmp_path, 4, 160, 90, 5, 20.0)
    assert len({t.id for t in tasks}) == 4 and len({t.media for t in tasks}) == 1
    instant = bench.one_run(tasks, 2, tmp_path / "instant", partial(bench.InstantPolicy, 20.0), "instant")
    assert instant["turns"] == 4 * len(bench.WORKLOAD) and instant["env_ms"] > 0
    server = bench.ServerProcess(0.0, 20.0)
    try:
        factory = partial(OpenAIPolicy, model="bench", base_url=server.url, retries=0, timeout=60)
        with bench.timed_request_builds() as builds:
            served = bench.one_run(tasks, 2, tmp_path / "served", factory, "openai")
        assert OpenAIPolicy.request_body.__name__ == "request_body"  # restored
        assert server.cpu_seconds() > 0
    finally:
        server.close()
    assert served["turns"] == instant["turns"] and served["failed"] == instant["failed"] == 0  # same episodes
    assert len(builds) == served["turns"] and all(b > 0 for b in builds)
    row = bench.row_text(
        {**served, "latency": 0.5, "workers": 2, "server_cpu": 0.1, "build_ms": 1.0, "ceiling": instant}
    )
    assert row.split()[:2] == ["0.5s", "2"]
    decode_bound = {
        **served,
        "latency": 0.001,
        "workers": 2,
        "server_cpu": 0.1,
        "build_ms": 1.0,
        "ceiling": instant,
    }
    bench.row_text(decode_bound)  # ideal 2000 turns/s: the decode-only run is the ceiling
    expected = (instant["cpu"] / instant["turns"]) / ((served["cpu"] + 0.1) / served["turns"])
    assert decode_bound["cpu_limit"] == expected and 0 < expected < 1.5
