"""The search step with the teacher's Observation given, when a look's frames are written by colour in a fixed
order (the teacher's ``field_clauses``) against the time order: is the span learnt once it follows the colour's name?

    python -m recipes.testbed.field_clauses same-episodes --time runs/testbed/sft_s0/sft_data/train.parquet \\
        --fields runs/testbed/field_clauses/fields_teacher/sft_data/train.parquet
    python -m recipes.testbed.field_clauses score --run runs/testbed/field_clauses/fields_s0 \\
        --probes runs/testbed/field_clauses/fields_fresh_teacher/sft_data/train.parquet \\
        --tasks runs/testbed/data/study_5321
    python -m recipes.testbed.field_clauses analyse --arm fields=runs/testbed/field_clauses/fields \\
        --arm time=runs/testbed/field_clauses/time --seeds 0 1 2 3 4 --primary fields-time

In the time order the span of a colour (``blue 25-51``) is copied from the clauses on either side of the colour's
own (``0-17 red, 25 yellow, 34-42 blue, 51-60 green``); in field clauses (``red 0-25, yellow 17-34, green 42-60,
blue 25-51``) it is the two numbers right after the colour's name. Runs are warmed up and write their turns with
:mod:`recipes.testbed.span_copy` (``train``, then ``measure --out RUN/field_probe.json``). ``score`` and
``analyse`` are :mod:`recipes.testbed.field_grid`'s (the search step's measures and exact span; each seed's rows
and the paired differences, t over seeds and a two-level bootstrap). ``same-episodes`` checks that the two forms'
teacher episodes are the same turns, Thoughts and actions, and counts the second Thoughts whose span follows the
colour's name in their Observation. ``sources`` (exploratory) says where each run's spans come from: the cue's
field, another colour's field (as the field clauses of the same look give them), or neither.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from omniagent.backends.synth_compact import parse_compact
from recipes.testbed import field_grid, span_copy
from recipes.testbed.cli_args import labelled
from recipes.testbed.search_step import span_match

SOURCES = ("the cue's field", "another colour's field", "other numbers", "no span")


def _turn(row: dict[str, Any]) -> dict[str, Any]:
    reply = json.loads(span_copy.reply_of_row(row))
    return {"thought": reply.get("thought"), "action": reply.get("action")}


def follows_the_name(reply: str) -> bool | None:
    """Whether a reply's Thought leads with a colour and a span (``blue 25-51``) that opens one of its Observation's
    clauses, word for word; None when the Thought leads with no span."""
    m = span_match(span_copy.parse_reply(reply)[0])
    if m is None:
        return None
    return f", {m.group(0)}" in f", {span_copy.observation_of(reply)}"


def same_episodes(time: Path, fields: Path) -> dict[str, Any]:
    """Check that two SFT parquets of the teacher's episodes, in the time order and in field clauses, hold the same
    turns with the same Thoughts and actions (the form changes Observations only). Returns the number of turns, how
    many Observations differ, and per form how many second Thoughts lead with a span and how many of those spans
    open a clause of their Observation; a ValueError when the turns differ."""
    pairs = span_copy.paired_rows(time, fields)
    changed = 0
    for x, y in pairs:
        if _turn(x) != _turn(y):
            raise ValueError(f"{x['id']}: the Thoughts or actions differ")
        changed += span_copy.observation_of_row(x) != span_copy.observation_of_row(y)
    out: dict[str, Any] = {"turns": len(pairs), "observations changed": changed}
    for name, rows in (("time", [x for x, _ in pairs]), ("fields", [y for _, y in pairs])):
        read = [follows_the_name(span_copy.reply_of_row(r)) for r in rows if r["turn"] == 2]
        spans = [x for x in read if x is not None]
        out[name] = {"second thoughts with a span": len(spans), "span opens a clause": sum(spans)}
    return out


def field_spans(reply: str) -> dict[str, tuple[str, str]]:
    """Each colour's span in a reply's Observation in field clauses (``blue 25-51``: ``("25", "51")``)."""
    claims = parse_compact(span_copy.observation_of(reply))
    return {c.items[0].value: (str(c.first), str(c.last)) for c in claims if c.kind == "field"}


def chosen_field(written: str, probe: dict[str, Any]) -> str:
    """The colour whose field (in the field clauses of ``probe``'s look) is the span ``written``'s Thought leads with,
    the cue's when two colours share that span; else ``other numbers``, or ``no span`` when it leads with none."""
    m = span_match(span_copy.parse_reply(written)[0])
    if m is None:
        return "no span"
    fields, span = field_spans(probe["reply"]), (m.group(2), m.group(3))
    if fields.get(probe["cue"]) == span:
        return str(probe["cue"])
    return next((c for c, s in fields.items() if s == span), "other numbers")


def span_source(written: str, probe: dict[str, Any]) -> str:
    """Where a written turn's span comes from (:data:`SOURCES`), whatever colour its Thought names: the span of the
    probe's cue in the field clauses of the probe's look (``probe`` in field clauses), another colour's, or
    neither."""
    chosen = chosen_field(written, probe)
    if chosen == probe["cue"]:
        return "the cue's field"
    return chosen if chosen in SOURCES else "another colour's field"


def sources_table(runs: Sequence[tuple[str, Path]], probes: list[dict[str, Any]]) -> str:
    """Exploratory: per run (and the teacher), the share of probes whose written span is each of :data:`SOURCES`;
    ``probes`` are the field-clause teacher's, whose Observations give each colour's span."""
    by_id = {p["id"]: p for p in probes}
    written = {"teacher": [(p["reply"], p) for p in probes]}
    for name, run in runs:
        written[name] = field_grid.written_pairs(run, by_id)
    lines = ["| run | turns | " + " | ".join(SOURCES) + " |", "| --- " * (2 + len(SOURCES)) + "|"]
    for name, pairs in written.items():
        found = [span_source(w, p) for w, p in pairs]
        shares = " | ".join(f"{found.count(x) / len(found):.3f}" for x in SOURCES)
        lines.append(f"| {name} | {len(found)} | {shares} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m recipes.testbed.field_clauses", description=__doc__.split("\n\n")[0]
    )
    sub = p.add_subparsers(dest="command", required=True)
    e = sub.add_parser("same-episodes", help="the two forms' teacher episodes differ in Observations only")
    e.add_argument("--time", type=Path, required=True, help="SFT parquet, Observations in the time order")
    e.add_argument(
        "--fields", type=Path, required=True, help="SFT parquet of the same episodes, field clauses"
    )
    field_grid.add_probe_commands(sub)
    w = sub.add_parser("sources", help="exploratory: where each run's spans come from")
    w.add_argument("--run", type=labelled, action="append", required=True, metavar="NAME=DIR")
    w.add_argument(
        "--probes", type=Path, required=True, help="the field-clause teacher's SFT parquet on the set"
    )
    w.add_argument("--tasks", type=Path, required=True, help="the set's folder (its tasks.jsonl)")
    args = p.parse_args(argv)
    if args.command == "sources":
        print(sources_table(args.run, span_copy.load_probes(args.probes, args.tasks)))
    elif args.command == "same-episodes":
        print(json.dumps(same_episodes(args.time, args.fields), indent=1))
    else:
        field_grid.run_probe_command(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
