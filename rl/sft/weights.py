"""Per-token loss weights of an SFT target: the answer action may weigh more than the rest of the turn.

A target follows the turn schema (:mod:`envs.turn_schema`): one JSON object whose last key is ``"action"``. In a
turn whose action is ``answer``, every token that covers a character of the action (from the ``"action":`` key to
the end of the turn, the closing ``<|im_end|>`` included) weighs ``answer_weight``; every other target token, and
every token of a turn that does not answer, weighs 1. The loss is then the weighted mean (:func:`rl.sft.step.sft_loss`):
the sum of weight times negative log-likelihood over the sum of the weights.

Why a knob: most of an answer's tokens are forced by the schema and cost nothing, so in a mean over a whole
episode the one or two tokens that choose the answer carry a small share of the gradient. ``answer_weight: 1``
(the default) is the plain SFT loss, and nothing differs from a run without this module.

The setting is ``data.omni.answer_weight``. Only the plain-torch trainer (``omni_sft.mode=local``) applies it;
``rl/train_sft.py`` refuses a weight other than 1 under verl, whose SFT loss reads only the 0/1 loss mask.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

ACTION_KEY = '"action":'


def answer_action_start(reply: str) -> int | None:
    """The character offset of the ``"action":`` key in ``reply`` when ``reply`` is one turn-schema object whose
    action's type is ``answer``; None for any other reply (another action, or not the schema)."""
    try:
        obj = json.loads(reply)
    except json.JSONDecodeError:
        return None
    action = obj.get("action") if isinstance(obj, dict) else None
    if not isinstance(action, dict) or action.get("type") != "answer":
        return None
    at = reply.rfind(ACTION_KEY)  # inside a JSON string a quote is escaped, so only the key itself matches
    return at if at >= 0 else None


def check_weight(weight: float) -> float:
    """``weight`` as a float, refused unless it is finite and positive."""
    value = float(weight)
    if not value > 0 or value == float("inf"):
        raise ValueError(f"answer_weight must be a positive finite number, got {weight!r}")
    return value


def token_weights(offsets: Sequence[tuple[int, int]], start: int | None, weight: float) -> list[float]:
    """One weight per token, from the tokenizer's ``(start, stop)`` character offsets: ``weight`` for each token
    that ends after ``start`` (the action's first character), 1 for the rest and for every token when ``start``
    is None."""
    weight = check_weight(weight)
    if start is None:
        return [1.0] * len(offsets)
    return [weight if stop > start else 1.0 for _, stop in offsets]


def reply_weights(offsets: Sequence[Sequence[int]], text: str, reply: str, weight: float) -> list[float]:
    """The weights of the tokens of ``text`` (their ``(start, stop)`` character offsets, as a fast tokenizer's
    ``return_offsets_mapping=True`` gives them), where ``text`` contains the turn-schema ``reply`` (the last
    occurrence counts): a target closed by ``<|im_end|>``, perhaps after a reasoning block. Weight 1: every token
    weighs 1, and nothing is parsed (the plain loss, e.g. the text warm-up's default)."""
    if check_weight(weight) == 1.0:
        return [1.0] * len(offsets)
    where = text.rfind(reply)
    if where < 0:
        raise ValueError("the reply is not part of the tokenized target")
    at = answer_action_start(reply)
    return token_weights([(int(a), int(b)) for a, b in offsets], None if at is None else where + at, weight)
