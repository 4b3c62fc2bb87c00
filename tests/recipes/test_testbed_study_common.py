"""recipes/testbed/studies/common.sh: the study scripts' shared shell helpers, run in bash on temporary folders."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
COMMON = ROOT / "recipes" / "testbed" / "studies" / "common.sh"
MODEL_FILES = (
    "config.json", "generation_config.json", "processor_config.json", "tokenizer.json", "tokenizer_config.json",
    "chat_template.jinja", "model.safetensors", "warmup_loss.json",
)  # fmt: skip


def _bash(script: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``script`` run by bash in ``cwd`` after sourcing common.sh, stopping at the first failure."""
    return subprocess.run(
        ["bash", "-c", f"set -euo pipefail; source {COMMON}; {script}"],
        cwd=cwd, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def _probes(folder: Path, text: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "field_probe.json").write_text(text)


def test_copy_probes_copies_once_and_never_overwrites(tmp_path: Path) -> None:
    _probes(tmp_path / "src", '{"rows": [1]}')
    done = _bash("copy_probes src a/b/dst", tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "a/b/dst/field_probe.json").read_text() == '{"rows": [1]}'
    # a second call with other source turns keeps what DST already holds
    _probes(tmp_path / "src", '{"rows": [2]}')
    assert _bash("copy_probes src a/b/dst", tmp_path).returncode == 0
    assert (tmp_path / "a/b/dst/field_probe.json").read_text() == '{"rows": [1]}'


def test_copy_probes_stops_the_script_when_the_source_has_none(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    done = _bash("copy_probes src dst; echo after", tmp_path)
    assert done.returncode != 0
    assert "after" not in done.stdout
    assert not (tmp_path / "dst" / "field_probe.json").exists()


def test_copy_model_copies_the_model_files_not_the_probes(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    for name in MODEL_FILES:
        (src / name).write_text(name)
    _probes(src, "{}")
    done = _bash("copy_model src dst", tmp_path)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in (tmp_path / "dst").iterdir()) == sorted(MODEL_FILES)
    # no model in SRC: nothing is made
    assert _bash("copy_model nothing there", tmp_path).returncode == 0
    assert not (tmp_path / "there").exists()


def test_wait_all_fails_when_one_background_job_fails(tmp_path: Path) -> None:
    ok = _bash("true & PIDS+=($!); sleep 0.1 & PIDS+=($!); wait_all; echo done", tmp_path)
    assert ok.returncode == 0 and "done" in ok.stdout
    bad = _bash("true & PIDS+=($!); (exit 3) & PIDS+=($!); wait_all; echo done", tmp_path)
    assert bad.returncode == 3
    assert "done" not in bad.stdout


# a stand-in for python that records each call's arguments, so fresh_field_set's plumbing is checked without a teacher
_RECORD_PYTHON = 'python() { echo "$*" >> calls.txt; }; '


def _fresh_set(tmp_path: Path, seed: int) -> Path:
    data = tmp_path / "runs/testbed/data" / f"study_{seed}"
    data.mkdir(parents=True)
    (data / "tasks.jsonl").write_text("{}\n")
    return data


def test_fresh_field_set_fills_the_folder_it_is_given(tmp_path: Path) -> None:
    data = _fresh_set(tmp_path, 7)
    done = _bash(_RECORD_PYTHON + "OUT=mine; fresh_field_set 7 theirs", tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "theirs/fresh_data/train").resolve() == data.resolve()
    assert not (tmp_path / "mine").exists()
    calls = (tmp_path / "calls.txt").read_text().splitlines()
    assert len(calls) == 1  # the set exists, so only the teacher runs
    assert "--out theirs/fresh_teacher --data theirs/fresh_data --field-clauses 1 --n-samples 1" in calls[0]


def test_fresh_field_set_defaults_to_out_and_makes_a_missing_set(tmp_path: Path) -> None:
    done = _bash(_RECORD_PYTHON + "OUT=mine; mkdir -p runs/testbed/data/study_8; fresh_field_set 8", tmp_path)
    assert done.returncode == 0, done.stderr
    made = tmp_path / "runs/testbed/data/study_8"
    assert (tmp_path / "mine/fresh_data/train").resolve() == made.resolve()
    calls = (tmp_path / "calls.txt").read_text().splitlines()
    assert calls[0].startswith("-m recipes.testbed.study make-set --data runs/testbed/data --seed 8")
    assert "--out mine/fresh_teacher" in calls[1]
    # neither a folder nor OUT: the script stops, naming OUT
    bare = _bash(_RECORD_PYTHON + "unset OUT; fresh_field_set 8", tmp_path)
    assert bare.returncode != 0 and "OUT" in bare.stderr


def test_measure_orders_runs_each_order_once_into_the_seeds_two_folders(tmp_path: Path) -> None:
    # a stand-in python on PATH records each call and writes the file its --out names
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "python"
    fake.write_text('#!/usr/bin/env bash\necho "$*" >> calls.txt\nwhile [ $# -gt 0 ]; do '
                    '[ "$1" = --out ] && echo "{}" > "$2"; shift; done\n')  # fmt: skip
    fake.chmod(0o755)
    setup = f"export PATH={bin_dir}:$PATH; OUT=out FIXED=fixed.parquet SHUFFLED=shuffled.parquet SET=set_5329"
    (tmp_path / "runs").mkdir()  # the models' folders, where each call's log goes
    _probes(tmp_path / "out" / "shuf3600_s4", '{"rows": [1]}')  # the fixed order is done already
    r = _bash(f"{setup}; measure_orders runs/shuf3600_s4 shuf3600_s4 rows.parquet", tmp_path)
    assert r.returncode == 0, r.stderr
    calls = (tmp_path / "calls.txt").read_text().splitlines()
    assert calls == [
        "-m recipes.testbed.span_copy measure --model runs/shuf3600_s4 --probes shuffled.parquet --tasks set_5329 "
        "--train rows.parquet --out out/shuf3600x_s4/field_probe.json"
    ]
    assert (tmp_path / "out" / "shuf3600_s4" / "field_probe.json").read_text() == '{"rows": [1]}'
    r = _bash(f"{setup}; measure_orders runs/shuf3600_s4 shuf3600_s4 rows.parquet", tmp_path)
    assert (
        r.returncode == 0 and len((tmp_path / "calls.txt").read_text().splitlines()) == 1
    )  # nothing left to do
    r = _bash(f"{setup}; measure_orders runs/fixed7200_s0 fixed7200_s0 wide.parquet", tmp_path)
    calls = (tmp_path / "calls.txt").read_text().splitlines()[1:]
    assert [c.split(" --probes ")[1].split()[0] for c in calls] == ["fixed.parquet", "shuffled.parquet"]
    assert [c.split(" --out ")[1] for c in calls] == [
        "out/fixed7200_s0/field_probe.json",
        "out/fixed7200x_s0/field_probe.json",
    ]


def test_names_of_labels_one_run_a_seed_in_the_seeds_order(tmp_path: Path) -> None:
    done = _bash("SEEDS=(3 0 4); names_of runs/x/arm1200", tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n") == [
        "--run s3=runs/x/arm1200_s3", "--run s0=runs/x/arm1200_s0", "--run s4=runs/x/arm1200_s4", "",
    ]  # fmt: skip
    # word-split as the scripts use it: one flag and one value per run
    split = _bash('SEEDS=(1 2); printf "<%s>" $(names_of a)', tmp_path)
    assert split.stdout == "<--run><s1=a_s1><--run><s2=a_s2>"


def test_copy_measure_measures_a_model_once(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "python"  # a stand-in python: records each call, writes nothing
    fake.write_text('#!/usr/bin/env bash\necho "$*" >> calls.txt\n')
    fake.chmod(0o755)
    (tmp_path / "runs/m_s0").mkdir(parents=True)
    r = _bash(f"export PATH={bin_dir}:$PATH; copy_measure runs/m_s0 p.parquet", tmp_path)
    assert r.returncode == 0, r.stderr
    calls = (tmp_path / "calls.txt").read_text().splitlines()
    assert calls == ["-m recipes.testbed.copy_task measure --model runs/m_s0 --probes p.parquet"]
    (tmp_path / "runs/m_s0/copy_probe.json").write_text("{}")  # measured: not again
    assert _bash(f"export PATH={bin_dir}:$PATH; copy_measure runs/m_s0 p.parquet", tmp_path).returncode == 0
    assert len((tmp_path / "calls.txt").read_text().splitlines()) == 1


def test_copy_pair_copies_the_control_trains_the_arm_and_measures_each_once(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "python"  # a stand-in python: records each call; a train call saves a model in its --out
    fake.write_text('#!/usr/bin/env bash\necho "$*" >> calls.txt\nwhile [ $# -gt 0 ]; do [ "$1" = --out ] && '
                    'mkdir -p "$2" && touch "$2/model.safetensors"; shift; done\n')  # fmt: skip
    fake.chmod(0o755)
    src = tmp_path / "task/spaced_s3"
    src.mkdir(parents=True)
    for name in MODEL_FILES:
        (src / name).write_text(name)
    setup = f"export PATH={bin_dir}:$PATH; OUT=out TASK=task BASE=base; mkdir -p out"
    pair = "copy_pair 3 task/spaced_s3 out/control_s3 out/arm_s3 --steps 900 --cosine"
    r = _bash(f"{setup}; {pair}", tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "calls.txt").read_text().splitlines() == [
        "-m recipes.testbed.copy_task measure --model out/control_s3 --probes out/probes.parquet",
        "-m recipes.testbed.span_copy train --init base/init --data task/rows_spaced.parquet --seed 3 --steps 900 "
        "--cosine --out out/arm_s3",
        "-m recipes.testbed.copy_task measure --model out/arm_s3 --probes out/probes.parquet",
    ]
    assert (tmp_path / "out/control_s3/warmup_loss.json").read_text() == "warmup_loss.json"
    for folder in ("control_s3", "arm_s3"):
        (tmp_path / "out" / folder / "copy_probe.json").write_text("{}")
    assert _bash(f"{setup}; {pair}", tmp_path).returncode == 0  # all done: nothing runs again
    assert len((tmp_path / "calls.txt").read_text().splitlines()) == 3


def test_copy_analysis_pairs_two_arms_and_draws_both_figures(tmp_path: Path) -> None:
    import json
    import sys

    from recipes.testbed.copy_task import WRITTEN, load_probes, make
    from recipes.testbed.field_clauses import field_spans

    probes = load_probes(make(24, 5, tmp_path / "out/probes.parquet", spaced=True))

    def wrong(p: dict) -> str:  # the cue's colour with another field's span
        fields = field_spans(p["reply"])
        start, end = fields[p["cue"]]
        other = next(c for c in fields if fields[c] != fields[p["cue"]])
        return p["reply"].replace(f"{p['cue']} {start}-{end}.", f"{p['cue']} {'-'.join(fields[other])}.")

    for arm, write, batch in (("a", lambda p: p["reply"], {"batch_size": 64}), ("b", wrong, {})):
        for seed in (0, 1):
            run = tmp_path / f"out/{arm}_s{seed}"
            run.mkdir()
            rows = [{"id": p["id"], "written": write(p)} for p in probes]
            (run / WRITTEN).write_text(json.dumps({"rows": rows}))
            (run / "warmup_loss.json").write_text(json.dumps({"loss": [1.0] * 400, **batch}))
    setup = f"export PATH={Path(sys.executable).parent}:$PATH PYTHONPATH={ROOT}; OUT=out SEEDS=(0 1)"
    r = _bash(f'{setup}; copy_analysis a b fig "the title"', tmp_path)
    assert r.returncode == 0, r.stderr
    exact = json.loads((tmp_path / "out/contrast.json").read_text())["exact copy"]["per_run"]
    assert exact == {"s0": 1.0, "s1": 1.0}  # a copies every cue's span, b none
    assert json.loads((tmp_path / "out/analysis_b.json").read_text())["per_run"]["s1"]["exact copy"] == 0.0
    assert (tmp_path / "out/parts_a.md").read_text().count("| s") >= 2
    curves = (tmp_path / "out/curves.md").read_text()  # the control first, each run on its batch
    assert curves.index("| b s0 | 16 |") < curves.index("| a s0 | 64 |") and "| b s1 | 16 |" in curves
    for figure in ("fig.png", "fig_loss.png"):
        assert (tmp_path / "docs/figures" / figure).read_bytes()[:4] == b"\x89PNG"
