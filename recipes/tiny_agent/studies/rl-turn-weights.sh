#!/usr/bin/env bash
# Information-gain and oracle turn weights, and TAURA and GRPO on a narrower task draw ([mcq, num, size]), from the
# shipped agent; seed 0, the three-seed study's settings; held-out and blind rows on seed 202.
# Page: docs/experiments/rl-turn-weights.md. Needs runs/tiny_ship with its SFT rows (rl-three-seeds.sh).
set -euo pipefail

OUT=runs/rl_modes
TYPES='local.task_types=[mcq,num,size]'

cd "$(dirname "$0")/../../.."
source recipes/tiny_agent/studies/common.sh

run() { train $OUT/$1 "${EVAL_TASKS[@]}" local.eval_every=4 local.seed=0 taura.mode=$2 "${@:3}"; }
ig() { run ig_s0 ig; }
oracle() { run oracle_s0 oracle; }
taura_types() { run taura_types_s0 taura "$TYPES"; }
grpo_types() { run grpo_types_s0 grpo "$TYPES"; }
in_parallel ig oracle
in_parallel taura_types grpo_types

for NAME in ig_s0 oracle_s0 taura_types_s0 grpo_types_s0; do
    media_and_blind $OUT/$NAME/final $SHIP $OUT/eval_$NAME
    python scripts/compare_runs.py $OUT/eval_$NAME $SHIP/eval/agent   # - SFT; by type
    python scripts/compare_runs.py $OUT/eval_$NAME $OUT/eval_${NAME}_blind   # - blind
    python -m recipes.tiny_agent.probes.turn_labels --trajectories $OUT/$NAME/rollouts.jsonl \
        --tasks $SHIP/synth_train/tasks.jsonl   # the weights each run applied
done
python scripts/compare_runs.py $OUT/eval_oracle_s0 $OUT/eval_ig_s0
python scripts/compare_runs.py $OUT/eval_taura_types_s0 $OUT/eval_grpo_types_s0
# training columns, times, KL and flat groups by task type (under `training`), and the figure
python -m recipes.tiny_agent.plot_runs $OUT/{ig,oracle,taura_types,grpo_types}_s0 --out docs/figures/rl_modes_runs.png
