#!/usr/bin/env bash
# Where the agent looks, and the agents that followed: the named-frame agent (seeds 202, 303 and the
# pre-registered 404), the option-Thought agent, the glyph agent, the glyph-read agent (the shipped one) and two
# shorter versions of its recipe. Page: docs/experiments/where-the-agent-looks.md. Each recipe run takes 47-90
# minutes on 2 cores. Needs runs/tiny_event (event-phase-agent.sh) and runs/ship_base (reading-values.sh).
set -euo pipefail

PER_FRAME="--per-frame 1 --event-percepts 8 --warmup-observation-loss 0"   # the per-frame recipe's flags

cd "$(dirname "$0")/../../.."

# the named-frame agent, its evidence reach, its claims, and seeds 303 and 404 (the confirmation)
python -m recipes.tiny_agent --out runs/tiny_named --preset event-phase $PER_FRAME \
    --named-frame 1 --caption-pool 200 --read-steps 10000 --read-keep vision
for RUN in tiny_named tiny_event; do
    python -m recipes.tiny_agent.probes.turn_labels --trajectories runs/$RUN/eval/agent/trajectories.jsonl \
        --tasks runs/$RUN/synth_eval/tasks.jsonl
    python -m recipes.tiny_agent.probes.turn_labels --trajectories runs/$RUN/eval/agent_blind/trajectories.jsonl \
        --tasks runs/$RUN/synth_blind/tasks.jsonl
done
python -m recipes.tiny_agent.probes.observations runs/tiny_named/eval/agent runs/tiny_named/eval/agent_blind \
    --world-dir runs/tiny_named/synth_eval
mkdir -p runs/s303_named runs/s404_named
cp -r runs/tiny_named/agent runs/tiny_named/synth_train runs/s303_named/
cp -r runs/tiny_named/agent runs/tiny_named/synth_train runs/s404_named/
python -m recipes.tiny_agent --out runs/s303_named --preset event-phase --eval-seed 303 --stages eval
python scripts/compare_runs.py runs/tiny_named/eval/agent+runs/s303_named/eval/agent \
    runs/tiny_named/eval/agent_blind+runs/s303_named/eval/agent_blind   # both seeds pooled (A1+A2 pools runs)
python -m recipes.tiny_agent --out runs/s404_named --preset event-phase --eval-seed 404 --eval-videos 8 --stages eval
python scripts/compare_runs.py runs/s404_named/eval/agent runs/s404_named/eval/agent_blind   # by category

# the teacher's rows: the plain teacher, then with named_frame (one frame at the named time)
for NAMED in false true; do
    python scripts/eval.py policy.name=synth_teacher benchmark.dataset=tasks benchmark.name=tiny-heldout \
        benchmark.annotations=runs/ship_base/synth_eval/tasks.jsonl out_dir=runs/ship_base/eval/teacher_named_$NAMED \
        unfreeze=true benchmark.limits.max_frames=8 benchmark.limits.max_clip_s=10.0 \
        benchmark.limits.max_audio_s=30.0 benchmark.limits.max_answer_chars=40 +policy.kwargs.named_frame=$NAMED
    python -m recipes.tiny_agent.probes.turn_labels \
        --trajectories runs/ship_base/eval/teacher_named_$NAMED/trajectories.jsonl \
        --tasks runs/ship_base/synth_eval/tasks.jsonl
done

# the option-Thought agent (a shorter read and event phase), and on seed 404
python -m recipes.tiny_agent --out runs/tiny_option --preset event-phase $PER_FRAME \
    --named-frame 1 --option-thought 1 --caption-pool 200 --read-steps 5000 --read-keep vision --event-steps 600
mkdir -p runs/s404_option && cp -r runs/tiny_option/agent runs/tiny_option/synth_train runs/s404_option/
python -m recipes.tiny_agent --out runs/s404_option --preset event-phase --eval-seed 404 --eval-videos 8 --stages eval
python scripts/compare_runs.py runs/tiny_option/eval/agent runs/tiny_option/eval/agent_blind   # widths: by category
python scripts/compare_runs.py runs/tiny_option/eval/agent runs/tiny_named/eval/agent   # - named-frame agent
python scripts/compare_runs.py runs/s404_option/eval/agent runs/s404_named/eval/agent   # the same on seed 404
python -m recipes.tiny_agent.probes.turn_labels --trajectories runs/tiny_option/eval/agent/trajectories.jsonl \
    --tasks runs/tiny_option/synth_eval/tasks.jsonl

