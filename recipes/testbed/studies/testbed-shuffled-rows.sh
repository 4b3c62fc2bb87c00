#!/usr/bin/env bash
# Testbed shuffled rows: the search-step warm-up (128 x 4) on the wide rows with each row's clause order drawn at
# random, five seeds side by side, one thread each, to 3,600 steps with models kept at 1,200 and 2,400; against the
# wide long study's fixed-order runs at 3,600 steps. Each model writes the second turn on a fresh set's probes in the
# teacher's fixed clause order and shuffled. Page: docs/experiments/testbed-shuffled-rows.md.
# Each step is skipped once done, and a warm-up stopped part-way goes on from its saved state.
# Folders: $OUT/<arm>_s<seed> hold a run's turns on the fixed-order probes, $OUT/<arm>x_s<seed> on the shuffled ones.
set -euo pipefail
cd "$(dirname "$0")/../../.."
source recipes/testbed/studies/common.sh

OUT=runs/testbed/shuffled_rows
WIDE_LONG=runs/testbed/wide_long   # the fixed-order runs: at3600_s*
BASE=runs/testbed/sft_s0           # seed 0's untrained agent (config and tokenizer)
WIDE=runs/testbed/wide_step/steps.parquet  # the 480 videos' search-step rows (3,814), clauses in the fixed order
ROWS=$OUT/rows.parquet             # the same rows, each one's clauses in an order drawn for it
SEEDS=(0 1 2 3 4)
SET=runs/testbed/data/study_5328   # the fresh set
FIXED=$OUT/fresh_teacher/sft_data/train.parquet
SHUFFLED=$OUT/shuffled.parquet

# the recipe's sets and seed 0's untrained agent (skipped once built); the fixed-order runs, built again by their
# study's script where any is absent (a new machine)
python -m recipes.testbed --out $BASE --seed 0 --stages data synth export build
for SEED in "${SEEDS[@]}"; do
    [ -e $WIDE_LONG/at3600_s$SEED/model.safetensors ] || NEED_WIDE_LONG=1
done
[ -z "${NEED_WIDE_LONG:-}" ] || bash recipes/testbed/studies/testbed-wide-long.sh

# the shuffled rows (seed 1); the fresh set, seed 5328, the teacher once per question on it, its probes shuffled
# so that the cue's clause moves (seed 0)
mkdir -p $OUT
[ -e $ROWS ] || python -m recipes.testbed.clause_shuffle make --probes $WIDE --all-rows --seed 1 --out $ROWS \
    | tee $OUT/rows.log
fresh_field_set 5328  # common.sh: SET, linked as $OUT/fresh_data/train; $OUT/fresh_teacher
[ -e $SHUFFLED ] || python -m recipes.testbed.clause_shuffle make --probes $FIXED --tasks $SET --seed 0 \
    --out $SHUFFLED | tee $OUT/shuffled.log

# stage SEED STEPS [FROM]: seed SEED's warm-up on the shuffled rows to STEPS steps (going on from the FROM folder's
# kept state), measured in both orders
stage() {
    local run=$OUT/shufrows$2_s$1 from=()
    [ -z "${3:-}" ] || from=(--start-from $3)
    [ -e $run/model.safetensors ] || python -m recipes.testbed.span_copy train --init $BASE/init --data $ROWS \
        --seed $1 --steps $2 --keep-state "${from[@]}" --out $run >> $run.log 2>&1
    measure_orders $run shufrows$2_s$1 $ROWS
}
chain() {
    copy_model $WIDE_LONG/at3600_s$1 $OUT/fixedrows_s$1
    measure_orders $OUT/fixedrows_s$1 fixedrows_s$1 $WIDE
    stage $1 1200
    stage $1 2400 $OUT/shufrows1200_s$1
    stage $1 3600 $OUT/shufrows2400_s$1
}
for SEED in "${SEEDS[@]}"; do
    chain $SEED &
    PIDS+=($!)
done
wait_all

# the analysis: each arm's rows; the primary (shufrows3600 - fixedrows on the fixed-order probes, span holds, t over
# seeds) with the figure; the same on the shuffled probes; the shorter warm-ups' rows in both orders
runs_of() { for SEED in "${SEEDS[@]}"; do printf -- '--run %s_s%s\n' "$1" "$SEED"; done; }
for ARM in fixedrows shufrows1200 shufrows2400 shufrows3600; do
    python -m recipes.testbed.field_clauses score $(runs_of $OUT/$ARM) --probes $FIXED --tasks $SET
    python -m recipes.testbed.field_clauses score $(runs_of $OUT/${ARM}x) --probes $SHUFFLED --tasks $SET
done
python -m recipes.testbed.field_clauses analyse --arm shufrows=$OUT/shufrows3600 --arm fixedrows=$OUT/fixedrows \
    --seeds "${SEEDS[@]}" --primary shufrows-fixedrows --out $OUT/analysis.json \
    --figure docs/figures/testbed_shuffled_rows.png | tee $OUT/analysis.md
python -m recipes.testbed.field_clauses analyse --arm shufrowsx=$OUT/shufrows3600x --arm fixedrowsx=$OUT/fixedrowsx \
    --seeds "${SEEDS[@]}" --primary shufrowsx-fixedrowsx --out $OUT/analysis_shuffled.json \
    | tee $OUT/analysis_shuffled.md
for N in 1200 2400; do
    python -m recipes.testbed.field_clauses analyse --arm at$N=$OUT/shufrows$N --arm at${N}x=$OUT/shufrows${N}x \
        --seeds "${SEEDS[@]}" --primary at${N}x-at$N --out $OUT/analysis_$N.json | tee $OUT/analysis_$N.md
done

# each run's own order contrast (shuffled - fixed, per seed); which clause the shuffled turns follow (the place lean);
# each arm's field choices on the fixed-order probes
{
    for ARM in shufrows3600 fixedrows; do
        python -m recipes.testbed.seed_contrast --a $OUT/${ARM}x --b $OUT/$ARM --seeds "${SEEDS[@]}"
    done
} | tee $OUT/contrasts.md
for ARM in shufrows1200 shufrows2400 shufrows3600 fixedrows; do
    python -m recipes.testbed.clause_shuffle follow $(names_of $OUT/${ARM}x) --probes $SHUFFLED --fixed $FIXED \
        --tasks $SET --json $OUT/follow_$ARM.json | tee $OUT/follow_$ARM.md
done
for ARM in shufrows3600 fixedrows; do
    python -m recipes.testbed.field_choice $(names_of $OUT/$ARM) --probes $FIXED --tasks $SET \
        --json $OUT/choice_$ARM.json > $OUT/choice_$ARM.md
done
