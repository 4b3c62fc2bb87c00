"""The search step with the teacher's Observation given, when the teacher's second Thought first quotes that
Observation around the cue (the teacher's ``span_quote``): is the span copied then?

    python -m recipes.testbed.span_quote score --run runs/testbed/span_quote/quote_s0 \\
        --probes runs/testbed/span_quote/fresh_teacher/sft_data/train.parquet --tasks runs/testbed/data/study_5307
    python -m recipes.testbed.span_quote analyse --arm quote=runs/testbed/span_quote/quote \\
        --arm plain=runs/testbed/span_copy/w96 --seeds 0 1 2 3 4 --primary quote-plain

Runs are warmed up and write their turns with :mod:`recipes.testbed.span_copy` (``train``, then ``measure --out
RUN/quote_probe.json`` on the quote-form teacher's probes). ``score`` reads each run's written turns and scores
them against those probes, adding two measures to :data:`recipes.testbed.search_step.MEASURES`:

- **exact span**: the Thought names the question's colour with the teacher's span, end for end (the teacher's
  spans are the same with and without the quote);
- **quote exact**: the Thought's quote (what comes before its last ``; ``) is the teacher's, verbatim.

``analyse`` gives each seed's rates with intervals over videos and every measure's difference of two arms paired by
seed: a t-interval over seeds and a two-level bootstrap (seeds, then videos), as ``span_copy analyse`` does.
``overlap`` counts, per run, how much of what its Thoughts write (the quote's numbers and clauses, the span's
numbers) its own Observation writes, against another probe's. ``same-turns`` checks that two teachers' SFT parquets
hold the same turns and Observations (the quote changes Thoughts only).
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from envs.jsonl import write_atomic
from recipes.testbed import probe_analysis, span_copy
from recipes.testbed.cli_args import maybe_labelled
from recipes.testbed.search_step import MEASURES, rate, span_match

QUOTE_MEASURES = {
    **MEASURES,
    "exact span": "exact",
    "quote exact": "quote",
}  # the table's columns, the row keys
PRIMARY = "exact span"
WRITTEN = "quote_probe.json"  # each run's turns, written by ``span_copy measure --out``
SCORED = "quote.json"  # each run's turns scored by ``score``


def quote_of(thought: str) -> str:
    """A Thought's quote of the Observation: what comes before its last ``; `` (empty without one)."""
    return thought.rpartition("; ")[0]


def score_turn(reply: str, probe: dict[str, Any]) -> dict[str, int]:
    """The measures of :data:`QUOTE_MEASURES` (by row key) of one written turn against the probe's teacher."""
    thought, action = span_copy.parse_reply(reply)
    teacher = span_copy.parse_reply(probe["reply"])[0]
    mine, ref = span_match(thought), span_match(teacher)
    exact = (
        mine is not None
        and ref is not None
        and mine.group(1) == probe["cue"]
        and mine.groups() == ref.groups()
    )
    return {**span_copy.score(thought, action, probe), "exact": int(exact),
            "quote": int(quote_of(thought) == quote_of(teacher))}  # fmt: skip


def rescore(
    run: Path, probes: list[dict[str, Any]], file: str = WRITTEN, measures: dict[str, str] = QUOTE_MEASURES
) -> dict[str, Any]:
    """``run``'s written turns (in ``file``) scored against ``probes``: the rates of ``measures`` (name: row key of
    :func:`score_turn`) over them, and the teacher's."""
    written = json.loads((run / file).read_text())
    by_id = {p["id"]: p for p in probes}
    missing = [r["id"] for r in written["rows"] if r["id"] not in by_id]
    if missing or len(written["rows"]) != len(probes):
        raise ValueError(f"{run / file}: its turns are not the probes' ({len(missing)} unknown ids)")
    rows = [{"id": r["id"], "video": r["video"], "template": r["template"],
             **score_turn(r["written"], by_id[r["id"]])} for r in written["rows"]]  # fmt: skip
    teacher = [{"video": p["video"], **score_turn(p["reply"], p)} for p in probes]
    return {"model": written["model"], "probes": len(rows), "seen": written.get("seen"),
            "rates": {name: rate(rows, key) for name, key in measures.items()},
            "teacher": {name: rate(teacher, key) for name, key in measures.items()}, "rows": rows}  # fmt: skip


def score_runs(runs: Sequence[Path], probes: list[dict[str, Any]], file: str = WRITTEN, scored: str = SCORED,
               measures: dict[str, str] = QUOTE_MEASURES) -> None:  # fmt: skip
    """The ``score`` command: each run's written turns (``file``) scored by :func:`rescore` into ``scored`` in its
    folder, and a line of its rates printed."""
    for run in runs:
        res = rescore(run, probes, file, measures)
        write_atomic(run / scored, json.dumps(res, indent=1))
        print(json.dumps({"run": str(run), **{k: round(v["mean"], 3) for k, v in res["rates"].items()}}))


