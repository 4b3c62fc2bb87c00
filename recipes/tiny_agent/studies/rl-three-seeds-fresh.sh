#!/usr/bin/env bash
# Batch 13, pre-registered: the held TAURA recipe (32 iterations, KL anchor, answer turns held) from two more
# training seeds, beside batch 12's seed 0, tested on a fresh set, seed 1414 (16 videos, 368 tasks); primary: the
# mean over the three seeds - SFT. Page: docs/experiments/rl-three-seeds-fresh.md.
# Needs runs/rl_hold (rl-hold-answer.sh, rl-32-iterations.sh).
set -euo pipefail

SET=1414
VIDEOS=16
OUT=runs/rl_seeds

cd "$(dirname "$0")/../../.."
source recipes/tiny_agent/studies/common.sh

seed1() { train $OUT/taura_s1 "${HELD[@]}" local.seed=1; }
seed2() { train $OUT/taura_s2 "${HELD[@]}" local.seed=2; }
in_parallel seed1 seed2
python -m recipes.tiny_agent.plot_runs $OUT/taura_s{1,2} runs/rl_hold/taura_hold --out docs/figures/rl_seeds_runs.png

copy_agent runs/s${SET}_agent
python -m recipes.tiny_agent --out runs/s${SET}_agent --eval-seed $SET --eval-videos $VIDEOS --stages eval --eval-jobs 2
for ROW in taura_s0:runs/rl_hold/taura_hold taura_s1:$OUT/taura_s1 taura_s2:$OUT/taura_s2 grpo_s0:runs/rl_hold/grpo_kl; do
    NAME=${ROW%%:*} RUN=${ROW#*:}
    media_and_blind $RUN/final runs/s${SET}_agent $OUT/eval${SET}_$NAME
    python scripts/compare_runs.py $OUT/eval${SET}_$NAME runs/s${SET}_agent/eval/agent   # one seed - SFT, by type
    python scripts/compare_runs.py $OUT/eval${SET}_$NAME $OUT/eval${SET}_${NAME}_blind   # media - blind
    python scripts/compare_runs.py $OUT/eval${SET}_${NAME}_blind runs/s${SET}_agent/eval/agent_blind   # the prior
    python scripts/compare_runs.py $OUT/eval${SET}_$NAME runs/s${SET}_agent/eval/prior   # - prior
done
python scripts/compare_runs.py --average $OUT/eval${SET}_taura_s0+$OUT/eval${SET}_taura_s1+$OUT/eval${SET}_taura_s2 \
    runs/s${SET}_agent/eval/agent   # the primary: the mean of the three seeds - SFT
python scripts/compare_runs.py $OUT/eval${SET}_taura_s0 $OUT/eval${SET}_grpo_s0   # TAURA - GRPO, seed 0 each
python scripts/compare_runs.py runs/s${SET}_agent/eval/agent runs/s${SET}_agent/eval/prior
training_ends $OUT/taura_s1 $OUT/taura_s2   # ref_kl
answers_by_category runs/s${SET}_agent/eval/agent_blind $OUT/eval${SET}_taura_s{0,1,2}_blind
