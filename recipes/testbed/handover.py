"""Where the testbed episode loses the answer: the teacher plays the first k turns, the agent the rest.

For each question of a search-level set the search teacher (compact language) plays a whole episode of n turns;
questions it answers wrongly are left out and counted. For every handover point k = 0 .. n - 1 the teacher's first
k turns are replayed through the environment and the agent (greedy, constrained, the recipe's caps, K = 5 from the
episode's start) plays the rest; the row's outcome is the environment's reward. k = 0 is the agent's own episode;
k = n - 1 ("last") leaves it only the final turn. The first turn the agent writes is compared with the teacher's
turn k + 1 in the same context (Observation, Thought, action type, and the answer's letter on the final turn).
Conditions: ``media`` and ``blind`` (every percept from the set's blanked copy). The plan and the result are on
docs/experiments/testbed-handover.md.

Rows are appended to ``OUT/rows.jsonl`` as they finish, so a stopped run resumes; ``--summary`` reads them back.

    python -m recipes.testbed.handover --model runs/testbed/attempt5/sft_s0/agent \\
        --set runs/testbed/data/handover5305 --out runs/testbed/handover/attempt5_s0
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from envs.jsonl import read_jsonl, write_atomic
from omniagent.backends.synth_compact import parse_compact
from omniagent.backends.synth_world import HUES
from recipes.testbed.digit_probe import resampled_means, video_interval, video_totals
from recipes.testbed.handover_run import CONDITIONS
from recipes.testbed.probe_cli import interval_bars, new_axes, probe_main, probe_parser, save_figure

POINTS = ("k=0", "k=1", "k=2", "k=3", "last")
PRIMARY_CONDITION = "media"


def rate(x: int, n: int) -> float | None:
    return round(x / n, 3) if n else None


def points_of(row: dict[str, Any]) -> list[str]:
    """The handover labels a row counts under: its k, and "last" when the agent wrote only the final turn."""
    return [f"k={row['k']}"] + (["last"] if row["last"] else [])


def by_point(rows: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, dict[str, Any]]]:
    """The played rows by (condition, handover point), each {question id: row}."""
    at: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
    for row in rows:
        if "reward" in row:
            for point in points_of(row):
                at.setdefault((row["condition"], point), {})[row["id"]] = row
    return at


def paired(a: dict[str, dict[str, Any]], b: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Outcome of rows ``a`` minus rows ``b``, paired by question id, by-video interval."""
    return video_interval({i: (a[i]["media"], a[i]["reward"] - b[i]["reward"]) for i in a if i in b})


