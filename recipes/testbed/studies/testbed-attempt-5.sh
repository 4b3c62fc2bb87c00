#!/usr/bin/env bash
# Testbed agent, attempt 5: attempt 3's recipe with a time-copy stage before SFT. Page:
# docs/experiments/testbed-attempt-5.md (attempt 4 without its start rule).
# Each stage resumes where it stopped. Two jobs at a time, one thread each.
set -euo pipefail
cd "$(dirname "$0")/../../.."
source recipes/testbed/studies/common.sh

OUT=runs/testbed/attempt5
DATA=runs/testbed/data

# SFT seeds 0 and 1 from attempt 3's synthesis, tokenizer and glyph stage (copied, not rebuilt)
for SEED in 0 1; do
    mkdir -p $OUT/sft_s$SEED
    for PART in sft_data init init_glyphs glyphs.json turn_tokens.json; do
        [ -e $OUT/sft_s$SEED/$PART ] || cp -r runs/testbed/sft_s$SEED/$PART $OUT/sft_s$SEED/
    done
    python -m recipes.testbed --out $OUT/sft_s$SEED --data $DATA --seed $SEED --time-copy-steps 3000 \
        --stages timecopy sft &
    PIDS+=($!)
done
wait_all
# calibration on the development set, then the digit probe of each agent (episode condition)
for SEED in 0 1; do
    python -m recipes.testbed --out $OUT/sft_s$SEED --data $DATA --seed $SEED --time-copy-steps 3000 --stages eval &
    PIDS+=($!)
done
wait_all
for SEED in 0 1; do
    python -m recipes.testbed.digit_probe --set $DATA/probe5304 --model $OUT/sft_s$SEED/agent \
        --out runs/testbed/digit_probe/attempt5_s$SEED --conditions episode &
    PIDS+=($!)
done
wait_all
python -m recipes.testbed.calibration --eval attempt3=runs/testbed/sft_s0/eval/dev \
    --eval attempt5_s0=$OUT/sft_s0/eval/dev --eval attempt5_s1=$OUT/sft_s1/eval/dev \
    --figure docs/figures/testbed_attempt5_calibration.png
python -m recipes.testbed.digit_probe --set $DATA/probe5304 --out runs/testbed/digit_probe/attempt5_s0 --summary \
    --label "attempt 5, seed 0" --with "attempt 5, seed 1=runs/testbed/digit_probe/attempt5_s1" \
    "attempt 3=runs/testbed/digit_probe/attempt3" --figure docs/figures/testbed_attempt5_digits.png
