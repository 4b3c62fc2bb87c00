#!/usr/bin/env bash
# Testbed agent, attempt 4: attempt 3's recipe with a time-copy stage before SFT. Page:
# docs/experiments/testbed-attempt-4.md. It runs only under its start rule: a time-copy checkpoint writes the
# cued digit at its frame's second in the episode condition of the digit probe (8-frame looks) above the agent
# before (0.035), resolved. This script checks the rule; the rule failed, so nothing of attempt 4 ran (its recipe
# ran later, without the rule, as attempt 5: testbed-attempt-5.sh).
set -euo pipefail
cd "$(dirname "$0")/../../.."
source recipes/testbed/studies/common.sh

for SEED in 0 1; do
    python -m recipes.testbed.digit_probe --set runs/testbed/data/probe5304 \
        --out runs/testbed/digit_probe/time_copy_s$SEED --summary | grep "^| episode | 8 "
done
