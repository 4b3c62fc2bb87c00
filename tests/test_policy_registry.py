"""One way to build a backend: declared parameters, strict validation, shared run settings."""

from __future__ import annotations

from typing import Any

import pytest

from envs.limits import EnvLimits
from envs.registry import DuplicateNameError
from omniagent.backends.scripted import RandomPolicy, UniformPolicy
from omniagent.policy import (
    POLICIES,
    Policy,
    PolicyConfigError,
    TurnOutput,
    make_policy,
    policy_names,
    policy_params,
    register_policy,
)

BUILT_IN = {"openai", "oracle", "random", "replay", "transformers", "uniform", "vllm"}


def test_every_backend_declares_documented_parameters():
    assert BUILT_IN <= set(policy_names())
    for name in BUILT_IN:
        params = policy_params(name)
        assert params is not None, name
        assert params.model_config.get("extra") == "forbid", name
        undocumented = [f for f, info in params.model_fields.items() if not info.description]
        assert not undocumented, f"{name}: {undocumented}"


def test_unknown_argument_is_refused_with_the_accepted_list():
    with pytest.raises(PolicyConfigError) as info:
        make_policy("uniform", num_frame=4)  # a typo of num_frames
    msg = str(info.value)
    assert "'num_frame'" in msg and "num_frames" in msg and "max_audio_windows" in msg and "limits" in msg
    with pytest.raises(PolicyConfigError, match="does not take 'temprature'.*temperature"):
        make_policy("openai", temprature=0.5)


def test_bad_values_are_refused_before_construction():
    with pytest.raises(PolicyConfigError, match="num_frames"):
        make_policy("uniform", num_frames=0)
    with pytest.raises(PolicyConfigError, match="server"):
        make_policy("openai", server="sglang")
    with pytest.raises(PolicyConfigError, match="max_new_tokens"):
        make_policy("transformers", max_new_tokens=0)  # refused before torch or a model loads


def test_shared_settings_reach_only_backends_that_declare_them():
    shared = {"seed": 5, "temperature": 0.7, "limits": {"max_frames": 3}}
    uniform = make_policy("uniform", shared=shared, num_frames=8)
    assert isinstance(uniform, UniformPolicy)
    assert uniform.limits == EnvLimits(max_frames=3) and uniform.num_frames == 3  # capped by the limits
    rand = make_policy("random", shared=shared)
    assert isinstance(rand, RandomPolicy) and rand.seed == 5
    assert make_policy("random", shared=shared, seed=9).seed == 9  # explicit arguments win
    openai = make_policy("openai", shared=shared)
    assert openai.config()["temperature"] == 0.7 and openai.config()["seed"] == 5


def test_unknown_backend_lists_the_known_ones():
    with pytest.raises(KeyError) as info:
        make_policy("gpt-omni")
    assert "gpt-omni" in str(info.value) and "uniform" in str(info.value)


class _Echo(Policy):
    name = "test_echo"

    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs

    def act(self, messages: list[Any]) -> TurnOutput:
        return TurnOutput(text="{}")


def test_registry_duplicate_rule_and_ad_hoc_factories():
    register_policy("test_echo")(_Echo)
    register_policy("test_echo")(_Echo)  # the same class again: fine
    with pytest.raises(DuplicateNameError):
        register_policy("test_echo")(UniformPolicy)
    with pytest.raises(DuplicateNameError):
        register_policy("uniform")(_Echo)
    assert POLICIES["uniform"] is UniformPolicy
    echo = make_policy("test_echo", shared={"seed": 1}, model="m")  # no Params: everything as given
    assert isinstance(echo, _Echo) and echo.kwargs == {"seed": 1, "model": "m"}


def test_config_is_json_safe_and_complete():
    policy = make_policy("replay", texts=["a", "b"], delay=0.0)
    assert policy.config() == {"texts": ["a", "b"], "path": None, "delay": 0.0, "repeat_last": True}
    assert repr(policy).startswith("ReplayPolicy(texts=['a', 'b']")
    limits = make_policy("oracle", limits=EnvLimits()).config()["limits"]
    assert limits == EnvLimits().model_dump(mode="json")


def test_backends_register_without_an_import_circle() -> None:
    """``omniagent.policy`` imports the backends; they import only ``omniagent.policy_base``, which imports
    no backend, so no import (function-level ones included) leads back to ``omniagent.policy``."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "omniagent"

    def imported(path: Path) -> set[str]:
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module:
                names.add(node.module)
        return names

    for path in sorted((root / "backends").glob("*.py")):
        assert "omniagent.policy" not in imported(path), path.name
    assert not {m for m in imported(root / "policy_base.py") if m.startswith("omniagent")}
    assert "omniagent.backends" in imported(root / "policy.py")
