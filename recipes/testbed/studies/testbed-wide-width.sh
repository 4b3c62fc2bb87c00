#!/usr/bin/env bash
# Testbed wide width: the search-step warm-up at twice the width (256 x 4) on the search steps of 480 training videos,
# five seeds side by side, one thread each, to 3,600 steps with models kept at 1,200 and 2,400; against the wide long
# study's 128-wide runs at 3,600 and 7,200 steps. Each model writes the second turn after the teacher's Observation on
# fresh probes, and at 3,600 steps on the 96 recipe videos' training rows. Page: docs/experiments/testbed-wide-width.md.
# Each step is skipped once done, and a warm-up stopped part-way goes on from its saved state.
set -euo pipefail
cd "$(dirname "$0")/../../.."
source recipes/testbed/studies/common.sh

OUT=runs/testbed/wide_width
WIDE_LONG=runs/testbed/wide_long   # the 128-wide runs: at3600_s*, at7200_s*, and their turns on the training probes
BASE=runs/testbed/sft_s0           # seed 0's untrained agent, 128 wide (config and tokenizer)
BASE256=$OUT/base256               # the same agent built 256 wide from seed 0's SFT data: the same tokenizer
DATA=runs/testbed/wide_step/steps.parquet    # the 480 videos' search-step rows (3,814)
NARROW=runs/testbed/step_only/steps.parquet  # the 96 videos' search-step rows (760): the training-video probes
TRAIN_SET=runs/testbed/data/train  # their questions
SEEDS=(0 1 2 3 4)
SET=runs/testbed/data/study_5326   # the fresh set
FRESH=$OUT/fresh_teacher/sft_data/train.parquet

# the recipe's sets and seed 0's untrained agent (skipped once built)
python -m recipes.testbed --out $BASE --seed 0 --stages data synth export build

# the comparators: the wide long study's runs; where any is absent (a new machine), its script builds them again
for SEED in "${SEEDS[@]}"; do
    for N in 3600 7200; do
        [ -e $WIDE_LONG/at${N}_s$SEED/model.safetensors ] || NEED_WIDE_LONG=1
    done
done
[ -z "${NEED_WIDE_LONG:-}" ] || bash recipes/testbed/studies/testbed-wide-long.sh

# the 256-wide untrained agent, its tokenizer checked against the 128-wide one's; the fresh set, seed 5326, and the
# teacher once per question on it in field clauses
mkdir -p $BASE256
[ -e $BASE256/sft_data ] || cp -r $BASE/sft_data $BASE256/
python -m recipes.testbed --out $BASE256 --seed 0 --text-width 256 --stages build
cmp $BASE256/init/tokenizer.json $BASE/init/tokenizer.json
fresh_field_set 5326  # common.sh: SET, linked as $OUT/fresh_data/train; $OUT/fresh_teacher

# measure RUN PROBES TASKS FILE: RUN's turns on PROBES (questions TASKS) into FILE, once
measure() {
    [ -e $4 ] || python -m recipes.testbed.span_copy measure --model $1 --probes $2 --tasks $3 --train $DATA \
        --out $4 >> $1.log 2>&1
}

# compare SEED: the wide long study's 128-wide models of seed SEED at 3,600 and 7,200 steps, copied and measured on
# the fresh probes; its turns at 3,600 steps on the training-video probes (greedy, so the same as measured again)
compare() {
    for N in 3600 7200; do
        copy_model $WIDE_LONG/at${N}_s$1 $OUT/w128at${N}_s$1
        measure $OUT/w128at${N}_s$1 $FRESH $SET $OUT/w128at${N}_s$1/field_probe.json
    done
    copy_probes $WIDE_LONG/seen3600_s$1 $OUT/seen_w128at3600_s$1
}

