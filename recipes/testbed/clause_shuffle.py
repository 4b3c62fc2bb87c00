"""Probes whose Observation lists the field clauses in a shuffled order, and which clause a run's span then follows.

    python -m recipes.testbed.clause_shuffle make \\
        --probes runs/testbed/clause_shuffle/fresh_teacher/sft_data/train.parquet \\
        --tasks runs/testbed/data/study_5327 --seed 0 --out runs/testbed/clause_shuffle/shuffled.parquet
    python -m recipes.testbed.clause_shuffle follow --run s0=runs/testbed/clause_shuffle/shuffled7200_s0 \\
        --probes runs/testbed/clause_shuffle/shuffled.parquet \\
        --fixed runs/testbed/clause_shuffle/fresh_teacher/sft_data/train.parquet --tasks runs/testbed/data/study_5327

``make`` copies an SFT parquet of teacher episodes on a set, rewriting the target reply of each probe row
(:func:`recipes.testbed.span_copy.probe_of`): its Observation's field clauses (``red 0-36, yellow 0-12, green 24-48,
blue 36-60``) are put in an order drawn for that probe from ``--seed`` and its id, uniform over the orders in which
the cue's clause no longer stands where it stood. Each clause keeps its text, so the Observation holds the same
tokens in another order. Every other row and field is left as it was, so ``span_copy measure``,
``field_clauses score`` and ``field_choice`` read the new parquet like any other probe set. An Observation that is
not the look's field clauses, one with a single clause, or a reply that holds the Observation twice is refused.
With ``--all-rows`` instead of ``--tasks`` it rewrites every row whose target Observation is two field clauses or more,
in an order drawn uniformly over all orders (warm-up rows whose clause order varies), and leaves the rest.

``follow`` reads each run's turns on the shuffled probes (``RUN/field_probe.json``) and says which field each span is:

- **the cue's colour**: the cue's clause, wherever it now stands;
- **the cue's old place**: the clause now standing where the cue's stood in the fixed order (``--fixed``);
- **another field**, or **not a field** (other numbers, or no span).

Of the turns that copy another field than the cue's, the share at the old place minus chance (1 over the number of
other fields) is the run's *place lean*; with two names or more, their mean and t-interval over names follow. A NAME
given twice pools its runs. ``--json`` writes the table's figures.
"""

from __future__ import annotations

import argparse
import json
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from envs.jsonl import read_jsonl, write_atomic, write_parquet
from recipes.testbed import span_copy
from recipes.testbed.analysis import t_interval
from recipes.testbed.cli_args import labelled
from recipes.testbed.field_clauses import chosen_field, field_spans
from recipes.testbed.field_grid import written_pairs

FOLLOWS = ("the cue's colour", "the cue's old place", "another field", "not a field")


def field_clauses(observation: str) -> list[str] | None:
    """``observation``'s clauses when it is the look's field clauses (each ``colour ...``, one per colour), else
    None."""
    clauses = observation.split(", ")
    fields = field_spans(json.dumps({"observation": observation}))
    if len(fields) != len(clauses) or [c.split(" ")[0] for c in clauses] != list(fields):
        return None
    return clauses


def shuffled_observation(observation: str, cue: str | None, rng: np.random.Generator) -> str:
    """``observation``'s field clauses in an order drawn by ``rng``, uniform over those that move the cue's clause
    (any order when ``cue`` is None or has no clause); a ValueError when it is not field clauses or has one clause."""
    clauses = field_clauses(observation)
    if clauses is None:
        raise ValueError(f"{observation!r}: not the look's field clauses (colour first, one clause each)")
    if len(clauses) < 2:
        raise ValueError(f"{observation!r}: a single clause has no other order")
    colours = [c.split(" ")[0] for c in clauses]
    before = colours.index(cue) if cue in colours else None
    while True:
        order = [int(i) for i in rng.permutation(len(clauses))]
        if before is None or order.index(before) != before:
            return ", ".join(clauses[i] for i in order)


