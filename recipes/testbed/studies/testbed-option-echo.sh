#!/usr/bin/env bash
# Testbed option echo: attempt 5's agents re-trained on teacher answers that write the chosen option's text right
# before its letter. Page: docs/experiments/testbed-option-echo.md.
# Each stage resumes where it stopped (SFT from its last checkpoint). Two jobs at a time, one thread each.
set -euo pipefail
cd "$(dirname "$0")/../../.."
source recipes/testbed/studies/common.sh

OUT=runs/testbed/option_echo
DATA=runs/testbed/data
RECIPE=(--data $DATA --time-copy-steps 3000 --option-echo 1)

# SFT seeds 0 and 1 start from attempt 5's time-copy output of that seed, with its tokenizer (copied); only the
# synthesis is new (the same teacher episodes, answer Thoughts with the option's text), then SFT
for SEED in 0 1; do
    mkdir -p $OUT/sft_s$SEED
    for PART in init init_glyphs glyphs.json timecopy; do
        [ -e $OUT/sft_s$SEED/$PART ] || cp -r runs/testbed/attempt5/sft_s$SEED/$PART $OUT/sft_s$SEED/
    done
    python -m recipes.testbed --out $OUT/sft_s$SEED --seed $SEED "${RECIPE[@]}" --stages synth export build sft &
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
    --eval attempt5_s1=runs/testbed/attempt5/sft_s1/eval/dev --eval echo_s0=$OUT/sft_s0/eval/dev \
    --eval echo_s1=$OUT/sft_s1/eval/dev --figure docs/figures/testbed_option_echo_calibration.png
