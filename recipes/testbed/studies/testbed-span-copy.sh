#!/usr/bin/env bash
# Testbed span copy: the recipe's text warm-up alone, on 96 or 480 training videos' teacher episodes, five warm-up
# seeds each; the second turn written after the teacher's Observation on a fresh set's probes.
# Page: docs/experiments/testbed-span-copy.md. Each step is skipped once done. Two jobs at a time, one thread each.
set -euo pipefail
cd "$(dirname "$0")/../../.."
source recipes/testbed/studies/common.sh

OUT=runs/testbed/span_copy
BASE=runs/testbed/sft_s0           # seed 0's teacher episodes on the 96 training videos and its untrained agent
LAYOUTS=runs/testbed/data_layouts  # 480 training videos; the first 96 are data/'s
FRESH=runs/testbed/data/study_5307
SEEDS=(0 1 2 3 4)

# the sets, and seed 0's teacher episodes and tokenizer (the recipe's data, synth, export and build stages)
python -m recipes.testbed --out $BASE --seed 0 --stages data synth export build
python -m recipes.testbed --out $OUT/layouts_teacher --data $LAYOUTS --train-videos 480 --seed 0 --stages data
cmp <(head -n 1152 $LAYOUTS/train/tasks.jsonl) runs/testbed/data/train/tasks.jsonl  # the first 96 videos' questions
[ -e $FRESH/tasks.jsonl ] || python -m recipes.testbed.study make-set --data runs/testbed/data --seed 5307 \
    --videos 32 --blind-videos 0

# the teacher: best-of-4 on the 480 videos (the w480 arm), once per question on the fresh set (the probes)
mkdir -p $OUT/fresh_data
ln -sfn "$(realpath $FRESH)" $OUT/fresh_data/train
python -m recipes.testbed --out $OUT/layouts_teacher --data $LAYOUTS --train-videos 480 --seed 0 \
    --stages synth export &
PIDS+=($!)
python -m recipes.testbed --out $OUT/fresh_teacher --data $OUT/fresh_data --n-samples 1 --seed 0 \
    --stages synth export &
PIDS+=($!)
wait_all

# the warm-ups: both arms of a seed side by side, from the same weights
declare -A DATA=([w96]=$BASE/sft_data/train.parquet [w480]=$OUT/layouts_teacher/sft_data/train.parquet)
for SEED in "${SEEDS[@]}"; do
    for ARM in w96 w480; do
        warm_up ${DATA[$ARM]} $SEED $OUT/${ARM}_s$SEED &
        PIDS+=($!)
    done
    wait_all
done

# the probes: each run writes the second turn after the teacher's Observation
for SEED in "${SEEDS[@]}"; do
    for ARM in w96 w480; do
        [ -e $OUT/${ARM}_s$SEED/probe.json ] || python -m recipes.testbed.span_copy measure \
            --model $OUT/${ARM}_s$SEED --probes $OUT/fresh_teacher/sft_data/train.parquet --tasks $FRESH \
            --train ${DATA[$ARM]} &
        PIDS+=($!)
    done
    wait_all
done

# the analysis: every seed's rows, the primary (span holds, w480 - w96, t over seeds), the floors, the figure
python -m recipes.testbed.span_copy analyse --arm w480=$OUT/w480 --arm w96=$OUT/w96 --seeds "${SEEDS[@]}" \
    --primary w480-w96 --out $OUT/analysis.json --figure docs/figures/testbed_span_copy.png | tee $OUT/analysis.md
# exploratory (added after the planned analysis): each run's spans end by end against the teacher's
RUNS=()
for ARM in w96 w480; do for SEED in "${SEEDS[@]}"; do RUNS+=(--run ${ARM}_s$SEED=$OUT/${ARM}_s$SEED); done; done
python -m recipes.testbed.span_copy breakdown "${RUNS[@]}" --probes $OUT/fresh_teacher/sft_data/train.parquet \
    --tasks $FRESH | tee $OUT/breakdown.md
