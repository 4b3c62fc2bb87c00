"""Scores with error bars, and the cost of getting them, from a run's ``results.jsonl`` rows.

:func:`summarize` gives the mean reward with a seeded BCa bootstrap 95% interval (rows sorted by task
id first, so any row order gives the same numbers) overall and by task type (with its metric:
accuracy, IoU, MRA), duration bin (ordered by value) and category; the answer rate; frames used, executed turns, context tokens
per turn; model vs environment time; the distribution of action types; counts of error codes and
stop reasons. Failed rows (media or policy errors) count as 0 in ``score`` and are left out of
``score_ok``. An ``ff`` answer that could not be scored (no judge configured) is left out of the
score and counted in ``unscored``, so it never hides as a 0.

:func:`write_summary` writes ``summary.json`` and ``summary.csv``; :func:`print_eval_summary` prints a
rich table; :func:`paired_compare` bootstraps the difference of two runs over their shared task ids
(:func:`compare` only checks whether two summaries' intervals overlap, when the rows are gone).
"""

from __future__ import annotations

import csv
import json
import math
import os
import re
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from omniagent.eval.accounting import cost_summary
from omniagent.eval.intervals import bootstrap_ci, cluster_bootstrap_ci
from omniagent.eval.samples import base_id, samples_summary

__all__ = [
    "DEFAULT_DURATION_BINS",
    "compare",
    "duration_bin",
    "format_ci",
    "format_num",
    "load_summary",
    "make_console",
    "print_compare",
    "paired_compare",
    "print_eval_summary",
    "print_paired",
    "summarize",
    "write_summary",
]

DEFAULT_DURATION_BINS = (60.0, 600.0, 1800.0, 3600.0)  # edges in seconds


def _fmt_seconds(edge: float) -> str:
    if edge >= 3600 and edge % 3600 == 0:
        return f"{int(edge // 3600)}h"
    if edge >= 60 and edge % 60 == 0:
        return f"{int(edge // 60)}m"
    return f"{edge:g}s"


def duration_bin(row: dict[str, Any], edges: tuple[float, ...] | list[float] = DEFAULT_DURATION_BINS) -> str:
    """The benchmark's own duration label when it has one (Video-MME short/medium/long), else the bin
    of the media duration by ``edges`` (``"<1m"``, ``"1m-10m"``, ..., ``">=1h"``)."""
    if row.get("duration_label"):
        return str(row["duration_label"])
    d = row.get("duration")
    if d is None:
        return "unknown"
    edges = sorted(float(e) for e in edges)
    if not edges or d < edges[0]:
        return f"<{_fmt_seconds(edges[0])}" if edges else "all"
    for a, b in zip(edges, edges[1:], strict=False):
        if a <= d < b:
            return f"{_fmt_seconds(a)}-{_fmt_seconds(b)}"
    return f">={_fmt_seconds(edges[-1])}"


TASK_METRICS = {"mcq": "accuracy", "tr": "IoU", "num": "MRA", "size": "MRA", "ff": "judge score"}
_LABEL_ORDER = {"short": 0, "medium": 1, "long": 2}
_UNIT = {"s": 1.0, "m": 60.0, "h": 3600.0}


def _seconds(text: str) -> float | None:
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*(s|m|h|min)?", text.strip())
    return None if m is None else float(m.group(1)) * _UNIT[(m.group(2) or "s")[0]]


def duration_order(label: str) -> tuple[int, float, str]:
    """Sort key of a duration bin by value: ``"<1m"`` < ``"1m-10m"`` < ``">=1h"``, ``"30s"`` <
    ``"60s"``, ``short`` < ``medium`` < ``long``; labels without a value last, by name."""
    text = str(label).strip()
    if text.lower() in _LABEL_ORDER:
        return (0, float(_LABEL_ORDER[text.lower()]), text)
    if text.startswith("<"):
        low = _seconds(text[1:])
        return (1, -1.0 if low is None else low - 1e-6, text)
    head = text.removeprefix(">=").split("-")[0]
    value = _seconds(head)
    return (1, value, text) if value is not None else (2, 0.0, text)


def _row_order(row: dict[str, Any]) -> tuple[str, str]:
    return (str(row.get("id", "")), json.dumps(row, sort_keys=True, default=str))


def scorable(row: dict[str, Any]) -> bool:
    """False for an answer that was recorded but could not be scored (ff without a judge)."""
    return not (row.get("answered") and not row.get("reward_available", True))


