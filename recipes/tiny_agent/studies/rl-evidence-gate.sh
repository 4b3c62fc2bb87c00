#!/usr/bin/env bash
# Batch 5, pre-registered: batch 4's runs with env.reward.evidence_gate=true (an episode's score counts only when a
# percept touched the evidence), tested on seed 505 (8 videos, 187 tasks).
# Page: docs/experiments/rl-evidence-gate.md. Needs runs/tiny_ship, runs/s404_agent and runs/rl_conf (batch 4).
set -euo pipefail

SET=505
VIDEOS=8
OUT=runs/rl_gate

cd "$(dirname "$0")/../../.."
source recipes/tiny_agent/studies/common.sh

copy_agent runs/s${SET}_agent
python -m recipes.tiny_agent --out runs/s${SET}_agent --eval-seed $SET --eval-videos $VIDEOS --stages eval --eval-jobs 2

run() {
    train $OUT/$1 "${EVAL_TASKS[@]}" local.eval_every=0 local.seed=0 taura.mode=$2 "${DRGRPO[@]}" \
        local.shuffle_options=true "${GATE[@]}"
}
taura_gate() { run taura_gate taura; }
grpo_gate() { run grpo_gate grpo; }
in_parallel taura_gate grpo_gate
python -m recipes.tiny_agent.plot_runs $OUT/{taura_gate,grpo_gate} --out docs/figures/rl_gate_runs.png

for ROW in taura_gate:$OUT/taura_gate/final grpo_gate:$OUT/grpo_gate/final taura_shuf:runs/rl_conf/taura_shuf/final; do
    NAME=${ROW%%:*} MODEL=${ROW#*:}
    if [ $NAME = taura_shuf ]; then  # batch 4's run: media row only
        heldout $MODEL runs/s${SET}_agent/synth_eval/tasks.jsonl $OUT/eval${SET}_$NAME
    else
        media_and_blind $MODEL runs/s${SET}_agent $OUT/eval${SET}_$NAME
        python scripts/compare_runs.py $OUT/eval${SET}_$NAME $OUT/eval${SET}_${NAME}_blind
        python scripts/compare_runs.py $OUT/eval${SET}_${NAME}_blind runs/s${SET}_agent/eval/agent_blind
    fi
    python scripts/compare_runs.py $OUT/eval${SET}_$NAME runs/s${SET}_agent/eval/agent   # the primary for taura_gate
    python -m recipes.tiny_agent.probes.turn_labels --trajectories $OUT/eval${SET}_$NAME/trajectories.jsonl \
        --tasks runs/s${SET}_agent/synth_eval/tasks.jsonl   # evidence reach ("evidence": any / first turn)
done
python scripts/compare_runs.py $OUT/eval${SET}_taura_gate $OUT/eval${SET}_grpo_gate
python scripts/compare_runs.py $OUT/eval${SET}_taura_gate $OUT/eval${SET}_taura_shuf   # what the gate cost
python -m recipes.tiny_agent.probes.turn_labels --trajectories runs/s404_agent/eval/agent/trajectories.jsonl \
    --tasks runs/s404_agent/synth_eval/tasks.jsonl   # score_by_reach: the counting figures that motivated it
