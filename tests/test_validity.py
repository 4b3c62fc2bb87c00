"""Validity tools: the train/eval overlap guard and the observation-fidelity probe (omniagent/eval/overlap.py, omniagent/eval/fidelity.py)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from envs.messages import Message, is_media
from envs.synth import generate_benchmark
from envs.tasks import LETTERS, Task
from omniagent.eval.config import EvalConfig
from omniagent.eval.fidelity import (
    ScriptedPolicyError,
    memory_notes,
    print_fidelity,
    run_fidelity,
    synthetic_probes,
)
from omniagent.eval.overlap import OverlapError, check_overlap, guard, media_hash, normalize_question
from omniagent.eval.runner import run_eval
from omniagent.policy import Policy, TurnOutput, make_policy
from omniagent.trajectory import load_trajectories

ROOT = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------------------------------- overlap
def task(tid: str, media: Path, question: str = "How many beeps?") -> Task:
    return Task(id=tid, media=str(media), question=question, task_type="num", answer=1.0)


def test_media_hash_follows_content_not_name(tmp_path: Path) -> None:
    a = tmp_path / "a.mp4"
    a.write_bytes(b"x" * 3_000_000)
    b = tmp_path / "renamed.mp4"
    shutil.copy(a, b)
    assert media_hash(a) == media_hash(b)
    c = tmp_path / "c.mp4"
    c.write_bytes(b"x" * 2_999_999 + b"y")  # differs in the last MiB
    d = tmp_path / "d.mp4"
    d.write_bytes(b"x" * 3_000_001)  # differs in size
    assert len({media_hash(a), media_hash(c), media_hash(d)}) == 3


def test_normalize_question() -> None:
    assert normalize_question("  How MANY beeps?!  ") == normalize_question("how many beeps")


def test_check_overlap_kinds(tmp_path: Path) -> None:
    m1, m2, m3 = (tmp_path / f"m{i}.mp4" for i in range(3))
    m1.write_bytes(b"one")
    m2.write_bytes(b"two")
    m3.write_bytes(b"three")
    copy = tmp_path / "copy_of_m1.mp4"
    shutil.copy(m1, copy)
    train = [task("t1", m1, "What colour is the car?"), task("t2", m2, "How many beeps?")]
    evaluation = [
        task("e1", copy, "What colour is the car"),  # same media (a copy) and same question: pair
        task("e2", m3, "how many BEEPS?"),  # same question on other media: question only
        task("e3", tmp_path / "absent.mp4", "Something new?"),
    ]
    rep = check_overlap(train, evaluation)
    assert [v["eval"] for v in rep.media.values()] == [["e1"]]
    assert [v["eval"] for v in rep.pairs.values()] == [["e1"]]
    assert sorted(i for v in rep.questions.values() for i in v["eval"]) == ["e1", "e2"]
    assert rep.overlaps() and rep.eval_ids() == {"e1"}
    assert rep.eval_ids(["question"]) == {"e1", "e2"}
    assert len(rep.unhashed) == 1 and "absent.mp4" in rep.unhashed[0]
    clean = check_overlap(train[1:], evaluation[2:])
    assert not clean.overlaps() and not clean.overlaps(["media", "pair", "question"])


def test_guard_refuses_or_prints(tmp_path: Path) -> None:
    m = tmp_path / "m.mp4"
    m.write_bytes(b"data")
    train, evaluation = [task("t", m)], [task("e", m)]
    with pytest.raises(OverlapError, match="1 shared media file"):
        guard(train, evaluation)
    printed: list[str] = []
    rep = guard(train, evaluation, allow=True, printer=printed.append)
    assert (
        rep.overlaps()
        and "continuing despite the overlap" in printed[0]
        and "eval e <-> train t" in printed[0]
    )
    with pytest.raises(ValueError, match="unknown overlap kinds"):
        guard(train, evaluation, fail_on=["media", "vibes"])


def test_overlap_script(tmp_path: Path) -> None:
    m = tmp_path / "m.mp4"
    m.write_bytes(b"data")
    for name, tid in (("train.jsonl", "t"), ("eval.jsonl", "e")):
        (tmp_path / name).write_text(task(tid, m).to_json() + "\n")
    res = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "overlap_guard.py"), "--train", str(tmp_path / "train.jsonl"),
         "--eval", str(tmp_path / "eval.jsonl")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert res.returncode == 3 and "OVERLAP (media, pair)" in res.stdout


# --------------------------------------------------------------------------------------- fidelity
class SeesOnlyMedia(Policy):
    """Answers a probe right only when raw media are in its context; from notes alone it picks a
    wrong letter (a stand-in for notes that lost the detail)."""

    name = "sees-only-media"

    def reset(self, info: dict[str, Any]) -> None:
        self.truth = info["task"]["answer"]
        self.n = len(info["task"]["choices"])

    def act(self, messages: list[Message]) -> TurnOutput:
        sees = any(is_media(p) for m in messages for p in m["content"])
        letter = self.truth if sees else next(x for x in LETTERS[: self.n] if x != self.truth)
        action = {"type": "answer", "content": letter}
        return TurnOutput(text=json.dumps({"observation": "", "thought": "", "action": action}))


@pytest.fixture(scope="module")
def scanned_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A scripted run over one synthetic video: uniform looks at 20 frames, one per second."""
    root = tmp_path_factory.mktemp("fidelity")
    tasks = generate_benchmark(
        root / "synth", seed=0, n_videos=1, durations=[20.0], config={"width": 112, "height": 64, "fps": 2}
    )
    cfg = EvalConfig(
        out_dir=str(root / "run"),
        policy="uniform",
        policy_kwargs={"num_frames": 20},
        workers=1,
        progress=False,
    )
    run_eval(tasks[:3], cfg)
    return root / "run"


