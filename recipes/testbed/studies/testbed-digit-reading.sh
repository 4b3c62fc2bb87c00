#!/usr/bin/env bash
# Where the testbed agent's digit reading breaks. Page: docs/experiments/testbed-digit-reading.md.
# Forced looks of 1, 2, 4 and 8 frames inside the cued field, on a fresh set (seed 5304). Resumable: the probe
# appends its rows as they finish and skips those already written. Two jobs at a time, one thread each.
set -euo pipefail
cd "$(dirname "$0")/../../.."
source recipes/testbed/studies/common.sh

OUT=runs/testbed
SET=$OUT/data/probe5304

# the fresh set (48 videos, 192 cue_digit questions) and its blanked copy
python -m recipes.testbed.digit_probe --make-set 5304 --videos 48 --set $SET --out $OUT/digit_probe/attempt3 --summary
# attempt 3's SFT seed 0 (the testbed study's last agent): every condition
python -m recipes.testbed.digit_probe --set $SET --model $OUT/sft_s0/agent --out $OUT/digit_probe/attempt3 &
    PIDS+=($!)
# attempt 2's agent (no caption batches): the episode condition only
python -m recipes.testbed.digit_probe --set $SET --model $OUT/attempt2/sft_s0/agent \
    --out $OUT/digit_probe/attempt2 --conditions episode &
    PIDS+=($!)
wait_all
python -m recipes.testbed.digit_probe --set $SET --out $OUT/digit_probe/attempt3 --summary --label "attempt 3" \
    --with "attempt 2=$OUT/digit_probe/attempt2" --figure docs/figures/testbed_digit_reading.png
python -m recipes.testbed.digit_probe --set $SET --out $OUT/digit_probe/attempt2 --summary