def _reply_with(reply: str, observation: str, new: str) -> str:
    old_json, new_json = json.dumps(observation), json.dumps(new)
    if reply.count(old_json) != 1:
        raise ValueError(f"{reply!r}: the Observation is not found exactly once in the reply")
    return reply.replace(old_json, new_json)


def _target(messages: list[dict[str, Any]], row_id: str) -> tuple[dict[str, Any], str]:
    """Where the target reply's text is kept: (the dict, its key)."""
    target = messages[-1]
    if isinstance(target["content"], str):
        return target, "content"
    parts = [p for p in target["content"] if p.get("type") == "text"]
    if len(parts) != 1:
        raise ValueError(f"{row_id}: the target reply is not one text part")
    return parts[0], "text"


def shuffle_row(row: dict[str, Any], seed: int, cue: str | None) -> dict[str, Any]:
    """``row`` with its target reply's Observation in a new order (:func:`shuffled_observation`), drawn from ``seed``
    and the row's id. Only the target reply changes."""
    rng = np.random.default_rng([seed, zlib.crc32(str(row["id"]).encode())])
    messages = json.loads(row["messages"])
    holder, key = _target(messages, row["id"])
    observation = span_copy.observation_of(holder[key])
    holder[key] = _reply_with(holder[key], observation, shuffled_observation(observation, cue, rng))
    return {**row, "messages": json.dumps(messages)}


def _shuffled_rows(rows: list[dict[str, Any]], seed: int, tasks_dir: Path | None) -> list[dict[str, Any]]:
    if tasks_dir is None:  # every row in field clauses, any order
        return [
            shuffle_row(r, seed, None) if len(field_clauses(span_copy.observation_of_row(r)) or ()) > 1 else r
            for r in rows
        ]
    tasks = {str(t["id"]): t for t in read_jsonl(tasks_dir / "tasks.jsonl")}
    out = []
    for row in rows:
        if row["task_id"] not in tasks:
            raise ValueError(f"row {row['id']} answers {row['task_id']}, not a question of {tasks_dir}")
        probe = span_copy.probe_of(row, tasks[row["task_id"]])
        out.append(row if probe is None else shuffle_row(row, seed, probe["cue"]))
    return out


def make(parquet: Path, seed: int, out: Path, tasks_dir: Path | None = None) -> dict[str, int]:
    """Write ``parquet`` to ``out`` with its probe rows (the questions of ``tasks_dir``) shuffled so that the cue's
    clause moves; without ``tasks_dir``, every row whose target Observation is field clauses, in any order. The
    counts of rows and of rows changed."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pq.read_table(str(parquet))
    rows = table.to_pylist()
    new = _shuffled_rows(rows, seed, tasks_dir)
    write_parquet(out, pa.Table.from_pylist(new, schema=table.schema))
    return {"rows": len(rows), "shuffled": sum(a is not b for a, b in zip(rows, new, strict=True))}


def follows(written: str, probe: dict[str, Any], fixed: dict[str, Any]) -> dict[str, Any]:
    """Which of :data:`FOLLOWS` a written span is on a shuffled ``probe`` (``fixed``: the same probe in the fixed
    order), with, for a copy of another field than the cue's, whether it is at the cue's old place and the chance."""
    now, cue = list(field_spans(probe["reply"])), str(probe["cue"])
    before = list(field_spans(fixed["reply"]))
    if sorted(now) != sorted(before):
        raise ValueError(f"{probe['id']}: the shuffled Observation's colours are not the fixed one's")
    place = now[before.index(cue)] if cue in before else None
    chosen = chosen_field(written, probe)
    kind = FOLLOWS[0] if chosen == cue else FOLLOWS[1] if chosen == place else None
    rec: dict[str, Any] = {"follows": kind or (FOLLOWS[2] if chosen in now else FOLLOWS[3])}
    if chosen in now and chosen != cue and place is not None:
        rec["at place"], rec["chance"] = chosen == place, 1 / (len(now) - 1)
    return rec


def place_lean(records: list[dict[str, Any]]) -> float | None:
    """The mean over copies of another field than the cue's of (at the old place − chance); None without one."""
    other = [r for r in records if "at place" in r]
    return sum(r["at place"] - r["chance"] for r in other) / len(other) if other else None


