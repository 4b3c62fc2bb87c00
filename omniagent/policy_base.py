"""The policy interface and its registry: what every backend builds on (imports no backend).

A policy turns the environment's current context (chat messages holding at most one raw percept)
into the model's raw text for this turn. Backends register themselves by name with
:func:`register_policy`, so the CLI, the evaluation runner and the synthesis pipeline pick them from
config instead of if-chains. Each backend declares its parameters once, as a pydantic model
(:attr:`Policy.Params`, unknown keys forbidden), checked by :func:`validate_params`.

Backends import this module; :mod:`omniagent.policy` imports the backends (``omniagent.backends``
registers the built-in ones) and offers :func:`omniagent.policy.make_policy`, so the import graph has
no circle.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError

from envs.messages import Message
from envs.registry import Registry

EntropyEstimator = Literal["exact", "topk_lump"]
"""How a turn's entropy was computed: ``exact`` from full logits; ``topk_lump`` from top-k log-probs
(see :mod:`omniagent.backends.entropy`, a lower bound on the true entropy)."""


class PolicyError(RuntimeError):
    """The policy could not produce a turn (dead server, garbage reply, model missing).

    The episode loop records it as the trajectory's stop reason; a batch run moves on.
    """


class PolicyConfigError(ValueError):
    """A backend was given arguments it does not declare, or values it cannot take."""


class PolicyParams(BaseModel):
    """Base of every backend's declared parameters: unknown keys are an error, not ignored."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)


class TurnOutput(BaseModel):
    """What a policy produced for one turn, with the statistics RL and analysis need."""

    text: str = Field(description="what the environment parses: the output with any reasoning block cut off")
    thinking: str | None = Field(
        default=None, description="a thinking variant's reasoning block (kept out of the parse, recorded)"
    )
    token_ids: list[int] | None = Field(
        default=None,
        description="the generated token ids as sampled, reasoning block included (a local model's; None for others)",
    )
    token_logprobs: list[float] | None = None
    token_entropies: list[float] | None = None
    entropy: float | None = Field(default=None, description="mean token entropy of the turn, in nats")
    entropy_estimator: EntropyEstimator | None = Field(
        default=None, description="how `entropy` was computed; None when there is no entropy"
    )
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    model_seconds: float = 0.0
    scripted_error: bool = Field(
        default=False,
        description="a deliberate mistake a scripted teacher makes to show the recovery; never an SFT target",
    )

    @property
    def entropy_is_estimate(self) -> bool:
        """True when the entropy comes from truncated top-k log-probs rather than full logits."""
        return self.entropy_estimator not in (None, "exact")


def _safe_value(value: Any) -> Any:
    """A parameter value as JSON-safe data; secrets masked."""
    if isinstance(value, SecretStr):
        return str(value)  # "**********"
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, Mapping):
        return {str(k): _safe_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_safe_value(v) for v in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return repr(value)


class Policy(abc.ABC):
    """One agent's decision rule. Subclasses implement :meth:`act`; :meth:`reset` is optional.

    A backend sets ``Params`` to its parameter model and calls :meth:`_init_params` with its keyword
    arguments; ``self.params`` then holds the validated values.
    """

    name: str = "policy"
    Params: ClassVar[type[PolicyParams] | None] = None
    params: PolicyParams | None = None

    def _init_params(self, kwargs: Mapping[str, Any]) -> Any:
        """Validate ``kwargs`` against ``Params`` and keep them as ``self.params``."""
        if self.Params is None:
            raise TypeError(f"{type(self).__name__} declares no Params")
        self.params = validate_params(self.name, self.Params, kwargs)
        return self.params

    def config(self) -> dict[str, Any]:
        """The parameters to record (run.json, trajectory meta): JSON-safe, secrets masked."""
        if self.params is None:
            return {}
        return {k: _safe_value(getattr(self.params, k)) for k in type(self.params).model_fields}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.config().items())
        return f"{type(self).__name__}({args})"

    def reset(self, info: dict[str, Any]) -> None:
        """Called once per episode with the environment's reset ``info`` (media facts, task, budget)."""

    @abc.abstractmethod
    def act(self, messages: list[Message]) -> TurnOutput:
        """Return the model's raw text for the current context."""

    def close(self) -> None:
        """Release models, servers or files held by the policy."""


PolicyFactory = Callable[..., Policy]
POLICIES: Registry[PolicyFactory] = Registry("policy backend")


def register_policy(name: str) -> Callable[[PolicyFactory], PolicyFactory]:
    """Class decorator: make a policy constructible by name from config and the CLI.

    Registering the same class twice is a no-op; a different object under a taken name raises.
    """
    return POLICIES.register(name)


def validate_params(name: str, params: type[PolicyParams], kwargs: Mapping[str, Any]) -> PolicyParams:
    """``kwargs`` as ``params``; unknown names or bad values raise :class:`PolicyConfigError`."""
    accepted = sorted(params.model_fields)
    unknown = sorted(set(kwargs) - set(accepted))
    if unknown:
        raise PolicyConfigError(
            f"policy {name!r} does not take {', '.join(map(repr, unknown))}; "
            f"it accepts: {', '.join(accepted) or 'no arguments'}"
        )
    try:
        return params.model_validate(dict(kwargs))
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}" for e in exc.errors()
        )
        raise PolicyConfigError(f"policy {name!r}: {problems}") from None
