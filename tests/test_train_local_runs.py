"""The single-process TAURA trainer (rl/train_local.py) on the tiny thinker, whole runs: one iteration per
weight mode, the progress bar, resume after SIGKILL exactly like an uninterrupted run, and a CI-sized run
that learns from its rewards."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch
from testkit import ROOT, mcq_tasks, read_csv_rows, synth_tasks
from testkit import TRAIN_LOCAL_SMALL as SMALL

from envs.env import OmniVideoEnv
from envs.tasks import load_tasks_jsonl
from omniagent.checkpoint import check_checkpoint
from omniagent.episode import run_episode
from omniagent.policy import make_policy
from omniagent.trajectory import Trajectory
from rl.checkpoint import latest_checkpoint, load_training_state, save_checkpoint
from rl.local.args import Args
from rl.local.bookkeeping import evaluate, load_policy
from rl.local.groups import RecordingPolicy
from rl.local.rollout import TurnEncoder
from rl.train_local import compose_config, train


@pytest.mark.parametrize("mode", ["grpo", "oracle", "ig"])
def test_one_iteration_per_weight_mode_logs_its_turn_weights(
    train_tasks: Path, random_dir: Path, tmp_path: Path, mode: str
) -> None:
    cfg = compose_config([*SMALL, f"actor_rollout_ref.model.path={random_dir}", f"local.train_tasks={train_tasks}",
                          f"taura.mode={mode}", "local.iterations=1", f"local.run_dir={tmp_path}"])  # fmt: skip
    (row,) = read_csv_rows(train(cfg))
    assert row["adv_finite"] == "1.0" and float(row["weight_mean"]) == pytest.approx(1.0, abs=1e-5)
    trajs = [
        Trajectory.model_validate_json(line)
        for line in (tmp_path / "rollouts.jsonl").read_text().splitlines()
    ]
    assert len(trajs) == 2 and all(len(t.meta["turn_weights"]) == t.num_turns == 2 for t in trajs)
    weights = [w for t in trajs for w in t.meta["turn_weights"]]
    if mode in ("grpo", "oracle"):  # the random model never fetches a percept: no overlap, every score 0
        assert weights == [1.0] * 4 and float(row["weight_std"]) == 0.0
    assert all(math.isfinite(w) and w >= 0 for w in weights)
    check_checkpoint(tmp_path / "final")


def test_the_progress_bar_moves_once_per_rollout_group_with_an_eta(
    train_tasks: Path, random_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two groups per iteration, two iterations: the bar (``local.progress``) counts 4 groups, and each group
    moves it as soon as it is played (before the next group starts), so a slow iteration still shows its pace;
    a resumed run's bar starts at the groups already done."""
    import rl.local.groups
    import rl.local.progress

    events: list[tuple[str, Any]] = []

    class Bar:  # records what the trainer asks of tqdm
        def __init__(self, **kwargs: Any) -> None:
            self.total, self.n = kwargs["total"], kwargs.get("initial", 0)
            events.append(("open", (self.total, self.n, kwargs.get("unit"), kwargs.get("disable"))))

        def update(self, n: int) -> None:
            self.n += n
            events.append(("update", self.n))

        def set_description(self, *args: Any, **kwargs: Any) -> None:
            events.append(("describe", args[0]))

        def set_postfix(self, **kwargs: Any) -> None:
            events.append(("postfix", sorted(kwargs)))

        def close(self) -> None:
            events.append(("close", self.n))

    played = rl.local.groups.play_group

    def play(*args: Any, **kwargs: Any) -> Any:
        events.append(("play", None))
        return played(*args, **kwargs)

    monkeypatch.setattr(rl.local.progress, "tqdm", Bar)
    monkeypatch.setattr(rl.local.groups, "play_group", play)
    over = [*SMALL, f"actor_rollout_ref.model.path={random_dir}", f"local.train_tasks={train_tasks}",
            "data.train_batch_size=2", "local.progress=true", f"local.run_dir={tmp_path}", "local.eval_every=0"]  # fmt: skip
    train(compose_config([*over, "local.iterations=1"]))
    assert events[0] == ("open", (2, 0, "group", False))
    kinds = [e[0] for e in events[1:]]
    assert kinds == ["play", "update", "play", "update", "postfix", "close"]  # per group, not per iteration
    assert [e[1] for e in events if e[0] == "update"] == [1, 2]
    events.clear()
    train(compose_config([*over, "local.iterations=2"]))  # resumes after iteration 1
    assert events[0] == ("open", (4, 2, "group", False))
    assert [e[1] for e in events if e[0] == "update"] == [3, 4]


def _train_cmd(tasks: Path, run_dir: Path, iterations: int, random_dir: Path) -> list[str]:
    return [sys.executable, "rl/train_local.py", *SMALL, f"actor_rollout_ref.model.path={random_dir}",
            f"local.train_tasks={tasks}", f"local.run_dir={run_dir}", f"local.iterations={iterations}",
            "local.threads=1"]  # fmt: skip


