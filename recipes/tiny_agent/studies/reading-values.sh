#!/usr/bin/env bash
# Reading values: single held-out frames captioned and checked against the synthetic world; the read stage, a
# wider encoder, a vision-only read, and glyph pretraining. Page: docs/experiments/reading-values.md.
# Needs the agents of event-phase-agent.sh (runs/tiny_event, runs/tiny_obs_given, runs/s303_obs), of
# where-the-agent-looks.sh (runs/tiny_option) and of tiny-agent.sh (runs/tiny_agent).
set -euo pipefail

READING_SET=runs/reading_eval   # 60 videos of 60 s, seed 909, 12 event groups each, never trained on

cd "$(dirname "$0")/../../.."

python -m envs.synth --out $READING_SET --seed 909 --n 60 --durations 60 --n-events 12 --split test

# the read agent: the read stage (10000 caption steps on a pool of 200 videos), then the per-frame recipe
python -m recipes.tiny_agent --out runs/tiny_read --preset event-phase --per-frame 1 --event-percepts 8 \
    --warmup-observation-loss 0 --caption-pool 200 --read-steps 10000
python scripts/compare_runs.py runs/tiny_read/eval/agent runs/tiny_obs_given/eval/agent

# the read stage's curve: the same held-out frames every 2500 steps
python -m recipes.tiny_agent.probes.reading --model runs/tiny_read/init --train-data runs/tiny_read/sft_data/train.parquet \
    --pool runs/tiny_read/caption_pool --steps 10000 --eval-every 2500 \
    --eval-dir runs/tiny_obs_given/synth_eval runs/s303_obs/synth_eval

# the wider encoder (128 x 4), probed with 3000 caption steps on the pool (the page's figures for it came from a
# one-off script that fed captions directly; this is the repository's command for the same probe)
python -m recipes.tiny_agent.model --corpus runs/tiny_read/sft_data/train.parquet --out runs/init_v128 \
    --vision-hidden-size 128 --vision-depth 4
python -m recipes.tiny_agent.probes.reading --model runs/init_v128 --train-data runs/tiny_read/sft_data/train.parquet \
    --pool runs/tiny_read/caption_pool --steps 3000 --eval-dir runs/tiny_obs_given/synth_eval runs/s303_obs/synth_eval

# the vision-only read: the event-phase agent's encoder and merger trained on captions, every text weight frozen
python -m recipes.tiny_agent --out runs/ship_read --preset event-phase --caption-pool 200 --stages data synth export
python -m recipes.tiny_agent.probes.reading --model runs/tiny_event/agent --train-data runs/ship_read/sft_data/train.parquet \
    --pool runs/ship_read/caption_pool --steps 10000 --eval-every 2500 --train-part vision \
    --eval-dir $READING_SET --save runs/ship_read/agent
python -m recipes.tiny_agent --out runs/ship_read --preset event-phase --stages eval   # it, blind, baselines on 202
mkdir -p runs/ship_base && cp -r runs/tiny_event/agent runs/ship_base/agent && cp -r runs/ship_read/synth_train runs/ship_base/
python -m recipes.tiny_agent --out runs/ship_base --preset event-phase --stages eval
python scripts/compare_runs.py runs/ship_read/eval/agent runs/ship_base/eval/agent
python scripts/compare_runs.py runs/ship_read/eval/agent runs/ship_read/eval/agent_blind

# the reading table: every agent on the reading set
for MODEL in runs/tiny_event/agent runs/tiny_obs_given/agent runs/tiny_read/init_read runs/tiny_read/agent \
    runs/ship_read/agent runs/tiny_agent/agent; do
    python -m recipes.tiny_agent.probes.reading --model $MODEL --eval-dir $READING_SET
done

# glyph pretraining: heads on a 64-wide encoder's tokens, log-sum-exp pooling, then mean pooling
python -m recipes.tiny_agent.model --corpus runs/tiny_option/sft_data/train.parquet --out runs/init_v64 \
    --vision-hidden-size 64
python -m recipes.tiny_agent.glyph_pretrain --model runs/init_v64 --media runs/tiny_option/synth_train \
    runs/tiny_option/caption_pool --eval-dir $READING_SET --steps 2500 --eval-every 500 --out runs/glyphs64.json
python -m recipes.tiny_agent.glyph_pretrain --model runs/init_v64 --media runs/tiny_option/synth_train \
    runs/tiny_option/caption_pool --eval-dir $READING_SET --steps 2000 --eval-every 1000 --pool mean \
    --out runs/glyphs64_mean.json
