#!/usr/bin/env bash
# Batch 18, pre-registered: the held TAURA command with env.reward.num_credit=0.5 (a graded credit for number
# answers by closeness on a log scale), training seeds 0 and 1; tested on seed 1818 (32 videos, 753 questions),
# with batch 13's held TAURA seed 0 (no credit, same task draws) as the direct control.
# Page: docs/experiments/rl-number-credit.md. Needs runs/rl_hold and runs/rl_seeds (rl-three-seeds-fresh.sh).
set -euo pipefail

SET=1818
VIDEOS=32
OUT=runs/rl_num

cd "$(dirname "$0")/../../.."
source recipes/tiny_agent/studies/common.sh

s0() { train $OUT/taura_num_s0 "${HELD[@]}" env.reward.num_credit=0.5 local.save_every=8 local.seed=0; }
s1() { train $OUT/taura_num_s1 "${HELD[@]}" env.reward.num_credit=0.5 local.save_every=8 local.seed=1; }
in_parallel s0 s1

copy_agent runs/s${SET}_agent
python -m recipes.tiny_agent --out runs/s${SET}_agent --eval-seed $SET --eval-videos $VIDEOS --stages eval --eval-jobs 2
heldout $OUT/taura_num_s0/final runs/s${SET}_agent/synth_eval/tasks.jsonl $OUT/eval${SET}_taura_num_s0
heldout $OUT/taura_num_s1/final runs/s${SET}_agent/synth_eval/tasks.jsonl $OUT/eval${SET}_taura_num_s1
heldout runs/rl_hold/taura_hold/final runs/s${SET}_agent/synth_eval/tasks.jsonl $OUT/eval${SET}_taura_hold_s0   # control
heldout $OUT/taura_num_s0/final runs/s${SET}_agent/synth_blind/tasks.jsonl $OUT/eval${SET}_taura_num_s0_blind
MEAN=$OUT/eval${SET}_taura_num_s0+$OUT/eval${SET}_taura_num_s1
python scripts/compare_runs.py --average $MEAN runs/s${SET}_agent/eval/agent   # the primary, by question
python scripts/compare_runs.py --average $MEAN runs/s${SET}_agent/eval/agent --cluster media   # and by video
python scripts/compare_runs.py --average $MEAN $OUT/eval${SET}_taura_hold_s0   # against the control
for R in taura_num_s0 taura_num_s1 taura_hold_s0; do   # each row - SFT, by question and by video
    python scripts/compare_runs.py $OUT/eval${SET}_$R runs/s${SET}_agent/eval/agent
    python scripts/compare_runs.py $OUT/eval${SET}_$R runs/s${SET}_agent/eval/agent --cluster media
done
python scripts/compare_runs.py $OUT/eval${SET}_taura_num_s0 $OUT/eval${SET}_taura_num_s0_blind   # media - blind
# by category; pitch answers of 100 or more; training: pitch rollouts, score and seconds by quarters
python - <<'PY'
import csv, json
rows = {d: {r["id"]: r for r in map(json.loads, open(f"runs/{d}/results.jsonl"))} for d in
        ["s1818_agent/eval/agent", "rl_num/eval1818_taura_num_s0", "rl_num/eval1818_taura_num_s1",
         "rl_num/eval1818_taura_hold_s0"]}
for cat in ["beep_pitch_num", "beep_count_num", "flash_count_num", "scene_change_num", "shape_width_size"]:
    for d, v in rows.items():
        sel = [r for r in v.values() if r["category"] == cat]
        print(cat, d, round(sum(r["reward"] for r in sel) / len(sel), 3), sum(1 for r in sel if (r["prediction"] or 0) >= 100))
for run in ["rl_num/taura_num_s0", "rl_num/taura_num_s1", "rl_hold/taura_hold", "rl_seeds/taura_s1", "rl_seeds/taura_s2"]:
    every = list(map(json.loads, open(f"runs/{run}/rollouts.jsonl")))
    pitch = [r for r in every if "frequency, in Hz" in r["question"]]
    quarters = [[r for r in pitch if 8 * k < r["meta"]["iteration"] <= 8 * k + 8] for k in range(4)]
    print(run, "pitch", len(pitch), "of", len(every), "scored", [r["reward"] for r in pitch if r["reward"]],
          ">= 100", sum((r["answer"] or 0) >= 100 for r in pitch),
          [(len(q), round(sum((r["answer"] or 0) >= 100 for r in q) / len(q), 3)) for q in quarters])
    m = list(csv.DictReader(open(f"runs/{run}/metrics.csv")))
    print(run, "score", [round(sum(float(r["score_mean"]) for r in m[i:i + 8]) / 8, 3) for i in range(0, 32, 8)],
          "seconds", round(sum(float(r["seconds"]) for r in m)))
PY
