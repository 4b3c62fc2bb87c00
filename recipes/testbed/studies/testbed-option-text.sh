#!/usr/bin/env bash
# Testbed option text: attempt 5's agents re-trained on teacher answers that give the chosen option's text, not its
# letter (the environment scores the text as its letter). Page: docs/experiments/testbed-option-text.md.
# Each stage resumes where it stopped (SFT from its last checkpoint). Two jobs at a time, one thread each.
set -euo pipefail
cd "$(dirname "$0")/../../.."
source recipes/testbed/studies/common.sh

OUT=runs/testbed/option_text
DATA=runs/testbed/data
RECIPE=(--data $DATA --time-copy-steps 3000 --option-text 1)

# SFT seeds 0 and 1 start from attempt 5's time-copy output of that seed, with its tokenizer (copied); only the
# synthesis is new (the same teacher episodes, answers by the option's text), then SFT
for SEED in 0 1; do
    mkdir -p $OUT/sft_s$SEED
    for PART in init init_glyphs glyphs.json timecopy; do
        [ -e $OUT/sft_s$SEED/$PART ] || cp -r runs/testbed/attempt5/sft_s$SEED/$PART $OUT/sft_s$SEED/
    done
    python -m recipes.testbed --out $OUT/sft_s$SEED --seed $SEED "${RECIPE[@]}" --stages synth export build sft &
    PIDS+=($!)
done
wait_all
# the syntheses differ from attempt 5's in the answer's form only
for SEED in 0 1; do
    python -m recipes.testbed.option_text --kept runs/testbed/attempt5/sft_s$SEED/sft_data/kept.jsonl \
        $OUT/sft_s$SEED/sft_data/kept.jsonl | tee $OUT/sft_s$SEED/kept_form.json
done
# the primary: the final turn on the handover study's fresh set, paired with attempt 5's same seed
for SEED in 0 1; do
    python -m recipes.testbed.handover --set $DATA/handover5305 --model $OUT/sft_s$SEED/agent \
        --out $OUT/sft_s$SEED/handover --conditions media --last-only --option-text 1 \
        --versus runs/testbed/handover/attempt5_s$SEED &
    PIDS+=($!)
done
wait_all
# the final turn's links, and the text agent minus the echo agent of the same seed (exploratory)
for SEED in 0 1; do
    python -m recipes.testbed.option_text --rows $OUT/sft_s$SEED/handover/rows.jsonl --set $DATA/handover5305 \
        | tee $OUT/sft_s$SEED/handover/links.json
    python -m recipes.testbed.handover --set $DATA/handover5305 --out $OUT/sft_s$SEED/handover --summary \
        --versus runs/testbed/option_echo/sft_s$SEED/handover --versus-name versus_echo.json
done
# calibration on the development set
for SEED in 0 1; do
    python -m recipes.testbed --out $OUT/sft_s$SEED --seed $SEED "${RECIPE[@]}" --stages eval &
    PIDS+=($!)
done
wait_all
python -m recipes.testbed.calibration --eval attempt5_s0=runs/testbed/attempt5/sft_s0/eval/dev \
    --eval attempt5_s1=runs/testbed/attempt5/sft_s1/eval/dev --eval text_s0=$OUT/sft_s0/eval/dev \
    --eval text_s1=$OUT/sft_s1/eval/dev --figure docs/figures/testbed_option_text_calibration.png
