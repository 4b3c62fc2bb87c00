"""Constrained decoding for the transformers backend: every turn decoded under the environment's
JSON schema of a well-formed turn (``reset`` info ``turn_schema``), with xgrammar.

Why: a small model's turns fail for reasons no learning signal needs to teach it (a missing key, an
unclosed string, a time outside the file, an answer in another task's format), and each costs a turn.
Decoding under the schema removes them; what the model chooses to look at or answer stays its own.
The separators are the ones the model was trained on (``json.dumps``), so the constraint only removes
tokens, it never forces an unfamiliar spelling. What the schema cannot say (``start <= end``, span
caps) the environment still rejects. A thinking variant may write its reasoning block first
(``prefix``: the family's :meth:`omniagent.families.Thinking.grammar`); the JSON follows it.
"""

from __future__ import annotations

import json
from typing import Any

from omniagent.policy_base import PolicyConfigError


class ConstraintUnavailable(PolicyConfigError):
    """Constrained decoding was asked for but cannot run (xgrammar missing, no schema in the info)."""


class TurnSchemas:
    """The episode's two turn schemas (``reset`` info) and which one the coming turn is under: the
    one source of the turn count for every backend that constrains, so they agree on the last turn."""

    def __init__(self) -> None:
        self.turn, self.max_turns = 0, 0
        self._schemas: tuple[dict[str, Any], dict[str, Any]] | None = None

    def reset(self, info: dict[str, Any]) -> None:
        if "turn_schema" not in info or "final_turn_schema" not in info:
            raise ConstraintUnavailable(
                "constrained decoding needs the environment's turn_schema in reset info (envs.OmniVideoEnv)"
            )
        self.turn, self.max_turns = 0, int(info.get("max_turns") or 0)
        self._schemas = (info["turn_schema"], info["final_turn_schema"])

    @property
    def schemas(self) -> tuple[dict[str, Any], dict[str, Any]]:
        if self._schemas is None:
            raise ConstraintUnavailable("constrained decoding before reset(): no turn schema is known yet")
        return self._schemas

    def final(self) -> bool:
        """Whether the coming turn is the budget's last (only an answer is allowed)."""
        return self.turn + 1 >= self.max_turns

    def current(self) -> dict[str, Any]:
        """The schema the coming turn decodes under."""
        return self.schemas[1] if self.final() else self.schemas[0]

    def advance(self) -> None:
        """Count the turn just generated."""
        self.turn += 1


TEXT_FIELDS = ("observation", "thought")


def cap_text_fields(schema: dict[str, Any], max_chars: int | None) -> dict[str, Any]:
    """``schema`` with ``maxLength`` on a turn's free-text fields (a copy; ``None`` leaves it as it is).

    The environment's schema leaves them unbounded; a small or random model may then write one string
    until the token budget runs out and the turn never closes. The cap only tightens the schema: every
    turn it allows, the environment accepts.
    """
    if max_chars is None:
        return schema
    props = dict(schema.get("properties", {}))
    for key in TEXT_FIELDS:
        if key in props:
            props[key] = {**props[key], "maxLength": int(max_chars)}
    return {**schema, "properties": props}


# one character of a JSON string: anything but a control character, a quote or a backslash, or an escape
JSON_STRING_CHAR = r'([^\x00-\x1f"\\]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})'


def json_safe_strings(node: Any) -> Any:
    """``node`` with every length-capped string schema written as the equivalent ``pattern``.

    xgrammar 0.2.9 compiles ``maxLength`` into a character class that admits raw control characters
    (``\x00``-``\x1f`` but ``\r``/``\n``), which no JSON parser accepts, so a capped string could end a
    turn as invalid JSON; the pattern allows exactly JSON's string characters and escapes, counted one
    per character.
    """
    if isinstance(node, list):
        return [json_safe_strings(v) for v in node]
    if not isinstance(node, dict):
        return node
    out = {k: json_safe_strings(v) for k, v in node.items()}
    plain = not any(k in out for k in ("pattern", "enum", "const", "format"))
    if out.get("type") == "string" and "maxLength" in out and plain:
        lo, hi = int(out.pop("minLength", 0)), int(out.pop("maxLength"))
        out["pattern"] = f"^{JSON_STRING_CHAR}{{{lo},{hi}}}$"
    return out


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

    def __init__(
        self,
        tokenizer: Any,
        vocab_size: int,
        stop_token_ids: list[int],
        prefix: str | None = None,
        max_text_chars: int | None = None,
    ) -> None:
        """``prefix``: EBNF (``root ::= ...``) of what may precede the turn's JSON, e.g. a reasoning block.
        ``max_text_chars``: cap on the observation and thought strings (:func:`cap_text_fields`)."""
        self.max_text_chars = max_text_chars
        xgr = _xgrammar()
        info = xgr.TokenizerInfo.from_huggingface(
            tokenizer, vocab_size=vocab_size, stop_token_ids=stop_token_ids
        )
        self._xgr = xgr
        self._compiler = xgr.GrammarCompiler(info)
        self._prefix = xgr.Grammar.from_ebnf(prefix) if prefix else None
        self.episode = TurnSchemas()
        self._compiled: tuple[Any, Any] | None = None

    def _compile(self, schema: dict[str, Any]) -> Any:
        options: dict[str, Any] = dict(any_whitespace=False, separators=(", ", ": "), strict_mode=True)
        if self._prefix is None:
            return self._compiler.compile_json_schema(json.dumps(schema), **options)
        turn = self._xgr.Grammar.from_json_schema(json.dumps(schema), **options)
        return self._compiler.compile_grammar(self._xgr.Grammar.concat(self._prefix, turn))

    def reset(self, info: dict[str, Any]) -> None:
        """Compile this episode's schemas (about a millisecond each) from the env's reset info."""
        self.episode.reset(info)
        turn, final = (
            json_safe_strings(cap_text_fields(s, self.max_text_chars)) for s in self.episode.schemas
        )
        self._compiled = (self._compile(turn), self._compile(final))

    def current_grammar(self) -> Any:
        """The compiled grammar the coming turn decodes under (a trainer replays it over the sampled ids)."""
        if self._compiled is None:
            raise ConstraintUnavailable("constrained decoding before reset(): no turn schema compiled yet")
        return self._compiled[1] if self.episode.final() else self._compiled[0]

    def next_processor(self) -> Any:
        """The logits processor of the coming turn (the answer-only grammar on the last); counts the turn."""
        compiled = self._compiled
        if compiled is None:
            raise ConstraintUnavailable("constrained decoding before reset(): no turn schema compiled yet")
        from xgrammar.contrib.hf import LogitsProcessor

        processor = LogitsProcessor(compiled[1] if self.episode.final() else compiled[0])
        self.episode.advance()
        return processor
