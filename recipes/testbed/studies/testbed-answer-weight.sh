#!/usr/bin/env bash
# Testbed answer weight: the option-text agents re-trained with their answer action's tokens weighing 10 in the SFT
# loss (text warm-up and full SFT). Page: docs/experiments/testbed-answer-weight.md.
# Each stage resumes where it stopped (SFT from its last checkpoint). Two jobs at a time, one thread each.
set -euo pipefail
cd "$(dirname "$0")/../../.."
source recipes/testbed/studies/common.sh

OUT=runs/testbed/answer_weight
DATA=runs/testbed/data
RECIPE=(--data $DATA --time-copy-steps 3000 --option-text 1 --answer-weight 10)

# SFT seeds 0 and 1 start from attempt 5's time-copy output of that seed, with its tokenizer, and train on the option
# text study's SFT data of that seed (copied: the same rows, byte for byte); only the loss differs
for SEED in 0 1; do
    mkdir -p $OUT/sft_s$SEED/sft_data
    for PART in init init_glyphs glyphs.json timecopy; do
        [ -e $OUT/sft_s$SEED/$PART ] || cp -r runs/testbed/attempt5/sft_s$SEED/$PART $OUT/sft_s$SEED/
    done
    for PART in kept.jsonl summary.json train.parquet; do
        [ -e $OUT/sft_s$SEED/sft_data/$PART ] || cp runs/testbed/option_text/sft_s$SEED/sft_data/$PART $OUT/sft_s$SEED/sft_data/
    done
    cmp $OUT/sft_s$SEED/sft_data/train.parquet runs/testbed/option_text/sft_s$SEED/sft_data/train.parquet
    python -m recipes.testbed --out $OUT/sft_s$SEED --seed $SEED "${RECIPE[@]}" --stages synth export build sft &
    PIDS+=($!)
done
wait_all
# the primary: the final turn on the handover study's fresh set, paired with the option text agent of the same seed
for SEED in 0 1; do
    python -m recipes.testbed.handover --set $DATA/handover5305 --model $OUT/sft_s$SEED/agent \
        --out $OUT/sft_s$SEED/handover --conditions media --last-only --option-text 1 \
        --versus runs/testbed/option_text/sft_s$SEED/handover &
    PIDS+=($!)
done
wait_all
# the final turn's links, and the weighted agent minus attempt 5's agent of the same seed (secondary)
for SEED in 0 1; do
    python -m recipes.testbed.option_text --rows $OUT/sft_s$SEED/handover/rows.jsonl --set $DATA/handover5305 \
        | tee $OUT/sft_s$SEED/handover/links.json
    python -m recipes.testbed.handover --set $DATA/handover5305 --out $OUT/sft_s$SEED/handover --summary \
        --versus runs/testbed/handover/attempt5_s$SEED --versus-name versus_attempt5.json
done
# calibration on the development set
for SEED in 0 1; do
    python -m recipes.testbed --out $OUT/sft_s$SEED --seed $SEED "${RECIPE[@]}" --stages eval &
    PIDS+=($!)
done
wait_all
python -m recipes.testbed.calibration --eval text_s0=runs/testbed/option_text/sft_s0/eval/dev \
    --eval text_s1=runs/testbed/option_text/sft_s1/eval/dev --eval weighted_s0=$OUT/sft_s0/eval/dev \
    --eval weighted_s1=$OUT/sft_s1/eval/dev --figure docs/figures/testbed_answer_weight_calibration.png
