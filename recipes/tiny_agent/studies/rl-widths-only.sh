#!/usr/bin/env bash
# Batch 16, pre-registered: the held TAURA command and its GRPO twin with every rollout a width question
# ('local.task_types=[size]'), 32 iterations, seed 0; tested on seed 1616 (32 videos, 753 questions).
# Page: docs/experiments/rl-widths-only.md. Needs runs/tiny_ship (rl-three-seeds.sh).
set -euo pipefail

SET=1616
VIDEOS=32
OUT=runs/rl_size

cd "$(dirname "$0")/../../.."
source recipes/tiny_agent/studies/common.sh

taura_size() { train $OUT/taura_size "${HELD[@]}" local.seed=0 'local.task_types=[size]'; }
grpo_size() { train $OUT/grpo_size "${GRPO_KL[@]}" local.seed=0 'local.task_types=[size]'; }
in_parallel taura_size grpo_size
python -m recipes.tiny_agent.plot_runs $OUT/{taura_size,grpo_size} --out $OUT/size.png   # width score, ref_kl, flat groups

copy_agent runs/s${SET}_agent
python -m recipes.tiny_agent --out runs/s${SET}_agent --eval-seed $SET --eval-videos $VIDEOS --stages eval --eval-jobs 2
for NAME in taura_size grpo_size; do
    heldout $OUT/$NAME/final runs/s${SET}_agent/synth_eval/tasks.jsonl $OUT/eval${SET}_$NAME
    python scripts/compare_runs.py $OUT/eval${SET}_$NAME runs/s${SET}_agent/eval/agent   # the primary for taura_size
    python scripts/compare_runs.py $OUT/eval${SET}_$NAME runs/s${SET}_agent/eval/agent --cluster media
    python scripts/compare_runs.py $OUT/eval${SET}_$NAME runs/s${SET}_agent/eval/prior
done
python scripts/compare_runs.py $OUT/eval${SET}_taura_size $OUT/eval${SET}_grpo_size --cluster media
heldout $OUT/taura_size/final runs/s${SET}_agent/synth_blind/tasks.jsonl $OUT/eval${SET}_taura_size_blind
python scripts/compare_runs.py $OUT/eval${SET}_taura_size $OUT/eval${SET}_taura_size_blind --cluster media
python scripts/compare_runs.py $OUT/eval${SET}_taura_size_blind runs/s${SET}_agent/eval/agent_blind
python scripts/compare_runs.py runs/s${SET}_agent/eval/agent runs/s${SET}_agent/eval/agent_blind --cluster media
answers_by_category runs/s${SET}_agent/eval/agent $OUT/eval${SET}_taura_size{,_blind} $OUT/eval${SET}_grpo_size
