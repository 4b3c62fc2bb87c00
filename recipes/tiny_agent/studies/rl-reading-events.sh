#!/usr/bin/env bash
# Batch 8, pre-registered: batch 7's runs with env.reward.reading_scope=events (the reading credit counts only
# frames with an event and audio spans with a sound), tested on seed 808 (16 videos, 377 tasks).
# Page: docs/experiments/rl-reading-events.md. Needs runs/tiny_ship (rl-three-seeds.sh).
set -euo pipefail

SET=808
VIDEOS=16
OUT=runs/rl_events

cd "$(dirname "$0")/../../.."
source recipes/tiny_agent/studies/common.sh

# the SFT, blind, uniform, random and prior rows (read only after both policies were evaluated)
copy_agent runs/s${SET}_agent
python -m recipes.tiny_agent --out runs/s${SET}_agent --eval-seed $SET --eval-videos $VIDEOS --stages eval --eval-jobs 2

EVENTS_RUN=(local.eval_every=0 local.seed=0 "${DRGRPO[@]}" local.shuffle_options=true "${GATE[@]}" "${BONUS[@]}"
    "${READING[@]}" "${EVENTS[@]}" local.progress=false)
taura_events() { train $OUT/taura_events "${EVENTS_RUN[@]}" taura.mode=taura; }
grpo_events() { train $OUT/grpo_events "${EVENTS_RUN[@]}" taura.mode=grpo; }
in_parallel taura_events grpo_events
training_ends $OUT/grpo_events $OUT/taura_events
python -m recipes.tiny_agent.probes.reading_breakdown $OUT/grpo_events $OUT/taura_events   # predictions 1 and 2

circular runs/s${SET}_agent/agent runs/s${SET}_agent $OUT/circ${SET}_sft
for NAME in taura_events grpo_events; do
    media_and_blind $OUT/$NAME/final runs/s${SET}_agent $OUT/eval${SET}_$NAME
    circular $OUT/$NAME/final runs/s${SET}_agent $OUT/circ${SET}_$NAME
    python scripts/compare_runs.py $OUT/eval${SET}_$NAME runs/s${SET}_agent/eval/agent   # the primary for taura_events
    python scripts/compare_runs.py $OUT/eval${SET}_$NAME $OUT/eval${SET}_${NAME}_blind
    python scripts/compare_runs.py $OUT/eval${SET}_${NAME}_blind runs/s${SET}_agent/eval/agent_blind   # blind - SFT blind
    python scripts/compare_runs.py --circular $OUT/circ${SET}_$NAME $OUT/circ${SET}_sft   # whole questions
    python -m recipes.tiny_agent.probes.turn_labels --trajectories $OUT/eval${SET}_$NAME/trajectories.jsonl \
        --tasks runs/s${SET}_agent/synth_eval/tasks.jsonl   # evidence reach, entropy AUROC
done
python -m recipes.tiny_agent.probes.turn_labels --trajectories runs/s${SET}_agent/eval/agent/trajectories.jsonl \
    --tasks runs/s${SET}_agent/synth_eval/tasks.jsonl   # SFT's
python scripts/compare_runs.py $OUT/eval${SET}_taura_events $OUT/eval${SET}_grpo_events   # TAURA - GRPO
python -m recipes.tiny_agent.probes.observations runs/s${SET}_agent/eval/agent $OUT/eval${SET}_taura_events \
    $OUT/eval${SET}_grpo_events
