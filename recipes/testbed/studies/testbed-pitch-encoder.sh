#!/usr/bin/env bash
# Does the testbed agent's audio encoder carry the beep's pitch? Page: docs/experiments/testbed-pitch-encoder.md.
# A linear probe of each encoder's audio tokens, trained on the glyph pool's beeps, scored on the fresh set's
# (data/handover5305, made by recipes/testbed/studies/testbed-handover.sh). A finished encoder is not run again.
set -euo pipefail
cd "$(dirname "$0")/../../.."
source recipes/testbed/studies/common.sh

OUT=runs/testbed
probe() {  # label, model folder
    python -m recipes.testbed.pitch_probe --model "$2" --train $OUT/data/pool --test $OUT/data/handover5305 \
        --out $OUT/pitch_probe/$1
}
probe attempt5_s0 $OUT/attempt5/sft_s0/agent &
    PIDS+=($!)
probe attempt5_s1 $OUT/attempt5/sft_s1/agent &
    PIDS+=($!)
wait_all
probe attempt3_s0 $OUT/sft_s0/agent &
    PIDS+=($!)
probe untrained $OUT/attempt5/sft_s0/init &
    PIDS+=($!)
wait_all
# the page's table
python -m recipes.testbed.pitch_probe --table "attempt 5, seed 0=$OUT/pitch_probe/attempt5_s0" \
    "attempt 5, seed 1=$OUT/pitch_probe/attempt5_s1" "attempt 3, seed 0=$OUT/pitch_probe/attempt3_s0" \
    "untrained=$OUT/pitch_probe/untrained"
