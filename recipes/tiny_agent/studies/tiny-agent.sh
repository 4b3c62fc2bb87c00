#!/usr/bin/env bash
# The shipped tiny agent (`--model tiny`, the glyph-read agent): its recipe from an empty folder, its held-out
# rows on seeds 202, 404, 505 and 606, its turn budget, and another training seed.
# Page: docs/experiments/tiny-agent.md. Run from anywhere; about 47 minutes for the recipe on 2 cores, then
# about 3-17 minutes per further held-out set.
set -euo pipefail

OUT=runs/tiny_agent   # the recipe's folder
SEED1_OUT=runs/tiny_seed1   # the same recipe with --seed 1
QUESTION="Which digit is shown on screen at about 18 s?"   # the example episode, on a held-out video

cd "$(dirname "$0")/../../.."

# every figure of the first tables (data ... sft, probe, eval; rerun to resume), then the untrained row
python -m recipes.tiny_agent --out $OUT --eval-jobs 2
python -m recipes.tiny_agent --out $OUT --stages eval --eval-random-weights --eval-jobs 2

# the further held-out sets: the same agent in a folder of its own per seed, 8 videos each
for SEED in 404 505 606; do
    mkdir -p runs/s${SEED}_agent && cp -r $OUT/agent $OUT/synth_train runs/s${SEED}_agent/
done
python -m recipes.tiny_agent --out runs/s404_agent --eval-seed 404 --eval-videos 8 --stages eval --eval-jobs 2
python -m recipes.tiny_agent --out runs/s505_agent --eval-seed 505 --eval-videos 8 --stages eval --eval-jobs 2
python -m recipes.tiny_agent --out runs/s606_agent --eval-seed 606 --eval-videos 8 --stages eval --eval-jobs 2

# the turn-budget sweep (plot: OUT/scaling/acc_vs_k.png), and what was done to make it --model tiny
python -m recipes.tiny_agent --out $OUT --stages scaling
python -m recipes.tiny_agent --out $OUT --stages ship

# the example episode quoted on the page
python -m omniagent.run $OUT/synth_eval/synth_video_s202_000_60s.mp4 "$QUESTION" --choices "6|1|4|5" \
    --model tiny --constrained

# another training seed (synthesis, build, glyph, read and SFT seeds), on seed 202 and on seed 404
python -m recipes.tiny_agent --out $SEED1_OUT --seed 1 --eval-jobs 2
mkdir -p runs/s404_seed1 && cp -r $SEED1_OUT/agent $SEED1_OUT/synth_train runs/s404_seed1/
python -m recipes.tiny_agent --out runs/s404_seed1 --eval-seed 404 --eval-videos 8 --stages eval --eval-jobs 2
