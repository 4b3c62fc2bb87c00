#!/usr/bin/env bash
# TAURA vs GRPO on the testbed (the search level of envs.synth). Page: docs/experiments/taura-testbed.md.
# Every step resumes where it stopped (the recipe's stages, the trainer's checkpoints, the evals' finished ids),
# so the script can be started again after a crash. Two jobs at a time, one thread each (2 cores).
set -euo pipefail
cd "$(dirname "$0")/../../.."
source recipes/testbed/studies/common.sh

OUT=runs/testbed
SFT_SEEDS="0 1 2"    # the gates' SFT seeds; the study starts from SFT seed 0
RL_SEEDS="0 1 2 3 4 5 6 7 8 9"
STUDY_SEED=5399
STUDY_VIDEOS=168     # 12 questions each
BLIND_VIDEOS=42

# 1. the shared sets (training 5301, glyph pool 5302, development 5303), then each SFT seed's agent
python -m recipes.testbed --out $OUT/sft_s0 --stages data
python -m recipes.testbed --out $OUT/sft_s0 --seed 0 --stages synth export build glyphs sft &
PIDS+=($!)
python -m recipes.testbed --out $OUT/sft_s1 --seed 1 --stages synth export build glyphs sft &
PIDS+=($!)
wait_all
python -m recipes.testbed --out $OUT/sft_s2 --seed 2 --stages synth export build glyphs sft &
PIDS+=($!)
# calibration: SFT seed 0 on the development set (the plan's band 0.40-0.80), with its floors and blind row
python -m recipes.testbed --out $OUT/sft_s0 --stages eval
wait_all

# 1b. the development record (the page's figure): attempt 2's recipe, without caption batches, on seed 0, and
# the development rows of attempts 2 and 3 against their floors. Attempt 1's language (v1) is no longer built.
python -m recipes.testbed --out $OUT/attempt2/sft_s0 --data $OUT/data --seed 0 --caption-batch 0
python -m recipes.testbed.calibration --eval attempt2=$OUT/attempt2/sft_s0/eval/dev \
    --eval attempt3=$OUT/sft_s0/eval/dev --figure docs/figures/taura_testbed_calibration.png
# Calibration failed in both attempts and the plan allowed no further redesign: the study ended here. The steps
# below are the plan's, kept as written and never run; remove this exit to run them.
exit 0

# 2. the gates, each SFT seed on its own fresh gate set (5311 + seed), made only now
for SEED in $SFT_SEEDS; do
    python -m recipes.testbed.gates --sft $OUT/sft_s$SEED --gate-seed $((5311 + SEED)) --seed $SEED \
        --steps set eval auroc &
    PIDS+=($!)
    python -m recipes.testbed.gates --sft $OUT/sft_s$SEED --gate-seed $((5311 + SEED)) --seed $SEED \
        --steps flat grpo &
    PIDS+=($!)
    wait_all
    python -m recipes.testbed.gates --sft $OUT/sft_s$SEED --gate-seed $((5311 + SEED)) --seed $SEED --steps report
done

# 3. the study set and its blind subset (made after the gates and the plan's amendments)
python -m recipes.testbed.study make-set --data $OUT/data --seed $STUDY_SEED --videos $STUDY_VIDEOS \
    --blind-videos $BLIND_VIDEOS
SET=$OUT/data/study_$STUDY_SEED

# 4. the runs, paired by seed: TAURA and GRPO of one seed at a time
for SEED in $RL_SEEDS; do
    python -m recipes.testbed.study train --arm taura --seed $SEED --sft $OUT/sft_s0 --out $OUT/study &
    PIDS+=($!)
    python -m recipes.testbed.study train --arm grpo --seed $SEED --sft $OUT/sft_s0 --out $OUT/study &
    PIDS+=($!)
    wait_all
done

# 5. every final policy and the SFT agent on the study set and its blind subset; the floors
python -m recipes.testbed.study eval --run $OUT/study/sft --sft $OUT/sft_s0 --set $SET &
PIDS+=($!)
python -m recipes.testbed.study floors --study $OUT/study --sft $OUT/sft_s0 --set $SET &
PIDS+=($!)
wait_all
for SEED in $RL_SEEDS; do
    python -m recipes.testbed.study eval --run $OUT/study/taura_s$SEED --sft $OUT/sft_s0 --set $SET &
    PIDS+=($!)
    python -m recipes.testbed.study eval --run $OUT/study/grpo_s$SEED --sft $OUT/sft_s0 --set $SET &
    PIDS+=($!)
    wait_all
done

# 6. the analysis: primary, secondaries (Holm), AUROC per seed, the figure
python -m recipes.testbed.study analyse --study $OUT/study --sft $OUT/sft_s0 --set $SET \
    --figure docs/figures/taura_testbed.png
