"""Information gain of a turn's percept: how much it lowered the policy's uncertainty about the answer.

The measure behind ``taura.mode=ig`` (:mod:`rl.algo.taura`), defined precisely:

- **answer entropy** ``Ha(context)``: append to the context an assistant message that starts an answer,
  ``{"observation": "", "thought": "", "action": {"type": "answer", "content": "`` (the protocol's answer
  action with empty observation and thought), and read the policy's next-token distribution at the end of that
  prefix. For a multiple-choice task it is restricted to the choice letters' tokens and renormalised, and
  ``Ha`` is the entropy of that distribution over letters (at most ``log(#choices)``); for other task types it
  is the entropy of the full next-token distribution (the first token of the answer);
- **information gain** of turn ``k``: ``IG[k] = Ha(context_k) - Ha(context_{k+1})``: the answer entropy just
  before the turn minus the answer entropy in the next context, which holds turn ``k``'s output and the percept
  it fetched. It is 0 for turns without a percept (answers, rejected output) and for a trajectory's last turn
  (no later context). It is negative when a percept made the policy less sure; the TAURA weight uses
  ``max(IG, 0)`` (see ``score_floor`` in :func:`rl.algo.taura.taura_advantages`).

All in nats, under the current policy, one no-grad forward per context.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from envs.tasks import Task, choice_letter
from rl.local.evidence import percept_spans
from rl.local.rollout import TurnEncoder, TurnRow, model_inputs
from rl.sft.step import collate

ANSWER_PREFIX = '{"observation": "", "thought": "", "action": {"type": "answer", "content": "'


def answer_entropy(model: Any, encoder: TurnEncoder, context: list[Any], task: Task) -> float:
    """``Ha(context)`` of the module docstring, in nats."""
    probe = [*context, {"role": "assistant", "content": [{"type": "text", "text": ANSWER_PREFIX}]}]
    item = encoder.encode(probe)
    # The loss mask covers the prefix's tokens and the closing <|im_end|>: the last position before that
    # token is where the policy chooses what follows the prefix.
    end = int(torch.nonzero(item["loss_mask"]).max())
    with torch.no_grad():
        logits = model(**model_inputs(collate([item], encoder.pad_id), model), use_cache=False).logits[
            0, end - 1
        ]
    logits = logits.float()
    if task.task_type == "mcq" and task.choices:
        ids = [encoder.tokenizer.convert_tokens_to_ids(choice_letter(i)) for i in range(len(task.choices))]
        ids = [i for i in ids if isinstance(i, int) and i != encoder.tokenizer.unk_token_id]
        if ids:
            logits = logits[torch.tensor(ids, device=logits.device)]
    logp = torch.log_softmax(logits, dim=-1)
    return float(-(logp.exp() * logp).sum())


def information_gains(model: Any, encoder: TurnEncoder, rows: Sequence[TurnRow], task: Task) -> list[float]:
    """``IG[k]`` for each turn of ONE trajectory (``rows`` in turn order), per the module docstring."""
    entropies = [answer_entropy(model, encoder, row.context, task) for row in rows]
    gains = []
    for k, row in enumerate(rows):
        has_next = k + 1 < len(rows)
        gains.append(entropies[k] - entropies[k + 1] if has_next and percept_spans(row.record) else 0.0)
    return gains
