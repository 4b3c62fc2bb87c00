#!/usr/bin/env bash
# Testbed capacity: attempt 5's recipe with a text model 256 wide. Page: docs/experiments/testbed-capacity.md.
# Each stage resumes where it stopped (SFT from its last checkpoint). Two jobs at a time, one thread each.
set -euo pipefail
cd "$(dirname "$0")/../../.."
source recipes/testbed/studies/common.sh

OUT=runs/testbed/capacity
DATA=runs/testbed/data
RECIPE=(--data $DATA --time-copy-steps 3000 --text-width 256)

# SFT seeds 0 and 1 from attempt 5's synthesis (copied); everything after it is rebuilt at the new width
for SEED in 0 1; do
    mkdir -p $OUT/sft_s$SEED
    [ -e $OUT/sft_s$SEED/sft_data ] || cp -r runs/testbed/attempt5/sft_s$SEED/sft_data $OUT/sft_s$SEED/
    python -m recipes.testbed --out $OUT/sft_s$SEED --seed $SEED "${RECIPE[@]}" --stages build glyphs timecopy sft &
    PIDS+=($!)
done
wait_all
# the primary: the final turn on the handover study's fresh set, paired with attempt 5's same seed
for SEED in 0 1; do
    python -m recipes.testbed.handover --set $DATA/handover5305 --model $OUT/sft_s$SEED/agent \
        --out $OUT/sft_s$SEED/handover --conditions media --last-only --versus runs/testbed/handover/attempt5_s$SEED &
    PIDS+=($!)
done
wait_all
# calibration on the development set
for SEED in 0 1; do
    python -m recipes.testbed --out $OUT/sft_s$SEED --seed $SEED "${RECIPE[@]}" --stages eval &
    PIDS+=($!)
done
wait_all
python -m recipes.testbed.calibration --eval attempt5_s0=runs/testbed/attempt5/sft_s0/eval/dev \
    --eval attempt5_s1=runs/testbed/attempt5/sft_s1/eval/dev --eval capacity_s0=$OUT/sft_s0/eval/dev \
    --eval capacity_s1=$OUT/sft_s1/eval/dev --figure docs/figures/testbed_capacity_calibration.png
