"""Protocols (greedy default, official), samples=k with pass@k, cost accounting per question and per run,
and what `omniagent-eval` prints and lists in --help (omniagent/eval/protocols.py, samples.py,
accounting.py, hydra_help.py)."""

from __future__ import annotations

import subprocess
import sys
from math import comb
from pathlib import Path
from typing import Any

import pytest
from fake_openai_server import FakeServer
from media_factory import make_video
from testkit import compose_conf, small_synth_overrides, turn_text

from envs.jsonl import read_jsonl
from envs.tasks import Task
from omniagent.eval.accounting import cost_summary
from omniagent.eval.config import (
    EvalConfig,
    FrozenPresetError,
    check_decoding,
    check_frozen,
    eval_config_from,
)
from omniagent.eval.pipeline import run_from_config
from omniagent.eval.results import load_rows
from omniagent.eval.runner import policy_factory_for, run_eval
from omniagent.eval.samples import pass_at_k

ROOT = Path(__file__).resolve().parents[1]


def synth(synth_dir: Path, out: Path, *extra: str) -> list[str]:
    return [*small_synth_overrides(synth_dir, out), "summary.n_boot=100", *extra]


# ------------------------------------------------------------------------------------------ protocols
def test_greedy_is_the_default_and_official_sets_the_released_settings() -> None:
    greedy = eval_config_from(
        compose_conf("eval", ["benchmarks=videomme", "benchmark.annotations=x.parquet"])
    )
    assert greedy.temperature == 0.0 and greedy.max_turns == 16 and greedy.protocol.name == "greedy"
    assert (
        "protocol" not in greedy.fingerprint() and "samples" not in greedy.fingerprint()
    )  # old run folders resume
    cfg = compose_conf(
        "eval",
        ["benchmarks=videomme", "benchmark.annotations=x.parquet", "protocol=official", "policy.name=openai"],
    )
    official = eval_config_from(cfg)
    assert (official.temperature, official.max_turns) == (1.0, 32)
    limits = official.env_limits()
    assert (limits.max_frames, limits.max_audio_s, limits.max_clip_s) == (60, 300.0, 60.0)
    assert official.fingerprint()["protocol"]["name"] == "official"
    policy = policy_factory_for(official)()
    try:
        p = policy.params
        assert (p.temperature, p.top_p, p.top_k, p.max_tokens) == (1.0, 0.95, 20, 4096)
        body = policy.request_body([{"role": "user", "content": [{"type": "text", "text": "Q?"}]}])
        assert body["extra_body"]["top_k"] == 20 and body["top_p"] == 0.95 and body["temperature"] == 1.0
    finally:
        policy.close()


def test_official_turn_budget_grows_with_the_media(tasks: list[Task]) -> None:
    cfg = eval_config_from(compose_conf("eval", ["protocol=official"]))
    t = tasks[0]
    assert cfg.task_turn_budget(t.model_copy(update={"duration": 59.0})) == 5
    assert cfg.task_turn_budget(t.model_copy(update={"duration": 130.0})) == 7  # 5 + floor(130 / 60)
    assert cfg.task_turn_budget(t.model_copy(update={"duration": 7200.0})) == 32  # capped at max_turns
    assert t.duration is None or t.duration < 60
    assert cfg.task_turn_budget(t.model_copy(update={"duration": None})) == 5  # probed: a 20 s video
    assert eval_config_from(compose_conf("eval", [])).task_turn_budget(t) == 16  # greedy: the preset's K


def test_protocol_fields_are_frozen_and_the_policy_temperature_must_match() -> None:
    assert check_frozen(["protocol=official"]) == []
    with pytest.raises(FrozenPresetError, match="protocol.temperature=0.3"):
        check_frozen(["protocol.temperature=0.3"])
    check_decoding(compose_conf("eval", ["protocol=official", "+policy.kwargs.temperature=1.0"]))
    with pytest.raises(FrozenPresetError, match="differs from the run's decoding temperature 1.0"):
        check_decoding(compose_conf("eval", ["protocol=official", "+policy.kwargs.temperature=0.0"]))


