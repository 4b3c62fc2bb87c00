#!/usr/bin/env bash
# Batch 7, pre-registered: batch 6's runs with env.reward.reading_credit=0.5 (pay the share of served percepts an
# Observation described exactly), tested on seed 707 (8 videos, 186 tasks), with circular multiple-choice rows.
# Page: docs/experiments/rl-reading-credit.md. Needs runs/tiny_ship (rl-three-seeds.sh).
set -euo pipefail

SET=707
VIDEOS=8
OUT=runs/rl_read

cd "$(dirname "$0")/../../.."
source recipes/tiny_agent/studies/common.sh

# the SFT, blind, uniform, random and prior rows (read only after both policies were evaluated)
copy_agent runs/s${SET}_agent
python -m recipes.tiny_agent --out runs/s${SET}_agent --eval-seed $SET --eval-videos $VIDEOS --stages eval --eval-jobs 2

READ=(local.eval_every=0 local.seed=0 "${DRGRPO[@]}" local.shuffle_options=true "${GATE[@]}" "${BONUS[@]}"
    "${READING[@]}" local.progress=false)
taura_read() { train $OUT/taura_read "${READ[@]}" taura.mode=taura; }
grpo_read() { train $OUT/grpo_read "${READ[@]}" taura.mode=grpo; }
in_parallel taura_read grpo_read
python -m recipes.tiny_agent.plot_runs $OUT/{taura_read,grpo_read} --out docs/figures/rl_read_runs.png
training_ends $OUT/grpo_read $OUT/taura_read   # reading share, turns, frames, seconds: first and last four
python -m recipes.tiny_agent.probes.reading_breakdown $OUT/grpo_read $OUT/taura_read   # empty vs event frames read

circular runs/s${SET}_agent/agent runs/s${SET}_agent $OUT/circ${SET}_sft
for NAME in taura_read grpo_read; do
    media_and_blind $OUT/$NAME/final runs/s${SET}_agent $OUT/eval${SET}_$NAME
    circular $OUT/$NAME/final runs/s${SET}_agent $OUT/circ${SET}_$NAME
    python scripts/compare_runs.py $OUT/eval${SET}_$NAME runs/s${SET}_agent/eval/agent   # the primary for taura_read
    python scripts/compare_runs.py $OUT/eval${SET}_$NAME $OUT/eval${SET}_${NAME}_blind
    python scripts/compare_runs.py --circular $OUT/circ${SET}_$NAME $OUT/circ${SET}_sft   # whole questions
    python -m recipes.tiny_agent.probes.turn_labels --trajectories $OUT/eval${SET}_$NAME/trajectories.jsonl \
        --tasks runs/s${SET}_agent/synth_eval/tasks.jsonl   # evidence reach
done
python scripts/compare_runs.py $OUT/eval${SET}_taura_read $OUT/eval${SET}_grpo_read
python -m recipes.tiny_agent.probes.observations runs/s${SET}_agent/eval/agent $OUT/eval${SET}_taura_read \
    $OUT/eval${SET}_grpo_read   # reading, reading_events, event recall
