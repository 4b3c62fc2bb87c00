"""What the answer-form probes share (:mod:`recipes.testbed.option_echo`, :mod:`recipes.testbed.option_text`): the
final-turn rows they read, the pairing of two syntheses that should differ in the answer's form only, and their
command line (``--rows ROWS --set SET``, or ``--kept A B``)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from envs.jsonl import read_jsonl
from envs.scoring import letters


def last_rows(rows: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """The handover rows of the media condition at "last" (the agent wrote only the final turn) that were played."""
    for row in rows:
        if row.get("condition") == "media" and row.get("last") and "reward" in row:
            yield row


def paired_episodes(
    plain: list[dict[str, Any]], changed: list[dict[str, Any]]
) -> tuple[list[tuple[dict[str, Any], dict[str, Any]]], int]:
    """Two syntheses' kept episodes paired by id, and how many ids only one of them has."""
    by_id = {r["id"]: r for r in plain}
    pairs = [(by_id[b["id"]], b) for b in changed if b["id"] in by_id]
    return pairs, len(set(by_id) ^ {r["id"] for r in changed})


def same_but_last(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Two episodes of one task with the same answer, reward, options and turns, the final turn aside."""
    same = [a[k] == b[k] for k in ("answer", "reward", "choices")] + [len(a["turns"]) == len(b["turns"])]
    same += [x["raw_text"] == y["raw_text"] for x, y in zip(a["turns"][:-1], b["turns"][:-1], strict=False)]
    return all(same)


def chosen(episode: dict[str, Any]) -> tuple[str, str]:
    """The episode's answered letter and that option's text (empty when the letter is no option's)."""
    options, letter = letters(len(episode["choices"])), str(episode["answer"])
    return letter, episode["choices"][options.index(letter)] if letter in options else ""


def form_main(
    argv: Sequence[str] | None,
    prog: str,
    doc: str,
    rates: Callable[[list[dict[str, Any]], dict[str, dict[str, Any]]], dict[str, Any]],
    kept: Callable[[list[dict[str, Any]], list[dict[str, Any]]], dict[str, int]],
    kept_names: tuple[str, str],
) -> int:
    """The probe's command line: ``rates`` of a handover run's rows, or ``kept`` of two syntheses."""
    p = argparse.ArgumentParser(prog=prog, description=doc.split("\n")[0])
    p.add_argument("--rows", type=Path, help="a handover probe's rows.jsonl")
    p.add_argument("--set", type=Path, help="the set it ran on (its tasks.jsonl has the options)")
    p.add_argument("--kept", type=Path, nargs=2, metavar=kept_names, help="compare two syntheses instead")
    args = p.parse_args(argv)
    if args.kept:
        print(json.dumps(kept(read_jsonl(args.kept[0]), read_jsonl(args.kept[1]))))
        return 0
    if not (args.rows and args.set):
        p.error(f"--rows and --set (or --kept {' '.join(kept_names)})")
    tasks = {t["id"]: t for t in read_jsonl(args.set / "tasks.jsonl")}
    print(json.dumps(rates(read_jsonl(args.rows), tasks), indent=2))
    return 0
