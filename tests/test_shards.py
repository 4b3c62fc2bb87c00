"""Shards of an evaluation (omniagent/eval/shards.py) and their merge (omniagent/eval/merge.py,
merge_runs.py): three shards merged give exactly what one unsharded run gives; shards of different runs,
overlapping shards and running shards are refused; incomplete shards are reported."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from testkit import compose_conf, small_synth_overrides

from envs.jsonl import read_jsonl
from omniagent.eval.batch import RunLock
from omniagent.eval.merge_runs import merge_main, merge_runs
from omniagent.eval.pipeline import run_from_config
from omniagent.eval.shards import Shard, ShardSpecError, shard_of

ROOT = Path(__file__).resolve().parents[1]
TIMING = {"started_at", "finished_at", "wall_seconds", "model_seconds", "env_seconds", "context_tokens"}


def overrides(synth_dir: Path, out: Path, *extra: str) -> list[str]:
    return [
        *small_synth_overrides(synth_dir, out),
        "summary.n_boot=200",
        "policy.name=random",
        "workers=2",
        *extra,
    ]


def run(synth_dir: Path, out: Path, *extra: str) -> dict[str, Any]:
    ov = overrides(synth_dir, out, *extra)
    return run_from_config(compose_conf("eval", ov), overrides=ov)


def comparable(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["id"]: {k: v for k, v in r.items() if k not in TIMING} for r in rows}


# ------------------------------------------------------------------------------------------- specs
def test_shard_specs_and_launcher_variables() -> None:
    assert Shard.parse("1/3") == Shard(1, 3) and Shard.parse(None) is None and Shard.parse("") is None
    torchrun = Shard.parse(
        "auto", {"RANK": "5", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4"}
    )
    assert (torchrun.index, torchrun.count) == (5, 8) and "RANK/WORLD_SIZE" in torchrun.source
    slurm = Shard.parse("auto", {"SLURM_PROCID": "2", "SLURM_NTASKS": "3"})
    assert (slurm.index, slurm.count, slurm.name) == (2, 3, "shard-2-of-3")
    local = Shard.parse("auto", {"LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"})
    assert (local.index, local.count) == (1, 2)
    alone = Shard.parse("auto", {})
    assert (alone.index, alone.count) == (0, 1) and "only shard" in alone.source
    for bad in ("3/3", "-1/2", "1", "a/b", "0/0"):
        with pytest.raises(ShardSpecError):
            Shard.parse(bad)
    with pytest.raises(ShardSpecError, match="RANK='x'"):
        Shard.parse("auto", {"RANK": "x", "WORLD_SIZE": "2"})


def test_shards_are_disjoint_cover_every_id_and_ignore_order() -> None:
    ids = [f"videomme-{i:03d}-{j}" for i in range(300) for j in (1, 2, 3)]
    parts = [Shard(i, 4).select(ids, key=str) for i in range(4)]
    assert sorted(x for p in parts for x in p) == sorted(ids)
    assert sum(len(p) for p in parts) == len(set(ids))
    assert all(150 < len(p) < 300 for p in parts)  # a hash spreads them
    assert Shard(2, 4).select(ids[::-1], key=str) == parts[2][::-1]  # same members in any order
    assert Shard(2, 4).select(ids[:100], key=str) == [
        x for x in parts[2] if x in ids[:100]
    ]  # whatever else exists
    assert shard_of("videomme-001-1", 4) == shard_of("videomme-001-1", 4)


# ------------------------------------------------------------------------------------------- merge
def test_three_shards_merged_equal_the_unsharded_run(synth_dir: Path, tmp_path: Path) -> None:
    whole = run(synth_dir, tmp_path / "whole")
    sharded = tmp_path / "sharded"
    sizes = [run(synth_dir, sharded, f"shard={i}/3")["n"] for i in range(3)]
    assert sum(sizes) == whole["n"] >= 9 and all(sizes)
    report, merged = merge_runs(sorted(sharded.glob("shard-*-of-3")), sharded)
    assert report.complete and report.rows == whole["n"]
    a, b = (
        comparable(read_jsonl(tmp_path / "whole" / "results.jsonl")),
        comparable(read_jsonl(sharded / "results.jsonl")),
    )
    assert a == b  # same ids, rewards, predictions, turns, frames ...
    assert {r["id"]: r["reward"] for r in read_jsonl(sharded / "results.jsonl")} == {
        k: v["reward"] for k, v in a.items()
    }
    for key in ("n", "score", "score_ok", "answer_rate", "frames_used", "turns", "by_task_type", "by_duration",
                "by_category", "actions", "stop_reasons", "name"):  # fmt: skip
        assert merged[key] == whole[key], key
    assert 0 < whole["score"]["mean"] < 1 and whole["score"]["lo"] < whole["score"]["hi"]
    trajs = {t["id"]: t["answer"] for t in read_jsonl(sharded / "trajectories.jsonl")}
    assert trajs == {t["id"]: t["answer"] for t in read_jsonl(tmp_path / "whole" / "trajectories.jsonl")}
    assert (
        json.loads((sharded / "run.json").read_text())["digest"]
        == json.loads((tmp_path / "whole" / "run.json").read_text())["digest"]
    )
    on_disk = json.loads((sharded / "summary.json").read_text())
    assert on_disk["score"] == whole["score"] and on_disk["run"]["complete"] is True
    # an unsharded run into the merged folder finds every task done
    again = run(synth_dir, sharded)
    assert again["run"]["ran"] == 0 and again["score"] == whole["score"]


def test_merge_refuses_other_runs_overlaps_and_running_shards(synth_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "runs"
    run(synth_dir, out, "shard=0/2")
    run(synth_dir, out, "shard=1/2", "seed=7")  # other settings
    shards = sorted(out.glob("shard-*-of-2"))
    assert merge_main([*map(str, shards), "--out", str(tmp_path / "m")]) == 2
    with pytest.raises(ValueError, match="shards of different runs .*another settings"):
        merge_runs(shards, tmp_path / "m")
    other = tmp_path / "other"
    run(synth_dir, other, "shard=1/3")
    with pytest.raises(ValueError, match="another shard count"):
        merge_runs([shards[0], other / "shard-1-of-3"], tmp_path / "m")
    with pytest.raises(ValueError, match="is not a shard"):
        merge_runs([shards[0], tmp_path], tmp_path / "m")
    with pytest.raises(ValueError, match="are both shard 0/2"):
        merge_runs([shards[0], shards[0]], tmp_path / "m")
    # a row copied into the other shard: overlap
    run(synth_dir, out, "shard=1/2", "seed=7", "allow_config_change=true")
    twin = tmp_path / "twin"
    run(synth_dir, twin, "shard=1/2")
    row = read_jsonl(shards[0] / "results.jsonl")[0]
    with (twin / "shard-1-of-2" / "results.jsonl").open("a") as fh:
        fh.write(json.dumps(row) + "\n")
    with pytest.raises(ValueError, match=f"task '{row['id']}' is in .* the shards overlap"):
        merge_runs([shards[0], twin / "shard-1-of-2"], tmp_path / "m")
    with RunLock(shards[0]):  # a shard still being written
        res = subprocess.run(
            [sys.executable, str(ROOT / "scripts" / "merge_runs.py"), str(shards[0]), "--out", str(tmp_path / "m2")],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    assert res.returncode == 2 and "is in use by process" in res.stdout


def test_incomplete_shards_are_merged_and_reported(
    synth_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "runs"
    first = run(synth_dir, out, "shard=0/3")
    shard0 = out / "shard-0-of-3"
    rows = read_jsonl(shard0 / "results.jsonl")
    (shard0 / "results.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in rows[:-1])
    )  # one task cut off
    code = merge_main([str(shard0), "--out", str(out), "--quiet"])
    text = capsys.readouterr().out
    assert code == 3
    assert f"{first['n'] - 1} of {first['n']} done; INCOMPLETE: 1 not run" in text
    assert "MISSING shard(s) 1, 2 of 3" in text and "the merged run is partial" in text
    merged = json.loads((out / "merged.json").read_text())
    assert merged["complete"] is False and merged["absent"] == [1, 2]
    assert len(read_jsonl(out / "results.jsonl")) == first["n"] - 1
    assert (
        len(read_jsonl(out / "trajectories.jsonl")) == first["n"] - 1
    )  # the cut-off task's trajectory is left out


def test_endpoints_are_not_settings(tmp_path: Path) -> None:
    """Shards on other machines reach the model at other endpoints: same fingerprint, so they merge; a
    folder fingerprinted before endpoints were left out still resumes."""
    from omniagent.eval.config import EvalConfig
    from omniagent.eval.results import ConfigMismatchError, check_fingerprint, fingerprint_digest

    def cfg(**kwargs: Any) -> EvalConfig:
        return EvalConfig(out_dir=str(tmp_path), policy="openai", policy_kwargs={"model": "m", **kwargs})

    a = cfg(base_url="http://node-a:8000/v1", timeout=60)
    b = cfg(base_url=["http://node-b:8000/v1", "http://node-c:8000/v1"], retries=5, cooldown=10)
    assert fingerprint_digest(a) == fingerprint_digest(b)
    assert fingerprint_digest(cfg(max_tokens=64)) != fingerprint_digest(a)
    legacy = {"digest": "0123456789abcdef", "config": {**json.loads(json.dumps(a.fingerprint())),
              "policy_kwargs": {"model": "m", "base_url": "http://node-a:8000/v1", "timeout": 60}}}  # fmt: skip
    (tmp_path / "run.json").write_text(json.dumps(legacy))
    assert check_fingerprint(tmp_path, b)["digest"] == fingerprint_digest(b)
    with pytest.raises(ConfigMismatchError, match=r"other settings \(changed: policy_kwargs\)"):
        check_fingerprint(tmp_path, cfg(max_tokens=64))
