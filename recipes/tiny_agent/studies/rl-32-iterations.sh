#!/usr/bin/env bash
# Batch 12, pre-registered: batch 11's two runs resumed from their iteration-16 checkpoints to 32 iterations,
# tested on seed 1212 (16 videos, 369 tasks) with each policy's 16-iteration weights beside them; then seed 1313
# (an addendum: the same policies, media rows, and the held run's blind row last).
# Page: docs/experiments/rl-32-iterations.md. Needs runs/rl_hold from rl-hold-answer.sh.
set -euo pipefail

SET=1212
SET2=1313
VIDEOS=16
OUT=runs/rl_hold

cd "$(dirname "$0")/../../.."
source recipes/tiny_agent/studies/common.sh

# keep the 16-iteration weights: final/ is rewritten at the end of the longer run
for NAME in taura_hold grpo_kl; do
    [ -d $OUT/${NAME}_final16 ] || cp -r $OUT/$NAME/final $OUT/${NAME}_final16
done
taura_hold() { train $OUT/taura_hold "${HELD[@]}" local.seed=0; }   # resumes from step-000016
grpo_kl() { train $OUT/grpo_kl "${GRPO_KL[@]}" local.seed=0; }
in_parallel taura_hold grpo_kl

copy_agent runs/s${SET}_agent
python -m recipes.tiny_agent --out runs/s${SET}_agent --eval-seed $SET --eval-videos $VIDEOS --stages eval --eval-jobs 2
for NAME in taura_hold grpo_kl; do
    media_and_blind $OUT/$NAME/final runs/s${SET}_agent $OUT/eval${SET}_${NAME}32
    heldout $OUT/${NAME}_final16 runs/s${SET}_agent/synth_eval/tasks.jsonl $OUT/eval${SET}_${NAME}16
    python scripts/compare_runs.py $OUT/eval${SET}_${NAME}32 runs/s${SET}_agent/eval/agent   # the primary for taura_hold
    python scripts/compare_runs.py $OUT/eval${SET}_${NAME}16 runs/s${SET}_agent/eval/agent
    python scripts/compare_runs.py $OUT/eval${SET}_${NAME}32 $OUT/eval${SET}_${NAME}16   # 32 - 16
    python scripts/compare_runs.py $OUT/eval${SET}_${NAME}32 $OUT/eval${SET}_${NAME}32_blind   # media - blind
    python scripts/compare_runs.py $OUT/eval${SET}_${NAME}32_blind runs/s${SET}_agent/eval/agent_blind
    python -m recipes.tiny_agent.probes.turn_labels --trajectories $OUT/eval${SET}_${NAME}32/trajectories.jsonl \
        --tasks runs/s${SET}_agent/synth_eval/tasks.jsonl   # evidence reach, entropy AUROC
done
python -m recipes.tiny_agent.probes.turn_labels --trajectories runs/s${SET}_agent/eval/agent/trajectories.jsonl \
    --tasks runs/s${SET}_agent/synth_eval/tasks.jsonl
python scripts/compare_runs.py $OUT/eval${SET}_taura_hold32 $OUT/eval${SET}_grpo_kl32   # TAURA - GRPO
python -m recipes.tiny_agent.probes.observations runs/s${SET}_agent/eval/agent $OUT/eval${SET}_{taura_hold,grpo_kl}32
python -m recipes.tiny_agent.plot_runs $OUT/{taura_hold,grpo_kl} --out docs/figures/rl_hold32_runs.png   # ref_kl
answers_by_category runs/s${SET}_agent/eval/agent{,_blind} $OUT/eval${SET}_{taura_hold,grpo_kl}32{,_blind}
python - $OUT/{taura_hold,grpo_kl} <<'PY'
import csv, sys
for run in sys.argv[1:]:  # the training reward and score by quarters of 32 iterations, and the seconds
    rows = list(csv.DictReader(open(run + "/metrics.csv")))
    by8 = lambda k: [round(sum(float(r[k]) for r in rows[i:i + 8]) / 8, 3) for i in range(0, len(rows), 8)]
    print(run, "reward by 8 iterations", by8("reward_mean"), "score", by8("score_mean"),
          "seconds 1-16", round(sum(float(r["seconds"]) for r in rows[:16])),
          "17-32", round(sum(float(r["seconds"]) for r in rows[16:])))
PY

# the addendum: seed 1313, media rows, then the held run's blind row
copy_agent runs/s${SET2}_agent
python -m recipes.tiny_agent --out runs/s${SET2}_agent --eval-seed $SET2 --eval-videos $VIDEOS --stages eval --eval-jobs 2
for NAME in taura_hold grpo_kl; do
    heldout $OUT/$NAME/final runs/s${SET2}_agent/synth_eval/tasks.jsonl $OUT/eval${SET2}_${NAME}32
done
python scripts/compare_runs.py $OUT/eval${SET2}_taura_hold32 runs/s${SET2}_agent/eval/agent   # - SFT
python scripts/compare_runs.py $OUT/eval${SET2}_grpo_kl32 runs/s${SET2}_agent/eval/agent
python scripts/compare_runs.py $OUT/eval${SET2}_taura_hold32 $OUT/eval${SET2}_grpo_kl32   # TAURA - GRPO
heldout $OUT/taura_hold/final runs/s${SET2}_agent/synth_blind/tasks.jsonl $OUT/eval${SET2}_taura_hold32_blind
python scripts/compare_runs.py $OUT/eval${SET2}_taura_hold32 $OUT/eval${SET2}_taura_hold32_blind
python scripts/compare_runs.py $OUT/eval${SET2}_taura_hold32_blind runs/s${SET2}_agent/eval/agent_blind
answers_by_category $OUT/eval${SET2}_taura_hold32{,_blind}
