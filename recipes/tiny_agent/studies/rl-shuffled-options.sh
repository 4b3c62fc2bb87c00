#!/usr/bin/env bash
# Batch 4, pre-registered: TAURA and GRPO (lr 2.5e-4, Dr.GRPO, fresh draws, local.shuffle_options) tested on a set
# no RL setting was chosen on, seed 404 (8 videos, 186 tasks). Page: docs/experiments/rl-shuffled-options.md.
# Needs runs/tiny_ship (rl-three-seeds.sh) and runs/rl_lr/taura_lr25 (rl-step-size.sh) for the after-the-fact row.
set -euo pipefail

SET=404
VIDEOS=8
OUT=runs/rl_conf

cd "$(dirname "$0")/../../.."
source recipes/tiny_agent/studies/common.sh

# the SFT, blind, uniform, random and prior rows on the set
copy_agent runs/s${SET}_agent
python -m recipes.tiny_agent --out runs/s${SET}_agent --eval-seed $SET --eval-videos $VIDEOS --stages eval --eval-jobs 2

run() { train $OUT/$1 "${EVAL_TASKS[@]}" local.eval_every=0 local.seed=0 taura.mode=$2 "${DRGRPO[@]}" local.shuffle_options=true; }
taura_shuf() { run taura_shuf taura; }
grpo_shuf() { run grpo_shuf grpo; }
in_parallel taura_shuf grpo_shuf
python -m recipes.tiny_agent.plot_runs $OUT/{taura_shuf,grpo_shuf} --out docs/figures/rl_conf_runs.png   # mcq_letters

for NAME in taura_shuf grpo_shuf; do
    media_and_blind $OUT/$NAME/final runs/s${SET}_agent $OUT/eval${SET}_$NAME
    python scripts/compare_runs.py $OUT/eval${SET}_$NAME runs/s${SET}_agent/eval/agent   # the primary for taura_shuf
    python scripts/compare_runs.py $OUT/eval${SET}_$NAME $OUT/eval${SET}_${NAME}_blind
    python scripts/compare_runs.py $OUT/eval${SET}_${NAME}_blind runs/s${SET}_agent/eval/agent_blind   # the blind rows' rise
done
python scripts/compare_runs.py $OUT/eval${SET}_taura_shuf $OUT/eval${SET}_grpo_shuf
# after the fact: the lr 2.5e-4 TAURA run without shuffled options
heldout runs/rl_lr/taura_lr25/final runs/s${SET}_agent/synth_eval/tasks.jsonl $OUT/eval${SET}_taura_lr25
python scripts/compare_runs.py $OUT/eval${SET}_taura_lr25 runs/s${SET}_agent/eval/agent
python scripts/compare_runs.py $OUT/eval${SET}_taura_shuf $OUT/eval${SET}_taura_lr25
