#!/usr/bin/env bash
# Batch 15, pre-registered: no training; batch 13's four policies and the shipped agent on a fresh set three times
# larger, seed 1515 (48 videos, 1,130 questions); every interval also by video (--cluster media).
# Page: docs/experiments/rl-large-set.md. Needs runs/rl_hold and runs/rl_seeds (rl-three-seeds-fresh.sh).
set -euo pipefail

SET=1515
VIDEOS=48
OUT=runs/rl_power

cd "$(dirname "$0")/../../.."
source recipes/tiny_agent/studies/common.sh

copy_agent runs/s${SET}_agent
python -m recipes.tiny_agent --out runs/s${SET}_agent --eval-seed $SET --eval-videos $VIDEOS --stages eval --eval-jobs 2
for ROW in taura_s0:runs/rl_hold/taura_hold taura_s1:runs/rl_seeds/taura_s1 taura_s2:runs/rl_seeds/taura_s2 \
    grpo_s0:runs/rl_hold/grpo_kl; do
    NAME=${ROW%%:*} RUN=${ROW#*:}
    heldout $RUN/final runs/s${SET}_agent/synth_eval/tasks.jsonl $OUT/eval${SET}_$NAME
    python scripts/compare_runs.py $OUT/eval${SET}_$NAME runs/s${SET}_agent/eval/agent   # by question
    python scripts/compare_runs.py $OUT/eval${SET}_$NAME runs/s${SET}_agent/eval/agent --cluster media   # by video
    python scripts/compare_runs.py $OUT/eval${SET}_$NAME runs/s${SET}_agent/eval/prior
done
MEAN=$OUT/eval${SET}_taura_s0+$OUT/eval${SET}_taura_s1+$OUT/eval${SET}_taura_s2
python scripts/compare_runs.py --average $MEAN runs/s${SET}_agent/eval/agent   # the primary, by question
python scripts/compare_runs.py --average $MEAN runs/s${SET}_agent/eval/agent --cluster media   # and by video
python scripts/compare_runs.py $OUT/eval${SET}_taura_s0 $OUT/eval${SET}_grpo_s0 --cluster media   # TAURA - GRPO
python scripts/compare_runs.py runs/s${SET}_agent/eval/agent runs/s${SET}_agent/eval/agent_blind --cluster media
python scripts/compare_runs.py runs/s${SET}_agent/eval/agent runs/s${SET}_agent/eval/prior
# P5: seeds 1414 and 1515 pooled, the mean of seeds - SFT (a comma pools the sets' means)
python scripts/compare_runs.py --average \
    runs/rl_seeds/eval1414_taura_s0+runs/rl_seeds/eval1414_taura_s1+runs/rl_seeds/eval1414_taura_s2,$MEAN \
    runs/s1414_agent/eval/agent,runs/s${SET}_agent/eval/agent
# the earlier passes re-read by video
python scripts/compare_runs.py runs/rl_hold/eval1212_taura_hold32 runs/s1212_agent/eval/agent --cluster media
python scripts/compare_runs.py runs/rl_hold/eval1313_taura_hold32 runs/s1313_agent/eval/agent --cluster media

# blind rows (run after the primary was read; seed 1's was stopped and not run)
for ROW in taura_s0:runs/rl_hold/taura_hold taura_s2:runs/rl_seeds/taura_s2; do
    NAME=${ROW%%:*} RUN=${ROW#*:}
    heldout $RUN/final runs/s${SET}_agent/synth_blind/tasks.jsonl $OUT/eval${SET}_${NAME}_blind
    python scripts/compare_runs.py $OUT/eval${SET}_$NAME $OUT/eval${SET}_${NAME}_blind --cluster media
    python scripts/compare_runs.py $OUT/eval${SET}_${NAME}_blind runs/s${SET}_agent/eval/agent_blind
done
