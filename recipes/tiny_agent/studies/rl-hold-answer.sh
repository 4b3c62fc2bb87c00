#!/usr/bin/env bash
# Batch 11, pre-registered: batch 10's TAURA run with taura.hold_answer_turns=true (answer turns at weight 1, out
# of the group mean), and batch 10's GRPO run repeated as the control; tested on seed 1111 (16 videos, 378 tasks).
# Page: docs/experiments/rl-hold-answer.md. Needs runs/tiny_ship (rl-three-seeds.sh).
set -euo pipefail

SET=1111
VIDEOS=16
OUT=runs/rl_hold

cd "$(dirname "$0")/../../.."
source recipes/tiny_agent/studies/common.sh

taura_hold() { train $OUT/taura_hold "${ANCHORED[@]}" local.seed=0 taura.mode=taura taura.hold_answer_turns=true; }
grpo_kl() { train $OUT/grpo_kl "${ANCHORED[@]}" local.seed=0 taura.mode=grpo; }
in_parallel taura_hold grpo_kl
copy_agent runs/s${SET}_agent
python -m recipes.tiny_agent --out runs/s${SET}_agent --eval-seed $SET --eval-videos $VIDEOS --stages eval --eval-jobs 2

for NAME in taura_hold grpo_kl; do
    media_and_blind $OUT/$NAME/final runs/s${SET}_agent $OUT/eval${SET}_$NAME
    python scripts/compare_runs.py $OUT/eval${SET}_$NAME runs/s${SET}_agent/eval/agent   # the primary for taura_hold
    python scripts/compare_runs.py $OUT/eval${SET}_$NAME $OUT/eval${SET}_${NAME}_blind   # media - blind
    python scripts/compare_runs.py $OUT/eval${SET}_${NAME}_blind runs/s${SET}_agent/eval/agent_blind   # the prior
    python -m recipes.tiny_agent.probes.turn_labels --trajectories $OUT/eval${SET}_$NAME/trajectories.jsonl \
        --tasks runs/s${SET}_agent/synth_eval/tasks.jsonl   # evidence reach, entropy AUROC
done
python -m recipes.tiny_agent.probes.turn_labels --trajectories runs/s${SET}_agent/eval/agent/trajectories.jsonl \
    --tasks runs/s${SET}_agent/synth_eval/tasks.jsonl
python scripts/compare_runs.py $OUT/eval${SET}_taura_hold $OUT/eval${SET}_grpo_kl   # TAURA - GRPO
python -m recipes.tiny_agent.probes.observations runs/s${SET}_agent/eval/agent $OUT/eval${SET}_{taura_hold,grpo_kl}   # prediction 5
python -m recipes.tiny_agent.plot_runs $OUT/{taura_hold,grpo_kl} --out docs/figures/rl_hold_runs.png   # weights, ref_kl
python -m recipes.tiny_agent.probes.reading_breakdown $OUT/grpo_kl $OUT/taura_hold
training_ends $OUT/taura_hold $OUT/grpo_kl
answers_by_category runs/s${SET}_agent/eval/agent{,_blind} $OUT/eval${SET}_{taura_hold,grpo_kl}{,_blind}
# prediction 1: the held run's applied weights on answer turns and on every other turn (turns, min, mean, max)
python - $OUT/taura_hold/rollouts.jsonl <<'PY'
import json, sys
w = {}
for line in open(sys.argv[1]):
    tr = json.loads(line)
    if tr["meta"]["iteration"] <= 16:  # this study's iterations (the 32-iteration study appends 17-32)
        for turn, x in zip(tr["turns"], tr["meta"]["turn_weights"]):
            w.setdefault(turn["action_type"] == "answer", []).append(x)
print({"answer" if k else "other": (len(v), round(min(v), 3), round(sum(v) / len(v), 3), round(max(v), 3))
       for k, v in w.items()})
PY
