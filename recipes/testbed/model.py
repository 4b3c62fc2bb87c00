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


HEAD_DIM = 32  # the text model's head width at every size (128 wide: 4 query heads, 2 key/value heads)


def text_size(width: int = 128, layers: int = 4) -> dict[str, int]:
    """The text model's widths for ``width`` x ``layers``: heads of :data:`HEAD_DIM`, half as many key/value heads,
    an MLP twice as wide (the tiny agent's proportions; 128 x 4 is its default)."""
    if width % HEAD_DIM or width < 2 * HEAD_DIM or layers < 1:
        raise ValueError(f"text model {width} x {layers}: the width must be a multiple of {HEAD_DIM}, at least "
                         f"{2 * HEAD_DIM}, with at least one layer")  # fmt: skip
    heads = width // HEAD_DIM
    return {"hidden_size": width, "num_hidden_layers": layers, "num_attention_heads": heads,
            "num_key_value_heads": heads // 2, "intermediate_size": 2 * width}  # fmt: skip


def build_testbed_agent(
    out_dir: str | Path, corpus: Sequence[str], seed: int = 0, width: int = 128, layers: int = 4
) -> Path:
    """Build the untrained agent (tokenizer trained on ``corpus`` + :data:`FRAME_TOKENS`, a text model of
    ``width`` x ``layers``) and save a folder."""
    from recipes.tiny_agent.model import AgentSize, build_agent_thinker

    size = AgentSize(vision_hidden_size=64, **text_size(width, layers))
    return build_agent_thinker(out_dir, corpus, seed, size, added_tokens=FRAME_TOKENS)
