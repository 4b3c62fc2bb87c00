"""The turn-overhead benchmark's fixed workload (scripts/bench/turn_overhead.py): every action type,
a malformed turn and an answer, the same turns on every run (played here without the model)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from testkit import load_script

from envs.env import OmniVideoEnv
from omniagent.backends.scripted import ReplayPolicy
from omniagent.episode import run_episode


def test_workload_serves_every_action_type(tmp_path: Path) -> None:
    bench = load_script("scripts/bench/turn_overhead.py")
    (task,) = bench.make_media(tmp_path, 1, 20.0, seed=0)
    assert task.task_type == "mcq"
    texts = bench.workload_texts(20.0)
    assert texts == bench.workload_texts(20.0) and len(texts) == 10
    env = OmniVideoEnv()
    try:
        traj = run_episode(env, ReplayPolicy(texts=texts), task.env_options(len(texts)))
    finally:
        env.close()
    kinds = Counter(r.action_type or "format error" for r in traj.turns)
    assert kinds == {"get_frames": 3, "get_audio": 3, "get_clip": 2, "format error": 1, "answer": 1}
    assert traj.stop_reason == "answered" and traj.num_turns == 10
    assert all(r.error is None for r in traj.turns if r.action_type)  # every percept was served
    assert traj.frames_used == 8 + 4 + 16 + 2 * 5  # frames, and two 2 s clips at 2 fps (5 frames each)
    (mcq2,) = bench.make_media(tmp_path, 1, 20.0, seed=1)
    assert Path(mcq2.media).name != Path(task.media).name  # each seed has its own media
