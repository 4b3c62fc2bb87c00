"""The untrained testbed agent: the tiny agent's architecture (``recipes.tiny_agent.model``: text 128 x 4, vision
64 x 2) with its byte-level BPE trained on the testbed's own turns, plus one token for each piece of the turn's
JSON frame.

Why the frame tokens (measured on the seed-0 teacher episodes, recipes/testbed/README.md): the BPE's
pre-tokenisation splits at every quote, colon and space, so the frame of a turn (``{"observation": "``,
``", "thought": "``, ``", "action": {"type": "get_frames", "start": ``, ...) cost about 33 of a turn's 61 tokens,
and an episode 200 tokens. One added token per piece brings an episode to about 110: the agent writes fewer
tokens (a generation-bound cost on a CPU), and the action's type is one token, one decision.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

# The turn's JSON frame in the schema's key order and separators (envs/turn_schema.py, json.dumps), piece by piece.
FRAME_TOKENS: tuple[str, ...] = (
    '{"observation": "',
    '", "thought": "',
    '", "action": {"type": "get_frames", "start": ',
    '", "action": {"type": "get_audio", "start": ',
    '", "action": {"type": "get_clip", "start": ',
    '", "action": {"type": "answer", "content": "',
    ', "end": ',
    ', "num": ',
    '"}}',
    "}}",
)


def build_testbed_agent(out_dir: str | Path, corpus: Sequence[str], seed: int = 0) -> Path:
    """Build the untrained agent (tokenizer trained on ``corpus`` + :data:`FRAME_TOKENS`) and save a folder."""
    from recipes.tiny_agent.model import AgentSize, build_agent_thinker

    return build_agent_thinker(
        out_dir, corpus, seed, AgentSize(vision_hidden_size=64), added_tokens=FRAME_TOKENS
    )
