#!/usr/bin/env bash
# Batch 6, pre-registered: batch 5's runs with env.reward.evidence_bonus=0.2 (a dense credit for looking at the
# evidence), tested on seed 606 (8 videos, 192 tasks); the filter_groups check; seed 505 exploratory rows.
# Page: docs/experiments/rl-dense-credit.md. Needs runs/tiny_ship, runs/s505_agent and runs/rl_gate (batch 5).
set -euo pipefail

SET=606
VIDEOS=8
OUT=runs/rl_dense

cd "$(dirname "$0")/../../.."
source recipes/tiny_agent/studies/common.sh

copy_agent runs/s${SET}_agent
python -m recipes.tiny_agent --out runs/s${SET}_agent --eval-seed $SET --eval-videos $VIDEOS --stages eval --eval-jobs 2

# the plan's prediction: batch 5's groups rescored with the bonus
python - runs/rl_gate/taura_gate/rollouts.jsonl <<'PY'
import collections, json, sys
groups = collections.defaultdict(list)
for line in open(sys.argv[1]):
    r = json.loads(line)
    groups[r["meta"]["iteration"], r["id"].split("-")[0]].append((r["reward"] or 0.0, r["meta"]["evidence_seen"]))
for bonus in (0.0, 0.2):
    flat = sum(len({s + bonus if seen else 0.0 for s, seen in g}) == 1 for g in groups.values())
    print(f"gate, bonus {bonus}: {flat} of {len(groups)} groups flat")
PY

DENSE=("${EVAL_TASKS[@]}" local.eval_every=0 local.seed=0 "${DRGRPO[@]}" local.shuffle_options=true "${GATE[@]}" "${BONUS[@]}")
taura_dense() { train $OUT/taura_dense "${DENSE[@]}" taura.mode=taura; }
grpo_dense() { train $OUT/grpo_dense "${DENSE[@]}" taura.mode=grpo; }
in_parallel taura_dense grpo_dense
python -m recipes.tiny_agent.plot_runs $OUT/{taura_dense,grpo_dense} --out docs/figures/rl_dense_runs.png

# the filter_groups check: one iteration, alone, two threads (its metrics.csv: groups_played, groups_flat,
# gen_batches, adv_abs_mean, seconds)
train $OUT/fg_check "${DENSE[@]}" taura.mode=taura local.iterations=1 local.threads=2 \
    algorithm.filter_groups.enable=true algorithm.filter_groups.max_num_gen_batches=3

for NAME in taura_dense grpo_dense; do
    media_and_blind $OUT/$NAME/final runs/s${SET}_agent $OUT/eval${SET}_$NAME
    heldout $OUT/$NAME/final runs/s505_agent/synth_eval/tasks.jsonl $OUT/eval505_$NAME   # exploratory
    python scripts/compare_runs.py $OUT/eval${SET}_$NAME runs/s${SET}_agent/eval/agent   # the primary for taura_dense
    python scripts/compare_runs.py $OUT/eval${SET}_$NAME $OUT/eval${SET}_${NAME}_blind
    python scripts/compare_runs.py $OUT/eval${SET}_${NAME}_blind runs/s${SET}_agent/eval/agent_blind
    python scripts/compare_runs.py $OUT/eval505_$NAME runs/s505_agent/eval/agent
    python scripts/compare_runs.py $OUT/eval505_$NAME+$OUT/eval${SET}_$NAME \
        runs/s505_agent/eval/agent+runs/s${SET}_agent/eval/agent   # pooled over 505 and 606
    python -m recipes.tiny_agent.probes.turn_labels --trajectories $OUT/eval${SET}_$NAME/trajectories.jsonl \
        --tasks runs/s${SET}_agent/synth_eval/tasks.jsonl   # evidence reach
    python -m recipes.tiny_agent.probes.turn_labels --trajectories $OUT/eval${SET}_${NAME}_blind/trajectories.jsonl \
        --tasks runs/s${SET}_agent/synth_blind/tasks.jsonl   # score_by_reach on blanked media
    mcq_letters $OUT/eval${SET}_$NAME $OUT/eval505_$NAME $OUT/eval${SET}_${NAME}_blind
done
python scripts/compare_runs.py $OUT/eval${SET}_taura_dense $OUT/eval${SET}_grpo_dense
