"""The search step alone: does the text warm-up learn the step when the step is all it trains on?

    python -m recipes.testbed.step_only select \\
        --data runs/testbed/field_clauses/fields_teacher/sft_data/train.parquet --out runs/testbed/step_only/steps.parquet

``select`` keeps the **search-step rows** of an SFT parquet of the teacher's episodes: the second turns whose Thought
leads with a colour and a span (``blue 25-51.``), the step the span copy probes measure. Every column is kept, so the
recipe's text warm-up (``python -m recipes.testbed.span_copy train --data``) reads the file as it reads the whole
parquet, and samples its batches from those rows only.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from envs.jsonl import write_parquet
from recipes.testbed import span_copy
from recipes.testbed.search_step import span_match


def is_search_step(row: dict) -> bool:
    """Whether an SFT row (``turn``, ``messages``) is a second turn whose Thought leads with a colour and a span."""
    if row["turn"] != 2:
        return False
    return span_match(span_copy.parse_reply(span_copy.reply_of_row(row))[0]) is not None


def select(parquet: Path, out: Path) -> int:
    """Write the search-step rows of ``parquet`` to ``out`` (every column, in order; written whole, then renamed);
    returns how many. A parquet with none is refused."""
    import pyarrow.parquet as pq

    table = pq.read_table(str(parquet))
    keep = [i for i, row in enumerate(table.select(["turn", "messages"]).to_pylist()) if is_search_step(row)]
    if not keep:
        raise ValueError(f"{parquet}: no second turn leads with a colour and a span")
    write_parquet(out, table.take(keep))
    return len(keep)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m recipes.testbed.step_only", description=__doc__.split("\n")[0]
    )
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("select", help="the search-step rows of an SFT parquet")
    s.add_argument("--data", type=Path, required=True, help="SFT parquet of the teacher's episodes")
    s.add_argument("--out", type=Path, required=True, help="the parquet of its search-step rows")
    args = p.parse_args(argv)
    print(f"{select(args.data, args.out)} search-step rows of {args.data} -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
