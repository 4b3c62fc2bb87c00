#!/usr/bin/env bash
# Testbed wide long: the wide step study's warm-ups on the search steps of 480 training videos, run on from their kept
# states at 3,600 steps to 7,200, with models kept at 4,800, 6,000 and 7,200 steps; five warm-up seeds side by side,
# one thread each. Each model writes the second turn after the teacher's Observation on fresh probes, and at 7,200
# steps on the 96 recipe videos' training rows. Page: docs/experiments/testbed-wide-long.md. Each step is skipped once
# done, a warm-up stopped part-way goes on from its saved state, and each longer warm-up goes on from the shorter
# one's kept state. Where the wide step study's runs are gone (a new machine), its rows and 3,600-step warm-ups are
# built again first, as its script built them (the page's amendment).
set -euo pipefail
cd "$(dirname "$0")/../../.."
source recipes/testbed/studies/common.sh

OUT=runs/testbed/wide_long
WIDE_STEP=runs/testbed/wide_step  # the wide step study: its rows and its 3,600-step runs (kept states)
BASE=runs/testbed/sft_s0          # seed 0's untrained agent (config and tokenizer)
DATA=$WIDE_STEP/steps.parquet     # the 480 videos' search-step rows (3,814)
NARROW=runs/testbed/step_only/steps.parquet  # the 96 videos' search-step rows (760): the training-video probes
TRAIN_SET=runs/testbed/data/train # their questions
FC=runs/testbed/field_clauses     # the field clauses study: the teacher's best-of-4 on the 96 videos (NARROW's source)
LAYOUTS=runs/testbed/data_layouts # 480 training videos; the first 96 are data/'s
SEEDS=(0 1 2 3 4)
LENGTHS=(4800 6000 7200)
SET=runs/testbed/data/study_5325  # the fresh set
FRESH=$OUT/fresh_teacher/sft_data/train.parquet

# rows_are FILE N: stop unless the parquet FILE holds N rows (the count the wide step study's rows had)
rows_are() { python -c "import pyarrow.parquet as pq, sys; n = pq.read_metadata(sys.argv[1]).num_rows; \
assert n == int(sys.argv[2]), f'{sys.argv[1]}: {n} rows, not {sys.argv[2]}'" "$1" "$2"; }

# the recipe's sets; the wide step study's rows when absent, built as its script and the step only study's built
# them (the narrow rows from the teacher's best-of-4 on the 96 videos, the wide rows from that on the 480); the wide
# step study's fresh set, seed 5324, to check its rebuilt warm-ups against its rows; this study's fresh set, seed
# 5325; the teacher once per question on each in field clauses
python -m recipes.testbed --out $BASE --seed 0 --stages data synth export build
if [ ! -e $NARROW ]; then
    python -m recipes.testbed --out $FC/fields_teacher --data runs/testbed/data --field-clauses 1 --seed 0 \
        --stages synth export
    python -m recipes.testbed.step_only select --data $FC/fields_teacher/sft_data/train.parquet --out $NARROW
fi
rows_are $NARROW 760
if [ ! -e $DATA ]; then
    python -m recipes.testbed --out $WIDE_STEP/wide_teacher --data $LAYOUTS --train-videos 480 --seed 0 --stages data
    cmp <(head -n 1152 $LAYOUTS/train/tasks.jsonl) $TRAIN_SET/tasks.jsonl  # the first 96 videos' questions
    python -m recipes.testbed --out $WIDE_STEP/wide_teacher --data $LAYOUTS --train-videos 480 --field-clauses 1 \
        --seed 0 --stages synth export
    python -m recipes.testbed.step_only select --data $WIDE_STEP/wide_teacher/sft_data/train.parquet --out $DATA
fi
rows_are $DATA 3814
fresh_field_set 5324 $WIDE_STEP  # common.sh, into the wide step study's folder
fresh_field_set 5325  # common.sh: SET, linked as $OUT/fresh_data/train; $OUT/fresh_teacher

# rebuild SEED: when the wide step study's 3,600-step wide warm-up of seed SEED has no kept state, trained again in
# one run with its state kept (the same steps as that study's 1,200/2,400/3,600 chain), then its turns measured
# again on that study's fresh probes (set beside its rows) and on the training-video probes (its seen turns)
rebuild() {
    local run=$WIDE_STEP/wide3600_s$1 seen=$WIDE_STEP/seen_wide3600_s$1
    [ -e $run.state.pt ] || python -m recipes.testbed.span_copy train --init $BASE/init --data $DATA --seed $1 \
        --steps 3600 --keep-state --out $run >> $run.log 2>&1
    [ -e $run/field_probe.json ] || python -m recipes.testbed.span_copy measure --model $run \
        --probes $WIDE_STEP/fresh_teacher/sft_data/train.parquet --tasks runs/testbed/data/study_5324 --train $DATA \
        --out $run/field_probe.json >> $run.log 2>&1
    [ -e $seen/field_probe.json ] || python -m recipes.testbed.span_copy measure --model $run --probes $NARROW \
        --tasks $TRAIN_SET --train $DATA --out $seen/field_probe.json >> $run.log 2>&1
}

# at3600 SEED: the 3,600-step arm, the wide step study's model of seed SEED copied and measured on the fresh probes;
# its turns on the training-video probes (greedy, so the same as measured again) copied
at3600() {
    copy_model $WIDE_STEP/wide3600_s$1 $OUT/at3600_s$1
    [ -e $OUT/at3600_s$1/field_probe.json ] || python -m recipes.testbed.span_copy measure \
        --model $OUT/at3600_s$1 --probes $FRESH --tasks $SET --train $DATA --out $OUT/at3600_s$1/field_probe.json \
        >> $OUT/at3600_s$1.log 2>&1
    copy_probes $WIDE_STEP/seen_wide3600_s$1 $OUT/seen3600_s$1
}

