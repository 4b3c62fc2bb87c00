"""Exploratory: where each number of a copy-task Thought comes from, when its span is not a field's.

    python -m recipes.testbed.copy_parts --run s0=runs/testbed/copy_task/plain3600_s0 ... \\
        --probes runs/testbed/copy_task/probes_plain.parquet

A run measured on the copy task (:mod:`recipes.testbed.copy_task`, ``MODEL/copy_probe.json``) writes, after each
probe's Observation (four colour fields in a random order, ``blue 28-40, red 36-47, green 7-43, yellow 4-25``), a
Thought that leads with a colour and a span. ``copy_task analyse`` asks whether that span is the cue's field, or some
other field's. This command looks at the span's two numbers one by one. Each end of the span is, in this order of
precedence:

- ``cue's``: the cue field's number at the same end (its start for the span's start);
- ``other field's``: another field's number at the same end;
- ``other end``: some field's number at the other end (a start written as an end, or the reverse);
- ``not in look``: no number of the Observation's fields.

Per run (and the probes' own replies, as ``teacher``) the table gives the share of turns whose Thought names the cue's
colour, each end's shares over the turns with a span, and how many spans are one field's (start and end from the same
field) or two fields' (both ends are the same end of two different fields). A second table gives, for the starts that
are some field's start, the place (1 to 4, in the Observation's order) of the clause they come from: a model that
copies from a fixed place, rather than by colour, shows it there. A field picked at random gives ``cue's`` 0.25 at each
end and each place about 0.25.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from envs.jsonl import write_atomic
from recipes.testbed import span_copy
from recipes.testbed.cli_args import labelled
from recipes.testbed.copy_task import load_probes, run_turns
from recipes.testbed.field_clauses import field_spans
from recipes.testbed.search_step import span_match

SOURCES = ("cue's", "other field's", "other end", "not in look")
ENDS = ("start", "end")


def end_source(number: str, end: int, fields: dict[str, tuple[str, str]], cue: str) -> str:
    """Where one end (0: start, 1: end) of a written span comes from, among ``fields`` (colour → span) and the cue."""
    if cue in fields and fields[cue][end] == number:
        return "cue's"
    if any(span[end] == number for span in fields.values()):
        return "other field's"
    if any(span[1 - end] == number for span in fields.values()):
        return "other end"
    return "not in look"


def parts(written: str, probe: dict[str, Any]) -> dict[str, Any]:
    """One written turn on ``probe``: whether its Thought names the cue's colour, each end's source, whether the span is
    one field's or two fields' same ends, and the clause place (1-based) of the field whose start it starts with."""
    m = span_match(span_copy.parse_reply(written)[0])
    cue = str(probe["cue"])
    if m is None:
        return {"cue named": False, "span": False}
    fields, span = field_spans(probe["reply"]), (m.group(2), m.group(3))
    rec: dict[str, Any] = {"cue named": m.group(1) == cue, "span": True}
    for end, name in enumerate(ENDS):
        rec[name] = end_source(span[end], end, fields, cue)
    starts = [c for c, s in fields.items() if s[0] == span[0]]
    ends = [c for c, s in fields.items() if s[1] == span[1]]
    rec["one field"] = span in fields.values()
    rec["two fields"] = bool(starts and ends) and not rec["one field"]
    order = list(fields)
    rec["start place"] = order.index(cue if cue in starts else starts[0]) + 1 if starts else None
    return rec


def summary(records: list[dict[str, Any]]) -> dict[str, Any]:
    """The shares over one run's turns (``cue named``) and over its turns with a span (the rest)."""
    spans = [r for r in records if r["span"]]
    out: dict[str, Any] = {
        "turns": len(records),
        "cue named": sum(r["cue named"] for r in records) / len(records),
    }
    out["with a span"] = len(spans)
    for name in ENDS:
        counts = Counter(r[name] for r in spans)
        out[name] = {s: counts[s] / len(spans) if spans else 0.0 for s in SOURCES}
    out["one field"] = sum(r["one field"] for r in spans)
    out["two fields"] = sum(r["two fields"] for r in spans)
    places = Counter(r["start place"] for r in spans if r["start place"] is not None)
    total = sum(places.values())
    out["start places"] = {p: places[p] / total if total else 0.0 for p in range(1, 5)}
    return out


def report(res: dict[str, dict[str, Any]]) -> str:
    head = [f"{e}: {s}" for e in ENDS for s in SOURCES]
    lines = ["| run | turns | cue named | with a span | " + " | ".join(head) + " | one field | two fields |"]
    lines.append("| --- " * (6 + len(head)) + "|")
    for name, r in res.items():
        shares = " | ".join(f"{r[e][s]:.3f}" for e in ENDS for s in SOURCES)
        lines.append(f"| {name} | {r['turns']} | {r['cue named']:.3f} | {r['with a span']} | {shares} | "
                     f"{r['one field']} | {r['two fields']} |")  # fmt: skip
    lines += ["", "| run | start from place 1 | place 2 | place 3 | place 4 |", "| --- " * 5 + "|"]
    for name, r in res.items():
        lines.append(f"| {name} | " + " | ".join(f"{r['start places'][p]:.3f}" for p in range(1, 5)) + " |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m recipes.testbed.copy_parts", description=__doc__.split("\n")[0]
    )
    p.add_argument("--run", type=labelled, action="append", required=True, metavar="NAME=DIR")
    p.add_argument("--probes", type=Path, required=True)
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    probes = load_probes(args.probes)
    res = {"teacher": summary([parts(p["reply"], p) for p in probes])}
    res.update({name: summary([parts(*turn) for turn in run_turns(run, probes)]) for name, run in args.run})
    print(report(res))
    if args.json:
        write_atomic(args.json, json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
