#!/usr/bin/env bash
# Testbed field clauses: the recipe's text warm-up alone (1,200 steps) on the teacher's episodes of the recipe's 96
# training videos, their Observations written by colour in a fixed order (fields) or in the time order (time, the
# recipe's), five warm-up seeds per arm, paired; each run writes the second turn after the teacher's Observation on
# fresh probes in its own form. Page: docs/experiments/testbed-field-clauses.md. Each step is skipped once done, and
# a warm-up stopped part-way goes on from its saved state. Two jobs at a time, one thread each.
set -euo pipefail
cd "$(dirname "$0")/../../.."
source recipes/testbed/studies/common.sh

OUT=runs/testbed/field_clauses
BASE=runs/testbed/sft_s0          # seed 0's teacher episodes on the 96 videos (time order) and its untrained agent
GRID_RUNS=runs/testbed/field_grid # the field grid study's random-field runs: the time arm's warm-up, trained there
SEEDS=(0 1 2 3 4)
SET=runs/testbed/data/study_5321  # the fresh set
declare -A DATA=([time]=$BASE/sft_data/train.parquet [fields]=$OUT/fields_teacher/sft_data/train.parquet)

# the recipe's sets and seed 0's episodes; the fresh set, seed 5321
python -m recipes.testbed --out $BASE --seed 0 --stages data synth export build
[ -e $SET/tasks.jsonl ] || python -m recipes.testbed.study make-set --data runs/testbed/data --seed 5321 \
    --videos 32 --blind-videos 0
mkdir -p $OUT/fresh_data
ln -sfn "$(realpath $SET)" $OUT/fresh_data/train

# the teacher: best-of-4 in field clauses on the 96 training videos (the fields arm), once per question on the fresh
# set in each form
fresh_teacher() {  # $1: time or fields
    python -m recipes.testbed --out $OUT/$1_fresh_teacher --data $OUT/fresh_data --field-clauses \
        "$([ "$1" = fields ] && echo 1 || echo 0)" --n-samples 1 --seed 0 --stages synth export
}
python -m recipes.testbed --out $OUT/fields_teacher --data runs/testbed/data --field-clauses 1 --seed 0 \
    --stages synth export &
PIDS+=($!)
fresh_teacher time &
PIDS+=($!)
wait_all
fresh_teacher fields
# the two forms hold the same turns, Thoughts and actions: in the training rows and on the fresh set
python -m recipes.testbed.field_clauses same-episodes --time ${DATA[time]} --fields ${DATA[fields]} \
    | tee $OUT/same_train.json
python -m recipes.testbed.field_clauses same-episodes --time $OUT/time_fresh_teacher/sft_data/train.parquet \
    --fields $OUT/fields_fresh_teacher/sft_data/train.parquet | tee $OUT/same_fresh.json

# the warm-ups. time: the field grid study's random-field runs, the same command on the same rows and seed (copied
# when present, else trained). fields: two seeds side by side; seed 0 of the time arm trained again beside the last
# one and compared with the copy, byte for byte
for SEED in "${SEEDS[@]}"; do copy_model $GRID_RUNS/random_s$SEED $OUT/time_s$SEED; done
for PAIR in "fields 0 fields 1" "fields 2 fields 3" "fields 4 time_check 0"; do
    set -- $PAIR
    for ARM_SEED in "$1 $2" "$3 $4"; do
        set -- $ARM_SEED
        warm_up "${DATA[${1/time_check/time}]}" $2 $OUT/${1}_s$2 &
        PIDS+=($!)
    done
    wait_all
done
for SEED in "${SEEDS[@]}"; do warm_up ${DATA[time]} $SEED $OUT/time_s$SEED; done
cmp $OUT/time_check_s0/model.safetensors $OUT/time_s0/model.safetensors
echo "time seed 0, trained again: the same weights, byte for byte" | tee $OUT/time_check.txt

# the probes: each run writes the second turn after the teacher's Observation, in its own form, on the fresh set
for SEED in "${SEEDS[@]}"; do
    for ARM in time fields; do
        [ -e $OUT/${ARM}_s$SEED/field_probe.json ] || python -m recipes.testbed.span_copy measure \
            --model $OUT/${ARM}_s$SEED --probes $OUT/${ARM}_fresh_teacher/sft_data/train.parquet --tasks $SET \
            --train ${DATA[$ARM]} --out $OUT/${ARM}_s$SEED/field_probe.json &
        PIDS+=($!)
    done
    wait_all
done

# the analysis: every run scored on its own form's probes; every seed's rows, the primary (span holds, fields -
# time, t over seeds), the secondaries, each arm's floor and the figure
for ARM in time fields; do
    RUNS=()
    for SEED in "${SEEDS[@]}"; do RUNS+=(--run $OUT/${ARM}_s$SEED); done
    python -m recipes.testbed.field_clauses score "${RUNS[@]}" \
        --probes $OUT/${ARM}_fresh_teacher/sft_data/train.parquet --tasks $SET
done
python -m recipes.testbed.field_clauses analyse --arm fields=$OUT/fields --arm time=$OUT/time --seeds "${SEEDS[@]}" \
    --primary fields-time --out $OUT/analysis.json --figure docs/figures/testbed_field_clauses.png \
    | tee $OUT/analysis.md
# exploratory, added after the plan: where each run's spans come from (the cue's field, another colour's, neither)
SOURCES=()
for ARM in fields time; do for SEED in "${SEEDS[@]}"; do SOURCES+=(--run ${ARM}_s$SEED=$OUT/${ARM}_s$SEED); done; done
python -m recipes.testbed.field_clauses sources "${SOURCES[@]}" \
    --probes $OUT/fields_fresh_teacher/sft_data/train.parquet --tasks $SET | tee $OUT/sources.md