OVERLAP = (
    "quote numbers",
    "quote clauses",
    "span numbers",
)  # what ``overlap`` counts, in its own Observation


def _found(parts: list[str], observation: str, clauses: bool) -> int:
    """How many of ``parts`` (numbers, or whole clauses) the Observation writes."""
    have = set(observation.split(", ")) if clauses else set(re.findall(r"\d+", observation))
    return sum(x in have for x in parts)


def overlap(rows: list[dict[str, Any]], probes: list[dict[str, Any]]) -> dict[str, Any]:
    """Exploratory: of what a run's Thoughts write (the quote's numbers and whole clauses, the span's two numbers),
    the share its own Observation writes, and the share the next probe's (a different Observation) writes: a part
    taken from the given text is in the first far more often than in the second."""
    obs = [span_copy.observation_of(p["reply"]) for p in probes]
    index = {p["id"]: i for i, p in enumerate(probes)}
    counts = {k: [0, 0, 0] for k in OVERLAP}  # own, other, all
    for row in rows:
        i = index[row["id"]]
        j = next(k % len(probes) for k in range(i + 1, i + len(probes)) if obs[k % len(probes)] != obs[i])
        thought = span_copy.parse_reply(row["written"])[0]
        quote, m = quote_of(thought), span_match(thought)
        parts = {"quote numbers": (re.findall(r"\d+", quote), False),
                 "quote clauses": (quote.split(", ") if quote else [], True),
                 "span numbers": (list(m.groups()[1:]) if m else [], False)}  # fmt: skip
        for key, (found, clauses) in parts.items():
            c = counts[key]
            c[0] += _found(found, obs[i], clauses)
            c[1] += _found(found, obs[j], clauses)
            c[2] += len(found)
    return {k: {"own": c[0] / c[2] if c[2] else None, "other": c[1] / c[2] if c[2] else None, "n": c[2]}
            for k, c in counts.items()}  # fmt: skip


def same_turns(plain: Path, quote: Path) -> int:
    """Check that two SFT parquets of teacher episodes hold the same turns (ids) with the same Observations, as the
    plain and quote-form teacher's do (the quote changes Thoughts only); the number of turns, else a ValueError."""
    pairs = span_copy.paired_rows(plain, quote)
    for x, y in pairs:
        if span_copy.observation_of_row(x) != span_copy.observation_of_row(y):
            raise ValueError(f"{x['id']}: the Observations differ")
    return len(pairs)


def score_arguments(s: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """A ``score`` command's options, as :func:`score_runs` reads them: ``--run`` (repeated), ``--probes``,
    ``--tasks``."""
    s.add_argument("--run", type=Path, action="append", required=True, help="a measured run's folder")
    s.add_argument("--probes", type=Path, required=True, help="the teacher's SFT parquet on the runs' set")
    s.add_argument("--tasks", type=Path, required=True, help="the set's folder (its tasks.jsonl)")
    return s


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m recipes.testbed.span_quote", description=__doc__.split("\n")[0]
    )
    sub = p.add_subparsers(dest="command", required=True)
    score_arguments(sub.add_parser("score", help=f"score a run's written turns ({WRITTEN} -> {SCORED})"))
    a = probe_analysis.analyse_arguments(
        sub.add_parser("analyse", help="rows per seed and the paired differences")
    )
    a.add_argument("--plot", default=PRIMARY, choices=list(QUOTE_MEASURES), help="the figure's measure")
    o = sub.add_parser(
        "overlap", help="exploratory: how much of what runs write their own Observation writes"
    )
    o.add_argument(
        "--run",
        type=maybe_labelled,
        action="append",
        required=True,
        metavar="[NAME=]DIR",
        help="a run with written turns",
    )
    o.add_argument("--probes", type=Path, required=True)
    o.add_argument("--tasks", type=Path, required=True)
    c = sub.add_parser("same-turns", help="check that two teachers' SFT parquets differ in Thoughts only")
    c.add_argument("plain", type=Path)
    c.add_argument("quote", type=Path)
    args = p.parse_args(argv)
    if args.command == "same-turns":
        print(f"{same_turns(args.plain, args.quote)} turns, the same ids and Observations")
        return 0
    if args.command == "overlap":
        probes = span_copy.load_probes(args.probes, args.tasks)
        print("| run | " + " | ".join(f"{k}: own / another's (n)" for k in OVERLAP) + " |")
        print("| --- " * (1 + len(OVERLAP)) + "|")
        for name, run in args.run:
            res = overlap(json.loads((run / WRITTEN).read_text())["rows"], probes)
            cells = [f"{r['own']:.3f} / {r['other']:.3f} ({r['n']})" if r["n"] else "—" for r in res.values()]
            print(f"| {name} | " + " | ".join(cells) + " |")
        return 0
    if args.command == "score":
        score_runs(args.run, span_copy.load_probes(args.probes, args.tasks))
        return 0
    print(probe_analysis.analyse_command(args, QUOTE_MEASURES, SCORED, args.plot))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
