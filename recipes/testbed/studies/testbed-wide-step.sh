#!/usr/bin/env bash
# Testbed wide step: the search-step warm-up (3,600 steps, models kept at 1,200, 2,400 and 3,600) on the search steps
# of the field clauses teacher's episodes on 480 training videos (wide) against the long step study's runs on those of
# the recipe's 96 (narrow, copied); five warm-up seeds, the wide runs side by side, one thread each. Each model writes
# the second turn after the teacher's Observation on fresh probes and on the 96 videos' training rows. Page:
# docs/experiments/testbed-wide-step.md. Each step is skipped once done, a warm-up stopped part-way goes on from its
# saved state, and each longer warm-up goes on from the shorter one's kept state.
set -euo pipefail
cd "$(dirname "$0")/../../.."
source recipes/testbed/studies/common.sh

OUT=runs/testbed/wide_step
LONG=runs/testbed/long_step       # the long step study: the narrow arm's runs
BASE=runs/testbed/sft_s0          # seed 0's untrained agent (config and tokenizer)
LAYOUTS=runs/testbed/data_layouts # 480 training videos; the first 96 are data/'s
NARROW=runs/testbed/step_only/steps.parquet  # the 96 videos' search-step rows (760)
WIDE=$OUT/steps.parquet           # the 480 videos' search-step rows
TRAIN_SET=runs/testbed/data/train # the 96 videos' questions
SEEDS=(0 1 2 3 4)
LENGTHS=(1200 2400 3600)
SET=runs/testbed/data/study_5324  # the fresh set
FRESH=$OUT/fresh_teacher/sft_data/train.parquet

# the recipe's sets and the narrow rows (the long step study's script, which runs the step only study's); the 480
# videos' set; the teacher's best-of-4 in field clauses on them, and their search steps; the fresh set, seed 5324, and
# the teacher once per question on it
python -m recipes.testbed --out $BASE --seed 0 --stages data synth export build
[ -e $LONG/at3600_s4/model.safetensors ] || bash recipes/testbed/studies/testbed-long-step.sh
python -m recipes.testbed --out $OUT/wide_teacher --data $LAYOUTS --train-videos 480 --seed 0 --stages data
cmp <(head -n 1152 $LAYOUTS/train/tasks.jsonl) $TRAIN_SET/tasks.jsonl  # the first 96 videos' questions
python -m recipes.testbed --out $OUT/wide_teacher --data $LAYOUTS --train-videos 480 --field-clauses 1 --seed 0 \
    --stages synth export
[ -e $WIDE ] || python -m recipes.testbed.step_only select --data $OUT/wide_teacher/sft_data/train.parquet --out $WIDE
fresh_field_set 5324  # common.sh: SET, linked as $OUT/fresh_data/train; $OUT/fresh_teacher

# the narrow arm: the long step study's models at each length, and its turns on the training-video probes at 3,600
# steps (greedy, so the same as measured again)
for SEED in "${SEEDS[@]}"; do
    for N in "${LENGTHS[@]}"; do copy_model $LONG/at${N}_s$SEED $OUT/narrow${N}_s$SEED; done
    copy_probes $LONG/seen3600_s$SEED $OUT/seen_narrow3600_s$SEED
done

# stage ARM ROWS SEED STEPS [FROM]: the warm-up on ROWS to STEPS steps (going on from the FROM-step model's kept
# state; skipped for a copied run); the turns on the fresh probes, and at 3,600 steps on the training-video probes
stage() {
    local run=$OUT/$1$4_s$3
    [ -e $run/model.safetensors ] || python -m recipes.testbed.span_copy train --init $BASE/init --data $2 \
        --seed $3 --steps $4 --keep-state ${5:+--start-from $OUT/$1$5_s$3} --out $run >> $run.log 2>&1
    [ -e $run/field_probe.json ] || python -m recipes.testbed.span_copy measure --model $run --probes $FRESH \
        --tasks $SET --train $2 --out $run/field_probe.json >> $run.log 2>&1
    [ $4 != 3600 ] || [ -e $OUT/seen_$1$4_s$3/field_probe.json ] || python -m recipes.testbed.span_copy measure \
        --model $run --probes $NARROW --tasks $TRAIN_SET --train $2 --out $OUT/seen_$1$4_s$3/field_probe.json \
        >> $run.log 2>&1
}
chain() { stage $1 $2 $3 1200; stage $1 $2 $3 2400 1200; stage $1 $2 $3 3600 2400; }
for SEED in "${SEEDS[@]}"; do
    chain wide $WIDE $SEED &
    PIDS+=($!)
done
wait_all
for SEED in "${SEEDS[@]}"; do chain narrow $NARROW $SEED; done  # copied: the fresh probes only

# the analysis: every seed's rows at each length, wide - narrow (at 3,600 steps the primary: span holds, t over
# seeds), the floor, the figure; the training-video probes; where each run's fresh spans come from
for N in "${LENGTHS[@]}"; do
    for ARM in wide narrow; do
        RUNS=()
        for SEED in "${SEEDS[@]}"; do RUNS+=(--run $OUT/$ARM${N}_s$SEED); done
        python -m recipes.testbed.field_clauses score "${RUNS[@]}" --probes $FRESH --tasks $SET
    done
    FIGURE=()
    [ $N != 3600 ] || FIGURE=(--figure docs/figures/testbed_wide_step.png)
    python -m recipes.testbed.field_clauses analyse --arm wide$N=$OUT/wide$N --arm narrow$N=$OUT/narrow$N \
        --seeds "${SEEDS[@]}" --primary wide$N-narrow$N --out $OUT/analysis_$N.json "${FIGURE[@]}" \
        | tee $OUT/analysis_$N.md
done
SEEN=()
for ARM in wide narrow; do
    RUNS=()
    for SEED in "${SEEDS[@]}"; do RUNS+=(--run $OUT/seen_${ARM}3600_s$SEED); done
    python -m recipes.testbed.field_clauses score "${RUNS[@]}" --probes $NARROW --tasks $TRAIN_SET
done
python -m recipes.testbed.field_clauses analyse --arm seenwide=$OUT/seen_wide3600 \
    --arm seennarrow=$OUT/seen_narrow3600 --seeds "${SEEDS[@]}" --primary seenwide-seennarrow \
    --out $OUT/seen_analysis.json | tee $OUT/seen_analysis.md
SOURCES=()
for ARM in wide narrow; do for SEED in "${SEEDS[@]}"; do SOURCES+=(--run ${ARM}_s$SEED=$OUT/${ARM}3600_s$SEED); done; done
python -m recipes.testbed.field_clauses sources "${SOURCES[@]}" --probes $FRESH --tasks $SET | tee $OUT/sources.md

# the contrasts the page reads beside the analysis (added after it): each arm over steps, each arm's fresh against
# training-video probes, and the primary on the probes that neither arm's rows hold
{
    for ARM in wide narrow; do
        for N in 3600 2400; do
            python -m recipes.testbed.seed_contrast --a $OUT/$ARM$N --b $OUT/${ARM}1200 --seeds "${SEEDS[@]}"
        done
        python -m recipes.testbed.seed_contrast --a $OUT/${ARM}3600 --b $OUT/seen_${ARM}3600 --seeds "${SEEDS[@]}"
    done
    python -m recipes.testbed.seed_contrast --a $OUT/wide3600 --b $OUT/narrow3600 --seeds "${SEEDS[@]}" --unseen-only
} | tee $OUT/contrasts.md
