"""envs/jsonl.py: the one reader policy (torn tail, comments, error collection) and the atomic writers."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from pydantic import BaseModel, Field

from envs.jsonl import (
    JsonlError,
    JsonlReader,
    append_jsonl,
    read_jsonl,
    repair_tail,
    write_atomic,
    write_jsonl,
    write_parquet,
)


class Rec(BaseModel):
    id: str
    n: int = Field(ge=0)


def _write(path: Path, *lines: str, end: str = "\n") -> Path:
    path.write_bytes((("\n".join(lines)) + end).encode("utf-8"))
    return path


def test_reads_objects_skipping_blank_lines(tmp_path: Path) -> None:
    path = _write(tmp_path / "a.jsonl", '{"id": "a", "n": 1}', "", "   ", '{"id": "é", "n": 2}')
    assert read_jsonl(path) == [{"id": "a", "n": 1}, {"id": "é", "n": 2}]
    assert [r.id for r in read_jsonl(path, Rec.model_validate)] == ["a", "é"]


def test_byte_order_mark_and_windows_line_ends(tmp_path: Path) -> None:
    path = tmp_path / "w.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"id": "a", "n": 1}\r\n{"id": "b", "n": 2}\r\n')
    assert [r["id"] for r in read_jsonl(path)] == ["a", "b"]


def test_comments_only_where_the_reader_opts_in(tmp_path: Path) -> None:
    path = _write(tmp_path / "c.jsonl", "# written by hand", '{"id": "a", "n": 1}', "  # indented too")
    assert read_jsonl(path, comments=True) == [{"id": "a", "n": 1}]
    with pytest.raises(JsonlError, match=r"c\.jsonl:1: not valid JSON"):
        read_jsonl(path)


def test_non_objects_are_bad_lines(tmp_path: Path) -> None:
    path = _write(tmp_path / "l.jsonl", "[1, 2]")
    with pytest.raises(JsonlError, match=r"l\.jsonl:1: expected a JSON object, got list"):
        read_jsonl(path)


def test_raise_at_first_vs_collect_every_bad_line(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "b.jsonl",
        '{"id": "ok", "n": 1}',
        "{broken",
        '{"id": "neg", "n": -1}',
        "3",
        '{"id": "ok2", "n": 2}',
    )
    with pytest.raises(JsonlError) as first:
        read_jsonl(path, Rec.model_validate)
    assert [p.lineno for p in first.value.problems] == [2]

    with pytest.raises(JsonlError) as every:
        read_jsonl(path, Rec.model_validate, collect=True)
    problems = every.value.problems
    assert [p.lineno for p in problems] == [2, 3, 4]
    assert "n: Input should be greater than or equal to 0" in problems[1].message
    message = str(every.value)
    assert f"3 bad line(s) in {path}" in message and f"{path}:4: expected a JSON object" in message


def test_caller_problems_join_the_same_error(tmp_path: Path) -> None:
    path = _write(tmp_path / "d.jsonl", '{"id": "a", "n": 1}', '{"id": "a", "n": 2}', "nope")
    reader = JsonlReader(path, Rec.model_validate, collect=True)
    seen: set[str] = set()
    with pytest.raises(JsonlError) as err:
        for lineno, rec in reader:
            if rec.id in seen:
                reader.problem(lineno, f"duplicate id {rec.id!r}")
            seen.add(rec.id)
    assert [str(p) for p in err.value.problems] == [
        f"{path}:2: duplicate id 'a'",
        f"{path}:3: not valid JSON (Expecting value at column 1)",
    ]


def test_torn_last_line_tolerated_only_when_asked_and_only_last(tmp_path: Path, caplog) -> None:
    torn = _write(tmp_path / "t.jsonl", '{"id": "a", "n": 1}', '{"id": "b", "n"', end="")
    with pytest.raises(JsonlError, match=r"t\.jsonl:2: not valid JSON .*torn last line\?"):
        read_jsonl(torn)
    reader = JsonlReader(torn, torn_tail=True)
    assert [r for _, r in reader] == [{"id": "a", "n": 1}]
    assert reader.torn is not None and reader.torn.lineno == 2
    assert "torn last line skipped" in caplog.text

    # the same broken text with its newline (or followed by more lines) is not a torn tail
    middle = _write(tmp_path / "m.jsonl", '{"id": "b", "n"', '{"id": "a", "n": 1}')
    with pytest.raises(JsonlError, match=r"m\.jsonl:1:"):
        read_jsonl(middle, torn_tail=True)
    terminated = _write(tmp_path / "e.jsonl", '{"id": "a", "n": 1}', '{"id": "b", "n"')
    with pytest.raises(JsonlError, match=r"e\.jsonl:2:"):
        read_jsonl(terminated, torn_tail=True)


def test_torn_multibyte_character_is_a_torn_tail(tmp_path: Path) -> None:
    path = tmp_path / "u.jsonl"
    path.write_bytes(b'{"id": "a", "n": 1}\n{"id": "\xc3')  # cut inside a two-byte UTF-8 character
    reader = JsonlReader(path, torn_tail=True)
    assert [r for _, r in reader] == [{"id": "a", "n": 1}]
    assert reader.torn is not None and reader.torn.lineno == 2


def test_unterminated_whole_last_record_is_read(tmp_path: Path) -> None:
    path = _write(tmp_path / "w.jsonl", '{"id": "a", "n": 1}', '{"id": "b", "n": 2}', end="")
    assert [r["id"] for r in read_jsonl(path)] == ["a", "b"]


def test_missing_file(tmp_path: Path) -> None:
    assert read_jsonl(tmp_path / "none.jsonl", missing_ok=True) == []
    with pytest.raises(FileNotFoundError):
        read_jsonl(tmp_path / "none.jsonl")


def test_write_jsonl_round_trip(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "sub" / "r.jsonl", [Rec(id="a", n=1), {"id": "b", "n": 2, "p": Path("/x")}])
    assert path.read_text(encoding="utf-8").splitlines() == [
        '{"id":"a","n":1}',
        '{"id": "b", "n": 2, "p": "/x"}',
    ]
    assert [r["id"] for r in read_jsonl(path)] == ["a", "b"]
    assert os.listdir(path.parent) == ["r.jsonl"]  # no temp file left behind


def test_write_atomic_keeps_the_old_file_and_no_temp_on_failure(tmp_path: Path, monkeypatch) -> None:
    path = write_atomic(tmp_path / "f.json", "old")

    def records():
        yield {"id": "a", "n": 1}
        raise RuntimeError("killed while producing")

    with pytest.raises(RuntimeError):
        write_jsonl(path, records())
    assert path.read_text() == "old"

    def full_disk(fd: int) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "fsync", full_disk)
    with pytest.raises(OSError, match="disk full"):
        write_atomic(path, "new")
    assert path.read_text() == "old" and os.listdir(tmp_path) == ["f.json"]
    monkeypatch.undo()
    write_atomic(path, b"new")
    assert path.read_bytes() == b"new"


def test_append_then_kill_then_repair_and_resume(tmp_path: Path) -> None:
    log = tmp_path / "results.jsonl"
    for i in range(3):
        append_jsonl(log, Rec(id=f"t{i}", n=i))
    with open(log, "ab") as fh:  # a kill in the middle of the fourth write
        fh.write(b'{"id": "t3", "n"')
    assert [r["id"] for r in read_jsonl(log, torn_tail=True)] == ["t0", "t1", "t2"]
    with pytest.raises(JsonlError, match="repair_tail"):
        append_jsonl(log, {"id": "t3", "n": 3})  # would glue two records together

    fixed = repair_tail(log)
    assert fixed is not None and fixed.lineno == 4 and "removed" in fixed.message
    assert repair_tail(log) is None
    append_jsonl(log, {"id": "t3", "n": 3})
    assert [r["id"] for r in read_jsonl(log)] == ["t0", "t1", "t2", "t3"]


def test_repair_keeps_a_whole_unterminated_record(tmp_path: Path) -> None:
    log = tmp_path / "x.jsonl"
    big = "y" * 200_000  # longer than one backward read block
    log.write_text(json.dumps({"id": "a", "s": big}) + "\n" + json.dumps({"id": "b", "s": big}))
    fixed = repair_tail(log)
    assert fixed is not None and fixed.lineno == 2 and "kept" in fixed.message
    append_jsonl(log, {"id": "c"})
    assert [r["id"] for r in read_jsonl(log)] == ["a", "b", "c"]

    only = tmp_path / "one.jsonl"
    only.write_bytes(b'{"id": "a", "s": "' + b"z" * 100_000)  # a single torn line, no newline at all
    assert repair_tail(only) is not None and only.read_bytes() == b""
    assert repair_tail(tmp_path / "missing.jsonl") is None


def test_write_atomic_gives_the_mode_open_would(tmp_path) -> None:
    import os
    import stat

    from envs.jsonl import write_atomic

    fresh = write_atomic(tmp_path / "a.json", "{}")
    plain = tmp_path / "b.json"
    plain.write_text("{}")
    assert stat.S_IMODE(fresh.stat().st_mode) == stat.S_IMODE(plain.stat().st_mode)
    os.chmod(fresh, 0o640)
    write_atomic(fresh, "{}")  # replacing keeps the file's own mode
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o640


def test_write_parquet_writes_a_table_or_a_frame_whole_and_keeps_the_old_file_on_failure(
    tmp_path: Path,
) -> None:
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = write_parquet(tmp_path / "sub" / "t.parquet", pa.table({"id": ["a", "b"], "n": [1, 2]}))
    assert pq.read_table(path).to_pylist() == [{"id": "a", "n": 1}, {"id": "b", "n": 2}]
    # a frame: its rows replace the table, its index is not a column
    frame = pd.DataFrame({"id": ["c"], "n": [3]}, index=[7])
    write_parquet(path, frame)
    assert pq.read_table(path).to_pylist() == [{"id": "c", "n": 3}]
    # a frame that parquet cannot encode (one column of mixed types): the error, the file as it was, no temp file
    with pytest.raises((pa.ArrowInvalid, pa.ArrowTypeError)):
        write_parquet(path, pd.DataFrame({"id": ["d", 4]}))
    assert pq.read_table(path).to_pylist() == [{"id": "c", "n": 3}]
    assert os.listdir(path.parent) == ["t.parquet"]
