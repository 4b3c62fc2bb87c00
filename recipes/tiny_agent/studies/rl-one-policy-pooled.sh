#!/usr/bin/env bash
# One TAURA policy (batch 12's held TAURA, seed 0) on every held-out set it met, pooled after the fact; and batch
# 19b, pre-registered: its two sibling seeds on sets 1818 and 1919 too, and the mean of the three seeds pooled
# over the four sets all three met. Page: docs/experiments/rl-one-policy-pooled.md.
# Needs the rows of rl-32-iterations.sh, rl-three-seeds-fresh.sh, rl-large-set.sh, rl-sft-anchor.sh,
# rl-number-credit.sh and rl-flat-credit.sh. `A1+A2` pools runs on different sets; a comma pools the sets' means.
set -euo pipefail

cd "$(dirname "$0")/../../.."
source recipes/tiny_agent/studies/common.sh

join() { local IFS=$1; shift; echo "$*"; }
T0=(runs/rl_hold/eval1212_taura_hold32 runs/rl_hold/eval1313_taura_hold32 runs/rl_seeds/eval1414_taura_s0
    runs/rl_power/eval1515_taura_s0 runs/rl_anchor/eval1717_taura_hold runs/rl_num/eval1818_taura_hold_s0
    runs/rl_flat/eval1919_taura_hold_s0)
SFT=(runs/s1212_agent/eval/agent runs/s1313_agent/eval/agent runs/s1414_agent/eval/agent runs/s1515_agent/eval/agent
    runs/s1717_agent/eval/agent runs/s1818_agent/eval/agent runs/s1919_agent/eval/agent)
for CLUSTER in "" "--cluster media"; do   # by question, then by video
    python scripts/compare_runs.py $(join + "${T0[@]}") $(join + "${SFT[@]}") $CLUSTER   # all seven sets
    python scripts/compare_runs.py $(join + "${T0[@]:2}") $(join + "${SFT[@]:2}") $CLUSTER   # 1414-1919 only
done
for N in 1 2; do   # seeds 1 and 2 over 1414 + 1515
    python scripts/compare_runs.py runs/rl_seeds/eval1414_taura_s$N+runs/rl_power/eval1515_taura_s$N \
        $(join + "${SFT[@]:2:2}")
done
GRPO=(runs/rl_hold/eval1212_grpo_kl32 runs/rl_hold/eval1313_grpo_kl32 runs/rl_seeds/eval1414_grpo_s0
    runs/rl_power/eval1515_grpo_s0)
python scripts/compare_runs.py $(join + "${GRPO[@]}") $(join + "${SFT[@]:0:4}")   # GRPO seed 0, 1212-1515
python scripts/compare_runs.py $(join + "${T0[@]:0:4}") $(join + "${SFT[@]:0:4}")   # TAURA seed 0, the same sets
python scripts/compare_runs.py $(join + "${T0[@]:0:4}") $(join + "${GRPO[@]}")   # TAURA seed 0 - GRPO seed 0

# batch 19b: seeds 1 and 2 on 1818 and 1919, then the mean of the three seeds over 1414, 1515, 1818, 1919
for SET in 1818 1919; do
    for N in 1 2; do
        heldout runs/rl_seeds/taura_s$N/final runs/s${SET}_agent/synth_eval/tasks.jsonl runs/rl_seeds/eval${SET}_taura_s$N
        python scripts/compare_runs.py runs/rl_seeds/eval${SET}_taura_s$N runs/s${SET}_agent/eval/agent
    done
done
MEANS=runs/rl_seeds/eval1414_taura_s0+runs/rl_seeds/eval1414_taura_s1+runs/rl_seeds/eval1414_taura_s2,runs/rl_power/eval1515_taura_s0+runs/rl_power/eval1515_taura_s1+runs/rl_power/eval1515_taura_s2,runs/rl_num/eval1818_taura_hold_s0+runs/rl_seeds/eval1818_taura_s1+runs/rl_seeds/eval1818_taura_s2,runs/rl_flat/eval1919_taura_hold_s0+runs/rl_seeds/eval1919_taura_s1+runs/rl_seeds/eval1919_taura_s2
FOUR=runs/s1414_agent/eval/agent,runs/s1515_agent/eval/agent,runs/s1818_agent/eval/agent,runs/s1919_agent/eval/agent
python scripts/compare_runs.py --average $MEANS $FOUR   # the primary, by question
python scripts/compare_runs.py --average $MEANS $FOUR --cluster media   # and by video
# each seed over the four sets: its four rows joined by commas, against the same four SFT rows
python scripts/compare_runs.py runs/rl_seeds/eval1414_taura_s0,runs/rl_power/eval1515_taura_s0,runs/rl_num/eval1818_taura_hold_s0,runs/rl_flat/eval1919_taura_hold_s0 $FOUR
for N in 1 2; do
    python scripts/compare_runs.py runs/rl_seeds/eval1414_taura_s$N,runs/rl_power/eval1515_taura_s$N,runs/rl_seeds/eval1818_taura_s$N,runs/rl_seeds/eval1919_taura_s$N $FOUR
done
