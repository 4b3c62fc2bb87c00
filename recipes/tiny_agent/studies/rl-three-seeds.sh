#!/usr/bin/env bash
# TAURA and GRPO from the shipped agent, three training seeds each, 16 iterations of 8 tasks x 8 episodes, tested
# on the recipe's held-out set (seed 202). Page: docs/experiments/rl-three-seeds.md. About 35-57 minutes a run,
# two runs at a time on 2 cores.
set -euo pipefail

SEEDS="0 1 2"
OUT=runs/rl_ship

cd "$(dirname "$0")/../../.."
source recipes/tiny_agent/studies/common.sh

ship_data   # the training and held-out tasks, and the shipped weights, in runs/tiny_ship
python -m recipes.tiny_agent --out runs/tiny_ship --stages eval --eval-jobs 2   # the SFT rows (the tiny agent's table)

for SEED in $SEEDS; do
    taura() { train $OUT/taura_s$SEED "${EVAL_TASKS[@]}" local.eval_every=4 local.seed=$SEED taura.mode=taura; }
    grpo() { train $OUT/grpo_s$SEED "${EVAL_TASKS[@]}" local.eval_every=4 local.seed=$SEED taura.mode=grpo; }
    in_parallel taura grpo
done
for SEED in $SEEDS; do
    for MODE in taura grpo; do
        heldout $OUT/${MODE}_s$SEED/final $SHIP/synth_eval/tasks.jsonl $OUT/eval_${MODE}_s$SEED
        python scripts/compare_runs.py $OUT/eval_${MODE}_s$SEED $SHIP/eval/agent
    done
done
TAURA3=$OUT/eval_taura_s0+$OUT/eval_taura_s1+$OUT/eval_taura_s2
GRPO3=$OUT/eval_grpo_s0+$OUT/eval_grpo_s1+$OUT/eval_grpo_s2
python scripts/compare_runs.py --average $TAURA3 $SHIP/eval/agent   # the mean of three seeds - SFT, by type
python scripts/compare_runs.py --average $GRPO3 $SHIP/eval/agent
python scripts/compare_runs.py --average $TAURA3 $GRPO3

# what TAURA rescaled, and entropy against discovery turns, in training and held out
python -m recipes.tiny_agent.probes.turn_labels --trajectories $OUT/taura_s{0,1,2}/rollouts.jsonl \
    --tasks $SHIP/synth_train/tasks.jsonl
python -m recipes.tiny_agent.probes.turn_labels --trajectories $OUT/eval_taura_s0/trajectories.jsonl \
    --tasks $SHIP/synth_eval/tasks.jsonl
python -m recipes.tiny_agent.plot_runs $OUT/{taura,grpo}_s{0,1,2} --out docs/figures/rl_ship_runs.png

# the turn budget after RL: TAURA seed 0 (chosen before the runs) and the SFT agent at K = 2, 4, 8
for ROW in taura_s0:$OUT/taura_s0/final sft:$SHIP/agent; do
    OMP_NUM_THREADS=1 python scripts/turn_scaling.py unfreeze=true benchmark.dataset=tasks \
        benchmark.annotations=$SHIP/synth_eval/tasks.jsonl benchmark.name=tiny-heldout 'benchmark.dataset_kwargs={}' \
        policy.name=transformers out_dir=$OUT/scaling_${ROW%%:*} workers=1 progress=false \
        overlap_guard.train_set=$SHIP/synth_train/tasks.jsonl +policy.kwargs.model=${ROW#*:} \
        +policy.kwargs.max_new_tokens=384 +policy.kwargs.device=cpu +policy.kwargs.constrained=True \
        "${LIMITS[@]}" 'scaling.ks=[2,4,8]' 'scaling.seeds=[0]'
done
for K in 002 004 008; do
    python scripts/compare_runs.py $OUT/scaling_taura_s0/K$K-s0 $OUT/scaling_sft/K$K-s0
done
