#!/usr/bin/env bash
# Testbed RoPE base: the recipe's text warm-up alone on the quote-form teacher episodes, with the text model's RoPE
# base at 1e4 (rope4) or the recipe's 1e6 (rope6: the span quote study's quote runs), five warm-up seeds each; the
# second turn written after the teacher's Observation on a fresh set's probes.
# Page: docs/experiments/testbed-rope-base.md. Each step is skipped once done. Two jobs at a time, one thread each.
set -euo pipefail
cd "$(dirname "$0")/../../.."
source recipes/testbed/studies/common.sh

OUT=runs/testbed/rope_base
BASE=runs/testbed/sft_s0     # seed 0's untrained agent (config and tokenizer)
QUOTE=runs/testbed/span_quote  # the quote-form teacher episodes and the rope6 warm-ups, rebuilt below when absent
FRESH=runs/testbed/data/study_5309
SEEDS=(0 1 2 3 4)
MAX_NEW=128  # the recipe's generation limit per turn
DATA=$QUOTE/teacher/sft_data/train.parquet

# the sets, seed 0's tokenizer, the quote-form teacher on the 96 training videos, and the fresh set's teacher
python -m recipes.testbed --out $BASE --seed 0 --stages data synth export build
python -m recipes.testbed --out $QUOTE/teacher --data runs/testbed/data --seed 0 --span-quote 1 --stages synth export
[ -e $FRESH/tasks.jsonl ] || python -m recipes.testbed.study make-set --data runs/testbed/data --seed 5309 \
    --videos 32 --blind-videos 0
mkdir -p $OUT/fresh_data
ln -sfn "$(realpath $FRESH)" $OUT/fresh_data/train
python -m recipes.testbed --out $OUT/fresh_teacher --data $OUT/fresh_data --n-samples 1 --seed 0 --span-quote 1 \
    --stages synth export

# the warm-ups, two at a time: rope4, and rope6 where the span quote study's runs are absent
JOBS=()
for SEED in "${SEEDS[@]}"; do
    JOBS+=("--seed $SEED --rope-theta 10000 --out $OUT/rope4_s$SEED")
    JOBS+=("--seed $SEED --out $QUOTE/quote_s$SEED")
done
for JOB in "${JOBS[@]}"; do
    read -r -a ARGS <<< "$JOB"
    [ ! -e "${ARGS[-1]}/config.json" ] || continue  # done (the span quote study's logs stay as they are)
    python -m recipes.testbed.span_copy train --init $BASE/init --data $DATA "${ARGS[@]}" > "${ARGS[-1]}.log" 2>&1 &
    PIDS+=($!)
    [ ${#PIDS[@]} -lt 2 ] || wait_all
done
wait_all

# the probes: each run writes the second turn after the teacher's Observation (the same command for both arms)
for SEED in "${SEEDS[@]}"; do
    mkdir -p $OUT/rope6_s$SEED
    ln -sfn "$(realpath $QUOTE/quote_s$SEED/warmup_loss.json)" $OUT/rope6_s$SEED/warmup_loss.json
    for ARM in rope4 rope6; do
        MODEL=$OUT/rope4_s$SEED
        [ $ARM = rope4 ] || MODEL=$QUOTE/quote_s$SEED
        [ -e $OUT/${ARM}_s$SEED/quote_probe.json ] || python -m recipes.testbed.span_copy measure --model $MODEL \
            --probes $OUT/fresh_teacher/sft_data/train.parquet --tasks $FRESH --max-new $MAX_NEW --train $DATA \
            --out $OUT/${ARM}_s$SEED/quote_probe.json &
        PIDS+=($!)
    done
    wait_all
done

# the analysis: every seed's rows, the primary (quote exact, rope4 - rope6, t over seeds), the floors, the figure,
# and the overlap of each run's quotes with its own Observation (secondary 3)
RUNS=()
for ARM in rope4 rope6; do for SEED in "${SEEDS[@]}"; do RUNS+=(--run $OUT/${ARM}_s$SEED); done; done
python -m recipes.testbed.span_quote score "${RUNS[@]}" --probes $OUT/fresh_teacher/sft_data/train.parquet \
    --tasks $FRESH
python -m recipes.testbed.span_quote analyse --arm rope4=$OUT/rope4 --arm rope6=$OUT/rope6 --seeds "${SEEDS[@]}" \
    --primary rope4-rope6 --out $OUT/analysis.json --figure docs/figures/testbed_rope_base.png --plot "quote exact" \
    | tee $OUT/analysis.md
python -m recipes.testbed.span_quote overlap "${RUNS[@]}" --probes $OUT/fresh_teacher/sft_data/train.parquet \
    --tasks $FRESH | tee $OUT/overlap.md
