#!/usr/bin/env bash
# The prior floor on the reward, a 16-iteration pilot: batch 11's held TAURA command with env.reward.prior_tasks
# (pay only the score above the no-look prior's), against batch 11's own held TAURA at 16 iterations, on seed
# 1414. Page: docs/experiments/rl-prior-reward.md. Needs runs/rl_hold/taura_hold_final16 (rl-32-iterations.sh) and
# runs/s1414_agent (rl-three-seeds-fresh.sh).
set -euo pipefail

SET=1414
OUT=runs/rl_prior

cd "$(dirname "$0")/../../.."
source recipes/tiny_agent/studies/common.sh

train $OUT/prior_hold16 "${ANCHORED[@]}" local.seed=0 taura.mode=taura taura.hold_answer_turns=true \
    env.reward.prior_tasks=$SHIP/synth_train/tasks.jsonl
media_and_blind $OUT/prior_hold16/final runs/s${SET}_agent $OUT/eval${SET}_prior_hold16
media_and_blind runs/rl_hold/taura_hold_final16 runs/s${SET}_agent $OUT/eval${SET}_taura_hold16   # the control
python scripts/compare_runs.py $OUT/eval${SET}_prior_hold16 $OUT/eval${SET}_taura_hold16   # - control
python scripts/compare_runs.py $OUT/eval${SET}_prior_hold16 runs/s${SET}_agent/eval/agent   # - SFT
python scripts/compare_runs.py $OUT/eval${SET}_prior_hold16 runs/s${SET}_agent/eval/prior   # - prior
python scripts/compare_runs.py $OUT/eval${SET}_prior_hold16 $OUT/eval${SET}_prior_hold16_blind   # media - blind
python scripts/compare_runs.py $OUT/eval${SET}_prior_hold16_blind runs/s${SET}_agent/eval/agent_blind
python -m recipes.tiny_agent.plot_runs $OUT/prior_hold16 runs/rl_hold/taura_hold --out $OUT/prior.png   # flat groups
python - $OUT/prior_hold16 runs/rl_hold/taura_hold <<'PY'
import csv, sys
for run in sys.argv[1:]:  # the environment's score by quarters of the first 16 iterations, and the seconds
    rows = list(csv.DictReader(open(run + "/metrics.csv")))[:16]
    print(run, [round(sum(float(r["score_mean"]) for r in rows[i:i + 4]) / 4, 3) for i in range(0, 16, 4)],
          round(sum(float(r["seconds"]) for r in rows)))
PY
