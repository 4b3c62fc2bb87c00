#!/usr/bin/env bash
# Does the testbed agent answer the questions it was trained on? Page: docs/experiments/testbed-own-questions.md.
# The handover probe (media condition) on the first 16 training videos (192 questions), compared with the
# handover study's fresh set (run recipes/testbed/studies/testbed-handover.sh first). Resumable.
set -euo pipefail
cd "$(dirname "$0")/../../.."
source recipes/testbed/studies/common.sh

OUT=runs/testbed
probe() {  # label, agent folder
    python -m recipes.testbed.handover --set $OUT/data/train --model "$2/agent" --out $OUT/own_questions/$1 \
        --conditions media --limit 192 --minus $OUT/handover/$1
}
probe attempt5_s0 $OUT/attempt5/sft_s0 &
    PIDS+=($!)
probe attempt5_s1 $OUT/attempt5/sft_s1 &
    PIDS+=($!)
wait_all
probe attempt3_s0 $OUT/sft_s0
# the page's figure: the primary agent's outcomes by handover point, training questions beside fresh ones
python -m recipes.testbed.handover --set $OUT/data/train --out $OUT/own_questions/attempt5_s0 --summary \
    --label "attempt 5 s0, training questions" --with "attempt 5 s0, fresh questions=$OUT/handover/attempt5_s0" \
    --figure docs/figures/testbed_own_questions.png
