"""The sampling distribution of a rollout turn, rebuilt for training (``local.masked_stats``).

A constrained rollout samples each token from the model's logits at ``rollout.temperature`` with every token the
turn's grammar forbids at that point set to -inf (xgrammar's logits processor). For the PPO ratio and TAURA's
entropies to be those of the policy that acted, the trainer must score

1. **the sampled token ids**, not the turn's text encoded again: the grammar lets the model spell a string in
   pieces the tokenizer would merge (``"`` then ``A`` where encoding gives ``"A``), and such a turn would be trained
   on a sequence the policy never sampled (:meth:`SampledTurns.item`);
2. **under the same mask**: :func:`replay_bitmask` replays a fresh matcher of the grammar the turn decoded under
   over the sampled ids and keeps, per generated position, the packed bitmask of the allowed tokens
   (xgrammar's format, ``(tokens, ceil(V / 32))`` int32); :func:`masked_logits` applies it to the logits that
   predict those tokens, after dividing them by the temperature. A position the grammar forces then has
   log-probability 0 and entropy 0, and the probability mass outside the grammar is not in any statistic.

Off (``local.masked_stats=false``), rows re-encode the turn's text and the statistics are the full vocabulary's
at temperature 1, as the trainer computed them before the key existed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch


def replay_bitmask(compiled: Any, token_ids: list[int]) -> torch.Tensor:
    """``(len(token_ids), ceil(V / 32))`` int32: the tokens the grammar allowed before each sampled token.

    Raises ``ValueError`` when the grammar rejects a sampled token (the ids were not sampled under it)."""
    import xgrammar as xgr

    matcher = xgr.GrammarMatcher(compiled)
    vocab = compiled.tokenizer_info.vocab_size
    out = xgr.allocate_token_bitmask(max(1, len(token_ids)), vocab)[: len(token_ids)]
    for i, token in enumerate(token_ids):
        matcher.fill_next_token_bitmask(out, i)
        if not matcher.accept_token(int(token)):
            raise ValueError(
                f"the grammar rejects sampled token {token} at position {i}: not sampled under it"
            )
    return out


@dataclass
class Allowed:
    """Which tokens a row's sampling allowed: ``bitmask[j]`` applies to the logits at position ``at + j``."""

    at: int
    bitmask: torch.Tensor


def masked_logits(logits: torch.Tensor, allowed: Allowed | None, temperature: float) -> torch.Tensor:
    """``logits`` (L, V) of a row as the sampler saw them: divided by ``temperature``, -inf where not allowed."""
    out = logits / temperature if temperature != 1.0 else logits.clone()
    if allowed is None or allowed.bitmask.shape[0] == 0:
        return out
    import xgrammar as xgr

    rows = out[allowed.at : allowed.at + allowed.bitmask.shape[0]]
    if rows.requires_grad:  # xgrammar masks in place: build the masked copy from a boolean mask instead
        bits = unpack(allowed.bitmask, out.shape[-1]).to(out.device)
        rows = rows.masked_fill(~bits, float("-inf"))
        return torch.cat([out[: allowed.at], rows, out[allowed.at + rows.shape[0] :]])
    xgr.apply_token_bitmask_inplace(rows, allowed.bitmask.to(rows.device), vocab_size=out.shape[-1])
    return out


def unpack(bitmask: torch.Tensor, vocab: int) -> torch.Tensor:
    """A packed int32 bitmask ``(n, W)`` as booleans ``(n, vocab)`` (bit ``j % 32`` of word ``j // 32``)."""
    shifts = torch.arange(32, dtype=torch.int32)
    bits = (bitmask.unsqueeze(-1) >> shifts) & 1  # (n, W, 32)
    return bits.reshape(bitmask.shape[0], -1)[:, :vocab].bool()


def token_stats(logits: torch.Tensor, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per position t: log p(ids[t+1]) and the entropy at t, from (already masked) logits; -inf logits count
    as probability 0 (no nan from 0 x -inf)."""
    logp_all = torch.log_softmax(logits, dim=-1)
    nxt = torch.roll(ids, shifts=-1)
    logp = logp_all.gather(-1, nxt.unsqueeze(-1)).squeeze(-1)
    entropy = torch.special.entr(logp_all.exp()).sum(-1)
    return logp, entropy
