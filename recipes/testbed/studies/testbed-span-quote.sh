#!/usr/bin/env bash
# Testbed span quote: the recipe's text warm-up alone on teacher episodes whose second Thought first quotes the
# Observation around the cue (quote) or does not (plain: the span copy study's w96 runs), five warm-up seeds each;
# the second turn written after the teacher's Observation on a fresh set's probes.
# Page: docs/experiments/testbed-span-quote.md. Each step is skipped once done. Two jobs at a time, one thread each.
set -euo pipefail
cd "$(dirname "$0")/../../.."
source recipes/testbed/studies/common.sh

OUT=runs/testbed/span_quote
BASE=runs/testbed/sft_s0      # seed 0's plain teacher episodes on the 96 training videos and its untrained agent
PLAIN=runs/testbed/span_copy  # the span copy study's w96 warm-ups (the plain arm), rebuilt below when absent
FRESH=runs/testbed/data/study_5308
SEEDS=(0 1 2 3 4)
MAX_NEW=128  # the recipe's generation limit per turn

# the sets, seed 0's plain teacher episodes and tokenizer, and the quote-form teacher episodes on the same 96 videos
python -m recipes.testbed --out $BASE --seed 0 --stages data synth export build
[ -e $FRESH/tasks.jsonl ] || python -m recipes.testbed.study make-set --data runs/testbed/data --seed 5308 \
    --videos 32 --blind-videos 0
mkdir -p $OUT/fresh_data
ln -sfn "$(realpath $FRESH)" $OUT/fresh_data/train
python -m recipes.testbed --out $OUT/teacher --data runs/testbed/data --seed 0 --span-quote 1 \
    --stages synth export &
PIDS+=($!)
python -m recipes.testbed --out $OUT/fresh_teacher --data $OUT/fresh_data --n-samples 1 --seed 0 --span-quote 1 \
    --stages synth export &
PIDS+=($!)
wait_all
# the quote changes Thoughts only: the same kept episodes, turns and Observations as the plain teacher's
python -m recipes.testbed.span_quote same-turns $BASE/sft_data/train.parquet $OUT/teacher/sft_data/train.parquet

# the warm-ups, two at a time: the quote arm, and the plain arm where the span copy study's runs are absent
JOBS=()
for SEED in "${SEEDS[@]}"; do
    JOBS+=("--data $OUT/teacher/sft_data/train.parquet --seed $SEED --out $OUT/quote_s$SEED")
    JOBS+=("--data $BASE/sft_data/train.parquet --seed $SEED --out $PLAIN/w96_s$SEED")
done
for JOB in "${JOBS[@]}"; do
    read -r -a ARGS <<< "$JOB"
    [ ! -e "${ARGS[-1]}/config.json" ] || continue  # done (the span copy study's logs stay as they are)
    python -m recipes.testbed.span_copy train --init $BASE/init "${ARGS[@]}" > "${ARGS[-1]}.log" 2>&1 &
    PIDS+=($!)
    [ ${#PIDS[@]} -lt 2 ] || wait_all
done
wait_all

# the probes: each run writes the second turn after the teacher's Observation (the same command for both arms)
for SEED in "${SEEDS[@]}"; do
    mkdir -p $OUT/plain_s$SEED
    ln -sfn "$(realpath $PLAIN/w96_s$SEED/warmup_loss.json)" $OUT/plain_s$SEED/warmup_loss.json
    for ARM in quote plain; do
        MODEL=$OUT/quote_s$SEED TRAIN=$OUT/teacher/sft_data/train.parquet
        [ $ARM = quote ] || { MODEL=$PLAIN/w96_s$SEED; TRAIN=$BASE/sft_data/train.parquet; }
        [ -e $OUT/${ARM}_s$SEED/quote_probe.json ] || python -m recipes.testbed.span_copy measure --model $MODEL \
            --probes $OUT/fresh_teacher/sft_data/train.parquet --tasks $FRESH --max-new $MAX_NEW --train $TRAIN \
            --out $OUT/${ARM}_s$SEED/quote_probe.json &
        PIDS+=($!)
    done
    wait_all
done

# the analysis: every seed's rows, the primary (exact span, quote - plain, t over seeds), the floors, the figure
RUNS=()
for ARM in quote plain; do for SEED in "${SEEDS[@]}"; do RUNS+=(--run $OUT/${ARM}_s$SEED); done; done
python -m recipes.testbed.span_quote score "${RUNS[@]}" --probes $OUT/fresh_teacher/sft_data/train.parquet \
    --tasks $FRESH
python -m recipes.testbed.span_quote analyse --arm quote=$OUT/quote --arm plain=$OUT/plain --seeds "${SEEDS[@]}" \
    --primary quote-plain --out $OUT/analysis.json --figure docs/figures/testbed_span_quote.png | tee $OUT/analysis.md
# exploratory (added after the planned analysis): how much of what each run writes its own Observation writes
python -m recipes.testbed.span_quote overlap "${RUNS[@]}" \
    --probes $OUT/fresh_teacher/sft_data/train.parquet --tasks $FRESH | tee $OUT/overlap.md
