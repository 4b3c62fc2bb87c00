#!/usr/bin/env bash
# Testbed long step: the recipe's text warm-up on the search-step rows alone (the step only study's step arm), run on
# to 3,600 steps, with its models at 1,200, 2,400 and 3,600 steps; five warm-up seeds, all five side by side, one
# thread each. Each model writes the second turn after the teacher's Observation on fresh probes and on its own
# training rows. Page: docs/experiments/testbed-long-step.md. Each step is skipped once done, a warm-up stopped
# part-way goes on from its saved state, and each longer warm-up goes on from the shorter one's kept state.
set -euo pipefail
cd "$(dirname "$0")/../../.."
source recipes/testbed/studies/common.sh

OUT=runs/testbed/long_step
STEP=runs/testbed/step_only       # the step only study: its search-step rows and its 1,200-step step runs
BASE=runs/testbed/sft_s0          # seed 0's untrained agent (config and tokenizer)
DATA=$STEP/steps.parquet          # the search-step rows (760)
TRAIN_SET=runs/testbed/data/train # their questions (the recipe's 96 training videos)
SEEDS=(0 1 2 3 4)
LENGTHS=(1200 2400 3600)
SET=runs/testbed/data/study_5323  # the fresh set
FRESH=$OUT/fresh_teacher/sft_data/train.parquet

# the recipe's sets, the field clauses teacher's rows and their search steps (the step only study's script); the
# fresh set, seed 5323, and the teacher once per question on it in field clauses
python -m recipes.testbed --out $BASE --seed 0 --stages data synth export build
[ -e $DATA ] || bash recipes/testbed/studies/testbed-step-only.sh
fresh_field_set 5323  # common.sh: SET, linked as $OUT/fresh_data/train; $OUT/fresh_teacher

# stage SEED STEPS [FROM]: seed SEED's warm-up to STEPS steps (going on from the FROM-step model's kept state), then
# its turns on the fresh probes (field_probe.json) and on its own training rows (seen<STEPS>_s<SEED>)
stage() {
    local run=$OUT/at$2_s$1
    [ -e $run/model.safetensors ] || python -m recipes.testbed.span_copy train --init $BASE/init --data $DATA \
        --seed $1 --steps $2 --keep-state ${3:+--start-from $OUT/at$3_s$1} --out $run >> $run.log 2>&1
    [ -e $run/field_probe.json ] || python -m recipes.testbed.span_copy measure --model $run --probes $FRESH \
        --tasks $SET --train $DATA --out $run/field_probe.json >> $run.log 2>&1
    [ -e $OUT/seen$2_s$1/field_probe.json ] || python -m recipes.testbed.span_copy measure --model $run \
        --probes $DATA --tasks $TRAIN_SET --out $OUT/seen$2_s$1/field_probe.json >> $run.log 2>&1
}
chain() { stage $1 1200; stage $1 2400 1200; stage $1 3600 2400; }
for SEED in "${SEEDS[@]}"; do
    chain $SEED &
    PIDS+=($!)
done
wait_all

# each 1,200-step model is the step only study's step run, trained again: the same weights, byte for byte
for SEED in "${SEEDS[@]}"; do cmp $OUT/at1200_s$SEED/model.safetensors $STEP/step_s$SEED/model.safetensors; done
echo "at1200 = step only's step runs, byte for byte, seeds ${SEEDS[*]}" | tee $OUT/at1200_check.txt

# the analysis: every seed's rows, the primary (span holds, at3600 - at1200, t over seeds), the middle length, the
# floor, the figure; the same on the training rows; where each run's spans come from
ARMS=()
SEEN=()
for N in "${LENGTHS[@]}"; do
    RUNS=()
    SEEN_RUNS=()
    for SEED in "${SEEDS[@]}"; do RUNS+=(--run $OUT/at${N}_s$SEED) && SEEN_RUNS+=(--run $OUT/seen${N}_s$SEED); done
    python -m recipes.testbed.field_clauses score "${RUNS[@]}" --probes $FRESH --tasks $SET
    python -m recipes.testbed.field_clauses score "${SEEN_RUNS[@]}" --probes $DATA --tasks $TRAIN_SET
    ARMS+=(--arm at$N=$OUT/at$N)
    SEEN+=(--arm seen$N=$OUT/seen$N)
done
python -m recipes.testbed.field_clauses analyse "${ARMS[@]}" --seeds "${SEEDS[@]}" --primary at3600-at1200 \
    --out $OUT/analysis.json --figure docs/figures/testbed_long_step.png | tee $OUT/analysis.md
python -m recipes.testbed.field_clauses analyse "${SEEN[@]}" --seeds "${SEEDS[@]}" --primary seen3600-seen1200 \
    --out $OUT/seen_analysis.json | tee $OUT/seen_analysis.md
SOURCES=()
for N in 3600 1200; do for SEED in "${SEEDS[@]}"; do SOURCES+=(--run at${N}_s$SEED=$OUT/at${N}_s$SEED); done; done
python -m recipes.testbed.field_clauses sources "${SOURCES[@]}" --probes $FRESH --tasks $SET | tee $OUT/sources.md
