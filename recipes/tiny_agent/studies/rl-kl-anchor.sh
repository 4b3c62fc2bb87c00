#!/usr/bin/env bash
# Batch 10, pre-registered: batch 8's runs with a KL anchor to the SFT policy (actor.use_kl_loss, coefficient 0.2,
# low_var_kl), tested on seed 1010 (16 videos, 374 tasks). Page: docs/experiments/rl-kl-anchor.md.
# Needs runs/tiny_ship (rl-three-seeds.sh).
set -euo pipefail

SET=1010
VIDEOS=16
OUT=runs/rl_kl

cd "$(dirname "$0")/../../.."
source recipes/tiny_agent/studies/common.sh

taura_kl() { train $OUT/taura_kl "${ANCHORED[@]}" local.seed=0 taura.mode=taura; }
grpo_kl() { train $OUT/grpo_kl "${ANCHORED[@]}" local.seed=0 taura.mode=grpo; }
in_parallel taura_kl grpo_kl
# the set is made after both runs ended; its SFT rows are read only after both policies' media rows exist
copy_agent runs/s${SET}_agent
python -m recipes.tiny_agent --out runs/s${SET}_agent --eval-seed $SET --eval-videos $VIDEOS --stages eval --eval-jobs 2

for NAME in taura_kl grpo_kl; do
    media_and_blind $OUT/$NAME/final runs/s${SET}_agent $OUT/eval${SET}_$NAME
    python scripts/compare_runs.py $OUT/eval${SET}_$NAME runs/s${SET}_agent/eval/agent   # the primary for taura_kl
    python scripts/compare_runs.py $OUT/eval${SET}_$NAME $OUT/eval${SET}_${NAME}_blind   # media - blind
    python scripts/compare_runs.py $OUT/eval${SET}_${NAME}_blind runs/s${SET}_agent/eval/agent_blind   # the prior
    python -m recipes.tiny_agent.probes.turn_labels --trajectories $OUT/eval${SET}_$NAME/trajectories.jsonl \
        --tasks runs/s${SET}_agent/synth_eval/tasks.jsonl   # evidence reach, entropy AUROC
done
python scripts/compare_runs.py $OUT/eval${SET}_taura_kl $OUT/eval${SET}_grpo_kl   # TAURA - GRPO
python -m recipes.tiny_agent.probes.observations runs/s${SET}_agent/eval/agent $OUT/eval${SET}_{taura,grpo}_kl   # predictions 2, 3
python -m recipes.tiny_agent.probes.reading_breakdown $OUT/grpo_kl $OUT/taura_kl   # event frames read, by half
python -m recipes.tiny_agent.plot_runs $OUT/{taura_kl,grpo_kl} --out docs/figures/rl_kl_runs.png   # max/last ref_kl
training_ends $OUT/taura_kl $OUT/grpo_kl   # predictions 1 and 4: ref_kl and the reading share
answers_by_category runs/s${SET}_agent/eval/agent{,_blind} $OUT/eval${SET}_{taura,grpo}_kl{,_blind}
