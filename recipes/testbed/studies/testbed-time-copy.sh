#!/usr/bin/env bash
# Copying the frames' times: whole-look caption training alone. Page: docs/experiments/testbed-time-copy.md.
# Needs the digit probe's rows of attempt 3 (recipes/testbed/studies/testbed-digit-reading.sh). Resumable: the
# trainer restarts from its newest checkpoint and the probe skips the rows it has. Two jobs, one thread each.
set -euo pipefail
cd "$(dirname "$0")/../../.."
source recipes/testbed/studies/common.sh

OUT=runs/testbed
SET=$OUT/data/probe5304

# two training seeds (the order of the drawn looks), from attempt 3's SFT seed 0, on looks of the glyph pool
for SEED in 0 1; do
    python -m recipes.testbed.time_copy --model $OUT/sft_s0/agent --pool $OUT/data/pool --probe-set $SET \
        --probe-rows $OUT/digit_probe/attempt3/rows.jsonl --out $OUT/time_copy/s$SEED --seed $SEED &
    PIDS+=($!)
done
wait_all
# each final checkpoint through the whole digit probe (episode and caption conditions)
for SEED in 0 1; do
    python -m recipes.testbed.digit_probe --set $SET --model $OUT/time_copy/s$SEED/final \
        --out $OUT/digit_probe/time_copy_s$SEED --conditions episode caption &
    PIDS+=($!)
done
wait_all
for SEED in 0 1; do
    python -m recipes.testbed.time_copy --model $OUT/sft_s0/agent --pool $OUT/data/pool --probe-set $SET \
        --probe-rows $OUT/digit_probe/attempt3/rows.jsonl --out $OUT/time_copy/s$SEED --summary
    python -m recipes.testbed.digit_probe --set $SET --out $OUT/digit_probe/time_copy_s$SEED --summary
done
python -m recipes.testbed.time_copy --model $OUT/sft_s0/agent --pool $OUT/data/pool --out $OUT/time_copy/s0 \
    --probe-rows $OUT/digit_probe/attempt3/rows.jsonl --summary --label "seed 0" --with "seed 1=$OUT/time_copy/s1" \
    --figure docs/figures/testbed_time_copy.png
