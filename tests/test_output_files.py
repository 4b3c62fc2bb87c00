"""Files others open and files on a full disk: summary.csv cells a spreadsheet would run are escaped,
a full disk stops an evaluation with one line and loses no row, annotation files in other encodings
are decoded when a byte-order mark names the encoding and refused naming it otherwise."""

from __future__ import annotations

import csv
import errno
import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from envs.jsonl import NoSpaceError, read_jsonl
from envs.tasks import Task
from omniagent.datasets import DatasetError, load_dataset
from omniagent.datasets.encoding import detect_encoding
from omniagent.eval.config import EvalConfig
from omniagent.eval.runner import run_eval
from omniagent.eval.summary import spreadsheet_safe, summarize, write_summary

ROOT = Path(__file__).resolve().parents[1]
HOSTILE = ['=HYPERLINK("http://example.invalid/x","click")', "+1+1", "-2+3+cmd|' /C calc'!A0", "@SUM(A1:A9)",
           "\tTAB", "\rCR"]  # fmt: skip


def cfg_for(out: Path, **kw: object) -> EvalConfig:
    base: dict[str, object] = {"out_dir": str(out), "policy": "oracle", "workers": 1, "progress": False}
    return EvalConfig(**{**base, **kw, "limits": {"max_turns": 4}})


def ids_of(path: Path) -> list[str]:
    return [r["id"] for r in read_jsonl(path)]


# ----------------------------------------------------------------------------- summary.csv
def test_summary_csv_cells_that_a_spreadsheet_would_run_are_escaped(
    tasks: list[Task], tmp_path: Path
) -> None:
    names = [*HOSTILE, "plain words", "-0.5"]
    tagged = [
        t.model_copy(update={"extra": {**t.extra, "category": names[i % len(names)]}})
        for i, t in enumerate(tasks)
    ]
    out = tmp_path / "run"
    run_eval(tagged, cfg_for(out))
    _, path = write_summary(summarize([*read_jsonl(out / "results.jsonl")], n_boot=50), out)
    with path.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    keys = {r["key"] for r in rows if r["group"] == "category"}
    assert {"'" + h for h in HOSTILE} <= keys, keys
    assert {"plain words", "-0.5"} <= keys  # text and a plain number stay as they are
    assert not any(k.startswith(("=", "+", "@", "\t", "\r")) for k in keys)
    assert not any(k.startswith("-") and k != "-0.5" for k in keys)
    for r in rows:  # numbers stay numbers (a group without a score has an empty cell)
        assert int(r["n"]) > 0 and (r["score"] == "" or 0.0 <= float(r["score"]) <= 1.0)
    assert (
        spreadsheet_safe(-0.25) == -0.25
        and spreadsheet_safe("+3") == "+3"
        and spreadsheet_safe("=1") == "'=1"
    )