def _mean(values: list[float]) -> float | None:
    return float(np.mean(values)) if values else None


def _group(rows: list[dict[str, Any]], n_boot: int, seed: int) -> dict[str, Any]:
    scored = [r for r in rows if scorable(r)]
    return {
        "n": len(rows),
        "score": bootstrap_ci([r["reward"] for r in scored], n_boot, seed),
        "answer_rate": _mean([float(r.get("answered") or 0) for r in rows]),
        "frames_used": _mean([r.get("frames_used", 0) for r in rows]),
        "turns": _mean([r.get("turns", 0) for r in rows]),
        "unscored": len(rows) - len(scored),
    }


def _time(rows: list[dict[str, Any]], attempted: list[dict[str, Any]]) -> dict[str, Any]:
    """Model and environment seconds in all, the model's share, and per attempted task."""
    model_s = sum(r.get("model_seconds", 0.0) for r in rows)
    env_s = sum(r.get("env_seconds", 0.0) for r in rows)
    return {
        "model_seconds": round(model_s, 3),
        "env_seconds": round(env_s, 3),
        "model_share": round(model_s / (model_s + env_s), 4) if model_s + env_s > 0 else None,
        "model_seconds_per_task": _mean([r.get("model_seconds", 0.0) for r in attempted]),
        "env_seconds_per_task": _mean([r.get("env_seconds", 0.0) for r in attempted]),
        "wall_seconds_per_task": _mean([r.get("wall_seconds", 0.0) for r in attempted]),
    }