# -------------------------------------------------------------------------------------------- samples
def test_pass_at_k_is_the_unbiased_estimator() -> None:
    assert pass_at_k(5, 2, 1) == pytest.approx(0.4)
    assert pass_at_k(10, 3, 2) == pytest.approx(1 - comb(7, 2) / comb(10, 2))
    assert pass_at_k(5, 2, 4) == 1.0 and pass_at_k(5, 0, 3) == 0.0
    with pytest.raises(ValueError, match="1 <= k <= n"):
        pass_at_k(3, 1, 4)


def test_samples_need_sampled_decoding(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="samples=3 needs sampled decoding.*protocol=official"):
        EvalConfig(out_dir=str(tmp_path), policy="random", samples=3)


def test_k_samples_per_question_give_a_mean_over_questions_and_pass_at_k(
    synth_dir: Path, tmp_path: Path
) -> None:
    ov = synth(synth_dir, tmp_path / "s", "policy.name=random", "protocol=official", "samples=4", "limit=5")
    summary = run_from_config(compose_conf("eval", ov), overrides=ov)
    rows = load_rows(tmp_path / "s" / "results.jsonl")
    assert len(rows) == 20 and {r["sample"] for r in rows} == {0, 1, 2, 3}
    by_q: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        assert r["id"] == f"{r['base_id']}#s{r['sample']}"
        by_q.setdefault(r["base_id"], []).append(r)
    assert len(by_q) == 5
    # each sample draws anew (its own seed): the random policy's looks differ between samples
    assert any(len({str(r["action_counts"]) + str(r["prediction"]) for r in rs}) > 1 for rs in by_q.values())
    s = summary["samples"]
    assert (s["k"], s["questions"], s["incomplete"], set(s["pass_at"])) == (4, 5, 0, {"1", "2", "4"})
    means = [sum(r["reward"] for r in rs) / 4 for rs in by_q.values()]
    assert s["mean"]["mean"] == pytest.approx(sum(means) / 5) == pytest.approx(summary["score"]["mean"])
    expect = sum(pass_at_k(4, sum(r["reward"] >= 0.5 for r in rs), 4) for rs in by_q.values()) / 5
    assert s["pass_at"]["4"]["mean"] == pytest.approx(expect)
    assert s["pass_at"]["1"]["mean"] <= s["pass_at"]["2"]["mean"] <= s["pass_at"]["4"]["mean"]
    assert summary["score"].get("clusters") == 5  # the interval resamples questions, not samples


# ----------------------------------------------------------------------------------------- accounting
def test_counted_tokens_media_and_time_per_question(
    synth_dir: Path, tasks: list[Task], tmp_path: Path
) -> None:
    ov = synth(synth_dir, tmp_path / "c", "policy.name=random", "limit=8", "seed=3")
    summary = run_from_config(compose_conf("eval", ov), overrides=ov)
    rows = load_rows(tmp_path / "c" / "results.jsonl")
    for r in rows:  # a scripted policy reports no usage: every turn is counted
        assert (
            r["prompt_tokens"] > 0 and r["completion_tokens"] > 0 and r["tokens_counted_turns"] == r["turns"]
        )
        clips = r["action_counts"].get("get_clip", 0)
        assert (r["clip_seconds"] > 0) == (
            clips > r["turn_error_codes"].get("clip", 0) and clips > 0
        ) or clips
    cost = summary["cost"]
    assert cost["tasks"] == 8 and cost["turns_with_counted_tokens"] == sum(r["turns"] for r in rows)
    assert cost["prompt_tokens"]["total"] == sum(r["prompt_tokens"] for r in rows)
    assert cost["tokens_per_task"] == pytest.approx(
        (sum(r["prompt_tokens"] for r in rows) + sum(r["completion_tokens"] for r in rows)) / 8
    )
    assert cost["frames"]["per_task"] == pytest.approx(sum(r["frames_used"] for r in rows) / 8, abs=1e-3)
    assert cost["wall_seconds"]["total"] >= cost["model_seconds"]["total"] >= 0


# on a 4 s video: 6 s asked, 1.5 s in the file; and a clip over a 3 s cap, refused
CLIP_PAST_END = turn_text("", "", {"type": "get_clip", "start": 2.5, "end": 8.5})
CLIP_TOO_LONG = turn_text("", "", {"type": "get_clip", "start": 0.0, "end": 3.5})
ANSWER_A = turn_text("", "", {"type": "answer", "content": "A"})


