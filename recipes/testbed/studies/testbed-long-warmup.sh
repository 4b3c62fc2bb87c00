#!/usr/bin/env bash
# Testbed long warm-up: the recipe's text warm-up alone, eight times as long (9,600 steps), on the quote-form teacher
# episodes of 480 training videos, five warm-up seeds; each run keeps its model every 1,200 steps, and every kept
# model writes the second turn after the teacher's Observation on a fresh set's probes.
# Page: docs/experiments/testbed-long-warmup.md. Each step is skipped once done, and a warm-up stopped part-way goes
# on from its saved state, so the script can be stopped and started again (the study spans sessions). Two jobs at a
# time, one thread each.
set -euo pipefail
cd "$(dirname "$0")/../../.."
source recipes/testbed/studies/common.sh

OUT=runs/testbed/long_warmup
BASE=runs/testbed/sft_s0           # seed 0's untrained agent (config and tokenizer)
LAYOUTS=runs/testbed/data_layouts  # 480 training videos; the first 96 are data/'s
FRESH=runs/testbed/data/study_5310
SEEDS=(0 1 2 3 4)
STEPS=9600
KEEP=1200    # the recipe's warm-up length: the first kept model is a recipe warm-up
MAX_NEW=128  # the recipe's generation limit per turn
DATA=$OUT/teacher/sft_data/train.parquet
PROBES=$OUT/fresh_teacher/sft_data/train.parquet

# the sets, seed 0's tokenizer, the quote-form teacher on the 480 training videos, and the fresh set's teacher
python -m recipes.testbed --out $BASE --seed 0 --stages data synth export build
python -m recipes.testbed --out $OUT/teacher --data $LAYOUTS --train-videos 480 --seed 0 --stages data
cmp <(head -n 1152 $LAYOUTS/train/tasks.jsonl) runs/testbed/data/train/tasks.jsonl  # the first 96 videos' questions
[ -e $FRESH/tasks.jsonl ] || python -m recipes.testbed.study make-set --data runs/testbed/data --seed 5310 \
    --videos 32 --blind-videos 0
mkdir -p $OUT/fresh_data
ln -sfn "$(realpath $FRESH)" $OUT/fresh_data/train
python -m recipes.testbed --out $OUT/teacher --data $LAYOUTS --train-videos 480 --seed 0 --span-quote 1 \
    --stages synth export &
PIDS+=($!)
python -m recipes.testbed --out $OUT/fresh_teacher --data $OUT/fresh_data --n-samples 1 --seed 0 --span-quote 1 \
    --stages synth export &
PIDS+=($!)
wait_all

# the warm-ups two at a time, then each pair's kept models measured (the same command for every kept model)
measure() {  # $1: a kept model's folder
    [ -e "$1/quote_probe.json" ] || python -m recipes.testbed.span_copy measure --model "$1" --probes $PROBES \
        --tasks $FRESH --max-new $MAX_NEW --train $DATA --out "$1/quote_probe.json"
}
for PAIR in "0 1" "2 3" "4"; do
    for SEED in $PAIR; do
        python -m recipes.testbed.long_warmup train --init $BASE/init --data $DATA --seed $SEED --steps $STEPS \
            --keep-every $KEEP --out $OUT/long_s$SEED >> $OUT/long_s$SEED.log 2>&1 &
        PIDS+=($!)
    done
    wait_all
    for SEED in $PAIR; do
        for ((STEP = KEEP; STEP <= STEPS; STEP += KEEP)); do
            measure $OUT/long_s$SEED/step_$STEP &
            PIDS+=($!)
            [ ${#PIDS[@]} -lt 2 ] || wait_all
        done
    done
    wait_all
done

# the analysis: every kept model scored; the primary (quote exact, at9600 - at1200, t over seeds), the floors and
# the figure; the learning curve (secondary 2) and the overlap with the run's own Observation (secondary 3)
RUNS=()
for SEED in "${SEEDS[@]}"; do
    for ((STEP = KEEP; STEP <= STEPS; STEP += KEEP)); do RUNS+=(--run $OUT/long_s$SEED/step_$STEP); done
    ln -sfn "$(realpath $OUT/long_s$SEED/step_$KEEP)" $OUT/at${KEEP}_s$SEED
    ln -sfn "$(realpath $OUT/long_s$SEED/step_$STEPS)" $OUT/at${STEPS}_s$SEED
done
python -m recipes.testbed.span_quote score "${RUNS[@]}" --probes $PROBES --tasks $FRESH
python -m recipes.testbed.span_quote analyse --arm at$STEPS=$OUT/at$STEPS --arm at$KEEP=$OUT/at$KEEP \
    --seeds "${SEEDS[@]}" --primary at$STEPS-at$KEEP --out $OUT/analysis.json \
    --figure docs/figures/testbed_long_warmup.png --plot "quote exact" | tee $OUT/analysis.md
python -m recipes.testbed.long_warmup curve --prefix $OUT/long --seeds "${SEEDS[@]}" --out $OUT/curve.json \
    --figure docs/figures/testbed_long_warmup_curve.png | tee $OUT/curve.md
OVERLAP=()
for SEED in "${SEEDS[@]}"; do for AT in $KEEP $STEPS; do OVERLAP+=(--run at${AT}_s$SEED=$OUT/at${AT}_s$SEED); done; done
python -m recipes.testbed.span_quote overlap "${OVERLAP[@]}" --probes $PROBES --tasks $FRESH | tee $OUT/overlap.md
# exploratory, added after the plan: the rates on the probes whose Observation the training rows hold, and on the rest
python -m recipes.testbed.long_warmup seen "${OVERLAP[@]}" | tee $OUT/seen.md
