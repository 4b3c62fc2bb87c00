"""Several endpoints behind the OpenAI-compatible backend (omniagent/backends/openai_endpoints.py):
least-loaded spreading, a dead endpoint taken out and its requests retried elsewhere (a run over two
fake servers, one killed mid-run, loses and fails no task), the connection-cut message, and the
endpoint counts in the run's report."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from fake_openai_server import FakeServer
from testkit import free_port

from envs.tasks import Task
from omniagent.backends.openai_backend import OpenAIPolicy, endpoint_urls
from omniagent.backends.openai_endpoints import EndpointPool
from omniagent.eval.config import EvalConfig
from omniagent.eval.results import load_rows
from omniagent.eval.runner import run_eval
from omniagent.policy import PolicyError


@pytest.fixture()
def servers():
    pair = [FakeServer(), FakeServer()]
    yield pair
    for s in pair:
        s.close()


def ask(policy: OpenAIPolicy) -> str:
    return policy.act([{"role": "user", "content": [{"type": "text", "text": "Q?"}]}]).text


def test_base_url_lists_and_comma_strings() -> None:
    assert endpoint_urls("http://a:1/v1/, http://b:2/v1") == ["http://a:1/v1", "http://b:2/v1"]
    assert endpoint_urls(["http://a:1/v1", "http://a:1/v1", "http://c/v1,http://d/v1"]) == [
        "http://a:1/v1", "http://c/v1", "http://d/v1",
    ]  # fmt: skip
    with pytest.raises(ValueError, match="names no server"):
        OpenAIPolicy(model="m", base_url=" , ")


def test_pool_picks_the_least_loaded_and_cools_failures_down() -> None:
    pool = EndpointPool(["a", "b", "c"], cooldown=8.0)
    first, second = pool.acquire(), pool.acquire()
    assert {first.url, second.url} == {"a", "b"}  # the busy one is passed over
    third = pool.acquire()
    assert third.url == "c"
    pool.release(first, ConnectionError("refused"), take_out=True)
    assert pool.acquire(avoid={second.url}).url == third.url  # a is out, b avoided: c, though busier
    failures = [pool.stats()["a"]["times_down"]]
    for _ in range(5):  # doubling pause, capped at the cool-down
        pool.endpoints[0].down_until = 0
        ep = pool.acquire(avoid={"b", "c"})
        assert ep.url == "a"
        pool.release(ep, ConnectionError("refused"), take_out=True)
    assert pool.endpoints[0].down_until - time.monotonic() == pytest.approx(8.0, abs=0.5)
    stats = pool.stats()["a"]
    assert stats["failed"] == 6 and stats["up"] is False and "refused" in stats["last_error"]
    assert failures == [1] and stats["times_down"] == 6
    ok = pool.endpoints[0]
    ok.down_until = 0
    pool.release(pool.acquire(avoid={"b", "c"}))
    assert pool.stats()["a"]["up"] is True and ok.failures_in_a_row == 0


def test_requests_alternate_between_two_live_endpoints(servers: list[FakeServer]) -> None:
    a, b = servers
    policy = OpenAIPolicy(model="m", base_url=f"{a.url},{b.url}", retries=0)
    for _ in range(6):
        ask(policy)
    assert len(a.requests) == 3 and len(b.requests) == 3
    stats = policy.endpoint_stats()
    assert stats[a.url]["ok"] == 3 and stats[b.url]["ok"] == 3 and stats[a.url]["up"]


def test_a_dead_endpoint_is_skipped_and_the_error_names_every_server(servers: list[FakeServer]) -> None:
    a, _ = servers
    dead = f"http://127.0.0.1:{free_port()}/v1"
    policy = OpenAIPolicy(model="m", base_url=[dead, a.url], retries=0, timeout=10)
    assert all(ask(policy) for _ in range(4))  # every request answered by the live one
    assert len(a.requests) == 4
    stats = policy.endpoint_stats()
    assert stats[dead]["ok"] == 0 and stats[dead]["failed"] >= 1 and stats[dead]["times_down"] >= 1
    both_dead = OpenAIPolicy(model="m", base_url=[dead, f"http://127.0.0.1:{free_port()}/v1"], retries=0)
    with pytest.raises(PolicyError, match=r"no server at http://127\.0\.0\.1:\d+/v1 \(nor at http"):
        ask(both_dead)


def test_a_connection_cut_mid_reply_is_named_as_such(servers: list[FakeServer]) -> None:
    a, _ = servers
    a.mode = "cut"
    policy = OpenAIPolicy(model="m", base_url=a.url, retries=0)
    with pytest.raises(PolicyError) as info:
        ask(policy)
    text = str(info.value)
    assert f"the server at {a.url} closed the connection before its reply was complete" in text
    assert "no server" not in text and "vllm serve" not in text and "\n" not in text


def test_a_run_loses_no_task_when_one_of_two_endpoints_dies(
    tasks: list[Task], servers: list[FakeServer], tmp_path: Path
) -> None:
    a, b = servers
    for s in servers:
        s.delay = 0.03
    mcq = [t for t in tasks if t.task_type == "mcq"]  # the fake servers answer "B"
    many = [t.model_copy(update={"id": f"{t.id}#{k}"}) for k in range(30) for t in mcq][:36]
    assert len(many) == 36

    def kill_b_mid_run() -> None:
        while len(a.requests) + len(b.requests) < len(many) // 3:
            time.sleep(0.005)
        b.mode = "cut"  # replies in flight are cut off, then the port closes
        b.close()

    killer = threading.Thread(target=kill_b_mid_run)
    killer.start()
    cfg = EvalConfig(
        out_dir=str(tmp_path / "run"), policy="openai", workers=6, progress=False,
        policy_kwargs={"model": "fake-omni", "base_url": [a.url, b.url], "retries": 1, "timeout": 30},
    )  # fmt: skip
    report = run_eval(many, cfg)
    killer.join()
    rows = load_rows(tmp_path / "run" / "results.jsonl")
    assert len(rows) == len(many) and {r["status"] for r in rows} == {"ok"}
    assert all(r["answered"] and r["prediction"] == "B" for r in rows)
    assert report.failed == 0 and report.errors == 0
    ep = report.endpoints
    assert ep is not None and set(ep) == {a.url, b.url}
    assert ep[b.url]["ok"] >= 3 and ep[b.url]["failed"] >= 1 and ep[b.url]["times_down"] >= 1
    assert ep[a.url]["ok"] > ep[b.url]["ok"] and ep[a.url]["up"] and ep[a.url]["failed"] == 0
    assert ep[a.url]["ok"] + ep[b.url]["ok"] == len(many)  # one answered request per one-turn episode
