#!/usr/bin/env bash
# Testbed step only: the recipe's text warm-up (1,200 steps) on the search-step rows alone (second turns whose
# Thought leads with a colour and a span) or on every turn (the field clauses study's fields arm), both in field
# clauses, five warm-up seeds per arm, paired; each run writes the second turn after the teacher's Observation on
# fresh probes. Page: docs/experiments/testbed-step-only.md. Each step is skipped once done, and a warm-up stopped
# part-way goes on from its saved state. Two jobs at a time, one thread each.
set -euo pipefail
cd "$(dirname "$0")/../../.."
source recipes/testbed/studies/common.sh

OUT=runs/testbed/step_only
FC=runs/testbed/field_clauses     # the field clauses study: its teacher rows and its fields runs (the all arm)
BASE=runs/testbed/sft_s0          # seed 0's untrained agent (config and tokenizer)
SEEDS=(0 1 2 3 4)
SET=runs/testbed/data/study_5322  # the fresh set
declare -A DATA=([all]=$FC/fields_teacher/sft_data/train.parquet [step]=$OUT/steps.parquet)

# the recipe's sets; the teacher's best-of-4 in field clauses on the 96 training videos; the fresh set, seed 5322,
# and the teacher once per question on it
python -m recipes.testbed --out $BASE --seed 0 --stages data synth export build
python -m recipes.testbed --out $FC/fields_teacher --data runs/testbed/data --field-clauses 1 --seed 0 \
    --stages synth export
fresh_field_set 5322  # common.sh: SET, linked as $OUT/fresh_data/train; $OUT/fresh_teacher
# the step arm's rows: the search steps of the same episodes
[ -e ${DATA[step]} ] || python -m recipes.testbed.step_only select --data ${DATA[all]} --out ${DATA[step]}

# the warm-ups. all: the field clauses study's fields runs, the same command on the same rows and seed (copied when
# present, else trained). step: two seeds side by side; seed 0 of the all arm trained again beside the last one and
# compared with the copy, byte for byte
for SEED in "${SEEDS[@]}"; do copy_model $FC/fields_s$SEED $OUT/all_s$SEED; done
for PAIR in "step 0 step 1" "step 2 step 3" "step 4 all_check 0"; do
    set -- $PAIR
    for ARM_SEED in "$1 $2" "$3 $4"; do
        set -- $ARM_SEED
        warm_up "${DATA[${1/all_check/all}]}" $2 $OUT/${1}_s$2 &
        PIDS+=($!)
    done
    wait_all
done
for SEED in "${SEEDS[@]}"; do warm_up ${DATA[all]} $SEED $OUT/all_s$SEED; done
cmp $OUT/all_check_s0/model.safetensors $OUT/all_s0/model.safetensors
echo "all seed 0, trained again: the same weights, byte for byte" | tee $OUT/all_check.txt

# the probes: each run writes the second turn after the teacher's Observation on the fresh set
for SEED in "${SEEDS[@]}"; do
    for ARM in all step; do
        [ -e $OUT/${ARM}_s$SEED/field_probe.json ] || python -m recipes.testbed.span_copy measure \
            --model $OUT/${ARM}_s$SEED --probes $OUT/fresh_teacher/sft_data/train.parquet --tasks $SET \
            --train ${DATA[$ARM]} --out $OUT/${ARM}_s$SEED/field_probe.json &
        PIDS+=($!)
    done
    wait_all
done

# the analysis: every seed's rows, the primary (span holds, step - all, t over seeds), the secondaries, the floor,
# the figure, and where each run's spans come from
for ARM in all step; do
    RUNS=()
    for SEED in "${SEEDS[@]}"; do RUNS+=(--run $OUT/${ARM}_s$SEED); done
    python -m recipes.testbed.field_clauses score "${RUNS[@]}" --probes $OUT/fresh_teacher/sft_data/train.parquet \
        --tasks $SET
done
python -m recipes.testbed.field_clauses analyse --arm step=$OUT/step --arm all=$OUT/all --seeds "${SEEDS[@]}" \
    --primary step-all --out $OUT/analysis.json --figure docs/figures/testbed_step_only.png | tee $OUT/analysis.md
SOURCES=()
for ARM in step all; do for SEED in "${SEEDS[@]}"; do SOURCES+=(--run ${ARM}_s$SEED=$OUT/${ARM}_s$SEED); done; done
python -m recipes.testbed.field_clauses sources "${SOURCES[@]}" --probes $OUT/fresh_teacher/sft_data/train.parquet \
    --tasks $SET | tee $OUT/sources.md
