#!/usr/bin/env bash
# Batch 20, pre-registered: the one TAURA policy the validation sets 1414 + 1515 select (batch 12's held TAURA,
# seed 0) on 96 fresh videos, seed 2020 (2,282 questions); primary: TAURA seed 0 - SFT by question and by video.
# Page: docs/experiments/rl-confirm.md. Needs runs/rl_hold and the rows of rl-one-policy-pooled.sh.
set -euo pipefail

SET=2020
VIDEOS=96
OUT=runs/rl_confirm

cd "$(dirname "$0")/../../.."
source recipes/tiny_agent/studies/common.sh

# the selection: seed N (0, 1, 2) over 1414 + 1515
for ROW in 0:runs/rl_seeds/eval1414_taura_s0 1:runs/rl_seeds/eval1414_taura_s1 2:runs/rl_seeds/eval1414_taura_s2; do
    python scripts/compare_runs.py ${ROW#*:}+runs/rl_power/eval1515_taura_s${ROW%%:*} \
        runs/s1414_agent/eval/agent+runs/s1515_agent/eval/agent
done

# the set and its SFT rows (agent, blind, uniform, random, prior), then the RL rows
copy_agent runs/s${SET}_agent
python -m recipes.tiny_agent --out runs/s${SET}_agent --eval-seed $SET --eval-videos $VIDEOS --stages eval --eval-jobs 2
heldout runs/rl_hold/taura_hold/final runs/s${SET}_agent/synth_eval/tasks.jsonl $OUT/eval${SET}_taura_s0
heldout runs/rl_hold/grpo_kl/final runs/s${SET}_agent/synth_eval/tasks.jsonl $OUT/eval${SET}_grpo_s0
for CLUSTER in "" "--cluster media"; do   # by question, then by video
    python scripts/compare_runs.py $OUT/eval${SET}_taura_s0 runs/s${SET}_agent/eval/agent $CLUSTER   # the primary
    python scripts/compare_runs.py $OUT/eval${SET}_taura_s0 $OUT/eval${SET}_grpo_s0 $CLUSTER   # TAURA - GRPO
    python scripts/compare_runs.py $OUT/eval${SET}_grpo_s0 runs/s${SET}_agent/eval/agent $CLUSTER   # GRPO - SFT
    python scripts/compare_runs.py runs/s${SET}_agent/eval/agent_blind runs/s${SET}_agent/eval/agent $CLUSTER
    python scripts/compare_runs.py runs/s${SET}_agent/eval/prior runs/s${SET}_agent/eval/agent $CLUSTER
done
python scripts/compare_runs.py $OUT/eval${SET}_taura_s0 runs/s${SET}_agent/eval/prior   # TAURA - prior
python - <<'PY'   # answers "2" to widths; frames and turns per question
import json
for run in ["runs/s2020_agent/eval/agent", "runs/rl_confirm/eval2020_taura_s0", "runs/rl_confirm/eval2020_grpo_s0"]:
    rows = [json.loads(x) for x in open(f"{run}/results.jsonl")]
    widths = [r for r in rows if r["category"] == "shape_width_size"]
    print(run, sum(r["prediction"] == 2 for r in widths), "of", len(widths), "widths answered 2;",
          round(sum(r["frames_used"] for r in rows) / len(rows), 1), "frames,",
          round(sum(r["turns"] for r in rows) / len(rows), 2), "turns")
PY

# pooled over the sets after the selection (1717-2020), and over all eight sets the policy met
AFTER=runs/rl_anchor/eval1717_taura_hold+runs/rl_num/eval1818_taura_hold_s0+runs/rl_flat/eval1919_taura_hold_s0+$OUT/eval${SET}_taura_s0
AFTER_SFT=runs/s1717_agent/eval/agent+runs/s1818_agent/eval/agent+runs/s1919_agent/eval/agent+runs/s${SET}_agent/eval/agent
python scripts/compare_runs.py $AFTER $AFTER_SFT
ALL=runs/rl_hold/eval1212_taura_hold32+runs/rl_hold/eval1313_taura_hold32+runs/rl_seeds/eval1414_taura_s0+runs/rl_power/eval1515_taura_s0+$AFTER
ALL_SFT=runs/s1212_agent/eval/agent+runs/s1313_agent/eval/agent+runs/s1414_agent/eval/agent+runs/s1515_agent/eval/agent+$AFTER_SFT
python scripts/compare_runs.py $ALL $ALL_SFT
python scripts/compare_runs.py $ALL $ALL_SFT --cluster media
