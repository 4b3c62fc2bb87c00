"""Accuracy as a function of the turn budget K (hydra; config in conf/turn_scaling.yaml).

    python scripts/turn_scaling.py policy.name=random 'scaling.ks=[6,8,12,16,24,32,52]' 'scaling.seeds=[0,1,2]'

Also installed as ``omniagent-turn-scaling``. Every (K, seed) cell is an ordinary eval run (the same runner as scripts/eval.py) in
``out_dir/K<K>-s<seed>/``, so a killed sweep resumes where it stopped. Then it writes, into out_dir:

- ``turn_scaling.csv``: one row per cell (K, seed, n, score and its 95% CI, mean executed turns,
  mean frames used, answer rate), plus one ``seed=all`` row per K (mean over seeds, min/max);
- ``acc_vs_k.png``, ``acc_vs_turns.png``, ``acc_vs_frames.png``: accuracy against the budget, against
  the turns actually executed, and against the frames actually used.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from envs.jsonl import write_atomic
from omniagent.eval.config import check_decoding, check_frozen, eval_config_from, judge_config, to_plain
from omniagent.eval.hydra_help import CONF_DIR
from omniagent.eval.judges import make_judge
from omniagent.eval.pipeline import load_tasks_from_config, run_one
from omniagent.eval.summary import make_console

CSV_FIELDS = ["k", "seed", "n", "score", "ci_lo", "ci_hi", "turns", "frames_used", "answer_rate", "out_dir"]


def cell_row(k: int, seed: int, summary: dict[str, Any], out_dir: str) -> dict[str, Any]:
    s = summary["score"]
    return {
        "k": k,
        "seed": seed,
        "n": summary["n"],
        "score": s["mean"],
        "ci_lo": s["lo"],
        "ci_hi": s["hi"],
        "turns": summary["turns"]["mean"],
        "frames_used": summary["frames_used"]["mean"],
        "answer_rate": summary["answer_rate"]["mean"],
        "out_dir": out_dir,
    }


def aggregate(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per K: the mean over seeds (ci_lo / ci_hi hold the min / max over seeds)."""
    out = []
    for k in sorted({r["k"] for r in rows}):
        sel = [r for r in rows if r["k"] == k and r["score"] is not None]
        if not sel:
            continue

        def mean(key: str, sel: list[dict[str, Any]] = sel) -> float:
            return sum(r[key] for r in sel) / len(sel)

        out.append(
            {
                "k": k,
                "seed": "all",
                "n": sum(r["n"] for r in sel),
                "score": mean("score"),
                "ci_lo": min(r["score"] for r in sel),
                "ci_hi": max(r["score"] for r in sel),
                "turns": mean("turns"),
                "frames_used": mean("frames_used"),
                "answer_rate": mean("answer_rate"),
                "out_dir": "",
            }
        )
    return out


def write_csv(rows: list[dict[str, Any]], path: Path) -> None:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CSV_FIELDS)
    w.writeheader()
    w.writerows(rows)
    write_atomic(path, buf.getvalue())


def plot(rows: list[dict[str, Any]], out_dir: Path, title: str = "") -> list[Path]:
    """The three PNGs (per-seed points with their 95% CIs, and the mean over seeds as a line)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cells = [r for r in rows if r["seed"] != "all" and r["score"] is not None]
    agg = aggregate(cells)
    paths = []
    for x_key, x_label, name in (
        ("k", "turn budget K", "acc_vs_k.png"),
        ("turns", "mean executed turns", "acc_vs_turns.png"),
        ("frames_used", "mean frames used", "acc_vs_frames.png"),
    ):
        fig, ax = plt.subplots(figsize=(6, 4), dpi=100)
        for seed in sorted({r["seed"] for r in cells}, key=str):
            sel = sorted((r for r in cells if r["seed"] == seed), key=lambda r: r[x_key])
            xs = [r[x_key] for r in sel]
            ys = [r["score"] for r in sel]
            err = [[r["score"] - r["ci_lo"] for r in sel], [r["ci_hi"] - r["score"] for r in sel]]
            ax.errorbar(xs, ys, yerr=err, fmt="o", alpha=0.45, capsize=2, label=f"seed {seed}")
        line = sorted(agg, key=lambda r: r[x_key])
        ax.plot([r[x_key] for r in line], [r["score"] for r in line], "-k", lw=2, label="mean over seeds")
        if x_key == "k":
            ax.set_xscale("log", base=2)
            ks = [r["k"] for r in line]
            ax.set_xticks(ks, [str(k) for k in ks])
        ax.set_xlabel(x_label)
        ax.set_ylabel("score (95% CI per seed)")
        ax.set_title(title or "turn scaling")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
        fig.tight_layout()
        path = out_dir / name
        fig.savefig(path)
        plt.close(fig)
        paths.append(path)
    return paths


def sweep(cfg: Any, overrides: list[str] | None = None, console: Any = None) -> dict[str, Any]:
    """Run every (K, seed) cell (resuming finished ones), then write the CSV and the plots."""
    check_frozen(overrides, bool(cfg.get("unfreeze")))
    check_decoding(cfg)
    out = Path(cfg.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tasks, loaded = load_tasks_from_config(cfg, console)
    judge = make_judge(judge_config(cfg)) if any(t.task_type == "ff" for t in tasks) else None
    ks = [int(k) for k in to_plain(cfg.scaling.ks)]
    seeds = [int(s) for s in to_plain(cfg.scaling.seeds)]
    rows = []
    for k in ks:
        for seed in seeds:
            cell = out / f"K{k:03d}-s{seed}"
            ecfg = eval_config_from(cfg, out_dir=str(cell), max_turns=k, seed=seed)
            ecfg = ecfg.model_copy(update=loaded.confinement())  # the env re-checks media_root
            summary = run_one(tasks, ecfg, judge=judge, cfg=cfg, name=f"K={k} seed={seed}")
            rows.append(cell_row(k, seed, summary, str(cell)))
            if console is not None:
                s = summary["score"]
                console.print(
                    f"K={k:3d} seed={seed}: score {s['mean']:.3f} [{s['lo']:.3f}, {s['hi']:.3f}] "
                    f"turns {summary['turns']['mean']:.2f} frames {summary['frames_used']['mean']:.1f}"
                )
    all_rows = rows + aggregate(rows)
    write_csv(all_rows, out / "turn_scaling.csv")
    pngs = plot(all_rows, out, title=str(cfg.get("run_name") or ""))
    return {"rows": all_rows, "csv": str(out / "turn_scaling.csv"), "plots": [str(p) for p in pngs]}


@hydra.main(config_path=CONF_DIR, config_name="turn_scaling", version_base=None)
def main(cfg: DictConfig) -> None:
    console = make_console()
    result = sweep(cfg, overrides=list(HydraConfig.get().overrides.task), console=console)
    console.print(f"wrote {result['csv']} and {', '.join(result['plots'])}")


if __name__ == "__main__":
    main()
