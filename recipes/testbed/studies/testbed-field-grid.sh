#!/usr/bin/env bash
# Testbed field grid: the recipe's text warm-up alone (1,200 steps), on the teacher's episodes of 96 training videos
# of four equal colour fields (grid) or of random fields (random, the recipe's), five warm-up seeds per arm, paired;
# each run writes the second turn after the teacher's Observation on its own world's fresh probes.
# Page: docs/experiments/testbed-field-grid.md. Each step is skipped once done, and a warm-up stopped part-way goes
# on from its saved state. Two jobs at a time, one thread each.
set -euo pipefail
cd "$(dirname "$0")/../../.."
source recipes/testbed/studies/common.sh

OUT=runs/testbed/field_grid
BASE=runs/testbed/sft_s0          # seed 0's teacher episodes on the 96 random-field videos and its untrained agent
GRID=runs/testbed/data_grid       # the grid world's sets (the same seeds as runs/testbed/data)
SEEDS=(0 1 2 3 4)
declare -A SETS=([random]=runs/testbed/data [grid]=$GRID)
declare -A DATA=([random]=$BASE/sft_data/train.parquet [grid]=$OUT/grid_teacher/sft_data/train.parquet)

# the sets: the recipe's (random fields) and their grid twins; a fresh set of each world, seed 5320
python -m recipes.testbed --out $BASE --seed 0 --stages data synth export build
python -m recipes.testbed --out $OUT/grid_teacher --data $GRID --search-fields grid --seed 0 --stages data
for ARM in random grid; do
    [ -e ${SETS[$ARM]}/study_5320/tasks.jsonl ] || python -m recipes.testbed.study make-set --data ${SETS[$ARM]} \
        --seed 5320 --videos 32 --blind-videos 0 --search-fields $ARM
    mkdir -p $OUT/${ARM}_fresh_data
    ln -sfn "$(realpath ${SETS[$ARM]}/study_5320)" $OUT/${ARM}_fresh_data/train
done

# the teacher: best-of-4 on the grid world's 96 training videos (the grid arm), once per question on each fresh set
fresh_teacher() {  # $1: random or grid
    python -m recipes.testbed --out $OUT/$1_fresh_teacher --data $OUT/$1_fresh_data --search-fields $1 \
        --n-samples 1 --seed 0 --stages synth export
}
python -m recipes.testbed --out $OUT/grid_teacher --data $GRID --search-fields grid --seed 0 \
    --stages synth export &
PIDS+=($!)
fresh_teacher random &
PIDS+=($!)
wait_all
fresh_teacher grid

# the warm-ups: both arms of a seed side by side, from the same weights
for SEED in "${SEEDS[@]}"; do
    for ARM in random grid; do
        warm_up ${DATA[$ARM]} $SEED $OUT/${ARM}_s$SEED &  # common.sh: skipped once the model is saved
        PIDS+=($!)
    done
    wait_all
done

# the probes: each run writes the second turn after the teacher's Observation on its own world's fresh set
for SEED in "${SEEDS[@]}"; do
    for ARM in random grid; do
        [ -e $OUT/${ARM}_s$SEED/field_probe.json ] || python -m recipes.testbed.span_copy measure \
            --model $OUT/${ARM}_s$SEED --probes $OUT/${ARM}_fresh_teacher/sft_data/train.parquet \
            --tasks ${SETS[$ARM]}/study_5320 --train ${DATA[$ARM]} --out $OUT/${ARM}_s$SEED/field_probe.json &
        PIDS+=($!)
    done
    wait_all
done

# the analysis: every run scored on its own probes; every seed's rows, the primary (span holds, grid - random, t
# over seeds), the secondaries, each arm's floor and the figure
for ARM in random grid; do
    RUNS=()
    for SEED in "${SEEDS[@]}"; do RUNS+=(--run $OUT/${ARM}_s$SEED); done
    python -m recipes.testbed.field_grid score "${RUNS[@]}" \
        --probes $OUT/${ARM}_fresh_teacher/sft_data/train.parquet --tasks ${SETS[$ARM]}/study_5320
done
python -m recipes.testbed.field_grid analyse --arm grid=$OUT/grid --arm random=$OUT/random --seeds "${SEEDS[@]}" \
    --primary grid-random --out $OUT/analysis.json --figure docs/figures/testbed_field_grid.png | tee $OUT/analysis.md
# exploratory, added after the plan: the spans each run writes, and the teacher's in the grid arm's training rows
SPANS=()
for ARM in grid random; do for SEED in "${SEEDS[@]}"; do SPANS+=(--run ${ARM}_s$SEED=$OUT/${ARM}_s$SEED); done; done
python -m recipes.testbed.field_grid spans "${SPANS[@]}" --train grid=${DATA[grid]} | tee $OUT/spans.md
