"""The search step alone (recipes/testbed/step_only.py): ``select`` keeps exactly the second turns whose Thought
leads with a colour and a span, every column, and the recipe's text warm-up reads the file."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest
from testkit import search_teacher_parquet

from recipes.testbed.search_step import span_match
from recipes.testbed.span_copy import parse_reply, reply_of_row
from recipes.testbed.step_only import main, select


@pytest.fixture(scope="module")
def teacher(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from envs.synth import generate_benchmark

    root = tmp_path_factory.mktemp("step_only")
    generate_benchmark(
        root / "set", seed=14, n_videos=2, durations=[60.0], config={"level": "search"}, split="test"
    )
    return search_teacher_parquet(root / "set", root / "synth", field_clauses=True)


def test_select_keeps_the_search_steps_and_every_column(teacher: Path, tmp_path: Path, capsys) -> None:
    rows = pq.read_table(str(teacher)).to_pylist()
    steps = [r for r in rows if r["turn"] == 2 and span_match(parse_reply(reply_of_row(r))[0])]
    others = [r for r in rows if r["turn"] == 2 and r not in steps]  # a pitch question's second turn listens
    assert steps and others and len(steps) < len(rows)
    out = tmp_path / "steps.parquet"
    assert main(["select", "--data", str(teacher), "--out", str(out)]) == 0
    assert f"{len(steps)} search-step rows" in capsys.readouterr().out
    kept = pq.read_table(str(out))
    assert kept.schema == pq.read_table(str(teacher)).schema and kept.to_pylist() == steps
    assert not (tmp_path / "steps.parquet.part").exists()
    assert {r["task_id"] for r in steps} < {r["task_id"] for r in rows}  # pitch questions have no search step


def test_select_refuses_a_parquet_without_search_steps(teacher: Path, tmp_path: Path) -> None:
    import pyarrow as pa

    rows = [r for r in pq.read_table(str(teacher)).to_pylist() if r["turn"] == 1]
    pq.write_table(pa.Table.from_pylist(rows), str(tmp_path / "first.parquet"))
    with pytest.raises(ValueError, match="no second turn"):
        select(tmp_path / "first.parquet", tmp_path / "none.parquet")
    assert not (tmp_path / "none.parquet").exists()