# -------------------------------------------------------------------------------- full disk
def _torn_writes(monkeypatch: pytest.MonkeyPatch, name: str, after: int) -> list[int]:
    """Appends to ``name`` fail with ENOSPC after ``after`` of them, having written half the line."""
    import envs.jsonl as jsonl

    real, calls = jsonl._write_all, [0]

    def write(fd: int, data: bytes) -> None:
        if os.path.basename(os.readlink(f"/proc/self/fd/{fd}")) == name:
            calls[0] += 1
            if calls[0] > after:
                os.write(fd, data[: len(data) // 2])
                raise OSError(errno.ENOSPC, "No space left on device")
        real(fd, data)

    monkeypatch.setattr(jsonl, "_write_all", write)
    return calls


def test_a_full_disk_at_the_write_call_stops_the_run_and_loses_no_row(
    tasks: list[Task], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "run"
    _torn_writes(monkeypatch, "results.jsonl", after=3)
    with pytest.raises(NoSpaceError) as err:
        run_eval(tasks, cfg_for(out))
    assert str(err.value) == f"no space left on device writing {out / 'results.jsonl'}"
    raw = (out / "results.jsonl").read_bytes()
    assert raw.endswith(b"\n") and len(ids_of(out / "results.jsonl")) == 3  # cut back to whole rows
    monkeypatch.undo()
    report = run_eval(tasks, cfg_for(out))  # space again: resumes, no duplicates
    assert report.skipped == 3
    ids = ids_of(out / "results.jsonl")
    assert sorted(ids) == sorted(t.id for t in tasks) and len(set(ids)) == len(ids)
    assert sorted(ids_of(out / "trajectories.jsonl")) == sorted(ids)


EVAL_ARGS = ["benchmark.dataset=tasks", "unfreeze=true", "progress=false", "workers=1"]


def _eval(annotations: Path, out: Path, *prelude: str) -> subprocess.CompletedProcess[str]:
    """``scripts/eval.py`` on a tasks file, in its own process (``prelude``: Python run first)."""
    argv = [
        str(ROOT / "scripts" / "eval.py"),
        f"benchmark.annotations={annotations}",
        f"out_dir={out}",
        *EVAL_ARGS,
    ]
    code = "\n".join(
        [
            *prelude,
            "import runpy, sys",
            f"sys.argv = {argv!r}",
            f"runpy.run_path({argv[0]!r}, run_name='__main__')",
        ]
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=out.parent, env=env, timeout=300
    )


def _one_line(proc: subprocess.CompletedProcess[str], path: Path) -> None:
    text = proc.stdout + proc.stderr
    assert proc.returncode == 7, text
    assert "Traceback" not in text and "Logging error" not in text
    (line,) = [ln for ln in text.splitlines() if "no space left" in ln]
    assert line.endswith(f"no space left on device writing {path}")


def test_the_eval_command_says_one_line_for_a_full_disk(
    synth_dir: Path, tasks: list[Task], tmp_path: Path
) -> None:
    out = tmp_path / "run"
    inject = [
        "import errno, os, envs.jsonl as j",
        "real = j._write_all",
        "def write(fd, data):",
        "    if os.readlink(f'/proc/self/fd/{fd}').endswith('results.jsonl') and os.path.getsize(os.readlink(f'/proc/self/fd/{fd}')) > 0:",
        "        os.write(fd, data[:10]); raise OSError(errno.ENOSPC, 'No space left on device')",
        "    real(fd, data)",
        "j._write_all = write",
    ]
    _one_line(_eval(synth_dir / "tasks.jsonl", out, *inject), out / "results.jsonl")
    assert len(ids_of(out / "results.jsonl")) == 1 and (out / "results.jsonl").read_bytes().endswith(b"\n")


@pytest.fixture()
def small_disk(tmp_path: Path) -> Path:
    """A 300 KB tmpfs, mounted for the test (needs root and a kernel that lets it mount)."""
    where = tmp_path / f"disk-{uuid.uuid4().hex[:6]}"
    where.mkdir()
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("mounting a small filesystem needs root")
    made = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=300k", "tmpfs", str(where)], capture_output=True
    )
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.decode().strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=True)


def test_a_real_full_filesystem_stops_eval_with_one_line_and_resumes(
    synth_dir: Path, tasks: list[Task], small_disk: Path
) -> None:
    filler = small_disk / "filler"
    filler.write_bytes(b"\0" * (300 * 1024 - 24 * 1024))  # about 24 KB left: a few rows fit
    out = small_disk / "run"
    _one_line(_eval(synth_dir / "tasks.jsonl", out), out / "results.jsonl")
    written = ids_of(out / "results.jsonl")
    assert 0 < len(written) < len(tasks) and (out / "results.jsonl").read_bytes().endswith(b"\n")
    filler.unlink()
    again = _eval(synth_dir / "tasks.jsonl", out)
    assert again.returncode == 0, again.stdout + again.stderr
    ids = ids_of(out / "results.jsonl")
    assert sorted(ids) == sorted(t.id for t in tasks) and len(set(ids)) == len(ids)


# ------------------------------------------------------------------------------- encodings
ROWS = [
    {"id": f"t{i}", "media": "v.mp4", "question": f"Quelle est la couleur de la façade numéro {i}, très précisément?",
     "task_type": "mcq", "choices": ["rouge é", "vert è"], "answer": "A"}
    for i in range(3)
]  # fmt: skip


def _write(folder: Path, name: str, encoding: str, bom: bytes = b"") -> Path:
    (folder / "v.mp4").write_bytes(b"x")
    path = folder / name
    if name.endswith(".jsonl"):
        text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in ROWS)
    elif name.endswith(".json"):
        text = json.dumps(ROWS, ensure_ascii=False)
    else:
        text = "id,media,question,task_type,choices,answer\n" + "".join(
            f'{r["id"]},{r["media"]},"{r["question"]}",mcq,rouge é|vert è,A\n' for r in ROWS
        )
    path.write_bytes(bom + text.encode(encoding))
    return path


@pytest.mark.parametrize("name", ["tasks.jsonl", "tasks.json"])
@pytest.mark.parametrize(("encoding", "bom"), [("utf-16-le", b"\xff\xfe"), ("utf-16-be", b"\xfe\xff"),
                                               ("utf-32-le", b"\xff\xfe\x00\x00"), ("utf-8", b"\xef\xbb\xbf")])  # fmt: skip
def test_an_annotation_file_whose_bom_names_its_encoding_is_decoded(
    tmp_path: Path, name: str, encoding: str, bom: bytes
) -> None:
    loaded = load_dataset("tasks", _write(tmp_path, name, encoding, bom), check=False)
    assert [t.question for t in loaded.tasks] == [r["question"] for r in ROWS]


def test_a_utf16_csv_with_bom_is_decoded(tmp_path: Path) -> None:
    from omniagent.datasets.readers import read_rows

    rows = list(read_rows(_write(tmp_path, "tasks.csv", "utf-16-le", b"\xff\xfe")))
    assert [r.data["question"] for r in rows] == [r["question"] for r in ROWS]


@pytest.mark.parametrize(
    ("name", "encoding"),
    [
        ("tasks.jsonl", "utf-16-le"),
        ("tasks.json", "utf-16-be"),
        ("tasks.jsonl", "cp1252"),
        ("tasks.csv", "gb18030"),
    ],
)
def test_an_annotation_file_in_another_encoding_is_refused_naming_it(
    tmp_path: Path, name: str, encoding: str
) -> None:
    path = _write(tmp_path, name, encoding)
    with pytest.raises(DatasetError) as err:
        load_dataset("tasks", path, check=False)
    message = str(err.value)
    detected = detect_encoding(path.read_bytes())
    assert str(path) in message and detected in message and "UTF-8" in message, message
    assert not detected.startswith("utf-8") and "\n" not in message
    if encoding.startswith("utf-16"):
        assert detected == encoding
