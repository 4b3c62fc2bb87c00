#!/usr/bin/env bash
# Does the trainer learn? The same eight training tasks every iteration (local.task_pool=8): TAURA and GRPO (batch
# 1), TAURA continued to 32 iterations (batch 2), TAURA with shuffled options (batch 3); a sampled eval on the
# pool's tasks with the media and blind, and the held-out rows on seed 202.
# Page: docs/experiments/rl-fixed-tasks.md. Needs runs/tiny_ship with its SFT rows (rl-three-seeds.sh).
set -euo pipefail

OUT=runs/rl_pool
POOL_SEEDS="0 1 2 3 4 5 6 7"   # sampled pool evals at temperature 1.0, one per seed

cd "$(dirname "$0")/../../.."
source recipes/tiny_agent/studies/common.sh

run() {
    train $OUT/$1 "${EVAL_TASKS[@]}" local.eval_every=4 local.seed=0 taura.mode=$2 "${DRGRPO[@]}" \
        'local.task_types=[mcq,num,size]' local.task_pool=8 "${@:3}"
}
taura_pool() { run taura_pool taura; }
grpo_pool() { run grpo_pool grpo; }
in_parallel taura_pool grpo_pool
# batch 2: TAURA resumed from its iteration-16 checkpoint to 32 iterations, in a copy of its folder
if [ ! -d $OUT/taura_pool32 ]; then
    cp -r $OUT/taura_pool $OUT/taura_pool32 && rm -rf $OUT/taura_pool32/final
fi
run taura_pool32 taura local.iterations=32
# batch 3: every rollout episode's choices in their own seeded order
run taura_pool_shuf taura local.shuffle_options=true local.eval_every=0

# training: fixed_task_change (per task: fixed_task_change.per_task), mcq_letters, flat groups; the figure
python -m recipes.tiny_agent.plot_runs $OUT/{taura_pool,grpo_pool,taura_pool32} --out docs/figures/rl_pool_runs.png
python -m recipes.tiny_agent.plot_runs $OUT/taura_pool_shuf --out $OUT/shuf.png

# the pool eval: the pool's tasks (every seed-0 run draws the same pool) and their blind copies
python -m recipes.tiny_agent.sets pool $OUT/taura_pool $SHIP/synth_train/tasks.jsonl --out $OUT/pool --blind $OUT/pool_blind
pool_eval() {  # pool_eval MODEL TASKS OUT SEED: one sampled eval on the pool, as training samples
    OMP_NUM_THREADS=1 python scripts/eval.py unfreeze=true benchmark.dataset=tasks benchmark.annotations=$2 \
        benchmark.name=tiny-pool +benchmark.dataset_kwargs.allow_outside_media_root=true policy.name=transformers \
        out_dir=$3/s$4 workers=1 progress=false seed=$4 benchmark.temperature=1.0 +policy.kwargs.model=$1 \
        +policy.kwargs.max_new_tokens=384 +policy.kwargs.device=cpu +policy.kwargs.constrained=True "${LIMITS[@]}"
}
for ROW in sft:$SHIP/agent taura_pool:$OUT/taura_pool/final grpo_pool:$OUT/grpo_pool/final \
    taura_pool_shuf:$OUT/taura_pool_shuf/final; do
    NAME=${ROW%%:*} MODEL=${ROW#*:}
    for S in $POOL_SEEDS; do
        pool_eval $MODEL $OUT/pool/tasks.jsonl $OUT/pooleval_$NAME $S
        pool_eval $MODEL $OUT/pool_blind/tasks.jsonl $OUT/pooleval_${NAME}_blind $S
    done
    MEDIA=$(printf "$OUT/pooleval_$NAME/s%s+" $POOL_SEEDS)
    BLIND=$(printf "$OUT/pooleval_${NAME}_blind/s%s+" $POOL_SEEDS)
    SFT=$(printf "$OUT/pooleval_sft/s%s+" $POOL_SEEDS)
    python scripts/compare_runs.py --average ${MEDIA%+} ${BLIND%+}   # - blind
    if [ $NAME != sft ]; then
        python scripts/compare_runs.py --average ${MEDIA%+} ${SFT%+}   # - SFT
    fi
    # the pool eval's multiple-choice answers by letter, and its looks per episode
    python - $OUT/pooleval_$NAME <<'PY'
import collections, glob, json, sys
eps = [json.loads(line) for f in sorted(glob.glob(sys.argv[1] + "/s*/trajectories.jsonl")) for line in open(f)]
print(dict(sorted(collections.Counter(e["answer"] for e in eps if e["choices"]).items())),
      "frames/episode", round(sum(e["frames_used"] for e in eps) / len(eps), 1),
      "audio s/episode", round(sum(e["audio_seconds_used"] for e in eps) / len(eps)))
PY
done

# held-out rows on seed 202 (batch 2: media only)
for NAME in taura_pool grpo_pool taura_pool_shuf; do
    media_and_blind $OUT/$NAME/final $SHIP $OUT/eval_$NAME
    python scripts/compare_runs.py $OUT/eval_$NAME $SHIP/eval/agent
    python scripts/compare_runs.py $OUT/eval_$NAME $OUT/eval_${NAME}_blind
done
heldout $OUT/taura_pool32/final $SHIP/synth_eval/tasks.jsonl $OUT/eval_taura_pool32
python scripts/compare_runs.py $OUT/eval_taura_pool32 $SHIP/eval/agent
python scripts/compare_runs.py $OUT/eval_taura_pool $OUT/eval_grpo_pool
