#!/usr/bin/env bash
# Testbed shuffled long: the shuffled-rows warm-ups (128 x 4, five seeds side by side, one thread each) run on from
# their kept states at 3,600 steps to 7,200, with models kept at 5,400; each model, the 3,600-step ones and the wide
# long study's fixed-order runs at 7,200 steps write the second turn on a fresh set's probes in the teacher's fixed
# clause order and shuffled. Page: docs/experiments/testbed-shuffled-long.md.
# Each step is skipped once done, and a warm-up stopped part-way goes on from its saved state.
# Folders: $OUT/<arm>_s<seed> hold a run's turns on the fixed-order probes, $OUT/<arm>x_s<seed> on the shuffled ones.
set -euo pipefail
cd "$(dirname "$0")/../../.."
source recipes/testbed/studies/common.sh

OUT=runs/testbed/shuffled_long
PREV=runs/testbed/shuffled_rows    # the shuffled-rows runs: shufrows3600_s* with their kept states
WIDE_LONG=runs/testbed/wide_long   # the fixed-order runs: at7200_s*
BASE=runs/testbed/sft_s0           # seed 0's untrained agent (config and tokenizer)
ROWS=$PREV/rows.parquet            # the wide rows, each one's clauses in an order drawn for it
SEEDS=(0 1 2 3 4)
SET=runs/testbed/data/study_5329   # the fresh set
FIXED=$OUT/fresh_teacher/sft_data/train.parquet
SHUFFLED=$OUT/shuffled.parquet

# the runs this study goes on from, built again by their studies' scripts where any is absent (a new machine)
for SEED in "${SEEDS[@]}"; do
    [ -e $PREV/shufrows3600_s$SEED.state.pt ] || NEED_PREV=1
    [ -e $WIDE_LONG/at7200_s$SEED/model.safetensors ] || NEED_WIDE_LONG=1
done
[ -z "${NEED_WIDE_LONG:-}" ] || bash recipes/testbed/studies/testbed-wide-long.sh
[ -z "${NEED_PREV:-}" ] || bash recipes/testbed/studies/testbed-shuffled-rows.sh

# the fresh set, seed 5329, the teacher once per question on it, its probes shuffled so that the cue's clause moves
mkdir -p $OUT
fresh_field_set 5329  # common.sh: SET, linked as $OUT/fresh_data/train; $OUT/fresh_teacher
[ -e $SHUFFLED ] || python -m recipes.testbed.clause_shuffle make --probes $FIXED --tasks $SET --seed 0 \
    --out $SHUFFLED | tee $OUT/shuffled.log

# stage SEED STEPS FROM: seed SEED's warm-up on the shuffled rows to STEPS steps, going on from the FROM folder's kept
# state, measured in both orders
stage() {
    local run=$OUT/shuf$2_s$1
    [ -e $run/model.safetensors ] || python -m recipes.testbed.span_copy train --init $BASE/init --data $ROWS \
        --seed $1 --steps $2 --keep-state --start-from $3 --out $run >> $run.log 2>&1
    measure_orders $run shuf$2_s$1 $ROWS
}
chain() {
    copy_model $PREV/shufrows3600_s$1 $OUT/shuf3600_s$1
    measure_orders $OUT/shuf3600_s$1 shuf3600_s$1 $ROWS
    copy_model $WIDE_LONG/at7200_s$1 $OUT/fixed7200_s$1
    measure_orders $OUT/fixed7200_s$1 fixed7200_s$1 runs/testbed/wide_step/steps.parquet
    stage $1 5400 $PREV/shufrows3600_s$1
    stage $1 7200 $OUT/shuf5400_s$1
}
for SEED in "${SEEDS[@]}"; do
    chain $SEED &
    PIDS+=($!)
done
wait_all

# the primary: each seed's cue lean on the fixed-order probes at 7,200 steps (the cue's share of its field choices
# minus chance), t over seeds, with the figure; the same at 3,600 and 5,400, the change from 3,600, the reference
for ARM in shuf3600 shuf5400 fixed7200; do
    python -m recipes.testbed.field_choice $(names_of $OUT/$ARM) --probes $FIXED --tasks $SET \
        --json $OUT/choice_$ARM.json > $OUT/choice_$ARM.md
done
python -m recipes.testbed.field_choice $(names_of $OUT/shuf7200) --probes $FIXED --tasks $SET \
    --base $OUT/choice_shuf3600.json --json $OUT/choice_shuf7200.json \
    --cue-figure docs/figures/testbed_shuffled_long.png \
    --cue-title "shuffled rows, 7,200 steps: the cue's share − chance" \
    > $OUT/choice_shuf7200.md

# span holds: each arm's rows in both orders; 7,200 − 3,600 steps on each order (paired, t and two-level bootstrap);
# 5,400 steps and the reference, shuffled − fixed
runs_of() { for SEED in "${SEEDS[@]}"; do printf -- '--run %s_s%s\n' "$1" "$SEED"; done; }
for ARM in shuf3600 shuf5400 shuf7200 fixed7200; do
    python -m recipes.testbed.field_clauses score $(runs_of $OUT/$ARM) --probes $FIXED --tasks $SET
    python -m recipes.testbed.field_clauses score $(runs_of $OUT/${ARM}x) --probes $SHUFFLED --tasks $SET
done
python -m recipes.testbed.field_clauses analyse --arm shuf7200=$OUT/shuf7200 --arm shuf3600=$OUT/shuf3600 \
    --seeds "${SEEDS[@]}" --primary shuf7200-shuf3600 --out $OUT/analysis.json | tee $OUT/analysis.md
python -m recipes.testbed.field_clauses analyse --arm shuf7200x=$OUT/shuf7200x --arm shuf3600x=$OUT/shuf3600x \
    --seeds "${SEEDS[@]}" --primary shuf7200x-shuf3600x --out $OUT/analysis_shuffled.json \
    | tee $OUT/analysis_shuffled.md
python -m recipes.testbed.field_clauses analyse --arm at5400=$OUT/shuf5400 --arm at5400x=$OUT/shuf5400x \
    --seeds "${SEEDS[@]}" --primary at5400x-at5400 --out $OUT/analysis_5400.json | tee $OUT/analysis_5400.md
python -m recipes.testbed.field_clauses analyse --arm fixed7200x=$OUT/fixed7200x --arm fixed7200=$OUT/fixed7200 \
    --seeds "${SEEDS[@]}" --primary fixed7200x-fixed7200 --out $OUT/analysis_reference.json \
    | tee $OUT/analysis_reference.md

# which clause the shuffled turns follow (the place lean), at each length and for the reference
for ARM in shuf3600 shuf5400 shuf7200 fixed7200; do
    python -m recipes.testbed.clause_shuffle follow $(names_of $OUT/${ARM}x) --probes $SHUFFLED --fixed $FIXED \
        --tasks $SET --json $OUT/follow_$ARM.json | tee $OUT/follow_$ARM.md
done
