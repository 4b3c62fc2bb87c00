#!/usr/bin/env bash
# Testbed layouts: the answer weight agents' recipe on five times the training videos (480, not 96).
# Page: docs/experiments/testbed-layouts.md. Each stage resumes where it stopped (SFT from its last checkpoint) or is
# skipped once done. Two jobs at a time, one thread each.
set -euo pipefail
cd "$(dirname "$0")/../../.."
source recipes/testbed/studies/common.sh

OUT=runs/testbed/layouts
DATA=runs/testbed/data_layouts  # 480 training videos; the pool and development sets are the same files as data/'s
PARENT=runs/testbed/answer_weight
FRESH=runs/testbed/data/study_5306
RECIPE=(--data $DATA --train-videos 480 --time-copy-steps 3000 --option-text 1 --answer-weight 10)
PARENT_RECIPE=(--data runs/testbed/data --time-copy-steps 3000 --option-text 1 --answer-weight 10)

# the fresh set (32 videos, 384 questions, all 32 blanked), the layouts data, and the parent of seed 0 on the fresh set
[ -e $FRESH/tasks.jsonl ] || python -m recipes.testbed.study make-set --data runs/testbed/data --seed 5306 \
    --videos 32 --blind-videos 32
python -m recipes.testbed --out $OUT/sft_s0 --seed 0 "${RECIPE[@]}" --stages data &
PIDS+=($!)
python -m recipes.testbed --out $PARENT/sft_s0 --seed 0 "${PARENT_RECIPE[@]}" --stages eval --eval-set $FRESH &
PIDS+=($!)
wait_all
cmp $DATA/dev/tasks.jsonl runs/testbed/data/dev/tasks.jsonl
cmp <(head -n 1152 $DATA/train/tasks.jsonl) runs/testbed/data/train/tasks.jsonl  # the first 96 videos' questions
for i in 000 050 095; do cmp $DATA/train/synth_search_s5301_${i}_60s.mp4 runs/testbed/data/train/synth_search_s5301_${i}_60s.mp4; done

# each SFT seed starts from attempt 5's time-copy output of that seed, with its tokenizer; the teacher synthesises
# its episodes on the 480 videos, then SFT runs as the parent's did. The two SFT runs go one after the other: on 18,800
# turns one SFT process holds 11-12 GB, and two at once on a 24 GB machine were killed for memory (see the page)
for SEED in 0 1; do
    mkdir -p $OUT/sft_s$SEED
    for PART in init init_glyphs glyphs.json timecopy; do
        [ -e $OUT/sft_s$SEED/$PART ] || cp -r runs/testbed/attempt5/sft_s$SEED/$PART $OUT/sft_s$SEED/
    done
    python -m recipes.testbed --out $OUT/sft_s$SEED --seed $SEED "${RECIPE[@]}" --stages synth export build &
    PIDS+=($!)
done
wait_all
for SEED in 0 1; do
    python -m recipes.testbed --out $OUT/sft_s$SEED --seed $SEED "${RECIPE[@]}" --stages sft
done

# the primary: each layouts agent with its blind self and the floors on the fresh set's videos that the evaluation's
# overlap guard passes against the 480 training videos: it flagged two (024 and 028) as the same content as training
# videos 380 and 292, which share their colour order but not their fields' bounds, digits or times (see the page)
python -m recipes.testbed.probe_cli --set $FRESH --train $DATA/train/tasks.jsonl --out ${FRESH}_unseen
for SEED in 0 1; do
    python -m recipes.testbed --out $OUT/sft_s$SEED --seed $SEED "${RECIPE[@]}" --stages eval --eval-set ${FRESH}_unseen &
    PIDS+=($!)
done
wait_all

# the parent of seed 1 on the fresh set; the final turn on the handover set, paired with the parent of the same seed
python -m recipes.testbed --out $PARENT/sft_s1 --seed 1 "${PARENT_RECIPE[@]}" --stages eval --eval-set $FRESH &
PIDS+=($!)
for SEED in 0 1; do
    python -m recipes.testbed.handover --set runs/testbed/data/handover5305 --model $OUT/sft_s$SEED/agent \
        --out $OUT/sft_s$SEED/handover --conditions media --last-only --option-text 1 \
        --versus $PARENT/sft_s$SEED/handover
done
wait_all
# secondary 1: layouts minus parent on the fresh set, by video
for SEED in 0 1; do
    python scripts/compare_runs.py $OUT/sft_s$SEED/eval/study_5306_unseen/agent $PARENT/sft_s$SEED/eval/study_5306/agent \
        --cluster media | tee $OUT/sft_s$SEED/versus_parent.txt
done
# secondary 4: the development set, and the figure of the fresh set's rows
for SEED in 0 1; do
    python -m recipes.testbed --out $OUT/sft_s$SEED --seed $SEED "${RECIPE[@]}" --stages eval &
    PIDS+=($!)
done
wait_all
python -m recipes.testbed.calibration --eval layouts_s0=$OUT/sft_s0/eval/study_5306_unseen \
    --eval layouts_s1=$OUT/sft_s1/eval/study_5306_unseen --eval parent_s0=$PARENT/sft_s0/eval/study_5306 \
    --eval parent_s1=$PARENT/sft_s1/eval/study_5306 --tasks $FRESH/tasks.jsonl \
    --figure docs/figures/testbed_layouts_calibration.png --set-name "fresh set (seed 5306)" | tee $OUT/fresh_calibration.md
python -m recipes.testbed.calibration --eval weighted_s0=$PARENT/sft_s0/eval/dev --eval weighted_s1=$PARENT/sft_s1/eval/dev \
    --eval layouts_s0=$OUT/sft_s0/eval/dev --eval layouts_s1=$OUT/sft_s1/eval/dev --tasks $DATA/dev/tasks.jsonl \
    | tee $OUT/dev_calibration.md
# secondary 3: the search step in the agents' own episodes on the fresh set (layouts and parent)
python -m recipes.testbed.search_step --set $FRESH --eval layouts_s0=$OUT/sft_s0/eval/study_5306_unseen \
    --eval layouts_s1=$OUT/sft_s1/eval/study_5306_unseen --eval parent_s0=$PARENT/sft_s0/eval/study_5306 \
    --eval parent_s1=$PARENT/sft_s1/eval/study_5306 | tee $OUT/search_step.md
