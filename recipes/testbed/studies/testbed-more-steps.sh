#!/usr/bin/env bash
# Does more SFT teach the testbed agent's final turn? Page: docs/experiments/testbed-more-steps.md.
# Attempt 5's two agents, 1,000 more SFT steps each (fresh schedule, peak lr 1e-3), then the handover probe at
# "last" on the handover study's fresh set, paired with its rows (run testbed-handover.sh first). Resumable: the
# SFT resumes from its checkpoints and the probe from its rows.
set -euo pipefail
cd "$(dirname "$0")/../../.."
source recipes/testbed/studies/common.sh

OUT=runs/testbed
A5=$OUT/attempt5
MORE=$OUT/more_steps
for s in 0 1; do
    mkdir -p $MORE/s$s
    python rl/train_sft.py --config-dir recipes/testbed/conf/sft +exp=testbed model.path=$A5/sft_s$s/agent \
        data.train_files=$A5/sft_s$s/sft_data/train.parquet "omni_sft.freeze=[visual]" \
        omni_sft.run_dir=$MORE/s$s/sft omni_sft.local.steps=1000 omni_sft.local.lr=1e-3 \
        omni_sft.local.warmup_steps=30 omni_sft.local.save_every=100 omni_sft.local.save_dir=$MORE/s$s/agent \
        trainer.seed=$s omni_sft.local.text_warmup.steps=0 omni_sft.local.captions.batch_size=16 \
        omni_sft.local.captions.pool=$OUT/data/pool > $MORE/s$s/sft.log 2>&1 &
        PIDS+=($!)
done
wait_all
for s in 0 1; do
    python -m recipes.testbed.handover --set $OUT/data/handover5305 --model $MORE/s$s/agent --out $MORE/s$s/handover \
        --conditions media --last-only --versus $OUT/handover/attempt5_s$s &
        PIDS+=($!)
done
wait_all