def test_probes_come_from_events_inside_the_fetched_frames(scanned_run: Path) -> None:
    trajs = load_trajectories(scanned_run / "trajectories.jsonl")
    probes = synthetic_probes(trajs[0], max_probes=10)
    assert probes, "the scan should have seen some synthetic events"
    for p in probes:
        assert p.percept["action"] == "get_frames" and p.choices[LETTERS.index(p.answer)]
        t = float(p.question.split(" at ")[1].split(" s")[0])
        assert t in [round(x, 2) for x in p.percept["timestamps"]]
    assert probes == synthetic_probes(trajs[0], max_probes=10)  # deterministic
    assert len(synthetic_probes(trajs[0], max_probes=1)) == 1
    assert "Turn 1: you looked at frames 0.00s-20.00s" in memory_notes(trajs[0])
    not_synth = trajs[0].model_copy(update={"media": "/nowhere/x.mp4"})
    assert synthetic_probes(not_synth) == []


def test_fidelity_prints_the_gap(scanned_run: Path) -> None:
    trajs = load_trajectories(scanned_run / "trajectories.jsonl")
    report = run_fidelity(trajs, SeesOnlyMedia(), max_probes=2, n_boot=200)
    assert report.n_probes >= 2 and report.n_episodes == 3
    assert report.memory["mean"] == 0.0 and report.raw["mean"] == 1.0
    assert report.gap["mean"] == 1.0 and report.gap["lo"] == 1.0
    lines: list[str] = []
    print_fidelity(report, lines.append)
    assert any("gap (raw - memory): 1.000 [1.000, 1.000]" in line for line in lines)
    with pytest.raises(ScriptedPolicyError, match="gap is 0 by construction"):
        run_fidelity(trajs, make_policy("oracle"), max_probes=2, n_boot=200)
    oracle = run_fidelity(trajs, make_policy("oracle"), max_probes=2, n_boot=200, allow_scripted=True)
    assert oracle.gap["mean"] == 0.0 and oracle.raw["mean"] == 1.0 and "scripted policy" in oracle.warning
    lines.clear()
    print_fidelity(oracle, lines.append)
    assert lines[0].startswith("WARNING: 'oracle' is a scripted policy") and lines[-1] == lines[0]


def test_fidelity_script(scanned_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "fid.json"
    cmd = [sys.executable, str(ROOT / "scripts" / "fidelity.py"), str(scanned_run), "--policy", "oracle",
           "--max-probes", "1", "--out", str(out)]  # fmt: skip
    refused = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2 and "scripted policy" in refused.stderr and not out.exists()
    res = subprocess.run([*cmd, "--allow-scripted"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "WARNING: 'oracle' is a scripted policy" in res.stdout
    assert "gap (raw - memory): 0.000" in res.stdout and out.exists()
