"""The ``omniagent`` verl agent loop's settings and rewards (rl/verl_ext/agent_loop.py) without a worker: the turn
budget, the shaped reward, the evidence gate, what the reading credit reads, the prior floor and the number credit,
and the settings the composed tiny config gives it (the loop under verl's own worker: test_agent_loop.py)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

pytest.importorskip("verl", reason="verl is not installed (pip install 'verl[verl-core]==0.9.1')")

from envs.limits import EnvLimits  # noqa: E402
from envs.tasks import Task, save_tasks_jsonl  # noqa: E402
from omniagent.tiny_model import AUDIO_CHUNK_SECONDS  # noqa: E402
from rl.verl_ext import agent_loop as al  # noqa: E402
from rl.verl_ext import omni_patches as verl_omni  # noqa: E402  (patches verl as external_lib would)


def test_turn_budget_reward_and_settings(taura_cfg):
    turns = al.TurnBudgetConfig(min=5, max=10, dynamic_by_duration=True, seconds_per_extra_turn=60)
    assert [al.turn_budget(d, turns) for d in (20, 60, 299, 3600, None)] == [5, 6, 9, 10, 5]
    uniform = al.TurnBudgetConfig(min=5, max=10, dynamic_by_duration=False, sample_uniform=True)
    draws = [al.turn_budget(600, uniform, al.episode_rng("u", s, 1)) for s in range(40)]
    assert set(draws) <= set(range(5, 11)) and len(set(draws)) > 1
    assert draws == [al.turn_budget(600, uniform, al.episode_rng("u", s, 1)) for s in range(40)]
    assert al.turn_budget(600, al.TurnBudgetConfig(dynamic_by_duration=False)) == 10
    with pytest.raises(ValueError):
        al.TurnBudgetConfig(min=6, max=5)

    shaping = al.RewardConfig(format_error_penalty=0.1, no_answer_penalty=0.5)
    assert al.shaped_reward(1.0, 2, True, shaping) == pytest.approx(0.8)
    assert al.shaped_reward(0.0, 0, False, shaping) == pytest.approx(-0.5)

    # the evidence gate (rl/algo/reward.py) reads the spans the environment reported, refused turns excepted
    tally = al.EpisodeTally(budget=5, evidence=[[9.0, 11.0]])
    tally.step(0.0, False, {"action_type": "get_audio", "timestamps": [2.0, 14.0], "error": "bad"}, None)
    assert not tally.evidence_seen and tally.format_errors == 1
    tally.step(0.0, False, {"action_type": "get_frames", "timestamps": [0.0, 10.0, 20.0]}, None)
    tally.step(1.0, True, {"action_type": "answer", "timestamps": []}, None)
    assert tally.evidence_seen and al.EpisodeTally(budget=5).evidence_seen  # no evidence: nothing to gate
    gated = al.RewardConfig(evidence_gate=True)
    assert al.shaped_reward(1.0, 0, True, gated, tally.evidence_seen) == 1.0
    assert al.shaped_reward(1.0, 0, True, gated, False) == 0.0
    # the reading credit reads what each turn wrote and was served (tests/test_reward.py scores it)
    parsed = {"observation": "none", "thought": "t", "action": {"type": "get_frames", "start": 0, "end": 20}}
    read = al.EpisodeTally(budget=5, media="/no/such/video.mp4")
    read.step(0.0, False, {"parsed": parsed, "action_type": "get_frames", "timestamps": [0.0, 10.0]}, None)
    read.step(0.0, False, {"action_type": None, "timestamps": [], "error": "bad_json"}, None)
    assert [(t.observation, t.action, t.timestamps, t.error) for t in read.turns] == [
        ("none", parsed["action"], [0.0, 10.0], None),
        (None, None, [], "bad_json"),
    ]
    # media without a synthetic ground truth earn no credit
    assert read.reading() is None and read.reading("events") is None

    settings = al.EnvSettings.from_config(taura_cfg.env)  # the composed tiny config
    assert settings.limits == EnvLimits(**taura_cfg.env.limits) and settings.turns == al.TurnBudgetConfig(
        **taura_cfg.env.turns
    )
    assert settings.reward == al.RewardConfig()  # the shared config's default: the plain outcome reward
    # the tiny checkpoint's Whisper features hold AUDIO_CHUNK_SECONDS: longer audio calls must be refused
    assert settings.limits.max_audio_s <= AUDIO_CHUNK_SECONDS
    # every verl process loads our Omni support, and rows without an agent_name run our loop
    assert taura_cfg.actor_rollout_ref.model.external_lib == verl_omni.__name__
    assert taura_cfg.actor_rollout_ref.rollout.agent.default_agent_loop == al.AGENT_NAME
    with pytest.raises(ValueError, match="unknown env settings"):
        al.EnvSettings.from_config({"turn": {}})


def test_the_prior_floor_reaches_every_turns_reward(tmp_path):
    """``env.reward.prior_tasks`` in verl's agent loop: the tally carries the prior's score and every turn's row gets
    the score above it (tests/test_reward.py checks the fit)."""
    task = Task(id="n0", media="v.mp4", question="How many beeps?", task_type="num", answer=3.0)
    prior_file = save_tasks_jsonl([task.model_copy(update={"id": f"c{i}", "answer": 2.0}) for i in range(2)],
                                  tmp_path / "prior.jsonl")  # fmt: skip
    loop = object.__new__(al.OmniAgentLoop)  # no verl worker: _finish reads only the settings
    loop.settings = al.EnvSettings(reward=al.RewardConfig(prior_tasks=str(prior_file)))
    tally = al.EpisodeTally(budget=3, prior=al.prior_score(loop.settings.reward, task))
    assert tally.prior == pytest.approx(0.4)  # the constant 2 against the truth 3 (MRA)
    tally.step(1.0, True, {"action_type": "answer", "timestamps": []}, None)
    outputs = loop._finish([SimpleNamespace(extra_fields={}) for _ in range(2)], tally)
    assert [o.reward_score for o in outputs] == pytest.approx([0.6, 0.6])
    assert outputs[0].extra_fields["env_reward"] == 1.0  # the environment's own score is kept beside it


def test_the_num_credit_grades_the_answer_the_episode_gave(tmp_path):
    """``env.reward.num_credit`` in verl's agent loop: the tally keeps the parsed answer of the answering step
    and the task's truth, and every turn's row gets the credit for its closeness (tests/test_reward.py grades it)."""
    loop = object.__new__(al.OmniAgentLoop)
    loop.settings = al.EnvSettings(reward=al.RewardConfig(num_credit=0.5))
    tally = al.EpisodeTally(budget=3, task_type="num", truth=2000.0)
    tally.step(0.0, False, {"action_type": "get_audio", "timestamps": [1.0, 2.0]}, None)
    assert tally.answer is None
    tally.step(0.0, True, {"action_type": "answer", "timestamps": [], "answer": 240.0}, None)
    outputs = loop._finish([SimpleNamespace(extra_fields={}) for _ in range(2)], tally)
    expected = 0.5 * al.answer_closeness(loop.settings.reward, "num", 240.0, 2000.0)
    assert 0.0 < expected < 0.5 and [o.reward_score for o in outputs] == pytest.approx([expected, expected])
    mcq = al.EpisodeTally(budget=3, task_type="mcq", truth="B")
    mcq.step(1.0, True, {"action_type": "answer", "timestamps": [], "answer": "B"}, None)
    assert loop._finish([SimpleNamespace(extra_fields={})], mcq)[0].reward_score == 1.0  # not graded
