"""The hydra entry point of evaluation (scripts/eval.py, omniagent/eval/pipeline.py and config.py) on a small
synthetic benchmark: a run from the composed config, circular evaluation, frozen presets, the overlap guard, the
script's command line and the config's validation."""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from testkit import ROOT, compose_conf, rows_of, small_synth_overrides

from envs.scoring import letters
from envs.tasks import Task, circular_tasks, letter_index, rotation_base
from omniagent.eval.compare import circular_rows, compare_main, load_run
from omniagent.eval.config import EvalConfig, FrozenPresetError, check_decoding, check_frozen
from omniagent.eval.overlap import OverlapError
from omniagent.eval.passive import PassiveConfig
from omniagent.eval.pipeline import run_from_config
from omniagent.eval.results import load_rows

# synth_dir and tasks (one small synthetic video and its tasks) are fixtures of conftest.py


def synth_overrides(synth_dir: Path, out: Path) -> list[str]:
    return [*small_synth_overrides(synth_dir, out), "limit=6", "summary.n_boot=100"]


def test_eval_config_runs_and_writes_the_summary(tasks: list[Task], synth_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "hydra"
    ov = synth_overrides(synth_dir, out) + ["policy.name=uniform"]
    summary = run_from_config(compose_conf("eval", ov), overrides=ov)
    assert summary["n"] == 6 and summary["run"]["ran"] == 6 and summary["run"]["max_turns"] == 16
    for name in ("results.jsonl", "trajectories.jsonl", "summary.json", "summary.csv", "run.json"):
        assert (out / name).exists(), name
    assert len(load_rows(out / "results.jsonl")) == 6
    again = run_from_config(compose_conf("eval", ov), overrides=ov)
    assert again["run"]["ran"] == 0 and again["n"] == 6
    # the passive baseline matched to that run's frames
    ov2 = synth_overrides(synth_dir, tmp_path / "hydra-passive") + [
        "policy.name=oracle", "mode=passive", f"passive.match_run={out}",
    ]  # fmt: skip
    p = run_from_config(compose_conf("eval", ov2), overrides=ov2)
    assert p["run"]["passive_num_frames"] == 8 and p["frames_used"]["mean"] == 8


def test_circular_eval_scores_a_question_only_when_every_rotation_is_right(
    tasks: list[Task], synth_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mcq = [t for t in tasks if t.task_type == "mcq"]
    assert mcq and all(len(t.choices or []) >= 2 for t in mcq)
    rotated = circular_tasks(tasks)
    assert len(rotated) == len(tasks) + sum(len(t.choices or []) - 1 for t in mcq)
    for task in mcq:  # each option under each letter once, the answer letter following its option
        copies = [r for r in rotated if rotation_base(r.id) == task.id]
        assert [c.id for c in copies][:2] == [task.id, f"{task.id}#rot1"] and len(copies) == len(
            task.choices or []
        )
        assert {c.choices[0] for c in copies} == set(task.choices or [])
        right = (task.choices or [])[letter_index(str(task.answer))]
        assert all(c.choices[letter_index(str(c.answer))] == right for c in copies)
        assert {c.answer for c in copies} == set(letters(len(copies)))
    assert rotation_base("a#rotx") == "a#rotx" and rotation_base("q#rot12") == "q"

    runs = {}
    for name in ("uniform", "oracle"):  # uniform always answers A; the oracle reads the answer
        out = tmp_path / name
        ov = [*synth_overrides(synth_dir, out), f"policy.name={name}", "circular=true", "limit=null",
              "benchmark.task_types=[mcq]"]  # fmt: skip
        summary = run_from_config(compose_conf("eval", ov), overrides=ov)
        assert summary["n"] == sum(len(t.choices or []) for t in mcq)  # every rotation is a row
        runs[name] = out
    plain, _ = load_run(str(runs["uniform"]))
    assert plain["score"]["mean"] == pytest.approx(sum(1 / len(t.choices or []) for t in mcq) / len(mcq))
    circ, rows = load_run(str(runs["uniform"]), circular=True)
    assert rows is not None and sorted(r["id"] for r in rows) == sorted(t.id for t in mcq)
    assert circ["score"]["mean"] == 0.0  # one letter is right in one rotation of each, never in all
    assert load_run(str(runs["oracle"]), circular=True)[0]["score"]["mean"] == 1.0
    raw = load_rows(runs["oracle"] / "results.jsonl")
    raw[1]["reward"] = None  # one rotation unscored: its question has no circular score
    assert len(circular_rows(raw)) == len(mcq) - 1
    assert compare_main([str(runs["oracle"]), str(runs["uniform"]), "--circular"]) == 0
    assert "oracle - uniform: 1.000" in capsys.readouterr().out  # over whole questions


def test_frozen_presets_refuse_overrides(synth_dir: Path, tmp_path: Path) -> None:
    ov = [f"out_dir={tmp_path}", "benchmark.max_turns=4"]
    with pytest.raises(FrozenPresetError, match=r"benchmark\.max_turns=4"):
        run_from_config(compose_conf("eval", ov), overrides=ov)
    with pytest.raises(FrozenPresetError, match="decoding temperature"):
        check_decoding(compose_conf("eval", ["+policy.kwargs.temperature=0.7"]))
    check_decoding(compose_conf("eval", ["+policy.kwargs.temperature=0.0"]))
    check_decoding(compose_conf("eval", ["+policy.kwargs.temperature=0.7", "unfreeze=true"]))


def test_the_overrides_media_refusals_suggest_run_under_a_frozen_preset(tmp_path: Path) -> None:
    """What a media-access refusal tells the user to add to scripts/eval.py is accepted under a frozen preset
    (it says where media may be read from, not what is measured); a measured field is still refused."""
    from envs.tasks import Task
    from omniagent.datasets.registry import outside_media_root

    root, outside = tmp_path / "root", tmp_path / "elsewhere.mp4"
    root.mkdir()
    outside.write_bytes(b"x")
    (root / "link.mp4").symlink_to(outside)
    problems = [
        *outside_media_root(
            "a", Task(id="t1", media=str(outside), question="q", task_type="num", answer="1"), root
        ),
        *outside_media_root(
            "b", Task(id="t2", media=str(root / "link.mp4"), question="q", task_type="num", answer="1"), root
        ),
    ]
    suggested = [re.search(r"in scripts/eval\.py: (\S+)\)", line).group(1) for line in problems]
    assert len(suggested) == 2 and suggested[0] != suggested[1]
    access = [*suggested, "benchmark.limits.allow_protocols=[https]", "benchmark.limits.allow_demuxers=[hls]"]
    assert check_frozen(access) == []
    with pytest.raises(FrozenPresetError, match="benchmark.limits.max_audio_s"):
        check_frozen([*access, "benchmark.limits.max_audio_s=5"])


def test_a_retired_limit_is_dropped_not_frozen_or_fingerprinted(tmp_path: Path) -> None:
    # envs.limits.RETIRED names it once: an old command that still sets it runs, and old run files still load
    assert check_frozen(["benchmark.limits.audio_cache_dir=/tmp/c", "benchmark.limits.backend=pyav"]) == []
    with pytest.raises(FrozenPresetError, match="benchmark.limits.max_frames=3"):
        check_frozen(["benchmark.limits.max_frames=3"])
    cfg = EvalConfig(
        out_dir=str(tmp_path), policy="oracle", limits={"max_frames": 8, "audio_cache_dir": "/tmp/c"}
    )
    assert cfg.fingerprint()["limits"]["max_frames"] == 8
    assert (
        "audio_cache_dir" not in cfg.fingerprint()["limits"] and "backend" not in cfg.fingerprint()["limits"]
    )


def test_overlap_guard_in_the_runner(synth_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    train = synth_dir / "tasks.jsonl"  # the eval set itself: every media file overlaps
    ov = synth_overrides(synth_dir, tmp_path / "o") + [f"overlap_guard.train_set={train}"]
    with pytest.raises(OverlapError, match="shared media"):
        run_from_config(compose_conf("eval", ov), overrides=ov)
    assert not (tmp_path / "o" / "results.jsonl").exists()
    ov.append("overlap_guard.allow_overlap=true")
    summary = run_from_config(compose_conf("eval", ov), overrides=ov)
    assert summary["n"] == 6
    assert "continuing despite the overlap" in capsys.readouterr().out


def test_eval_script_cli(tasks: list[Task], synth_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "cli"
    ov = synth_overrides(synth_dir, out) + ["policy.name=oracle", "limit=3", "workers=1"]
    res = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "eval.py"), *ov], capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 0, res.stderr[-2000:]
    assert "score [95% CI]" in res.stdout and "1.000 [1.000, 1.000]" in res.stdout
    assert Counter(r["status"] for r in rows_of(out)) == {"ok": 3}
    bad = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "eval.py"), f"out_dir={out}", "benchmark.temperature=0.7"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and "frozen" in bad.stdout


def test_eval_config_is_validated_from_the_hydra_config(synth_dir: Path, tmp_path: Path) -> None:
    from omegaconf import OmegaConf, open_dict
    from pydantic import ValidationError

    from envs.limits import EnvLimits
    from omniagent.eval.config import eval_config_from

    ov = synth_overrides(synth_dir, tmp_path / "x") + [
        "workers=3",
        "threads=1",
        "seed=5",
        "max_consecutive_policy_errors=0",
    ]
    cfg = compose_conf("eval", ov)
    ecfg = eval_config_from(cfg)
    assert (ecfg.workers, ecfg.seed, ecfg.max_consecutive_policy_errors, ecfg.progress) == (3, 5, 0, False)
    assert ecfg.threads == 1
    preset = OmegaConf.to_container(cfg.benchmark.limits, resolve=True)
    assert ecfg.env_limits() == EnvLimits(**preset, decode_threads=1)  # the run's decoder threads
    assert eval_config_from(compose_conf("eval", [*ov, "decode_threads=0"])).env_limits().decode_threads == 0
    assert (
        ecfg.fingerprint() == eval_config_from(compose_conf("eval", [*ov, "decode_threads=0"])).fingerprint()
    )
    with pytest.raises(ValidationError, match="decode_threads is a run setting"):
        eval_config_from(compose_conf("eval", [*ov, "unfreeze=true", "+benchmark.limits.decode_threads=2"]))
    assert ecfg.temperature == cfg.benchmark.temperature and ecfg.max_turns == cfg.benchmark.max_turns
    with open_dict(cfg):  # a key the config lacks takes the model's one default, not a second copy
        del cfg["workers"]
        del cfg["passive"]
    assert eval_config_from(cfg).workers == EvalConfig.model_fields["workers"].default
    assert eval_config_from(cfg).passive == PassiveConfig()
    with pytest.raises(ValidationError, match="wrkers"):
        EvalConfig(out_dir="x", policy="oracle", wrkers=2)
    with pytest.raises(ValidationError, match="max_frame"):
        EvalConfig(out_dir="x", policy="oracle", limits={"max_frame": 8})
    with open_dict(cfg):
        cfg.workers = 0
    with pytest.raises(ValidationError, match="workers"):
        eval_config_from(cfg)
