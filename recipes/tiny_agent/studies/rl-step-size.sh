#!/usr/bin/env bash
# A larger step (lr 5e-4, then 2.5e-4), Dr.GRPO, and a KL bound (local.target_kl) from the shipped agent;
# seed 0, otherwise the three-seed study's settings; held-out and blind rows on seed 202.
# Page: docs/experiments/rl-step-size.md. Needs runs/tiny_ship with its SFT rows (rl-three-seeds.sh).
set -euo pipefail

OUT=runs/rl_lr

cd "$(dirname "$0")/../../.."
source recipes/tiny_agent/studies/common.sh

run() {
    train $OUT/$1 "${EVAL_TASKS[@]}" local.eval_every=4 local.seed=0 taura.mode=$2 \
        actor_rollout_ref.actor.optim.lr=$3 algorithm.norm_adv_by_std_in_grpo=false "${@:4}"
}
taura_lr5() { run taura_lr5 taura 5e-4; }
grpo_lr5() { run grpo_lr5 grpo 5e-4; }
taura_lr25() { run taura_lr25 taura 2.5e-4; }
grpo_lr25() { run grpo_lr25 grpo 2.5e-4; }
taura_lr5_tkl() { run taura_lr5_tkl taura 5e-4 local.target_kl=0.02; }
in_parallel taura_lr5 grpo_lr5   # the first batch (its guard: approx. KL per update well under 0.1)
in_parallel taura_lr25 grpo_lr25 taura_lr5_tkl   # the second batch, three at a time

heldout $OUT/taura_lr5/final $SHIP/synth_eval/tasks.jsonl $OUT/eval_taura_lr5
python scripts/compare_runs.py $OUT/eval_taura_lr5 $SHIP/eval/agent
for NAME in taura_lr25 grpo_lr25 taura_lr5_tkl; do
    media_and_blind $OUT/$NAME/final $SHIP $OUT/eval_$NAME
    python scripts/compare_runs.py $OUT/eval_$NAME $SHIP/eval/agent   # - SFT; by type
    python scripts/compare_runs.py $OUT/eval_$NAME $OUT/eval_${NAME}_blind   # - blind
done
python scripts/compare_runs.py $OUT/eval_taura_lr25 $OUT/eval_grpo_lr25
python scripts/compare_runs.py $OUT/eval_taura_lr5_tkl $OUT/eval_taura_lr25
# training columns, flat groups, updates cut short by the bound, and the figure
python -m recipes.tiny_agent.plot_runs $OUT/{taura_lr25,grpo_lr25,taura_lr5_tkl} --out docs/figures/rl_lr_runs.png
python -m recipes.tiny_agent.plot_runs $OUT/{taura_lr5,grpo_lr5} --out $OUT/lr5.png
