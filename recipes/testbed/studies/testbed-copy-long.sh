#!/usr/bin/env bash
# Testbed copy long: the copy settings arm's settings (64 turns a step, a 45-step warm-up of the rate, a cosine decay)
# run four times as long, 3,600 steps, seeds 0-4 afresh; the copy settings arm (900 steps) reused as the control and
# paired by seed; both measured on fresh probes (seed 4). Page: docs/experiments/testbed-copy-long.md.
# Each step is skipped once done, and a warm-up stopped part-way goes on from its saved state.
set -euo pipefail
cd "$(dirname "$0")/../../.."
source recipes/testbed/studies/common.sh

OUT=runs/testbed/copy_long
TASK=runs/testbed/copy_task       # the copy task study's rows
SHORT=runs/testbed/copy_settings  # the copy settings study's runs (the control)
BASE=runs/testbed/sft_s0          # seed 0's untrained agent (config and tokenizer)
SEEDS=(0 1 2 3 4)

# the control's runs (the copy settings study, skipped once done); the fresh probes (seed 4) in the spaced form
for SEED in "${SEEDS[@]}"; do
    [ -e $SHORT/settings_s$SEED/model.safetensors ] || bash recipes/testbed/studies/testbed-copy-settings.sh
done
mkdir -p $OUT
[ -e $OUT/probes.parquet ] || python -m recipes.testbed.copy_task make --rows 256 --seed 4 --spaced \
    --out $OUT/probes.parquet

# chain SEED: the control's model copied here and measured; the arm's warm-up of seed SEED, measured
chain() {
    copy_pair $1 $SHORT/settings_s$1 $OUT/short_s$1 $OUT/long_s$1 --steps 3600 --batch-size 64 --lr-warmup 45 --cosine
}
for SEED in "${SEEDS[@]}"; do
    chain $SEED &
    PIDS+=($!)
done
wait_all

# the analysis: each arm (exact copy, cue lean, end loss) and where each end of its spans comes from; the primary
# (long - short, paired by seed) with its figure; both arms' loss curves on one axis of turns seen
copy_analysis long short testbed_copy_long "copy long: warm-up loss against turns seen"
