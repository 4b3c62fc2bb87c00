"""The one top-k entropy estimator, shared by every backend that sees only top-k log-probs.

Servers (vLLM offline or ``vllm serve``, OpenAI-compatible APIs) return the log-probs of the k most
likely tokens per step, not the full distribution. For one step with known probabilities
``p_1..p_k`` (the top-k, plus the chosen token when it fell outside them) and unseen tail mass
``r = 1 - sum(p_i)``, the true entropy is ``H = H_head + H_tail`` with ``H_head = -sum p_i log p_i``
exact and ``H_tail`` the entropy contribution of the unseen tokens.

Estimator ``"topk_lump"`` (recorded as ``TurnOutput.entropy_estimator``): ``H_head - r log r``, the
tail counted as one lump. Bounds, for a vocabulary of V tokens:

- it is a **lower bound**: ``-sum_tail p log p >= -r log r`` since every tail ``p <= r``;
- it **underestimates by at most** ``r log(V - k)`` (the tail spread evenly over V - k tokens);
- it is **exact** when the top-k carry all the mass (``r = 0``).

So with top-20 log-probs of a peaked LM step (``r`` of a few percent) the error is small; for a
flat step it can be large, and turns compare fairly only at the same k. It needs neither the
vocabulary size nor a renormalisation, so every backend gives the same number for the same input.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

TOPK_ESTIMATOR = "topk_lump"


def topk_entropy(logprobs: Iterable[float | None]) -> float:
    """Entropy estimate (nats) of one step from its known log-probs (see the module docstring)."""
    probs = [math.exp(lp) for lp in logprobs if lp is not None and math.isfinite(lp)]
    head = -sum(p * math.log(p) for p in probs if p > 0)
    rest = 1.0 - sum(probs)
    if rest <= 1e-12:
        return max(0.0, head)
    return max(0.0, head - rest * math.log(rest))


def topk_entropy_gap(logprobs: Iterable[float | None], vocab_size: int) -> float:
    """The most :func:`topk_entropy` can underestimate this step by: ``r log(V - k)``."""
    probs = [math.exp(lp) for lp in logprobs if lp is not None and math.isfinite(lp)]
    rest = max(0.0, 1.0 - sum(probs))
    return rest * math.log(max(1, vocab_size - len(probs)))
