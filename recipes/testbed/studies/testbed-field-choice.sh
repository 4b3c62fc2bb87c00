#!/usr/bin/env bash
# Testbed field choice: no training. Of the wide long study's search-step warm-ups' wrong-field choices on its fresh
# set 5325 (seeds 0-4, 3,600 and 7,200 steps pooled per seed), the share that land on the cue's clause neighbour minus
# chance, t over seeds; the same in time, each length alone, every run's tables, the wide width study's 256-wide runs
# (measured on set 5325 here) and set 5326's arms beside them. Page: docs/experiments/testbed-field-choice.md.
set -euo pipefail
cd "$(dirname "$0")/../../.."
source recipes/testbed/studies/common.sh

OUT=runs/testbed/field_choice
WIDE_LONG=runs/testbed/wide_long    # the 128-wide runs at3600_s*, at7200_s*, with their turns on set 5325
WIDE_WIDTH=runs/testbed/wide_width  # the 256-wide runs w256at*_s* and every arm's turns on set 5326
DATA=runs/testbed/wide_step/steps.parquet  # the wide rows: marks the probes whose Observation they hold
SEEDS=(0 1 2 3 4)
SET=runs/testbed/data/study_5325
FRESH=$WIDE_LONG/fresh_teacher/sft_data/train.parquet
SET2=runs/testbed/data/study_5326
FRESH2=$WIDE_WIDTH/fresh_teacher/sft_data/train.parquet

# the runs this study reads; where any is absent (a new machine), the study that made it runs again (the wide width
# script runs the wide long one first when that one's runs are absent)
for SEED in "${SEEDS[@]}"; do
    [ -e $WIDE_WIDTH/w256at3600_s$SEED/field_probe.json ] || NEED_WIDE_WIDTH=1
done
[ -z "${NEED_WIDE_WIDTH:-}" ] || bash recipes/testbed/studies/testbed-wide-width.sh
mkdir -p $OUT

# the 256-wide warm-ups at 3,600 steps write their turns on set 5325's probes (greedy, as the 128-wide runs did)
for SEED in "${SEEDS[@]}"; do
    RUN=$OUT/w256at3600_s$SEED
    mkdir -p $RUN
    [ -e $RUN/field_probe.json ] || python -m recipes.testbed.span_copy measure \
        --model $WIDE_WIDTH/w256at3600_s$SEED --probes $FRESH --tasks $SET --train $DATA \
        --out $RUN/field_probe.json >> $RUN.log 2>&1
done

# choose OUT FIGURE PROBES TASKS PREFIX...: the field_choice command on PROBES (questions TASKS), one name per seed
# ("sN") pooling the runs PREFIX_sN; its markdown into OUT.md, its leans into OUT.json, its figure into FIGURE ("-":
# none)
choose() {
    local out=$1 probes=$3 tasks=$4 fig=() runs=()
    [ "$2" = - ] || fig=(--figure $2 --title "wrong-field choices on set 5325, 3,600 and 7,200 steps pooled")
    shift 4
    for SEED in "${SEEDS[@]}"; do
        for PREFIX in "$@"; do runs+=(--run s$SEED=${PREFIX}_s$SEED); done
    done
    python -m recipes.testbed.field_choice "${runs[@]}" --probes $probes --tasks $tasks --json $out.json "${fig[@]}" \
        | tee $out.md
}

# the primary: each seed's choices at both lengths pooled, with the figure; then each length alone
choose $OUT/primary docs/figures/testbed_field_choice.png $FRESH $SET $WIDE_LONG/at3600 $WIDE_LONG/at7200
for N in 3600 7200; do
    choose $OUT/at$N - $FRESH $SET $WIDE_LONG/at$N
done
# the 256-wide runs on set 5325, then every arm of the wide width study on its set 5326
choose $OUT/w256at3600 - $FRESH $SET $OUT/w256at3600
for ARM in w128at3600 w128at7200 w256at1200 w256at2400 w256at3600; do
    choose $OUT/set5326_$ARM - $FRESH2 $SET2 $WIDE_WIDTH/$ARM
done