# stage SEED STEPS FROM: seed SEED's warm-up to STEPS steps, going on from the FROM folder's kept state; its turns on
# the fresh probes, and at 7,200 steps on the training-video probes
stage() {
    local run=$OUT/at$2_s$1
    [ -e $run/model.safetensors ] || python -m recipes.testbed.span_copy train --init $BASE/init --data $DATA \
        --seed $1 --steps $2 --keep-state --start-from $3 --out $run >> $run.log 2>&1
    [ -e $run/field_probe.json ] || python -m recipes.testbed.span_copy measure --model $run --probes $FRESH \
        --tasks $SET --train $DATA --out $run/field_probe.json >> $run.log 2>&1
    [ $2 != 7200 ] || [ -e $OUT/seen$2_s$1/field_probe.json ] || python -m recipes.testbed.span_copy measure \
        --model $run --probes $NARROW --tasks $TRAIN_SET --train $DATA --out $OUT/seen$2_s$1/field_probe.json \
        >> $run.log 2>&1
}
chain() {
    rebuild $1
    at3600 $1
    stage $1 4800 $WIDE_STEP/wide3600_s$1
    stage $1 6000 $OUT/at4800_s$1
    stage $1 7200 $OUT/at6000_s$1
}
for SEED in "${SEEDS[@]}"; do
    chain $SEED &
    PIDS+=($!)
done
wait_all

# the rebuilt 3,600-step warm-ups on the wide step study's fresh probes (its rows: the same when rebuilt alike)
RUNS=()
for SEED in "${SEEDS[@]}"; do RUNS+=(--run $WIDE_STEP/wide3600_s$SEED); done
python -m recipes.testbed.field_clauses score "${RUNS[@]}" --probes $WIDE_STEP/fresh_teacher/sft_data/train.parquet \
    --tasks runs/testbed/data/study_5324 | tee $OUT/rebuilt_wide3600.md
# and their mean loss over steps 1,101-1,200 and 2,301-2,400, beside that study's end loss at 1,200 and 2,400 steps
for SEED in "${SEEDS[@]}"; do
    python -c "import json, sys; loss = json.load(open(sys.argv[1]))['loss']; \
print(f'seed {sys.argv[2]}: loss at 1,200 {sum(loss[1100:1200]) / 100:.3f}, at 2,400 {sum(loss[2300:2400]) / 100:.3f}')" \
        $WIDE_STEP/wide3600_s$SEED/warmup_loss.json $SEED
done | tee -a $OUT/rebuilt_wide3600.md

# the analysis: every seed's rows at each length against 3,600 steps (at 7,200 the primary: span holds, t over
# seeds), the floor, the figure; the training-video probes; where each run's fresh spans come from
RUNS=()
for SEED in "${SEEDS[@]}"; do RUNS+=(--run $OUT/at3600_s$SEED); done
python -m recipes.testbed.field_clauses score "${RUNS[@]}" --probes $FRESH --tasks $SET
for N in "${LENGTHS[@]}"; do
    RUNS=()
    for SEED in "${SEEDS[@]}"; do RUNS+=(--run $OUT/at${N}_s$SEED); done
    python -m recipes.testbed.field_clauses score "${RUNS[@]}" --probes $FRESH --tasks $SET
    FIGURE=()
    [ $N != 7200 ] || FIGURE=(--figure docs/figures/testbed_wide_long.png)
    python -m recipes.testbed.field_clauses analyse --arm at$N=$OUT/at$N --arm at3600=$OUT/at3600 \
        --seeds "${SEEDS[@]}" --primary at$N-at3600 --out $OUT/analysis_$N.json "${FIGURE[@]}" \
        | tee $OUT/analysis_$N.md
done
for N in 3600 7200; do
    RUNS=()
    for SEED in "${SEEDS[@]}"; do RUNS+=(--run $OUT/seen${N}_s$SEED); done
    python -m recipes.testbed.field_clauses score "${RUNS[@]}" --probes $NARROW --tasks $TRAIN_SET
done
python -m recipes.testbed.field_clauses analyse --arm seen7200=$OUT/seen7200 --arm seen3600=$OUT/seen3600 \
    --seeds "${SEEDS[@]}" --primary seen7200-seen3600 --out $OUT/seen_analysis.json | tee $OUT/seen_analysis.md
SOURCES=()
for N in 7200 3600; do for SEED in "${SEEDS[@]}"; do SOURCES+=(--run at${N}_s$SEED=$OUT/at${N}_s$SEED); done; done
python -m recipes.testbed.field_clauses sources "${SOURCES[@]}" --probes $FRESH --tasks $SET | tee $OUT/sources.md

# the contrasts the page reads beside the analysis (added after it): each length's fresh against training-video
# probes, and the primary on the probes whose Observation the wide rows do not hold
{
    for N in 7200 3600; do
        python -m recipes.testbed.seed_contrast --a $OUT/at$N --b $OUT/seen$N --seeds "${SEEDS[@]}"
    done
    python -m recipes.testbed.seed_contrast --a $OUT/at7200 --b $OUT/at3600 --seeds "${SEEDS[@]}" --unseen-only
} | tee $OUT/contrasts.md