def _score(
    rows: list[dict[str, Any]], scored: list[dict[str, Any]], n_boot: int, seed: int
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The score's interval and the samples block: with ``samples=k`` the k runs of a question are not
    independent, so the interval resamples questions."""
    samples = samples_summary(rows, n_boot=n_boot, seed=seed)
    values = [r["reward"] for r in scored]
    if samples is None:
        return bootstrap_ci(values, n_boot, seed), None
    return cluster_bootstrap_ci(values, [base_id(r) for r in scored], n_boot, seed), samples


def summarize(
    rows: list[dict[str, Any]],
    *,
    duration_bins: tuple[float, ...] | list[float] = DEFAULT_DURATION_BINS,
    n_boot: int = 1000,
    seed: int = 0,
    name: str | None = None,
) -> dict[str, Any]:
    """The summary of a run (see the module docstring). ``rows``: ``results.jsonl`` records.

    Rows are sorted by task id first, so the numbers do not depend on the order rows were written
    in (worker count, resumed runs); ``seed`` is the run's bootstrap seed.
    """
    rows = sorted(rows, key=_row_order)
    ok = [r for r in rows if r.get("status") == "ok"]
    scored = [r for r in rows if scorable(r)]
    scored_ok = [r for r in ok if scorable(r)]
    attempted = [r for r in rows if r.get("stop_reason") not in (None, "media_error")]
    ctx = [t for r in attempted for t in (r.get("context_tokens") or []) if t is not None]
    actions: Counter[str] = Counter()
    errors: Counter[str] = Counter()
    for r in rows:
        actions.update(r.get("action_counts") or {})
        errors.update(r.get("turn_error_codes") or {})
        if r.get("error_code"):
            errors[r["error_code"]] += 1
    n_actions = sum(actions.values())

    def groups(key: Any, order: Any = str) -> dict[str, Any]:
        by: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for r in rows:
            k = key(r)
            if k is not None:
                by[str(k)].append(r)
        return {k: _group(v, n_boot, seed) for k, v in sorted(by.items(), key=lambda kv: order(kv[0]))}

    by_type = groups(lambda r: r.get("task_type"))
    for kind, g in by_type.items():
        g["metric"] = TASK_METRICS.get(kind, "score")
    score, samples = _score(rows, scored, n_boot, seed)

    return {
        "name": name,
        "n": len(rows),
        "n_ok": len(ok),
        "n_failed": sum(r.get("status") == "failed" for r in rows),
        "n_error": sum(r.get("status") == "error" for r in rows),
        "unscored": len(rows) - len(scored),
        "score": score,
        "score_ok": bootstrap_ci([r["reward"] for r in scored_ok], n_boot, seed),
        "answer_rate": bootstrap_ci([float(r.get("answered") or 0) for r in rows], n_boot, seed),
        "frames_used": bootstrap_ci([r.get("frames_used", 0) for r in attempted], n_boot, seed),
        "turns": bootstrap_ci([r.get("turns", 0) for r in attempted], n_boot, seed),
        "audio_seconds_used": _mean([r.get("audio_seconds_used", 0.0) for r in attempted]),
        "context_tokens_per_turn": {
            "mean": _mean(ctx),
            "max": max(ctx) if ctx else None,
            "turns_reported": len(ctx),
        },
        "time": _time(rows, attempted),
        "metric_by_task_type": {k: {"metric": g["metric"], **g["score"]} for k, g in by_type.items()},
        "by_task_type": by_type,
        "by_duration": groups(lambda r: duration_bin(r, duration_bins), order=duration_order),
        "by_category": groups(lambda r: r.get("category")),
        "actions": dict(actions.most_common()),
        "action_share": {k: round(v / n_actions, 4) for k, v in actions.most_common()} if n_actions else {},
        "error_codes": dict(errors.most_common()),
        "stop_reasons": dict(Counter(str(r.get("stop_reason")) for r in rows).most_common()),
        "cost": cost_summary(rows),
        "samples": samples,
        "bootstrap": {"n_boot": n_boot, "seed": seed, "level": 0.95, "method": "BCa", "order": "task id"},
        "duration_bins": [float(e) for e in duration_bins],
    }


CSV_FIELDS = [
    "group",
    "key",
    "n",
    "score",
    "ci_lo",
    "ci_hi",
    "answer_rate",
    "frames_used",
    "turns",
    "unscored",
    "metric",  # what the score is for that group (accuracy, IoU, MRA), last so old readers keep working
]


def _csv_rows(summary: dict[str, Any]) -> list[dict[str, Any]]:
    out = [
        {
            "group": "overall",
            "key": "all",
            "metric": "mean reward",
            "n": summary["n"],
            "score": summary["score"]["mean"],
            "ci_lo": summary["score"]["lo"],
            "ci_hi": summary["score"]["hi"],
            "answer_rate": summary["answer_rate"]["mean"],
            "frames_used": summary["frames_used"]["mean"],
            "turns": summary["turns"]["mean"],
            "unscored": summary["unscored"],
        }
    ]
    for group in ("by_task_type", "by_duration", "by_category"):
        for key, g in summary[group].items():
            out.append(
                {
                    "group": group.removeprefix("by_"),
                    "key": key,
                    "metric": g.get("metric", "mean reward"),
                    "n": g["n"],
                    "score": g["score"]["mean"],
                    "ci_lo": g["score"]["lo"],
                    "ci_hi": g["score"]["hi"],
                    "answer_rate": g["answer_rate"],
                    "frames_used": g["frames_used"],
                    "turns": g["turns"],
                    "unscored": g["unscored"],
                }
            )
    return out


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")  # what a spreadsheet may run as a formula (OWASP)
_PLAIN_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def spreadsheet_safe(value: Any) -> Any:
    """A CSV cell a spreadsheet shows as text, never runs: a string starting with ``=``, ``+``, ``-``,
    ``@``, a tab or a carriage return gets a leading single quote (OWASP's CSV injection advice);
    numbers, and strings that are plain numbers (``-0.5``), are left as they are."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS) and not _PLAIN_NUMBER.fullmatch(value):
        return "'" + value
    return value


def write_summary(
    summary: dict[str, Any], out_dir: str | os.PathLike[str], stem: str = "summary"
) -> tuple[Path, Path]:
    """Write ``<stem>.json`` and ``<stem>.csv`` into ``out_dir`` (atomically); return both paths."""
    from envs.jsonl import write_atomic

    out = Path(out_dir)
    js, cs = out / f"{stem}.json", out / f"{stem}.csv"
    write_atomic(js, json.dumps(summary, indent=1, default=str))
    import io

    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CSV_FIELDS)
    w.writeheader()
    w.writerows({k: spreadsheet_safe(v) for k, v in row.items()} for row in _csv_rows(summary))
    write_atomic(cs, buf.getvalue())
    return js, cs


def load_summary(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A ``summary.json`` (or the folder holding it)."""
    p = Path(path)
    if p.is_dir():
        p = p / "summary.json"
    return json.loads(p.read_text())


def format_ci(c: dict[str, Any] | None, digits: int = 3) -> str:
    """A confidence interval ``{"mean", "lo", "hi"}`` as ``"mean [lo, hi]"`` with ``digits`` decimals;
    ``"-"`` when ``c`` is empty or has no mean."""
    if not c or c.get("mean") is None:
        return "-"
    return f"{c['mean']:.{digits}f} [{c['lo']:.{digits}f}, {c['hi']:.{digits}f}]"


def format_num(x: float | None, digits: int = 1) -> str:
    """``x`` with ``digits`` decimals; ``"-"`` for None or NaN."""
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def make_console() -> Any:
    """A rich console, 140 columns wide when the output is not a terminal (logs, pipes)."""
    import sys

    from rich.console import Console

    return Console(width=None if sys.stdout.isatty() else 140)


def print_eval_summary(summary: dict[str, Any], console: Any = None) -> None:
    """Print the summary as a rich table plus one line each for cost, actions and errors."""
    from rich.table import Table

    console = console or make_console()
    title = f"{summary.get('name') or 'run'}: {summary['n']} tasks ({summary['n_failed']} failed, {summary['n_error']} errors)"
    table = Table(title=title)
    for col, just in (("group", "left"), ("key", "left"), ("n", "right"), ("score [95% CI]", "right"),
                      ("answered", "right"), ("frames", "right"), ("turns", "right")):  # fmt: skip
        table.add_column(col, justify=just)
    for r in _csv_rows(summary):
        ci = "-" if r["score"] is None else f"{r['score']:.3f} [{r['ci_lo']:.3f}, {r['ci_hi']:.3f}]"
        table.add_row(
            r["group"], f"{r['key']} ({r['metric']})" if r["group"] == "task_type" else str(r["key"]), str(r["n"]), ci, format_num(r["answer_rate"], 2), format_num(r["frames_used"]),
            format_num(r["turns"]),
        )  # fmt: skip
    console.print(table)
    t = summary["time"]
    ctx = summary["context_tokens_per_turn"]
    console.print(
        f"score over ok rows {format_ci(summary['score_ok'])}; answer rate {format_ci(summary['answer_rate'], 2)}; "
        f"frames {format_ci(summary['frames_used'], 1)}; turns {format_ci(summary['turns'], 1)}; "
        f"context tokens/turn {format_num(ctx['mean'], 0)} (max {ctx['max'] if ctx['max'] is not None else '-'})"
    )
    share = "-" if t["model_share"] is None else f"{100 * t['model_share']:.0f}%"
    console.print(
        f"time: model {t['model_seconds']:.1f} s vs env {t['env_seconds']:.1f} s (model {share}); "
        f"actions {summary['actions'] or '-'}; errors {summary['error_codes'] or '-'}"
    )
    if summary["unscored"]:
        console.print(
            f"[yellow]{summary['unscored']} answer(s) could not be scored (free-form without a judge) "
            "and are left out of the score[/yellow]"
        )


def _overlap(a: dict[str, Any], b: dict[str, Any]) -> bool | None:
    if a.get("mean") is None or b.get("mean") is None:
        return None
    return a["lo"] <= b["hi"] and b["lo"] <= a["hi"]


def compare(summary_a: dict[str, Any], summary_b: dict[str, Any], metric: str = "score") -> dict[str, Any]:
    """Do the two runs' 95% intervals overlap, overall and per task type?

    Non-overlapping intervals mean the difference is resolved; overlapping ones mean it is not
    (a conservative test: overlap does not prove the runs equal).
    """
    a, b = summary_a[metric], summary_b[metric]
    overlap = _overlap(a, b)
    name_a, name_b = summary_a.get("name") or "A", summary_b.get("name") or "B"
    if overlap is None:
        verdict = "cannot compare: a run has no scored tasks"
    elif overlap:
        verdict = f"intervals overlap: no resolved difference between {name_a} and {name_b} at 95%"
    else:
        better = name_a if a["mean"] > b["mean"] else name_b
        verdict = f"intervals do not overlap: {better} is better at 95%"
    by_type = {}
    for k in sorted(set(summary_a.get("by_task_type", {})) & set(summary_b.get("by_task_type", {}))):
        ga, gb = summary_a["by_task_type"][k][metric], summary_b["by_task_type"][k][metric]
        by_type[k] = {"a": ga, "b": gb, "overlap": _overlap(ga, gb)}
    return {
        "metric": metric,
        "a": {"name": name_a, **a},
        "b": {"name": name_b, **b},
        "diff": None if overlap is None else a["mean"] - b["mean"],
        "overlap": overlap,
        "verdict": verdict,
        "by_task_type": by_type,
    }


def print_compare(result: dict[str, Any], console: Any = None) -> None:
    console = console or make_console()
    a, b = result["a"], result["b"]
    console.print(f"{a['name']}: {format_ci(a)}   {b['name']}: {format_ci(b)}")
    console.print(result["verdict"])
    for k, v in result["by_task_type"].items():
        mark = "overlap" if v["overlap"] else ("-" if v["overlap"] is None else "DIFFERENT")
        console.print(f"  {k}: {format_ci(v['a'])} vs {format_ci(v['b'])}  {mark}")


def paired_compare(
    rows_a: list[dict[str, Any]],
    rows_b: list[dict[str, Any]],
    *,
    n_boot: int = 1000,
    seed: int = 0,
    names: tuple[str, str] = ("A", "B"),
    cluster: str | None = None,
) -> dict[str, Any]:
    """Paired bootstrap of the score difference A - B over the task ids both runs scored.

    Pairing removes the between-task variance two unpaired intervals carry, so a real difference
    is resolved with fewer tasks; ids are sorted, so row order does not change the interval. The
    difference is resolved at 95% when its interval excludes 0. Also per task type, with its metric.
    ``cluster`` names a row field (``"media"``): then whole clusters of tasks, keyed by A's value of that
    field, are resampled (:func:`cluster_bootstrap_ci`); a row without the field is its own cluster.
    """
    a = {str(r.get("id")): r for r in rows_a if scorable(r)}
    b = {str(r.get("id")): r for r in rows_b if scorable(r)}
    shared = sorted(set(a) & set(b))

    def diff(ids: list[str]) -> dict[str, Any]:
        deltas = [a[i]["reward"] - b[i]["reward"] for i in ids]
        if cluster is None:
            ci = bootstrap_ci(deltas, n_boot, seed)
        else:
            keys = [str(a[i].get(cluster) or f"id:{i}") for i in ids]
            ci = cluster_bootstrap_ci(deltas, keys, n_boot, seed)
        ci["resolved"] = None if ci["mean"] is None else bool(ci["lo"] > 0 or ci["hi"] < 0)
        return ci

    overall = diff(shared)
    by_type: dict[str, Any] = {}
    for kind in sorted({str(a[i].get("task_type")) for i in shared}):
        ids = [i for i in shared if str(a[i].get("task_type")) == kind]
        by_type[kind] = {"metric": TASK_METRICS.get(kind, "score"), **diff(ids)}
    name_a, name_b = names
    if overall["resolved"] is None:
        verdict = "cannot compare: the runs share no scored task id"
    elif overall["resolved"]:
        better = name_a if overall["mean"] > 0 else name_b
        unit = f"clusters of tasks by {cluster}" if cluster else f"{len(shared)} shared tasks"
        verdict = f"{better} is better at 95% (paired bootstrap over {unit})"
    else:
        verdict = f"no resolved difference at 95% (the paired interval of {name_a} - {name_b} contains 0)"
    return {
        "paired": True,
        "cluster": cluster,
        "n_shared": len(shared),
        "only_a": len(set(a) - set(b)),
        "only_b": len(set(b) - set(a)),
        "a": {"name": name_a, **bootstrap_ci([a[i]["reward"] for i in shared], n_boot, seed)},
        "b": {"name": name_b, **bootstrap_ci([b[i]["reward"] for i in shared], n_boot, seed)},
        "diff": overall,
        "verdict": verdict,
        "by_task_type": by_type,
    }


def print_paired(result: dict[str, Any], console: Any = None) -> None:
    """Print a :func:`paired_compare` result: both means on the shared tasks, A - B with its interval."""
    console = console or make_console()
    a, b, d = result["a"], result["b"], result["diff"]
    console.print(
        f"on {result['n_shared']} shared tasks ({result['only_a']} only in {a['name']}, "
        f"{result['only_b']} only in {b['name']}): {a['name']} {format_ci(a)}   {b['name']} {format_ci(b)}"
    )
    by = f" (resampling {d.get('clusters')} clusters by {result['cluster']})" if result.get("cluster") else ""
    console.print(f"{a['name']} - {b['name']}: {format_ci(d)}{by}; {result['verdict']}")
    for kind, v in result["by_task_type"].items():
        mark = "-" if v["resolved"] is None else ("RESOLVED" if v["resolved"] else "not resolved")
        console.print(f"  {kind} ({v['metric']}, n={v['n']}): difference {format_ci(v)}  {mark}")
