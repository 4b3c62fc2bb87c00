"""Constrained decoding for the transformers backend: every turn decoded under the environment's
JSON schema of a well-formed turn (``reset`` info ``turn_schema``), with xgrammar.

Why: a small model's turns fail for reasons no learning signal needs to teach it (a missing key, an
unclosed string, a time outside the file, an answer in another task's format), and each costs a turn.
Decoding under the schema removes them; what the model chooses to look at or answer stays its own.
The separators are the ones the model was trained on (``json.dumps``), so the constraint only removes
tokens, it never forces an unfamiliar spelling. What the schema cannot say (``start <= end``, span
caps) the environment still rejects.
"""

from __future__ import annotations

import json
from typing import Any


class ConstraintUnavailable(RuntimeError):
    """Constrained decoding was asked for but cannot run (xgrammar missing, no schema in the info)."""


def _xgrammar() -> Any:
    try:
        import xgrammar
    except ImportError as exc:  # pragma: no cover - xgrammar is a core dependency
        raise ConstraintUnavailable(
            "constrained decoding needs xgrammar (pip install xgrammar); or set constrained=false"
        ) from exc
    return xgrammar


class TurnGrammar:
    """Compiles the episode's turn schemas for one tokenizer and hands out a fresh logits processor
    per ``generate`` call (xgrammar's processors keep matcher state and are single-use)."""

    def __init__(self, tokenizer: Any, vocab_size: int, stop_token_ids: list[int]) -> None:
        xgr = _xgrammar()
        info = xgr.TokenizerInfo.from_huggingface(
            tokenizer, vocab_size=vocab_size, stop_token_ids=stop_token_ids
        )
        self._compiler = xgr.GrammarCompiler(info)
        self._turn: Any = None
        self._final: Any = None

    def _compile(self, schema: dict[str, Any]) -> Any:
        return self._compiler.compile_json_schema(
            json.dumps(schema), any_whitespace=False, separators=(", ", ": "), strict_mode=True
        )

    def reset(self, info: dict[str, Any]) -> None:
        """Compile this episode's schemas (about a millisecond each) from the env's reset info."""
        if "turn_schema" not in info or "final_turn_schema" not in info:
            raise ConstraintUnavailable(
                "constrained decoding needs the environment's turn_schema in reset info (envs.OmniVideoEnv)"
            )
        self._turn, self._final = self._compile(info["turn_schema"]), self._compile(info["final_turn_schema"])

    def processor(self, final: bool) -> Any:
        if self._turn is None:
            raise ConstraintUnavailable("constrained decoding before reset(): no turn schema compiled yet")
        from xgrammar.contrib.hf import LogitsProcessor

        return LogitsProcessor(self._final if final else self._turn)
