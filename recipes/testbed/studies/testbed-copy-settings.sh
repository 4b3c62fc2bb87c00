#!/usr/bin/env bash
# Testbed copy settings: the text warm-up on the copy task's spaced rows at 64 turns a step, a linear warm-up of the
# learning rate over 45 steps and a cosine decay, 900 steps (the same 57,600 turns as the copy task's spaced3600 runs,
# reused as the control and paired by seed); five seeds side by side, one thread each; both arms measured on fresh
# probes (seed 3). Page: docs/experiments/testbed-copy-settings.md.
# Each step is skipped once done, and a warm-up stopped part-way goes on from its saved state.
set -euo pipefail
cd "$(dirname "$0")/../../.."
source recipes/testbed/studies/common.sh

OUT=runs/testbed/copy_settings
TASK=runs/testbed/copy_task   # the copy task study's rows and spaced3600 runs (the control)
BASE=runs/testbed/sft_s0      # seed 0's untrained agent (config and tokenizer)
SEEDS=(0 1 2 3 4)

# the control's runs (the copy task study, skipped once done); the fresh probes (seed 3) in the spaced form
for SEED in "${SEEDS[@]}"; do
    [ -e $TASK/spaced3600_s$SEED/model.safetensors ] || bash recipes/testbed/studies/testbed-copy-task.sh
done
mkdir -p $OUT
[ -e $OUT/probes.parquet ] || python -m recipes.testbed.copy_task make --rows 256 --seed 3 --spaced \
    --out $OUT/probes.parquet

# chain SEED: the control's model copied here and measured; the arm's warm-up of seed SEED, measured
chain() {
    copy_pair $1 $TASK/spaced3600_s$1 $OUT/control_s$1 $OUT/settings_s$1 --steps 900 --batch-size 64 --lr-warmup 45 --cosine
}
for SEED in "${SEEDS[@]}"; do
    chain $SEED &
    PIDS+=($!)
done
wait_all

# the analysis: each arm (exact copy, cue lean, end loss) and where each end of its spans comes from; the primary
# (settings - control, paired by seed) with its figure; and, exploratory, added after the result: both arms' loss
# curves on one axis of turns seen, and where each first fell below 0.1
copy_analysis settings control testbed_copy_settings "copy settings: warm-up loss against turns seen"
