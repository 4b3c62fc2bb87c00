"""SFT rows read on demand (rl/sft/rows.py): the same rows as reading the whole table, one row group decoded at a
time, subsets, single columns, and pickling without open files."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rl.sft.rows import ParquetRows


def _write(path: Path, first: int, n: int, group: int) -> Path:
    rng = np.random.default_rng(first)
    table = pa.table(
        {
            "id": [f"r{first + i}" for i in range(n)],
            "messages": [f'[{{"n": {first + i}}}]' for i in range(n)],
            "blobs": pa.array([[rng.bytes(300)] for _ in range(n)], pa.list_(pa.large_binary())),
        }
    )
    pq.write_table(table, path, row_group_size=group)
    return path


@pytest.fixture()
def files(tmp_path: Path) -> list[Path]:
    return [_write(tmp_path / "a.parquet", 0, 10, 4), _write(tmp_path / "b.parquet", 10, 7, 3)]


def _eager(files: list[Path]) -> list[dict]:
    return [row for f in files for row in pq.read_table(f).to_pylist()]


def test_every_row_is_the_row_the_whole_table_gives(files: list[Path]) -> None:
    rows = ParquetRows(files)
    eager = _eager(files)
    assert len(rows) == len(eager) == 17
    assert [rows.row(i) for i in range(len(rows))] == eager
    assert rows.row(-1) == eager[-1]
    for bad in (17, -18):
        with pytest.raises(IndexError):
            rows.row(bad)
    assert ParquetRows(files[0]).row(3) == eager[3]  # one path as a string or Path


def test_a_pass_in_order_decodes_each_row_group_once_and_keeps_few(files, monkeypatch) -> None:
    reads: list[int] = []
    original = pq.ParquetFile.read_row_group

    def counted(self, i, *args, **kwargs):
        reads.append(i)
        return original(self, i, *args, **kwargs)

    monkeypatch.setattr(pq.ParquetFile, "read_row_group", counted)
    rows = ParquetRows(files, cache_groups=2)
    for i in range(len(rows)):
        rows.row(i)
    assert reads == [0, 1, 2, 0, 1, 2]  # a's three groups (4, 4, 2 rows), then b's three (3, 3, 1)
    assert len(rows._cache) == 2  # memory: at most two decoded groups, whatever the data's size
    rows.row(16)
    assert len(reads) == 6  # a cached group is not read again
    rows.row(0)
    assert len(reads) == 7  # an evicted one is


def test_a_subset_keeps_its_order_and_a_column_reads_alone(files: list[Path]) -> None:
    eager = _eager(files)
    rows = ParquetRows(files).select([16, 2, 9])
    assert len(rows) == 3 and [rows.row(i)["id"] for i in range(3)] == ["r16", "r2", "r9"]
    assert rows.column("messages") == [eager[i]["messages"] for i in (16, 2, 9)]
    assert rows.select([2, 0]).column("id") == ["r9", "r16"]  # a subset of a subset
    with pytest.raises(IndexError):
        rows.select([3])
    with pytest.raises(ValueError, match="no parquet files"):
        ParquetRows([])


def test_rows_pickle_without_their_files_or_decoded_groups(files: list[Path]) -> None:
    rows = ParquetRows(files)
    for i in range(len(rows)):
        rows.row(i)
    data = pickle.dumps(rows)
    assert len(data) < 2_000  # the 17 rows' blobs alone are 5 kB: none travel
    back = pickle.loads(data)
    assert [back.row(i) for i in range(len(back))] == _eager(files)
