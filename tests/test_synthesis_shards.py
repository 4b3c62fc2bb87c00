"""Teacher synthesis in shards and with several workers (rl/synthesis/folder.py, workers.py): three shards
merged equal the unsharded run (the same kept and rejected trajectories, task stats and summary), and
so does a run with three workers; shards of different runs, overlapping or running shards, and another
job's shards are refused; a missing shard is reported. The teacher is the scripted ``synth_teacher``
on the synthetic benchmark, audited offline by the rule-based auditor."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from omegaconf import OmegaConf

from envs.jsonl import read_jsonl
from envs.synth import generate_benchmark
from envs.tasks import load_tasks_jsonl, save_tasks_jsonl
from omniagent.eval.batch import RunLock
from omniagent.eval.merge import MergeError
from omniagent.eval.merge_runs import merge_runs
from omniagent.eval.shards import Shard, ShardSpecError, shard_of, write_manifest
from omniagent.policy import make_policy
from rl.synthesis.folder import merge_main, merge_synthesis, settings_digest, shard_key
from rl.synthesis.synthesize import run_synthesis

ROOT = Path(__file__).resolve().parents[1]
TIMING = {"model_seconds", "env_seconds", "wall_seconds", "seconds"}
FILES = ("kept.jsonl", "rejected.jsonl", "task_stats.jsonl")


@pytest.fixture(scope="module")
def tasks_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The synthetic benchmark, plus three tasks repeated under new ids (the dedupe's cross-task case)."""
    bench = tmp_path_factory.mktemp("bench")
    tasks = generate_benchmark(
        bench,
        seed=2,
        n_videos=2,
        durations=[20, 30],
        config={"max_tasks_per_template": 1, "width": 112, "height": 64, "fps": 2},
    )
    repeats = [t.model_copy(update={"id": f"{t.id}-again"}) for t in tasks[::9][:3]]
    path = bench / "with_repeats.jsonl"
    save_tasks_jsonl([*tasks[: len(tasks) // 2], *repeats, *tasks[len(tasks) // 2 :]], path)
    return path


def config(tasks_file: Path, out: Path, limit: int | None = None, **over: Any) -> dict[str, Any]:
    cfg = OmegaConf.to_container(OmegaConf.load(ROOT / "conf" / "synthesize.yaml"))
    cfg.update({"out_dir": str(out), "n_samples": 2, **over})
    cfg["data"].update(tasks=str(tasks_file), limit=limit)
    cfg["teacher"]["backend"] = "synth_teacher"
    return cfg


def untimed(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: untimed(v) for k, v in value.items() if k not in TIMING}
    if isinstance(value, list):
        return [untimed(v) for v in value]
    return value


def contents(folder: Path) -> dict[str, Any]:
    """Every record of the folder without timings, each file's records sorted by task then sample."""

    def order(rec: dict[str, Any]) -> tuple[str, int]:
        meta = rec.get("meta", rec)
        return (str(meta["task_id"]), int(meta.get("sample", 0)))

    got: dict[str, Any] = {
        name: sorted(untimed(list(read_jsonl(folder / name))), key=order) for name in FILES
    }
    got["summary"] = json.loads((folder / "summary.json").read_text())
    return got


@pytest.fixture(scope="module")
def unsharded(tasks_file: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("whole")
    run_synthesis(config(tasks_file, out), progress=False)
    return contents(out)


def run_shards(tasks_file: Path, root: Path, count: int = 3, **over: Any) -> list[Path]:
    for i in range(count):
        run_synthesis(config(tasks_file, root, shard=f"{i}/{count}", **over), progress=False)
    return [root / f"shard-{i}-of-{count}" for i in range(count)]


def test_three_shards_merged_equal_the_unsharded_run(
    tasks_file: Path, unsharded: dict[str, Any], tmp_path: Path
) -> None:
    tasks = load_tasks_jsonl(tasks_file)
    repeats = [t for t in tasks if t.id.endswith("-again")]
    dup_rejected = [
        r for r in unsharded["rejected.jsonl"] if r["meta"]["task_id"].endswith("-again")
    ]  # the repeats' answers were kept already under the first id
    assert repeats and dup_rejected and all("duplicate" in r["meta"]["qc"]["reasons"] for r in dup_rejected)
    assert unsharded["summary"]["kept"] > 0 and unsharded["summary"]["tasks"] == len(tasks)

    shards = run_shards(tasks_file, tmp_path / "sharded", workers=2)
    sizes = [json.loads((s / "shard.json").read_text())["expected"] for s in shards]
    assert sum(sizes) == len(tasks) and all(sizes)
    for t in repeats:  # a repeat lands in the shard of its first id, by media and question
        first = next(x for x in tasks if x.id == t.id.removesuffix("-again"))
        assert shard_of(shard_key(t), 3) == shard_of(shard_key(first), 3)
    report, summary = merge_synthesis(shards, tmp_path / "merged")
    assert report.complete and report.rows == len(tasks)
    assert contents(tmp_path / "merged") == unsharded
    assert summary == unsharded["summary"]


def test_workers_give_the_same_output(tasks_file: Path, unsharded: dict[str, Any], tmp_path: Path) -> None:
    run_synthesis(config(tasks_file, tmp_path / "w3", workers=3), progress=False)
    assert contents(tmp_path / "w3") == unsharded
    with pytest.raises(ValueError, match="workers=1"):  # a policy object is one teacher
        run_synthesis(config(tasks_file, tmp_path / "one", workers=2), policy=make_policy("uniform"))


def test_merge_refusals_and_a_missing_shard(tasks_file: Path, tmp_path: Path) -> None:
    shards = run_shards(tasks_file, tmp_path / "a", limit=12)
    # another run: other settings (n_samples) -> refused, naming them
    other = run_shards(tasks_file, tmp_path / "b", count=3, n_samples=1, limit=12)
    with pytest.raises(MergeError, match="different runs.*settings"):
        merge_synthesis([shards[0], other[1], shards[2]], tmp_path / "m1")
    # the same shard twice, and an overlap (a shard's folder copied under another index)
    with pytest.raises(MergeError, match="both shard 1/3"):
        merge_synthesis([shards[0], shards[1], shards[1]], tmp_path / "m2")
    fake = tmp_path / "fake"
    shutil.copytree(shards[1], fake)
    manifest = json.loads((fake / "shard.json").read_text())
    (fake / "shard.json").write_text(json.dumps(manifest | {"index": 2}))
    with pytest.raises(MergeError, match="overlap"):
        merge_synthesis([shards[0], shards[1], fake], tmp_path / "m3")
    # a shard still being written
    with RunLock(shards[2]), pytest.raises(Exception, match="in use by process"):
        merge_synthesis(shards, tmp_path / "m4")
    # another job's shards, either way round
    evaluation = tmp_path / "evaluation"
    write_manifest(evaluation, Shard(0, 3), expected=1, all_keys=["x"], settings="s", extra={"summary": {}})
    with pytest.raises(MergeError, match="not a shard of a teacher synthesis"):
        merge_synthesis([evaluation], tmp_path / "m5")
    with pytest.raises(MergeError, match="rl/synthesize.py merge"):
        merge_runs(shards, tmp_path / "m6")
    # a missing shard: merged, reported, exit 3; all three: exit 0
    assert merge_main([str(shards[0]), str(shards[2]), "--out", str(tmp_path / "m7")]) == 3
    merged = json.loads((tmp_path / "m7" / "merged.json").read_text())
    assert merged["absent"] == [1] and not merged["complete"]
    assert merge_main([*map(str, shards), "--out", str(tmp_path / "m7")]) == 0
    with pytest.raises(ShardSpecError):
        run_synthesis(config(tasks_file, tmp_path / "c", shard="3/3"), progress=False)


def test_endpoints_and_folders_are_not_settings(tasks_file: Path, tmp_path: Path) -> None:
    base = config(tasks_file, tmp_path / "x")
    moved = config(tasks_file, tmp_path / "y", shard="1/4", workers=8)
    moved["data"]["tasks"] = "/elsewhere/tasks.jsonl"
    moved["teacher"]["kwargs"].update(base_url=["http://a:1/v1", "http://b:1/v1"], timeout=5)
    moved["judge"].update(base_url="http://judge:9/v1", api_key="sk-x", max_retries=7)
    assert settings_digest(moved) == settings_digest(base)
    for change in ({"n_samples": 3}, {"seed": 1}):
        assert settings_digest(config(tasks_file, tmp_path / "x", **change)) != settings_digest(base)
    judged = config(tasks_file, tmp_path / "x")
    judged["judge"]["model"] = "judge-32b"
    assert settings_digest(judged) != settings_digest(base)


def test_merge_command(tasks_file: Path, tmp_path: Path) -> None:
    shards = run_shards(tasks_file, tmp_path / "s", count=2, limit=6)
    cmd = [sys.executable, "rl/synthesize.py", "merge", *map(str, shards), "--out", str(tmp_path / "m")]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert '"tasks": 6' in proc.stdout and "merged 2 of 2 shard(s), 6 row(s)" in proc.stdout
    bad = subprocess.run([*cmd[:3], str(tmp_path / "nowhere"), "--out", str(tmp_path / "m2")], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert bad.returncode == 2 and "is not a shard" in bad.stderr
