#!/usr/bin/env bash
# Testbed copy task: the text warm-up (128 x 4) on a minimal copy task (no media, no first turn; four colour fields in
# random order, the Thought copying the cue's span), in the testbed's tokens (plain) or with the Observation and the
# Thought led by a space so that the colour is one token in both (spaced); five seeds per arm, ten runs side by side,
# one thread each, to 3,600 steps with models kept at 1,200 and 2,400, each measured on fresh probes.
# Page: docs/experiments/testbed-copy-task.md.
# Each step is skipped once done, and a warm-up stopped part-way goes on from its saved state.
set -euo pipefail
cd "$(dirname "$0")/../../.."
source recipes/testbed/studies/common.sh

OUT=runs/testbed/copy_task
BASE=runs/testbed/sft_s0   # seed 0's untrained agent (config and tokenizer)
SEEDS=(0 1 2 3 4)
ARMS=(plain spaced)

# the recipe's sets and seed 0's untrained agent (skipped once built); the rows (seed 1, as many as the wide rows)
# and the fresh probes (seed 2), in each form
python -m recipes.testbed --out $BASE --seed 0 --stages data synth export build
mkdir -p $OUT
for ARM in "${ARMS[@]}"; do
    FLAG=(); [ $ARM = plain ] || FLAG=(--spaced)
    [ -e $OUT/rows_$ARM.parquet ] || python -m recipes.testbed.copy_task make --rows 3814 --seed 1 "${FLAG[@]}" \
        --out $OUT/rows_$ARM.parquet
    [ -e $OUT/probes_$ARM.parquet ] || python -m recipes.testbed.copy_task make --rows 256 --seed 2 "${FLAG[@]}" \
        --out $OUT/probes_$ARM.parquet
done

# stage ARM SEED STEPS [FROM]: the warm-up of seed SEED on ARM's rows to STEPS steps (going on from the FROM folder's
# kept state), measured on ARM's probes
stage() {
    local run=$OUT/$1$3_s$2 from=()
    [ -z "${4:-}" ] || from=(--start-from $4)
    [ -e $run/model.safetensors ] || python -m recipes.testbed.span_copy train --init $BASE/init \
        --data $OUT/rows_$1.parquet --seed $2 --steps $3 --keep-state "${from[@]}" --out $run >> $run.log 2>&1
    [ -e $run/copy_probe.json ] || python -m recipes.testbed.copy_task measure --model $run \
        --probes $OUT/probes_$1.parquet >> $run.log 2>&1
}
chain() {
    stage $1 $2 1200
    stage $1 $2 2400 $OUT/${1}1200_s$2
    stage $1 $2 3600 $OUT/${1}2400_s$2
}
for ARM in "${ARMS[@]}"; do
    for SEED in "${SEEDS[@]}"; do
        chain $ARM $SEED &
        PIDS+=($!)
    done
done
wait_all

# the analysis: each arm at each length (exact copy, cue lean, the t over seeds); the primary (plain at 3,600 steps)
# with its figure; spaced - plain, paired by seed
for ARM in "${ARMS[@]}"; do
    for N in 1200 2400 3600; do
        FIGURE=(); [ $ARM$N != plain3600 ] || FIGURE=(--figure docs/figures/testbed_copy_task.png)
        python -m recipes.testbed.copy_task analyse $(names_of $OUT/$ARM$N) --probes $OUT/probes_$ARM.parquet \
            --json $OUT/analysis_$ARM$N.json "${FIGURE[@]}" | tee $OUT/analysis_$ARM$N.md
    done
done
python -m recipes.testbed.copy_task contrast --a $OUT/analysis_spaced3600.json --b $OUT/analysis_plain3600.json \
    | tee $OUT/contrast.md

# exploratory, added after the result: where each end of the written spans comes from (the cue's field, another
# field's same end, a field's other end, or no number of the look), and the clause place of the copied starts
for ARM in "${ARMS[@]}"; do
    for N in 1200 2400 3600; do
        python -m recipes.testbed.copy_parts $(names_of $OUT/$ARM$N) --probes $OUT/probes_$ARM.parquet \
            --json $OUT/parts_$ARM$N.json | tee $OUT/parts_$ARM$N.md
    done
done
