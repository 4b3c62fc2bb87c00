"""Build a policy backend by name: the one way the CLI, evaluation and synthesis get a policy.

The interface (:class:`Policy`, :class:`TurnOutput`, the errors, :func:`register_policy`) lives in
:mod:`omniagent.policy_base`, which backends import; this module imports the built-in backends (the
:mod:`omniagent.backends` package registers them on import) and re-exports the interface, so callers
need one import.

:func:`make_policy` validates keyword arguments against the backend's declared parameters, so a
misspelt option fails at once with the list of accepted names instead of being silently dropped;
callers pass run-wide settings (temperature, seed, limits) through ``shared`` and each backend takes
the ones it declares.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import omniagent.backends  # noqa: F401  (registers the built-in backends)
from omniagent.policy_base import (
    POLICIES,
    EntropyEstimator,
    Policy,
    PolicyConfigError,
    PolicyError,
    PolicyFactory,
    PolicyParams,
    TurnOutput,
    register_policy,
    validate_params,
)

__all__ = [
    "POLICIES",
    "EntropyEstimator",
    "Policy",
    "PolicyConfigError",
    "PolicyError",
    "PolicyFactory",
    "PolicyParams",
    "TurnOutput",
    "make_policy",
    "policy_names",
    "policy_params",
    "register_policy",
    "validate_params",
]


def policy_names() -> list[str]:
    """Every registered backend name, sorted."""
    return POLICIES.names()


def policy_params(name: str) -> type[PolicyParams] | None:
    """The parameter model a backend declares (None for an ad-hoc factory without one)."""
    return getattr(POLICIES[name], "Params", None)


def make_policy(name: str, /, *, shared: Mapping[str, Any] | None = None, **kwargs: Any) -> Policy:
    """Build the registered backend ``name``.

    ``kwargs`` must all be parameters the backend declares (else :class:`PolicyConfigError`, which
    lists the accepted ones). ``shared`` holds run-wide settings (``temperature``, ``seed``,
    ``limits``, ...) that are passed only to backends declaring them; ``kwargs`` win over them. A
    registered factory without ``Params`` gets ``shared`` and ``kwargs`` as they are.
    """
    factory = POLICIES[name]
    params: type[PolicyParams] | None = getattr(factory, "Params", None)
    common = dict(shared or {})
    if params is None:
        return factory(**{**common, **kwargs})
    taken = {k: v for k, v in common.items() if k in params.model_fields}
    merged = {**taken, **kwargs}
    validate_params(name, params, merged)  # fail before any heavy construction starts
    return factory(**merged)
