"""The verl path's sampling and training agree up to the banned media tokens, and constrained sampling is refused
there.

vLLM samples each token at the rollout temperature with the media placeholder and boundary ids banned
(rl/verl_ext/omni_patches.py); verl's actor recomputes log-probs and entropies over the full vocabulary at the
same temperature. The two distributions differ only by the probability mass the policy puts on the banned ids:
a sampled token's log-probability differs by -log(1 - mass). Measured here on the shipped tiny agent's own
turns: that mass is negligible (about 5e-7 per token on the search level, 1e-4 at most), so the PPO ratio and
TAURA's entropies of the verl path are those of the sampling distribution to within 1e-3 nats a turn.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from envs.env import OmniVideoEnv
from envs.limits import EnvLimits
from envs.synth import generate_benchmark
from omniagent.backends.transformers_backend import TransformersPolicy
from omniagent.episode import run_episode
from rl.train_taura import structured_output_refusal
from rl.verl_ext.media_tokens import omni_media_token_ids


def test_media_token_mass_of_the_shipped_agent_is_negligible(tmp_path: Path) -> None:
    tasks = generate_benchmark(tmp_path, seed=9, n_videos=1, durations=[60.0], config={"level": "search"})
    policy = TransformersPolicy(model="tiny", device="cpu", temperature=1.0, max_new_tokens=64, seed=0)
    banned = torch.tensor(omni_media_token_ids(policy.processor))
    assert len(banned) >= 5
    per_turn: list[list[float]] = []
    generate = policy.model.generate

    def recording(**kwargs):  # the full-vocabulary logits of every sampled token (unconstrained decoding)
        out = generate(**kwargs)
        per_turn.append([float(torch.softmax(s[0].float(), -1)[banned].sum()) for s in out.logits])
        return out

    policy.model.generate = recording
    env = OmniVideoEnv(limits=EnvLimits(max_frames=8, max_clip_s=10, max_audio_s=30, max_answer_chars=40))
    torch.manual_seed(0)
    for task in (tasks[0], tasks[4]):
        run_episode(env, policy, task.env_options(2), episode_id="m", seed=0)
    env.close()
    masses = [m for turn in per_turn for m in turn]
    assert len(masses) > 40
    assert sum(masses) / len(masses) < 1e-5 and max(masses) < 1e-2
    # the sequence log-ratio of a turn between the banned-id sampler and the full distribution
    assert max(abs(sum(math.log1p(-m) for m in turn)) for turn in per_turn) < 1e-2


@pytest.mark.parametrize(
    "key",
    [
        "actor_rollout_ref.rollout.structured_outputs",
        "actor_rollout_ref.rollout.guided_decoding",
        "local.constrained",
    ],
)
def test_constrained_sampling_is_refused_on_the_verl_path(key: str) -> None:
    config = OmegaConf.create({})
    assert structured_output_refusal(config) is None
    OmegaConf.update(config, key, True if key == "local.constrained" else {"json": {}}, force_add=True)
    message = structured_output_refusal(config)
    assert message is not None and key in message and "rl/train_local.py" in message
    OmegaConf.update(config, key, False if key == "local.constrained" else None, force_add=True)
    assert structured_output_refusal(config) is None