def agreement_rates(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per teacher turn (``turn 1`` .. and ``final``): the agent's first turn identical to the teacher's in its
    Observation; in its Thought among those whose Observation is; in its action type among those whose
    Observation and Thought are; the answer's letter on the final turn. Finer: the Thought's leading clause (cue
    and span) identical; the agent's and the teacher's looks that meet the evidence, among their looks."""
    keys = ("turns", "obs", "thought", "type", "letter", "span", "looks", "hits", "t_looks", "t_hits")
    out: dict[str, dict[str, int]] = {}
    for row in rows:
        for key in (f"turn {row['k'] + 1}",) + (("final",) if row["last"] else ()):
            acc = out.setdefault(key, dict.fromkeys(keys, 0))
            acc["turns"] += 1
            acc["obs"] += row["obs_same"]
            acc["thought"] += row["obs_same"] * row["thought_same"]
            acc["type"] += row["obs_same"] * row["thought_same"] * row["type_same"]
            acc["letter"] += row.get("letter", 0)
            acc["span"] += row["span_same"]
            for who, hit in (("", row["look_hits"]), ("t_", row["teacher_look_hits"])):
                acc[f"{who}looks"] += hit is not None
                acc[f"{who}hits"] += hit or 0

    return {
        key: {
            "turns": a["turns"],
            "obs": rate(a["obs"], a["turns"]),
            "thought | obs": rate(a["thought"], a["obs"]),
            "type | obs, thought": rate(a["type"], a["thought"]),
            "span": rate(a["span"], a["turns"]),
            "look hits": rate(a["hits"], a["looks"]),
            "teacher look hits": rate(a["t_hits"], a["t_looks"]),
            **({"letter": rate(a["letter"], a["turns"])} if key == "final" else {}),
        }  # fmt: skip
        for key, a in sorted(out.items())
    }


ANSWER_KIND = {"cue_digit_mcq": "digit", "cue_pitch_mcq": "tone", "pitch_color_mcq": "background"}


def named(text: str, kind: str) -> set[str]:
    """The values of ``kind`` an Observation names (compact language; none when it does not parse)."""
    try:
        claims = parse_compact(text)
    except ValueError:
        return set()
    return {i.value for c in claims for i in c.items if i.kind == kind}


def thought_values(thought: str, kind: str) -> set[str]:
    """The values of ``kind`` a Thought states (``digit 9``, ``500 Hz``, a colour word)."""
    if kind == "digit":
        return set(re.findall(r"digit (\d+)", thought))
    if kind == "tone":
        return set(re.findall(r"(\d+) Hz", thought))
    return {hue for hue in HUES if re.search(rf"\b{hue}\b", thought)}


def final_reads(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """At handover "last", per condition and template: the agent's final Observation names exactly the values of
    the answer's kind (digit, tone, background) that the teacher's names (``read``); its Thought then states exactly
    those (``carried``); and the letter right when read, when carried, and when not read (added after the plan's
    first rows: exploratory)."""
    acc: dict[str, list[int]] = {}
    for row in rows:
        if not row["last"] or not row.get("turns"):
            continue
        kind = ANSWER_KIND.get(row["template"])
        if kind is None:
            continue
        truth = named(json.loads(row["teacher"][row["k"]])["observation"], kind)
        try:
            turn = json.loads(row["turns"][0])
        except ValueError:
            turn = {}
        turn = turn if isinstance(turn, dict) else {}
        read = int(bool(truth) and named(str(turn.get("observation", "")), kind) == truth)
        carried = read * int(thought_values(str(turn.get("thought", "")), kind) == truth)
        right = int(row["reward"])
        a = acc.setdefault(f"{row['condition']} {row['template']}", [0] * 6)
        for i, v in enumerate((1, read, read * right, (1 - read) * right, carried, carried * right)):
            a[i] += v

    return {key: {"turns": n, "read": rate(r, n), "right | read": rate(rr, r), "right | not read": rate(rw, n - r),
                  "carried": rate(c, n), "right | carried": rate(cr, c)}
            for key, (n, r, rr, rw, c, cr) in sorted(acc.items())}  # fmt: skip


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Outcomes by condition and handover point with by-video intervals; the primary (media: "last" minus k = 0,
    paired by question); "last" media minus blind; outcomes by template at k = 0 and "last"; the agreement rates."""
    out: dict[str, Any] = {"left_out": {}, "outcome": {}, "by_template": {}, "agreement": {}}
    for row in rows:
        if row.get("left_out"):
            out["left_out"][row["left_out"]] = out["left_out"].get(row["left_out"], 0) + 1
    scored = [r for r in rows if "reward" in r]
    at = by_point(scored)
    for cond in CONDITIONS:
        for point in POINTS:
            if (cond, point) in at:
                sub = at[cond, point]
                out["outcome"][f"{cond} {point}"] = video_interval(
                    {i: (r["media"], r["reward"]) for i, r in sub.items()}
                )
                for template in sorted({r["template"] for r in sub.values()}):
                    if point in ("k=0", "last"):
                        vals = {
                            i: (r["media"], r["reward"]) for i, r in sub.items() if r["template"] == template
                        }
                        out["by_template"][f"{cond} {point} {template}"] = video_interval(vals)
        out["agreement"][cond] = agreement_rates([r for r in scored if r["condition"] == cond])
    media_last, media_own = at.get((PRIMARY_CONDITION, "last"), {}), at.get((PRIMARY_CONDITION, "k=0"), {})
    out["primary"] = {
        "name": "media: last minus k=0 (the agent's own episode)",
        **paired(media_last, media_own),
    }
    out["last media - blind"] = paired(media_last, at.get(("blind", "last"), {}))
    out["final reads"] = final_reads(scored)
    return out


def set_difference(
    rows: list[dict[str, Any]], other: list[dict[str, Any]], point: str = "k=0", seed: int = 0
) -> dict[str, Any]:
    """Media outcome at ``point`` of ``rows`` minus that of ``other`` (another set: unpaired), with a percentile 95%
    interval from resampling each set's videos independently."""
    (sa, ca), (sb, cb) = (
        video_totals(
            {i: (r["media"], r["reward"]) for i, r in by_point(x).get((PRIMARY_CONDITION, point), {}).items()}
        )
        for x in (rows, other)
    )
    if not len(ca) or not len(cb):
        return {"n": 0}
    rng = np.random.default_rng(seed)
    boot = resampled_means(sa, ca, rng) - resampled_means(sb, cb, rng)
    lo, hi = np.percentile(boot, [2.5, 97.5])
    return {"name": f"media {point}: this set minus the other", "n": int(ca.sum()), "videos": len(ca),
            "other_n": int(cb.sum()), "other_videos": len(cb),
            "mean": round(float(sa.sum() / ca.sum() - sb.sum() / cb.sum()), 3), "lo": round(float(lo), 3),
            "hi": round(float(hi), 3)}  # fmt: skip


def versus(rows: list[dict[str, Any]], other: list[dict[str, Any]]) -> dict[str, Any]:
    """Media outcome at "last" of ``rows`` minus ``other``'s (another agent on the same questions and teacher
    turns), paired by question, by-video interval; by template too."""
    mine, theirs = (by_point(x).get((PRIMARY_CONDITION, "last"), {}) for x in (rows, other))
    out = {"name": "media last: this run minus the other, paired by question", **paired(mine, theirs)}
    for template in sorted({r["template"] for r in mine.values()}):
        sub = {i: r for i, r in mine.items() if r["template"] == template}
        out[template] = paired(sub, theirs)
    return out


def fmt(m: dict[str, Any]) -> str:
    return f"{m['mean']:+.3f} [{m['lo']:+.3f}, {m['hi']:+.3f}] ({m['n']} questions, {m['videos']} videos)"


def table(res: dict[str, Any]) -> str:
    """The summary as markdown: outcomes by handover point, the agreement by teacher turn, the paired rows."""
    lines = ["| condition | handover | questions | outcome [95% CI] |", "| --- " * 4 + "|"]
    for key, m in res["outcome"].items():
        cond, point = key.split(" ", 1)
        lines.append(f"| {cond} | {point} | {m['n']} | {m['mean']:.3f} [{m['lo']:.3f}, {m['hi']:.3f}] |")
    lines += ["", "| condition | teacher turn | turns | Observation | Thought given Obs. | type given both | letter "
              "| span | look hits (teacher's) |", "| --- " * 9 + "|"]  # fmt: skip
    for cond, by_turn in res["agreement"].items():
        for key, a in by_turn.items():
            lines.append(f"| {cond} | {key} | {a['turns']} | {a['obs']} | {a['thought | obs']} | "
                         f"{a['type | obs, thought']} | {a.get('letter', '')} | {a['span']} | "
                         f"{a['look hits']} ({a['teacher look hits']}) |")  # fmt: skip
    lines += ["", "| final turn (exploratory) | turns | reads the answer's kind | right if read | right if not | "
              "Thought carries the read | right if carried |", "| --- " * 7 + "|"]  # fmt: skip
    for key, f in res.get("final reads", {}).items():
        lines.append(f"| {key} | {f['turns']} | {f['read']} | {f['right | read']} | {f['right | not read']} | "
                     f"{f['carried']} | {f['right | carried']} |")  # fmt: skip
    lines += ["", "| by template | outcome |", "| --- | --- |"]
    lines += [f"| {k} | {m['mean']:.3f} ({m['n']}) |" for k, m in res["by_template"].items()]
    for name in ("primary", "last media - blind"):
        if res[name].get("n"):
            lines.append(f"\n{res[name].get('name', name)}: {fmt(res[name])}")
    lines.append(f"left out: {res['left_out'] or 'none'}")
    return "\n".join(lines)


def figure(runs: dict[str, dict[str, Any]], path: Path) -> None:
    """Outcome by handover point: each run's media (solid) and blind (dashed) condition."""
    fig, ax = new_axes()
    for c, (label, res) in enumerate(runs.items()):
        for cond, style in zip(CONDITIONS, ("-", "--"), strict=True):
            keys = [p for p in POINTS if f"{cond} {p}" in res["outcome"]]
            if not keys:
                continue
            xs = [POINTS.index(p) + 0.06 * c for p in keys]
            ms = [res["outcome"][f"{cond} {p}"] for p in keys]
            interval_bars(ax, xs, ms, ls=style, color=f"C{c}", label=f"{label}, {cond}")
    ax.axhline(0.25, color="grey", lw=0.8, ls=":", label="any constant answer")
    ax.set(xticks=range(len(POINTS)), xticklabels=["own (k=0)", "k=1", "k=2", "k=3", "last"], ylim=(-0.02, 1.02),
           xlabel="teacher turns given before the agent takes over", ylabel="answered right",
           title="Teacher-correct questions, handed over after k turns")  # fmt: skip
    ax.legend(fontsize=6.5, loc="upper left")
    save_figure(fig, path)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = probe_parser(
        "python -m recipes.testbed.handover",
        __doc__,
        32,
        "videos of a made set (12 questions each)",
        CONDITIONS,
    )
    p.add_argument("--seed", type=int, default=0, help="the teacher's strategy seed")
    p.add_argument("--limit", type=int, default=0, help="only the set's first N questions (0: all)")
    p.add_argument("--option-text", type=int, choices=(0, 1), default=0,
                   help="1: an agent of the recipe's --option-text 1 (answers by the option's text; the teacher too)")  # fmt: skip
    p.add_argument("--last-only", action="store_true", help='play only the handover point "last"')
    p.add_argument("--versus", type=Path, metavar="DIR",
                   help='another run of the same questions: "last" (media) here minus there, paired (OUT/versus.json)')  # fmt: skip
    p.add_argument("--versus-name", default="versus.json", help="the file in OUT that --versus writes")
    p.add_argument("--only", type=Path, metavar="SET",
                   help="summarise only the rows of this tasks folder's questions (OUT/summary_<name>.json)")  # fmt: skip
    p.add_argument("--minus", type=Path, metavar="DIR",
                   help="another set's probe folder: the own episodes' difference (OUT/difference.json)")  # fmt: skip
    return p.parse_args(argv)


def run(args: argparse.Namespace) -> None:
    from recipes.testbed.handover_run import run_probe

    run_probe(args)


def only(rows: list[dict[str, Any]], tasks_dir: Path) -> list[dict[str, Any]]:
    """The rows of the questions in ``tasks_dir``."""
    ids = {str(r["id"]) for r in read_jsonl(tasks_dir / "tasks.jsonl")}
    return [r for r in rows if str(r["id"]) in ids]


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.only is not None:
        res = summary(only(list(read_jsonl(args.out / "rows.jsonl")), args.only))
        write_atomic(args.out / f"summary_{args.only.name}.json", json.dumps(res, indent=2))
        print(f"only the questions of {args.only}:\n{table(res)}")
        return 0
    probe_main(args, run, summary, table, figure)
    if args.versus is not None:
        res = versus(list(read_jsonl(args.out / "rows.jsonl")), list(read_jsonl(args.versus / "rows.jsonl")))
        write_atomic(args.out / args.versus_name, json.dumps(res, indent=2))
        print(f"\n{res['name']} ({args.versus}): " + (fmt(res) if res.get("n") else "no pairs"))
    if args.minus is not None:
        diff = set_difference(
            list(read_jsonl(args.out / "rows.jsonl")), list(read_jsonl(args.minus / "rows.jsonl"))
        )
        write_atomic(args.out / "difference.json", json.dumps(diff, indent=2))
        print(
            f"\n{diff.get('name', 'difference')} ({args.minus}): " + (fmt(diff) if diff["n"] else "no rows")
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