# the glyph agent (a 64-wide encoder, the glyph stage instead of the read stage), and on seed 404
python -m recipes.tiny_agent --out runs/tiny_glyph --preset event-phase $PER_FRAME \
    --named-frame 1 --option-thought 1 --caption-pool 200 --event-steps 600 --vision-width 64 \
    --glyph-steps 3000 --stages data synth export build glyphs sft events probe eval
mkdir -p runs/s404_glyph && cp -r runs/tiny_glyph/agent runs/tiny_glyph/synth_train runs/s404_glyph/
python -m recipes.tiny_agent --out runs/s404_glyph --preset event-phase --eval-seed 404 --eval-videos 8 --stages eval
python scripts/compare_runs.py runs/tiny_glyph/eval/agent runs/tiny_glyph/eval/agent_blind   # widths: by category
python scripts/compare_runs.py runs/tiny_glyph/eval/agent runs/tiny_option/eval/agent   # - option agent
python scripts/compare_runs.py runs/s404_glyph/eval/agent runs/s404_option/eval/agent   # the same on seed 404

# the glyph-read agent: a read stage training the text model alone, reordered options in the warm-up
python -m recipes.tiny_agent --out runs/tiny_glyph_read --preset event-phase $PER_FRAME \
    --named-frame 1 --option-thought 1 --caption-pool 200 --event-steps 600 --vision-width 64 --glyph-steps 3000 \
    --read-steps 2500 --option-shuffles 8 --stages data synth export build glyphs read sft events probe eval
mkdir -p runs/s404_glyph_read && cp -r runs/tiny_glyph_read/agent runs/tiny_glyph_read/synth_train runs/s404_glyph_read/
python -m recipes.tiny_agent --out runs/s404_glyph_read --preset event-phase --eval-seed 404 --eval-videos 8 --stages eval
python scripts/compare_runs.py runs/tiny_glyph_read/eval/agent runs/tiny_glyph_read/eval/agent_blind   # by category
python scripts/compare_runs.py runs/s404_glyph_read/eval/agent runs/s404_glyph_read/eval/agent_blind
python scripts/compare_runs.py runs/tiny_glyph_read/eval/agent runs/tiny_glyph/eval/agent   # - glyph agent
python scripts/compare_runs.py runs/s404_glyph_read/eval/agent runs/s404_glyph/eval/agent
python -m recipes.tiny_agent --out runs/tiny_glyph_read --preset event-phase $PER_FRAME \
    --named-frame 1 --option-thought 1 --caption-pool 200 --event-steps 600 --vision-width 64 --glyph-steps 3000 \
    --read-steps 2500 --option-shuffles 8 --stages scaling   # its turn budget (plot: OUT/scaling/acc_vs_k.png)
python scripts/compare_runs.py runs/tiny_glyph_read/scaling/K016-s0 runs/tiny_glyph_read/scaling/K002-s0

# two shorter versions of its recipe, each with its ship rule in its folder's PLAN.md before it ran
python -m recipes.tiny_agent --out runs/ship60 $PER_FRAME \
    --named-frame 1 --option-thought 1 --caption-pool 200 --vision-width 64 --option-shuffles 8 --glyph-steps 1500 \
    --read-steps 1500 --text-warmup-steps 800 --steps 1200 --event-steps 300 \
    --stages data synth export build glyphs read sft events probe eval   # cut 1
python -m recipes.tiny_agent --out runs/ship60b $PER_FRAME \
    --named-frame 1 --option-thought 1 --caption-pool 200 --vision-width 64 --option-shuffles 8 --glyph-steps 2000 \
    --read-steps 2500 --event-steps 400 --stages data synth export build glyphs read sft events probe eval   # cut 2
