#!/usr/bin/env bash
# Batch 19, pre-registered: the number credit paid only in groups whose episodes all scored 0
# (env.reward.num_credit=1.0, num_credit_scope=flat) with pitch tasks four times as often in the draw
# ('local.task_repeats={beep_pitch_num:4}'), training seeds 0 and 1; tested on seed 1919 (32 videos, 754
# questions), with batch 13's held TAURA seed 0 as the direct control. Page: docs/experiments/rl-flat-credit.md.
# Needs runs/rl_hold (rl-32-iterations.sh).
set -euo pipefail

SET=1919
VIDEOS=32
OUT=runs/rl_flat

cd "$(dirname "$0")/../../.."
source recipes/tiny_agent/studies/common.sh

FLAT=(env.reward.num_credit=1.0 env.reward.num_credit_scope=flat 'local.task_repeats={beep_pitch_num:4}'
    local.save_every=8)
s0() { train $OUT/taura_flat_s0 "${HELD[@]}" "${FLAT[@]}" local.seed=0; }
s1() { train $OUT/taura_flat_s1 "${HELD[@]}" "${FLAT[@]}" local.seed=1; }
in_parallel s0 s1

copy_agent runs/s${SET}_agent
python -m recipes.tiny_agent --out runs/s${SET}_agent --eval-seed $SET --eval-videos $VIDEOS --stages eval --eval-jobs 2
heldout $OUT/taura_flat_s0/final runs/s${SET}_agent/synth_eval/tasks.jsonl $OUT/eval${SET}_taura_flat_s0
heldout $OUT/taura_flat_s1/final runs/s${SET}_agent/synth_eval/tasks.jsonl $OUT/eval${SET}_taura_flat_s1
heldout runs/rl_hold/taura_hold/final runs/s${SET}_agent/synth_eval/tasks.jsonl $OUT/eval${SET}_taura_hold_s0   # control
heldout $OUT/taura_flat_s0/final runs/s${SET}_agent/synth_blind/tasks.jsonl $OUT/eval${SET}_taura_flat_s0_blind
MEAN=$OUT/eval${SET}_taura_flat_s0+$OUT/eval${SET}_taura_flat_s1
python scripts/compare_runs.py --average $MEAN runs/s${SET}_agent/eval/agent   # the primary, by question
python scripts/compare_runs.py --average $MEAN runs/s${SET}_agent/eval/agent --cluster media   # and by video
python scripts/compare_runs.py --average $MEAN $OUT/eval${SET}_taura_hold_s0   # against the control
for R in taura_flat_s0 taura_flat_s1 taura_hold_s0; do
    python scripts/compare_runs.py $OUT/eval${SET}_$R runs/s${SET}_agent/eval/agent
    python scripts/compare_runs.py $OUT/eval${SET}_$R runs/s${SET}_agent/eval/agent --cluster media
done
python scripts/compare_runs.py $OUT/eval${SET}_taura_flat_s0 $OUT/eval${SET}_taura_flat_s0_blind   # media - blind
# by category, count answers, pitch answers >= 100; training: pitch groups and their rewards
python - <<'PY'
import collections, csv, json, statistics as st
rows = {d: list(map(json.loads, open(f"runs/{d}/results.jsonl"))) for d in ["s1919_agent/eval/agent",
        "rl_flat/eval1919_taura_flat_s0", "rl_flat/eval1919_taura_flat_s1", "rl_flat/eval1919_taura_hold_s0"]}
counts = ["beep_count_num", "flash_count_num", "scene_change_num"]
for d, v in rows.items():
    for cat in ["beep_pitch_num", *counts, "shape_width_size", "spoken_word_mcq"]:
        sel = [r for r in v if r["category"] == cat]
        print(d, cat, round(sum(r["reward"] for r in sel) / len(sel), 3), "pitch answers >= 100:",
              sum(isinstance(r["prediction"], float) and r["prediction"] >= 100 for r in sel))
    sel = [r for r in v if r["category"] in counts]
    beeps = [float(r["prediction"] or 0) for r in v if r["category"] == "beep_count_num"]
    print(d, "counts", round(sum(r["reward"] for r in sel) / len(sel), 3), "beep-count mean answer",
          round(sum(beeps) / len(beeps), 1), "answers 11 or 16:", sum(b in (11.0, 16.0) for b in beeps))
for run in ["rl_flat/taura_flat_s0", "rl_flat/taura_flat_s1"]:
    groups = collections.defaultdict(list)
    for r in map(json.loads, open(f"runs/{run}/rollouts.jsonl")):
        if "frequency, in Hz" in r["question"]:
            groups[(r["meta"]["iteration"], r["id"].split("-")[0])].append(r)
    eps = [r for g in groups.values() for r in g]
    quarters = [[r for r in eps if 8 * k < r["meta"]["iteration"] <= 8 * k + 8] for k in range(4)]
    spread = [st.pstdev(c) for g in groups.values()
              if len(c := [r["meta"]["closeness"] or 0 for r in g if r["meta"]["evidence_seen"]]) > 1]
    print(run, "pitch groups", len(groups), "all scored 0", sum(all(not r["reward"] for r in g) for g in groups.values()),
          "saw the beep", round(sum(r["meta"]["evidence_seen"] for r in eps) / len(eps), 2),
          "closeness spread", round(sum(spread) / len(spread), 2),
          "shaped spread", round(sum(st.pstdev(r["meta"]["shaped_reward"] for r in g) for g in groups.values()) / len(groups), 2))
    print(run, "by quarter: >= 100", [round(sum((r["answer"] or 0) >= 100 for r in q) / len(q), 3) for q in quarters],
          "closeness", [round(sum(r["meta"]["closeness"] or 0 for r in q) / len(q), 2) for q in quarters],
          "saw the beep", [round(sum(r["meta"]["evidence_seen"] for r in q) / len(q), 2) for q in quarters])
    m = list(csv.DictReader(open(f"runs/{run}/metrics.csv")))
    print(run, "score", [round(sum(float(r["score_mean"]) for r in m[i:i + 8]) / 8, 3) for i in range(0, 32, 8)],
          "seconds", round(sum(float(r["seconds"]) for r in m)))
PY
