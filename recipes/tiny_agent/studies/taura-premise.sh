#!/usr/bin/env bash
# TAURA's premise on the SFT agents: does a turn's mean token entropy rank the turn that first saw the evidence
# (the discovery turn) above the other percept turns? Page: docs/experiments/taura-premise.md.
# Needs the held-out runs of event-phase-agent.sh (free rows: --eval-free) and of rl-three-seeds.sh (runs/tiny_ship).
set -euo pipefail

cd "$(dirname "$0")/../../.."

# free decoding: the text warm-up agent and the event-phase agent; constrained: the event-phase agent, the
# per-frame agent and the glyph-read agent (--model tiny)
for ROWS in tiny_nocap/eval/agent_free tiny_event/eval/agent_free tiny_event/eval/agent tiny_per_frame/eval/agent \
    tiny_ship/eval/agent; do
    SET=runs/${ROWS%%/*}/synth_eval
    python -m recipes.tiny_agent.probes.turn_labels --trajectories runs/$ROWS/trajectories.jsonl --tasks $SET/tasks.jsonl
done
