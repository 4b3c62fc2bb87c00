#!/usr/bin/env bash
# A Thought that names the unit (--unit-thought 1): the shipped recipe with the teacher's last Thought on a number
# or width question saying what the number counts or measures; measured once against the shipped agent on set
# 1919 (754 questions) and on its own held-out seed 202. Page: docs/experiments/unit-thought.md.
# Needs runs/s1919_agent (rl-flat-credit.sh). About 47 minutes for the recipe on 2 cores.
set -euo pipefail

OUT=runs/unit_agent
SET=1919

cd "$(dirname "$0")/../../.."
source recipes/tiny_agent/studies/common.sh

python -m recipes.tiny_agent --out $OUT --unit-thought 1 --eval-jobs 2   # the agent and its seed-202 rows
heldout $OUT/agent runs/s${SET}_agent/synth_eval/tasks.jsonl runs/unit$SET
python scripts/compare_runs.py runs/unit$SET runs/s${SET}_agent/eval/agent
python - runs/unit$SET runs/s${SET}_agent/eval/agent <<'PY'   # answers by number template
import collections, json, sys
for run in sys.argv[1:]:
    rows = [json.loads(x) for x in open(f"{run}/results.jsonl")]
    for t in ("shape_width_size", "beep_pitch_num", "beep_count_num"):
        sel = [r for r in rows if r["category"] == t]
        print(run, t, round(sum(r["reward"] for r in sel) / len(sel), 3),
              collections.Counter(r["prediction"] for r in sel).most_common(2),
              "answers >= 100:", sum(isinstance(r["prediction"], float) and r["prediction"] >= 100 for r in sel))
PY
