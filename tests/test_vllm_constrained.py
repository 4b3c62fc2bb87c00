"""Constrained decoding on the in-process vLLM backend, against a stand-in ``vllm`` module that
records what the backend asks for: both structured-output APIs vLLM has had (``structured_outputs``
from 0.12, ``guided_decoding`` before), the answer-only schema on the budget's last turn, and a
clear error where the installed vLLM has neither. vLLM itself does not run on a CPU."""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

import pytest

from omniagent.backends.constrained import ConstraintUnavailable
from omniagent.policy import make_policy

TURN = {"title": "any turn", "type": "object"}
FINAL = {"title": "answer only", "type": "object"}
INFO = {"turn_schema": TURN, "final_turn_schema": FINAL, "max_turns": 2}


class _Params:
    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs


def fake_vllm(api: str | None) -> tuple[types.ModuleType, list[dict[str, Any]]]:
    """A ``vllm`` module whose ``LLM.generate`` answers one fixed turn and records its sampling params."""
    sent: list[dict[str, Any]] = []
    mod = types.ModuleType("vllm")
    mod.sampling_params = types.ModuleType("vllm.sampling_params")  # type: ignore[attr-defined]
    if api is not None:
        setattr(mod.sampling_params, api, type(api, (_Params,), {}))  # type: ignore[attr-defined]

    class LLM:
        def __init__(self, **engine: Any) -> None:
            self.engine = engine

        def generate(self, requests: list[Any], sampling_params: Any, use_tqdm: bool) -> list[Any]:
            sent.append(sampling_params.kwargs)
            out = types.SimpleNamespace(text='{"observation": "none"}', token_ids=[1, 2], logprobs=None)
            return [types.SimpleNamespace(outputs=[out], prompt_token_ids=[0])]

    mod.LLM = LLM  # type: ignore[attr-defined]
    mod.SamplingParams = type("SamplingParams", (_Params,), {})  # type: ignore[attr-defined]
    return mod, sent


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from omniagent.tiny_model import build_tiny_thinker

    out = tmp_path_factory.mktemp("vllm-constrained") / "thinker"
    build_tiny_thinker(seed=0, out_dir=out)
    return out


@pytest.mark.parametrize(
    ("api", "field"),
    [("StructuredOutputsParams", "structured_outputs"), ("GuidedDecodingParams", "guided_decoding")],
)
def test_each_turn_carries_its_schema_in_the_installed_api(
    model_dir: Path, monkeypatch: pytest.MonkeyPatch, api: str, field: str
) -> None:
    mod, sent = fake_vllm(api)
    monkeypatch.setitem(sys.modules, "vllm", mod)
    policy = make_policy("vllm", model=str(model_dir), constrained=True)
    messages = [{"role": "user", "content": [{"type": "text", "text": "Where is the dog?"}]}]
    for _ in range(2):  # a second episode starts over from the any-turn schema
        policy.reset(INFO)
        policy.act(messages)
        policy.act(messages)
    assert [type(s[field]).__name__ for s in sent] == [api] * 4
    assert [s[field].kwargs["json"]["title"] for s in sent] == ["any turn", "answer only"] * 2
    assert all(set(s) - {field} == {"temperature", "top_p", "max_tokens", "logprobs", "seed"} for s in sent)


def test_unconstrained_requests_carry_no_schema_and_old_vllm_fails_at_once(
    model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mod, sent = fake_vllm("StructuredOutputsParams")
    monkeypatch.setitem(sys.modules, "vllm", mod)
    policy = make_policy("vllm", model=str(model_dir))
    policy.reset(INFO)
    policy.act([{"role": "user", "content": [{"type": "text", "text": "hi"}]}])
    assert "structured_outputs" not in sent[0] and "guided_decoding" not in sent[0]

    bare, _ = fake_vllm(None)
    monkeypatch.setitem(sys.modules, "vllm", bare)
    with pytest.raises(ConstraintUnavailable, match="constrained=false"):
        make_policy("vllm", model=str(model_dir), constrained=True)