def follow(
    runs: Sequence[tuple[str, Path]], shuffled: list[dict[str, Any]], fixed: list[dict[str, Any]]
) -> dict:
    """Per name (its runs pooled): each of :data:`FOLLOWS`' shares, the count of other-field copies and the place
    lean; with the t-interval of the leans over names."""
    by_id, fixed_by_id = {p["id"]: p for p in shuffled}, {p["id"]: p for p in fixed}
    per_run: dict[str, list[dict[str, Any]]] = {}
    for name, run in runs:
        pairs = written_pairs(run, by_id)
        per_run.setdefault(name, []).extend(follows(w, p, fixed_by_id[p["id"]]) for w, p in pairs)
    rows = {}
    for name, recs in per_run.items():
        shares = {k: sum(r["follows"] == k for r in recs) / len(recs) for k in FOLLOWS}
        rows[name] = {"turns": len(recs), **shares, "other-field copies": sum("at place" in r for r in recs),
                      "place lean": place_lean(recs)}  # fmt: skip
    leans = [r["place lean"] for r in rows.values() if r["place lean"] is not None]
    return {"rows": rows, "t": t_interval(leans)}


def table(res: dict[str, Any]) -> str:
    """The markdown ``follow`` prints."""
    head = "| run | turns | " + " | ".join(FOLLOWS) + " | other-field copies | place lean |"
    lines = [head, "| --- " * (len(FOLLOWS) + 4) + "|"]
    for name, r in res["rows"].items():
        lean = "—" if r["place lean"] is None else f"{r['place lean']:+.3f}"
        shares = " | ".join(f"{r[k]:.3f}" for k in FOLLOWS)
        lines.append(f"| {name} | {r['turns']} | {shares} | {r['other-field copies']} | {lean} |")
    t = res["t"]
    if t["n"] >= 2:
        lines += ["", f"Place lean over {t['n']} names: {t['mean']:+.3f} [{t['lo']:+.3f}, {t['hi']:+.3f}] "
                  f"(t 95%, p = {t['p']:.3f})."]  # fmt: skip
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m recipes.testbed.clause_shuffle", description=__doc__.split("\n\n")[0]
    )
    sub = p.add_subparsers(dest="command", required=True)
    m = sub.add_parser("make", help="the probes with their Observation's clauses shuffled")
    m.add_argument("--probes", type=Path, required=True, help="the teacher's SFT parquet (on the set)")
    m.add_argument("--tasks", type=Path, help="the set's folder (its tasks.jsonl): shuffle its probes")
    m.add_argument("--all-rows", action="store_true", help="shuffle every row in field clauses, any order")
    m.add_argument("--seed", type=int, required=True)
    m.add_argument("--out", type=Path, required=True)
    f = sub.add_parser("follow", help="which clause each run's span follows on the shuffled probes")
    f.add_argument("--run", type=labelled, action="append", required=True, metavar="NAME=DIR")
    f.add_argument("--probes", type=Path, required=True, help="the shuffled parquet (make's --out)")
    f.add_argument("--fixed", type=Path, required=True, help="the same probes in the fixed order")
    f.add_argument("--tasks", type=Path, required=True, help="the set's folder (its tasks.jsonl)")
    f.add_argument("--json", type=Path, help="write the figures here")
    args = p.parse_args(argv)
    if args.command == "make":
        if args.all_rows == (args.tasks is not None):
            p.error("make takes --tasks (its probes) or --all-rows (every row), one of the two")
        counts = make(args.probes, args.seed, args.out, None if args.all_rows else args.tasks)
        print(json.dumps({"out": str(args.out), **counts}))
        return 0
    load = span_copy.load_probes
    res = follow(args.run, load(args.probes, args.tasks), load(args.fixed, args.tasks))
    print(table(res))
    if args.json:
        write_atomic(args.json, json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