# stage SEED STEPS [FROM]: seed SEED's 256-wide warm-up to STEPS steps (going on from the FROM folder's kept state);
# its turns on the fresh probes, and at 3,600 steps on the training-video probes
stage() {
    local run=$OUT/w256at$2_s$1 from=()
    [ -z "${3:-}" ] || from=(--start-from $3)
    [ -e $run/model.safetensors ] || python -m recipes.testbed.span_copy train --init $BASE256/init --data $DATA \
        --seed $1 --steps $2 --keep-state "${from[@]}" --out $run >> $run.log 2>&1
    measure $run $FRESH $SET $run/field_probe.json
    [ $2 != 3600 ] || measure $run $NARROW $TRAIN_SET $OUT/seen_w256at$2_s$1/field_probe.json
}
chain() {
    compare $1
    stage $1 1200
    stage $1 2400 $OUT/w256at1200_s$1
    stage $1 3600 $OUT/w256at2400_s$1
}
for SEED in "${SEEDS[@]}"; do
    chain $SEED &
    PIDS+=($!)
done
wait_all

# the analysis: every seed's rows; the primary (w256at3600 - w128at3600, span holds, t over seeds) with the floor and
# the figure; at equal compute, roughly (w256at3600 - w128at7200); the training-video probes; where the spans come from
runs_of() { for SEED in "${SEEDS[@]}"; do printf -- '--run %s_s%s\n' "$1" "$SEED"; done; }
for ARM in w256at1200 w256at2400 w256at3600 w128at3600 w128at7200; do
    python -m recipes.testbed.field_clauses score $(runs_of $OUT/$ARM) --probes $FRESH --tasks $SET
done
python -m recipes.testbed.field_clauses analyse --arm w256at3600=$OUT/w256at3600 --arm w128at3600=$OUT/w128at3600 \
    --seeds "${SEEDS[@]}" --primary w256at3600-w128at3600 --out $OUT/analysis.json \
    --figure docs/figures/testbed_wide_width.png | tee $OUT/analysis.md
python -m recipes.testbed.field_clauses analyse --arm w256at2400=$OUT/w256at2400 --arm w256at1200=$OUT/w256at1200 \
    --seeds "${SEEDS[@]}" --primary w256at2400-w256at1200 --out $OUT/analysis_steps.json | tee $OUT/analysis_steps.md
python -m recipes.testbed.field_clauses analyse --arm w256at3600=$OUT/w256at3600 --arm w128at7200=$OUT/w128at7200 \
    --seeds "${SEEDS[@]}" --primary w256at3600-w128at7200 --out $OUT/analysis_compute.json \
    | tee $OUT/analysis_compute.md
for ARM in w256at3600 w128at3600; do
    python -m recipes.testbed.field_clauses score $(runs_of $OUT/seen_$ARM) --probes $NARROW --tasks $TRAIN_SET
done
python -m recipes.testbed.field_clauses analyse --arm seen256=$OUT/seen_w256at3600 --arm seen128=$OUT/seen_w128at3600 \
    --seeds "${SEEDS[@]}" --primary seen256-seen128 --out $OUT/seen_analysis.json | tee $OUT/seen_analysis.md
SOURCES=()
for ARM in w256at3600 w128at3600; do
    for SEED in "${SEEDS[@]}"; do SOURCES+=(--run ${ARM}_s$SEED=$OUT/${ARM}_s$SEED); done
done
python -m recipes.testbed.field_clauses sources "${SOURCES[@]}" --probes $FRESH --tasks $SET | tee $OUT/sources.md

# the contrasts the page reads beside the analysis: the 256-wide runs over steps; each width's fresh against
# training-video probes; the primary on the probes whose Observation the wide rows do not hold
{
    for N in 2400 3600; do
        python -m recipes.testbed.seed_contrast --a $OUT/w256at$N --b $OUT/w256at1200 --seeds "${SEEDS[@]}"
    done
    for ARM in w256at3600 w128at3600; do
        python -m recipes.testbed.seed_contrast --a $OUT/$ARM --b $OUT/seen_$ARM --seeds "${SEEDS[@]}"
    done
    python -m recipes.testbed.seed_contrast --a $OUT/w256at3600 --b $OUT/w128at3600 --seeds "${SEEDS[@]}" --unseen-only
} | tee $OUT/contrasts.md
