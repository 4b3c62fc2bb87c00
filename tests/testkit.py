"""Small helpers several test modules share (fixtures themselves live in conftest.py).

Why a module: the same free-port probe, strict JSON check and small synthetic-video settings were
written out in several test files; one copy keeps them the same.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

# Small synthetic videos (envs.synth's generator config): fast to make and to decode in a test.
SMALL_SYNTH: dict[str, Any] = {"width": 112, "height": 64, "fps": 2}


def free_port() -> int:
    """A TCP port nothing listens on now (for a server that must not be reachable, or one to start)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def strict_json(value: Any) -> str:
    """Strict UTF-8 JSON of an observation or info (media arrays as lists), as a trajectory writer does:
    NaN, unknown types and lone surrogates raise."""

    def default(o: Any) -> Any:
        if isinstance(o, np.ndarray | np.generic):
            return o.tolist()
        raise TypeError(type(o).__name__)

    text = json.dumps(value, ensure_ascii=False, allow_nan=False, default=default)
    text.encode("utf-8")  # raises on a lone surrogate
    return text


def verl_tiny_thinker(folder: Path) -> SimpleNamespace:
    """The tiny random thinker saved in ``folder / "thinker"``, with the processor verl builds through
    rl/verl_omni.py (needs verl): ``path``, ``model``, ``processor``, ``tokenizer``."""
    from omniagent.tiny_model import build_tiny_thinker
    from rl import verl_omni

    path = folder / "thinker"
    model, _ = build_tiny_thinker(seed=0, out_dir=path)
    processor = verl_omni.omni_hf_processor(str(path))
    return SimpleNamespace(path=path, model=model, processor=processor, tokenizer=processor.tokenizer)


def turn_text(obs: str, thought: str, action: dict[str, Any]) -> str:
    """One model turn in the environment's protocol, as a scripted test policy writes it."""
    return json.dumps({"observation": obs, "thought": thought, "action": action})


# Error codes of turns a constrained decoder can never produce: the turn schema rules them out.
SCHEMA_RULES_OUT = ("format_", "action_", "time_out_of_range", "num_invalid", "no_")


def assert_well_formed(traj: Any) -> None:
    """Every turn of ``traj`` parsed into an action, none failed for a reason the turn schema rules out,
    and the last one answered."""
    for rec in traj.turns:
        assert not (rec.error or "").startswith(SCHEMA_RULES_OUT), (rec.error, rec.error_message)
        assert rec.action_type is not None
    assert traj.turns[-1].action_type == "answer"
