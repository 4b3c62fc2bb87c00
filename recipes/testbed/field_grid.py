"""The search step with the teacher's Observation given, on videos of four equal colour fields (the level's
``search_fields='grid'``) against videos of random fields: is the next look learnt once it is one of four spans?

    python -m recipes.testbed.field_grid score --run runs/testbed/field_grid/grid_s0 \\
        --probes runs/testbed/field_grid/grid_fresh_teacher/sft_data/train.parquet \\
        --tasks runs/testbed/data_grid/study_5320
    python -m recipes.testbed.field_grid analyse --arm grid=runs/testbed/field_grid/grid \\
        --arm random=runs/testbed/field_grid/random --seeds 0 1 2 3 4 --primary grid-random

On a grid video the teacher's span for a colour is the field of the grid that colour was seen in (``red 15-30``),
one of four fixed spans; on a video of random fields it is the span between the frames of other colours seen on
either side (``red 17-43``), whose two numbers are copied from the Observation. Runs are warmed up and write their
turns with :mod:`recipes.testbed.span_copy` (``train``, then ``measure --out RUN/field_probe.json`` on their own
world's probes). ``score`` scores each run's written turns against those probes on :data:`FIELD_MEASURES` (the
search step's three measures and **exact span**, the Thought's colour and span the teacher's, end for end).
``analyse`` gives each seed's rates with intervals over videos and every measure's difference of two arms paired
by seed (a t-interval over seeds, a two-level bootstrap beside it), with each arm's teacher and floor on its own
probes. ``spans`` (exploratory) counts the spans each run writes, and the teacher's in an arm's training rows.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from recipes.testbed import probe_analysis, span_copy
from recipes.testbed.cli_args import labelled
from recipes.testbed.search_step import MEASURES, span_match
from recipes.testbed.span_quote import score_arguments, score_runs

FIELD_MEASURES = {
    **MEASURES,
    "exact span": "exact",
}  # the table's columns, the row keys of span_quote.score_turn
WRITTEN = "field_probe.json"  # each run's turns, written by ``span_copy measure --out``
SCORED = "field.json"  # each run's turns scored by ``score``


def written_pairs(run: Path, by_id: dict[str, dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """``run``'s written turns (``RUN/field_probe.json``), each with its probe from ``by_id``; a ValueError when some
    row is not one of those probes."""
    rows = json.loads((run / WRITTEN).read_text())["rows"]
    missing = [r["id"] for r in rows if r["id"] not in by_id]
    if missing:
        raise ValueError(f"{run / WRITTEN}: {len(missing)} rows are not these probes (first {missing[0]})")
    return [(r["written"], by_id[r["id"]]) for r in rows]


def written_spans(thoughts: Iterable[str]) -> Counter[str]:
    """How often each span (``15-30``) leads the Thoughts (``-``: a Thought that leads with none)."""
    return Counter(f"{m.group(2)}-{m.group(3)}" if (m := span_match(t)) else "-" for t in thoughts)


def spans_table(runs: Sequence[tuple[str, Path]], train: tuple[str, Path] | None = None, top: int = 5) -> str:
    """Exploratory: each run's most written spans on its probes with their shares, and with ``train`` (``(name,
    parquet)``) the teacher's spans in those training rows. A run that writes one span whatever the cue has not
    found the cue's clause."""
    counts = {name: written_spans(span_copy.parse_reply(r["written"])[0] for r in
                                  json.loads((run / WRITTEN).read_text())["rows"]) for name, run in runs}  # fmt: skip
    if train is not None:
        counts[f"{train[0]} (training rows, turn 2)"] = written_spans(
            span_copy.parse_reply(r)[0] for r in span_copy.second_turn_replies(train[1])
        )
    lines = ["| run | turns | most written spans (share) | spans written |", "| --- | --- | --- | --- |"]
    for name, c in counts.items():
        n = sum(c.values())
        most = ", ".join(f"{span} ({k / n:.2f})" for span, k in c.most_common(top))
        lines.append(f"| {name} | {n} | {most} | {len(c)} |")
    return "\n".join(lines)


def add_probe_commands(sub: Any) -> None:
    """The ``score`` and ``analyse`` commands, on the subparsers ``sub`` (``add_subparsers()``), of probe runs
    written to :data:`WRITTEN` and scored on :data:`FIELD_MEASURES` into :data:`SCORED` (run by
    :func:`run_probe_command`; the field clauses study's too)."""
    score_arguments(sub.add_parser("score", help=f"score runs' written turns ({WRITTEN} -> {SCORED})"))
    a = probe_analysis.analyse_arguments(
        sub.add_parser("analyse", help="rows per seed, the paired differences and each arm's floor")
    )
    a.add_argument("--plot", default="span holds", choices=list(FIELD_MEASURES), help="the figure's measure")


def run_probe_command(args: argparse.Namespace) -> None:
    """``score`` (each run's scores written, a line of rates printed) or ``analyse`` (the table printed)."""
    if args.command == "score":
        score_runs(args.run, span_copy.load_probes(args.probes, args.tasks), WRITTEN, SCORED, FIELD_MEASURES)
    else:
        print(probe_analysis.analyse_command(args, FIELD_MEASURES, SCORED, args.plot))


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m recipes.testbed.field_grid", description=__doc__.split("\n\n")[0]
    )
    sub = p.add_subparsers(dest="command", required=True)
    add_probe_commands(sub)
    w = sub.add_parser(
        "spans", help="exploratory: the spans each run writes, and the teacher's in training rows"
    )
    w.add_argument(
        "--run", type=labelled, action="append", required=True, metavar="NAME=DIR", help="a measured run"
    )
    w.add_argument(
        "--train", type=labelled, metavar="NAME=PARQUET", help="an arm's training rows (SFT parquet)"
    )
    args = p.parse_args(argv)
    if args.command == "spans":
        print(spans_table(args.run, args.train))
    else:
        run_probe_command(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
