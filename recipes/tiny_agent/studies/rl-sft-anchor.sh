#!/usr/bin/env bash
# Batch 17, pre-registered: the held TAURA command and its GRPO twin with local.sft_anchor (PPO-ptx on the shipped
# agent's own SFT rows: 0.5 x the NLL of 2 rows a step), seed 0; tested on seed 1717 (32 videos, 747 questions).
# The runs were planned for 32 iterations and stopped once checkpoints/step-000016 was saved (an amendment); the
# trainer reads local.iterations only to end its loop, so 16 iterations give that checkpoint.
# Page: docs/experiments/rl-sft-anchor.md. Needs runs/rl_hold (rl-32-iterations.sh).
set -euo pipefail

SET=1717
VIDEOS=32
OUT=runs/rl_anchor

cd "$(dirname "$0")/../../.."
source recipes/tiny_agent/studies/common.sh

# the SFT rows the anchor replays (their messages hash matches the shipped manifest's)
python -m recipes.tiny_agent --out runs/tiny_ship --stages data synth export
ship_data
ANCHOR=(local.save_every=8 local.sft_anchor.data=$SHIP/sft_data/train.parquet local.sft_anchor.coef=0.5
    local.sft_anchor.rows=2 local.iterations=16)
taura_anchor() { train $OUT/taura_anchor "${HELD[@]}" local.seed=0 "${ANCHOR[@]}"; }
grpo_anchor() { train $OUT/grpo_anchor "${GRPO_KL[@]}" local.seed=0 "${ANCHOR[@]}"; }
in_parallel taura_anchor grpo_anchor

copy_agent runs/s${SET}_agent
python -m recipes.tiny_agent --out runs/s${SET}_agent --eval-seed $SET --eval-videos $VIDEOS --stages eval --eval-jobs 2
for ROW in taura_anchor:$OUT/taura_anchor/checkpoints/step-000016 grpo_anchor:$OUT/grpo_anchor/checkpoints/step-000016 \
    taura_hold:runs/rl_hold/taura_hold/final; do
    NAME=${ROW%%:*} MODEL=${ROW#*:}
    if [ $NAME = grpo_anchor ]; then  # media row only
        heldout $MODEL runs/s${SET}_agent/synth_eval/tasks.jsonl $OUT/eval${SET}_$NAME
    else
        media_and_blind $MODEL runs/s${SET}_agent $OUT/eval${SET}_$NAME
    fi
    python scripts/compare_runs.py $OUT/eval${SET}_$NAME runs/s${SET}_agent/eval/agent   # the primary for taura_anchor
    python scripts/compare_runs.py $OUT/eval${SET}_$NAME runs/s${SET}_agent/eval/agent --cluster media
    python scripts/compare_runs.py $OUT/eval${SET}_$NAME runs/s${SET}_agent/eval/prior
done
python scripts/compare_runs.py $OUT/eval${SET}_taura_anchor $OUT/eval${SET}_taura_hold --cluster media
python scripts/compare_runs.py $OUT/eval${SET}_taura_anchor $OUT/eval${SET}_grpo_anchor --cluster media
for NAME in taura_anchor taura_hold; do
    python scripts/compare_runs.py $OUT/eval${SET}_$NAME $OUT/eval${SET}_${NAME}_blind --cluster media
    python scripts/compare_runs.py $OUT/eval${SET}_${NAME}_blind runs/s${SET}_agent/eval/agent_blind
done
python scripts/compare_runs.py runs/s${SET}_agent/eval/agent runs/s${SET}_agent/eval/agent_blind --cluster media
# beep counts: score, answers, audio requests; training by quarters of 16 iterations (first, min, max, sum)
python - <<'PY'
import collections, csv, json
for d in ["runs/s1717_agent/eval/agent", "runs/rl_anchor/eval1717_taura_hold", "runs/rl_anchor/eval1717_taura_anchor"]:
    every = list(map(json.loads, open(f"{d}/results.jsonl")))
    rows = [r for r in every if r["category"] == "beep_count_num"]
    print(d, collections.Counter(r["stop_reason"] for r in every), sum(r["reward"] for r in rows) / len(rows),
          sorted(collections.Counter(r["prediction"] for r in rows).items()),
          sum(r["action_counts"].get("get_audio", 0) for r in rows))
for run in ["rl_anchor/taura_anchor", "rl_anchor/grpo_anchor", "rl_hold/taura_hold"]:
    m = list(csv.DictReader(open(f"runs/{run}/metrics.csv")))[:16]
    for k in ["score_mean", "turns", "frames", "sft_nll", "ref_kl", "seconds"]:
        v = [float(r.get(k) or 0) for r in m]
        print(run, k, [round(sum(v[i:i + 4]) / 4, 3) for i in range(0, 16, 4)], v[0], min(v), max(v), sum(v))
PY
