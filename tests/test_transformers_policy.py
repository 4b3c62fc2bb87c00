"""The transformers policy (omniagent/backends/transformers_backend.py) on the tiny thinker: its log-probs and
entropies against a forward pass, loading by name or path, two threads sharing it, its load errors, and a
context the model cannot take."""

from __future__ import annotations

import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from testkit import SR, SYSTEM, audio_part, audio_tokens, image_part, text, user

from omniagent.backends.convert import build_model_inputs
from omniagent.policy import make_policy


def test_transformers_policy_logprobs_match_forward(tiny_thinker, tiny_dir: Path) -> None:
    import torch

    model, processor = tiny_thinker
    policy = make_policy(
        "transformers", model="tiny-random", tiny_dir=str(tiny_dir), device="cpu", max_new_tokens=6
    )
    messages = [SYSTEM, user(text("[t=4.0s]"), image_part(4.0), text("What is shown?"))]
    out = policy.act(messages)
    assert out.completion_tokens == len(out.token_logprobs) == len(out.token_entropies) > 0
    assert out.entropy == pytest.approx(np.mean(out.token_entropies))
    assert out.entropy_is_estimate is False and out.entropy_estimator == "exact" and out.model_seconds > 0

    batch, _ = build_model_inputs(messages, processor)
    prompt = batch["input_ids"]
    assert out.prompt_tokens == prompt.shape[1]
    # Re-run prompt + completion in one forward pass and recompute by hand in numpy.
    gen = policy.model.generate(**batch, generation_config=policy.generation_config).sequences[
        0, prompt.shape[1] :
    ]
    assert processor.tokenizer.decode(gen, skip_special_tokens=True) == out.text
    full = torch.cat([prompt, gen[None]], dim=1)
    fwd = dict(batch)
    fwd["input_ids"], fwd["attention_mask"] = full, torch.ones_like(full)
    with torch.inference_mode():
        logits = model(**fwd).logits[0, prompt.shape[1] - 1 : -1].double().numpy()
    z = logits - logits.max(-1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(-1, keepdims=True))
    entropy = -(np.exp(logp) * logp).sum(-1)
    chosen = logp[np.arange(len(gen)), gen.numpy()]
    np.testing.assert_allclose(out.token_entropies, entropy, atol=2e-4)
    np.testing.assert_allclose(out.token_logprobs, chosen, atol=2e-4)
    assert gen.tolist() == logits.argmax(-1).tolist()  # temperature 0 is greedy


def test_transformers_policy_loads_tiny_by_path(tiny_dir: Path) -> None:
    messages = [user(text("[audio 0-1s]"), audio_part(0.0, 1.0), text("Heard?"))]
    by_name = make_policy("transformers", model="tiny-random", tiny_dir=str(tiny_dir), max_new_tokens=4).act(
        messages
    )
    by_path = make_policy("transformers", model=str(tiny_dir), dtype="float32", max_new_tokens=4).act(
        messages
    )
    assert by_path.text == by_name.text
    assert by_path.token_logprobs == pytest.approx(by_name.token_logprobs, abs=1e-5)
    assert by_path.prompt_tokens == by_name.prompt_tokens > audio_tokens(SR)

    sampler = make_policy(
        "transformers", model="tiny-random", tiny_dir=str(tiny_dir), temperature=0.7, top_p=0.9
    )
    config = sampler.generation_config
    assert (config.do_sample, config.temperature, config.top_p) == (True, 0.7, 0.9)
    assert config.output_logits and config.return_dict_in_generate
    eos = sampler.processor.tokenizer.convert_tokens_to_ids(["<|im_end|>", "<|endoftext|>"])
    assert config.eos_token_id == eos


def test_transformers_policy_shared_by_two_threads(tiny_thinker, tiny_dir: Path) -> None:
    """Eval workers may share one policy: generation is serialised by its lock (the intervals of the
    model's ``generate`` calls never overlap) and each result equals the one computed alone."""
    policy = make_policy(
        "transformers", model="tiny-random", tiny_dir=str(tiny_dir), device="cpu", max_new_tokens=4
    )
    contexts = [[SYSTEM, user(text(f"[t={t}s]"), image_part(t), text("What?"))] for t in (1.0, 6.0)]
    alone = [policy.act(c).text for c in contexts]
    spans: list[tuple[float, float]] = []
    generate = policy.model.generate

    def timed(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        out = generate(*args, **kwargs)
        time.sleep(0.05)  # widen the window a second thread would need to overlap
        spans.append((t0, time.perf_counter()))
        return out

    policy.model.generate = timed
    with ThreadPoolExecutor(2) as pool:
        together = [o.text for o in pool.map(policy.act, contexts * 2)]
    assert together == alone * 2
    spans.sort()
    assert len(spans) == 4 and all(b[0] >= a[1] for a, b in zip(spans, spans[1:], strict=False))


def test_transformers_classes_are_imported_at_construction() -> None:
    """transformers resolves its names lazily and two threads doing that at once raced
    (ImportError: cannot import name 'Qwen2_5OmniProcessor'); the backend resolves them up front."""
    names = ["Qwen2_5OmniProcessor", "Qwen2_5OmniThinkerForConditionalGeneration", "GenerationConfig"]
    code = (
        "import transformers\n"
        f"names = {names!r}\n"
        "before = [n in vars(transformers) for n in names]\n"
        "from omniagent.backends.transformers_backend import _import_transformers\n"
        "_import_transformers()\n"
        "print(before, [n in vars(transformers) for n in names])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True
    )
    assert out.stdout.strip().splitlines()[-1] == f"{[False] * 3} {[True] * 3}"


def test_transformers_policy_load_errors(tmp_path: Path) -> None:
    with pytest.raises(OSError, match="--model tiny"):
        make_policy("transformers", model=str(tmp_path))  # a folder without config.json
    with pytest.raises(OSError, match="--backend openai --base-url"):
        make_policy("transformers", model="/no/such/checkpoint")
    with pytest.raises(ValueError, match="temperature"):
        make_policy("transformers", model="tiny-random", temperature=-1)


def test_a_context_the_model_cannot_take_is_a_policy_error_and_the_env_refuses_its_cause(
    tiny_dir: Path, video_path: Path
) -> None:
    """A 10 ms clip gives Qwen2.5-Omni's processor no audio token and its forward pass fails. With the
    environment's floor lifted (``min_clip_s=0``), the backend turns that failure into a PolicyError
    (the episode loop records it and a batch moves on); with the default floor the env rejects the clip."""
    import json

    from envs.env import OmniVideoEnv
    from omniagent.policy import PolicyError

    policy = make_policy("transformers", model="tiny-random", tiny_dir=str(tiny_dir), max_new_tokens=4)
    clip = json.dumps(
        {"observation": "none", "thought": "t", "action": {"type": "get_clip", "start": 1.0, "end": 1.01}}
    )
    for floor, error in ((0.0, None), (None, "span_too_short")):
        env = OmniVideoEnv(
            media=str(video_path), question="q", task_type="num", answer=1,
            limits={} if floor is None else {"min_clip_s": floor},
        )  # fmt: skip
        env.reset()
        obs, _, _, _, info = env.step(clip)
        assert info["error"] == error
        if floor is None:
            assert policy.act(obs).text is not None  # the error percept is an ordinary context
        else:
            with pytest.raises(PolicyError, match="failed on this context .* prompt tokens"):
                policy.act(obs)
        env.close()
