#!/usr/bin/env bash
# A policy that never looks: the `prior` policy (the training set's best constant answer for questions worded
# alike) on the held-out sets 1111-1414, against SFT and the RL policies. No training, no model: seconds a set.
# Page: docs/experiments/prior-floor.md. Needs the sets and rows of rl-hold-answer.sh, rl-32-iterations.sh and
# rl-three-seeds-fresh.sh (the recipe's eval stage now writes the prior row itself as eval/prior).
set -euo pipefail

SETS="1111 1212 1313 1414"

cd "$(dirname "$0")/../../.."
source recipes/tiny_agent/studies/common.sh

for SET in $SETS; do
    python scripts/eval.py unfreeze=true benchmark.dataset=tasks \
        benchmark.annotations=runs/s${SET}_agent/synth_eval/tasks.jsonl benchmark.name=tiny-heldout \
        policy.name=prior out_dir=runs/s${SET}_agent/eval/prior workers=1 progress=false \
        overlap_guard.train_set=$SHIP/synth_train/tasks.jsonl +policy.kwargs.train_tasks=$SHIP/synth_train/tasks.jsonl \
        "${LIMITS[@]}"
    python scripts/compare_runs.py runs/s${SET}_agent/eval/agent runs/s${SET}_agent/eval/prior   # SFT - prior, by type
done
for ROW in runs/rl_hold/eval1212_taura_hold32 runs/rl_hold/eval1212_grpo_kl32 runs/rl_hold/eval1313_taura_hold32; do
    SET=$(basename $ROW | sed 's/^eval\([0-9]*\)_.*/\1/')
    python scripts/compare_runs.py $ROW runs/s${SET}_agent/eval/prior
done
for ROW in runs/rl_seeds/eval1414_taura_s0 runs/rl_seeds/eval1414_taura_s1 runs/rl_seeds/eval1414_taura_s2 \
    runs/rl_seeds/eval1414_grpo_s0; do
    python scripts/compare_runs.py $ROW runs/s1414_agent/eval/prior
done