def clip_run(video: Path, out: Path, texts: list[str]) -> tuple[dict[str, Any], list[float]]:
    """One question on ``video`` answered by replaying ``texts``: its row and each turn's ``clip_seconds_used``."""
    task = Task(id="q", media=str(video), question="Which?", task_type="mcq", choices=["a", "b"], answer="A")
    cfg = EvalConfig(out_dir=str(out), policy="replay", policy_kwargs={"texts": texts}, workers=1,
                     progress=False, limits={"max_turns": 4, "max_clip_s": 3.0})  # fmt: skip
    run_eval([task], cfg)
    (row,) = load_rows(out / "results.jsonl")
    (traj,) = read_jsonl(out / "trajectories.jsonl")
    return row, [t["clip_seconds_used"] for t in traj["turns"]]


def test_clip_seconds_count_the_span_served_not_the_span_asked(tmp_path: Path) -> None:
    video = make_video(tmp_path / "short.mp4", duration=4.0, fps=10, gop=10, audio=False)
    row, per_turn = clip_run(video, tmp_path / "served", [CLIP_TOO_LONG, CLIP_PAST_END, ANSWER_A])
    assert row["turn_error_codes"] == {"span_too_long": 1} and row["answered"]
    served = row["duration"] - 2.5  # [2.5, 8.5] trimmed to the file's end
    assert served == pytest.approx(1.5, abs=0.05)
    assert row["clip_seconds"] == pytest.approx(served, abs=1e-3)  # not the 6 s asked for
    assert per_turn == [0.0, pytest.approx(served, abs=1e-3), pytest.approx(served, abs=1e-3)]
    assert cost_summary([row])["clip_seconds"]["total"] == pytest.approx(served, abs=1e-3)
    refused, per_turn = clip_run(video, tmp_path / "refused", [CLIP_TOO_LONG, ANSWER_A])
    assert refused["turn_error_codes"] == {"span_too_long": 1} and refused["action_counts"]["get_clip"] == 1
    assert refused["clip_seconds"] == 0.0 and per_turn == [0.0, 0.0]


def test_server_usage_is_taken_as_given(tasks: list[Task], tmp_path: Path) -> None:
    server = FakeServer()  # answers at once; usage: 123 prompt tokens, 3 completion tokens
    try:
        cfg = EvalConfig(out_dir=str(tmp_path / "u"), policy="openai", progress=False,
                         policy_kwargs={"model": "m", "base_url": server.url, "retries": 0})  # fmt: skip
        run_eval([t for t in tasks if t.task_type == "mcq"][:3], cfg)
    finally:
        server.close()
    rows = load_rows(tmp_path / "u" / "results.jsonl")
    assert [(r["prompt_tokens"], r["completion_tokens"], r["tokens_counted_turns"]) for r in rows] == [
        (123, 3, 0)
    ] * 3


# --------------------------------------------------------------------------------------- the command
def test_eval_help_lists_only_evaluation_groups() -> None:
    res = subprocess.run([sys.executable, str(ROOT / "scripts" / "eval.py"), "--help"], capture_output=True,
                         text=True, timeout=120)  # fmt: skip
    assert res.returncode == 0, res.stderr
    groups = res.stdout.split("== Config groups (group=option) ==")[1].split("== Config ==")[0]
    names = {line.split(":")[0] for line in groups.strip().splitlines()}
    assert names == {"benchmarks", "protocol"}  # not rl, rl/exp, sft, ... (training groups in conf/)
    assert "protocol: greedy, official" in groups and "omnivideobench" in groups and "mlvu" in groups


def test_eval_prints_its_folder_and_a_one_line_summary(synth_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "printed"
    cmd = [
        sys.executable,
        str(ROOT / "scripts" / "eval.py"),
        *synth(synth_dir, out, "policy.name=oracle", "limit=3"),
    ]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    tail = res.stdout.strip().splitlines()[-2:]
    assert tail[0].startswith(f"wrote {out} (results.jsonl")
    assert tail[1].startswith(
        "synthetic-oracle-active: score 1.000 [1.000, 1.000] on 3 task(s) (0 failed, 0 errors)"
    )
    assert "tokens per task" in tail[1]
