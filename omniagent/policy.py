"""The policy interface and its registry.

A policy turns the environment's current context (chat messages holding at most one raw percept)
into the model's raw text for this turn. Backends register themselves by name, so the CLI, the
evaluation runner and the synthesis pipeline pick them from config instead of if-chains.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, Field

from envs.messages import Message


class PolicyError(RuntimeError):
    """The policy could not produce a turn (dead server, garbage reply, model missing).

    The episode loop records it as the trajectory's stop reason; a batch run moves on.
    """


class TurnOutput(BaseModel):
    """What a policy produced for one turn, with the statistics RL and analysis need."""

    text: str
    token_logprobs: list[float] | None = None
    token_entropies: list[float] | None = None
    entropy: float | None = Field(default=None, description="mean token entropy of the turn, in nats")
    entropy_is_estimate: bool = Field(
        default=False, description="True when computed from truncated top-k log-probs rather than full logits"
    )
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    model_seconds: float = 0.0


class Policy(abc.ABC):
    """One agent's decision rule. Subclasses implement :meth:`act`; :meth:`reset` is optional."""

    name: str = "policy"

    def reset(self, info: dict[str, Any]) -> None:
        """Called once per episode with the environment's reset ``info`` (media facts, task, budget)."""

    @abc.abstractmethod
    def act(self, messages: list[Message]) -> TurnOutput:
        """Return the model's raw text for the current context."""

    def close(self) -> None:
        """Release models, servers or files held by the policy."""


POLICIES: dict[str, Callable[..., Policy]] = {}


def register_policy(name: str) -> Callable[[Callable[..., Policy]], Callable[..., Policy]]:
    """Class decorator: make a policy constructible by name from config and the CLI."""

    def deco(factory: Callable[..., Policy]) -> Callable[..., Policy]:
        if name in POLICIES:
            raise ValueError(f"policy {name!r} is registered twice")
        POLICIES[name] = factory
        return factory

    return deco


def make_policy(name: str, **kwargs: Any) -> Policy:
    """Build a registered policy; importing the backends package fills the registry lazily."""
    import omniagent.backends  # noqa: F401  (registers the built-in backends)

    if name not in POLICIES:
        raise KeyError(f"unknown policy backend {name!r}; known: {', '.join(sorted(POLICIES))}")
    return POLICIES[name](**kwargs)