@pytest.mark.slow
def test_resumes_after_sigkill_exactly_like_an_uninterrupted_run(
    train_tasks: Path, random_dir: Path, tmp_path: Path
) -> None:
    from safetensors.torch import load_file

    iterations = 4
    # local.threads=1 (in _train_cmd) instead of OMP_NUM_THREADS
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    ref_dir = tmp_path / "ref"
    ref = subprocess.run(_train_cmd(train_tasks, ref_dir, iterations, random_dir), capture_output=True, text=True, env=env,
                         cwd=ROOT, timeout=900)  # fmt: skip
    assert ref.returncode == 0, ref.stderr[-3000:]
    assert '{"threads": 1}' in ref.stdout  # the config's thread count, not the environment's

    run_dir = tmp_path / "run"
    proc = subprocess.Popen(_train_cmd(train_tasks, run_dir, iterations, random_dir), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=env, cwd=ROOT)  # fmt: skip
    deadline = time.monotonic() + 900
    while (
        time.monotonic() < deadline
        and proc.poll() is None
        and latest_checkpoint(run_dir / "checkpoints") is None
    ):
        time.sleep(0.05)
    assert proc.poll() is None, "the run finished before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    killed_at = int(load_training_state(latest_checkpoint(run_dir / "checkpoints"))["iteration"])
    assert 1 <= killed_at < iterations and not (run_dir / "final").exists()

    again = subprocess.run(_train_cmd(train_tasks, run_dir, iterations, random_dir), capture_output=True, text=True, env=env,
                           cwd=ROOT, timeout=900)  # fmt: skip
    assert again.returncode == 0, again.stderr[-3000:]
    assert f'"iteration": {killed_at}' in again.stdout  # resumed from the checkpoint, not from scratch
    got, want = read_csv_rows(run_dir / "metrics.csv"), read_csv_rows(ref_dir / "metrics.csv")
    assert [r["iteration"] for r in got] == [str(i) for i in range(1, iterations + 1)]  # no iteration twice
    for a, b in zip(got, want, strict=True):  # the same episodes, entropies and updates
        for key in ("reward_mean", "turns", "entropy_turn_mean", "weight_std", "param_delta"):
            assert float(a[key]) == pytest.approx(float(b[key]), rel=1e-4, abs=1e-7), key
    a, b = (
        load_file(str(ref_dir / "final" / "model.safetensors")),
        load_file(str(run_dir / "final" / "model.safetensors")),
    )
    assert all(torch.allclose(a[k], b[k], atol=1e-6) for k in a)


def _warm_start(policy, encoder: TurnEncoder, tasks: Path, steps: int) -> None:
    """Teach the random tiny thinker the answer format: a few SFT steps on an oracle's answer turns."""
    from rl.sft.step import collate, train_steps

    items = []
    for task in load_tasks_jsonl(tasks):
        recorder = RecordingPolicy(make_policy("oracle", look=False))
        run_episode(OmniVideoEnv(), recorder, task.env_options(2))
        for context, out in recorder.turns:
            items.append(
                encoder.encode(
                    [*context, {"role": "assistant", "content": [{"type": "text", "text": out.text}]}]
                )
            )
    losses = train_steps(
        policy.model, [collate([items[s % len(items)]], encoder.pad_id) for s in range(steps)], lr=3e-3
    )
    assert losses[-1] < 0.2 * losses[0]


@pytest.mark.slow
def test_ci_sized_taura_run_learns_from_its_rewards(
    train_tasks: Path, random_dir: Path, tmp_path: Path
) -> None:
    """A handful of updates on a fixed seed: advantages finite, weights moved by the advantages (no weight
    decay), the training tasks' greedy reward does not fall."""
    from safetensors.torch import load_file

    warm_tasks = mcq_tasks(synth_tasks(tmp_path / "s2", seed=2, n=2), tmp_path / "warm.jsonl")  # other videos
    cfg = compose_config([
        "+exp=tiny", "data.train_batch_size=2", "actor_rollout_ref.rollout.n=4", "data.max_response_length=64",
        "actor_rollout_ref.actor.ppo_mini_batch_size=1", "env.turns.min=2", "env.turns.max=2",
        "actor_rollout_ref.actor.optim.lr=1e-4", "actor_rollout_ref.actor.optim.weight_decay=0",
        f"actor_rollout_ref.model.path={random_dir}", f"local.train_tasks={train_tasks}", f"local.eval_tasks={train_tasks}",
        "local.iterations=2", "local.eval_every=0", f"local.run_dir={tmp_path / 'run'}", "local.progress=false",
    ])  # fmt: skip
    args = Args.from_config(cfg)
    policy = load_policy(str(random_dir), args)
    encoder = TurnEncoder(policy.processor, policy.model.config)
    _warm_start(policy, encoder, warm_tasks, steps=50)
    save_checkpoint(policy.model, policy.processor, tmp_path / "warm")
    before = evaluate(policy, OmniVideoEnv(), load_tasks_jsonl(train_tasks), args)

    cfg.actor_rollout_ref.model.path = str(tmp_path / "warm")
    rows = read_csv_rows(train(cfg))
    assert [int(r["iteration"]) for r in rows] == [1, 2]
    assert all(r["adv_finite"] == "1.0" for r in rows)
    assert any(float(r["reward_std"]) > 0 for r in rows)  # the warm start answers, sometimes right
    assert all(float(r["valid_turns"]) > 0 for r in rows)
    moved = [float(r["param_delta"]) > 0 for r in rows]
    first = next(i for i, r in enumerate(rows) if float(r["adv_abs_mean"]) > 0)
    assert (
        not any(moved[:first]) and moved[first]
    )  # the weights move once, and because, advantages are non-zero
    a, b = (
        load_file(str(tmp_path / "warm" / "model.safetensors")),
        load_file(str(tmp_path / "run" / "final" / "model.safetensors")),
    )
    assert any(not torch.equal(a[k], b[k]) for k in a)
    assert float(rows[-1]["eval_reward"]) >= before
