#!/usr/bin/env bash
# Testbed clause shuffle: no training. The wide long study's search-step warm-ups (seeds 0-4, 7,200 and 3,600 steps)
# and the wide width study's 256-wide ones (3,600 steps) write the second turn on a fresh set's probes twice: with the
# teacher's Observation in its fixed clause order, and with its clauses shuffled so that the cue's clause moves.
# Page: docs/experiments/testbed-clause-shuffle.md. Each step is skipped once done.
set -euo pipefail
cd "$(dirname "$0")/../../.."
source recipes/testbed/studies/common.sh

OUT=runs/testbed/clause_shuffle
WIDE_LONG=runs/testbed/wide_long    # the 128-wide runs at3600_s*, at7200_s*
WIDE_WIDTH=runs/testbed/wide_width  # the 256-wide runs w256at3600_s*
DATA=runs/testbed/wide_step/steps.parquet  # the wide rows: marks the probes whose Observation they hold
SEEDS=(0 1 2 3 4)
SET=runs/testbed/data/study_5327   # the fresh set
FIXED=$OUT/fresh_teacher/sft_data/train.parquet
SHUFFLED=$OUT/shuffled.parquet

# the runs this study reads; where any is absent (a new machine), the studies that made them run again (the wide
# width script runs the wide long one first when that one's runs are absent)
for SEED in "${SEEDS[@]}"; do
    [ -e $WIDE_WIDTH/w256at3600_s$SEED/model.safetensors ] || NEED=1
    [ -e $WIDE_LONG/at7200_s$SEED/model.safetensors ] || NEED=1
    [ -e $WIDE_LONG/at3600_s$SEED/model.safetensors ] || NEED=1
done
[ -z "${NEED:-}" ] || bash recipes/testbed/studies/testbed-wide-width.sh

# the fresh set, seed 5327, and the teacher once per question on it in field clauses; its probes shuffled (seed 0)
fresh_field_set 5327  # common.sh: SET, linked as $OUT/fresh_data/train; $OUT/fresh_teacher
[ -e $SHUFFLED ] || python -m recipes.testbed.clause_shuffle make --probes $FIXED --tasks $SET --seed 0 \
    --out $SHUFFLED | tee $OUT/shuffled.log

# orders SRC ARM SEED: the model SRC copied to $OUT/fixedARM_sSEED and $OUT/shufARM_sSEED, and its turns on the
# probes in each order written there, once
orders() {
    local run
    for ORDER in fixed shuf; do
        run=$OUT/$ORDER$2_s$3
        copy_model $1 $run
        local probes=$FIXED
        [ $ORDER = fixed ] || probes=$SHUFFLED
        [ -e $run/field_probe.json ] || python -m recipes.testbed.span_copy measure --model $run --probes $probes \
            --tasks $SET --train $DATA --out $run/field_probe.json >> $run.log 2>&1
    done
}
chain() {
    orders $WIDE_LONG/at7200_s$1 7200 $1
    orders $WIDE_LONG/at3600_s$1 3600 $1
    orders $WIDE_WIDTH/w256at3600_s$1 w256 $1
}
for SEED in "${SEEDS[@]}"; do
    chain $SEED &
    PIDS+=($!)
done
wait_all

# the analysis: each arm's rows in both orders; the primary (shuf7200 - fixed7200, span holds, t over seeds) with the
# figure, then the same at 3,600 steps and for the 256-wide runs
runs_of() { for SEED in "${SEEDS[@]}"; do printf -- '--run %s_s%s\n' "$1" "$SEED"; done; }
for ARM in 7200 3600 w256; do
    python -m recipes.testbed.field_clauses score $(runs_of $OUT/fixed$ARM) --probes $FIXED --tasks $SET
    python -m recipes.testbed.field_clauses score $(runs_of $OUT/shuf$ARM) --probes $SHUFFLED --tasks $SET
done
python -m recipes.testbed.field_clauses analyse --arm shuf7200=$OUT/shuf7200 --arm fixed7200=$OUT/fixed7200 \
    --seeds "${SEEDS[@]}" --primary shuf7200-fixed7200 --out $OUT/analysis_7200.json \
    --figure docs/figures/testbed_clause_shuffle.png | tee $OUT/analysis_7200.md
for ARM in 3600 w256; do
    python -m recipes.testbed.field_clauses analyse --arm shuf$ARM=$OUT/shuf$ARM --arm fixed$ARM=$OUT/fixed$ARM \
        --seeds "${SEEDS[@]}" --primary shuf$ARM-fixed$ARM --out $OUT/analysis_$ARM.json | tee $OUT/analysis_$ARM.md
done

# which clause each shuffled turn follows (the cue's colour or its old place), and each run's field choices in both
# orders (the earliest field's share among them)
for ARM in 7200 3600 w256; do
    python -m recipes.testbed.clause_shuffle follow $(names_of $OUT/shuf$ARM) --probes $SHUFFLED --fixed $FIXED \
        --tasks $SET --json $OUT/follow_$ARM.json | tee $OUT/follow_$ARM.md
    python -m recipes.testbed.field_choice $(names_of $OUT/fixed$ARM) --probes $FIXED --tasks $SET \
        --json $OUT/choice_fixed$ARM.json > $OUT/choice_fixed$ARM.md
    python -m recipes.testbed.field_choice $(names_of $OUT/shuf$ARM) --probes $SHUFFLED --tasks $SET \
        --json $OUT/choice_shuf$ARM.json > $OUT/choice_shuf$ARM.md
done
