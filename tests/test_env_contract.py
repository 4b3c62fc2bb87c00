"""The environment's Gymnasium contract: misuse raises before anything changes, hostile output becomes
an error percept, the info keys match their TypedDicts, error codes match docs/env-contract.md, and an env
with a task source works under wrappers and ``gymnasium.vector``."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.error import ResetNeeded
from testkit import strict_json

import envs
from envs.contract import ResetInfo, StepInfo
from envs.env import OmniVideoEnv
from envs.errors import EpisodeOver, ErrorCode
from envs.messages import message_text
from envs.tasks import Task, save_tasks_jsonl

ROOT = Path(__file__).resolve().parents[1]


def turn(action: dict[str, Any] | str, observation: str = "none") -> str:
    body = action if isinstance(action, str) else json.dumps(action)
    return '{"observation": ' + json.dumps(observation) + ', "thought": "t", "action": ' + body + "}"


@pytest.fixture()
def env(video_path: Path) -> OmniVideoEnv:
    e = OmniVideoEnv(
        media=str(video_path), question="Which?", task_type="mcq", choices=["a", "b", "c"], answer="B"
    )
    yield e
    e.close()


# ------------------------------------------------------------------------------------ misuse
def test_step_before_reset_raises_reset_needed(env: OmniVideoEnv) -> None:
    with pytest.raises(ResetNeeded):
        env.step(turn({"type": "answer", "content": "B"}))
    assert env.turn == 0 and env.messages == []


def test_step_after_the_end_raises_reset_needed_that_is_also_a_runtime_error(env: OmniVideoEnv) -> None:
    env.reset()
    env.step(turn({"type": "answer", "content": "B"}))
    with pytest.raises(ResetNeeded) as caught:
        env.step(turn({"type": "answer", "content": "B"}))
    assert isinstance(caught.value, RuntimeError) and isinstance(caught.value, EpisodeOver)


def test_failed_reset_leaves_no_runnable_episode(env: OmniVideoEnv, tmp_path: Path) -> None:
    env.reset()
    with pytest.raises(ValueError):
        env.reset(options={"max_turns": 0})
    with pytest.raises(ResetNeeded):
        env.step(turn({"type": "answer", "content": "B"}))


@pytest.mark.parametrize("bad", [None, 3, b"{}", {"type": "answer"}, ["x"]])
def test_step_with_a_non_string_fails_before_the_turn_counts(env: OmniVideoEnv, bad: Any) -> None:
    obs, _ = env.reset()
    with pytest.raises(TypeError):
        env.step(bad)
    assert env.turn == 0 and env.messages == obs
    _, _, _, _, info = env.step(turn({"type": "get_frames", "start": 0, "end": 1, "num": 1}))
    assert info["turn"] == 1 and info["error"] is None


@pytest.mark.parametrize("max_turns", [0, -1, -16, 2.5, True, "many"])
def test_a_turn_budget_below_one_or_not_whole_is_refused(env: OmniVideoEnv, max_turns: Any) -> None:
    with pytest.raises(ValueError, match="max_turns"):
        env.reset(options={"max_turns": max_turns})


def test_whole_turn_budgets_in_other_types_are_accepted(env: OmniVideoEnv) -> None:
    for value, expected in ((3, 3), (np.int64(4), 4), (5.0, 5), ("6", 6), (None, 16)):
        _, info = env.reset(options={"max_turns": value})
        assert info["max_turns"] == expected and env.max_turns == expected


def test_more_than_26_choices_is_refused_at_reset(env: OmniVideoEnv) -> None:
    choices = [f"option {i}" for i in range(27)]
    with pytest.raises(ValueError, match="at most 26 choices"):
        env.reset(options={"choices": choices, "answer": "A"})
    obs, _ = env.reset(options={"choices": choices[:26], "answer": "Z"})
    assert "Z. option 25" in message_text(obs[1])
    _, reward, term, _, _ = env.step(turn({"type": "answer", "content": "Z"}))
    assert term and reward == 1.0


def test_state_exists_before_reset(video_path: Path) -> None:
    e = OmniVideoEnv(media=str(video_path), question="q", task_type="num")
    counters = (e.frames_used, e.audio_seconds_used, e.clip_seconds_used)
    assert (e.turn, counters, e.done) == (0, (0, 0.0, 0.0), True)
    assert e.task == {} and e.task_id is None and e.media is None and e.messages == []
    assert e.max_turns == e.limits.max_turns and e.render() is None


# ------------------------------------------------------------------------- hostile output
HOSTILE = [
    (turn('{"type": "answer", "content": ' + "[" * 5000 + "]" * 5000 + "}"), "format_too_deep"),
    ("[" * 100_000, None),  # not JSON or too deep: either code, never a RecursionError
    ("{" * 3000 + "}" * 3000, None),
    (
        turn('{"type": "get_frames", "start": 0, "end": 2, "num": ' + "1" * 5000 + "}"),
        "format_number_too_long",
    ),
    (turn('{"type": "get_audio", "start": 1, "start": 2, "end": 3}'), "format_duplicate_key"),
    (turn('{"type": "get_frames", "start": "nan", "end": 2, "num": 2}'), "action_invalid_field"),
    (turn('{"type": "get_frames", "start": "1e999", "end": 2, "num": 2}'), "action_invalid_field"),
    (turn('{"type": "get_audio", "start": "10", "end": 12}'), "action_invalid_field"),
    (turn('{"type": "get_frames", "start": 1, "end": 2, "num": "inf"}'), "action_invalid_field"),
    (turn('{"type": "get_clip", "start": 1e999, "end": 2}'), "time_not_finite"),
    (turn('{"type": "answer", "content": NaN}'), "action_invalid_field"),
]


@pytest.mark.parametrize(("text", "code"), HOSTILE)
def test_hostile_output_is_an_error_percept_with_a_stable_code(
    env: OmniVideoEnv, text: str, code: str | None
) -> None:
    env.reset()
    obs, reward, term, trunc, info = env.step(text)
    assert info["error"] in {c.value for c in ErrorCode}
    if code is not None:
        assert info["error"] == code
    else:
        assert info["error"] in ("format_too_deep", "format_not_json")
    assert (reward, term, trunc, info["turn"], info["timestamps"]) == (0.0, False, False, 1, [])
    assert message_text(obs[-1]).startswith(f"ERROR ({info['error']}):")
    assert json.loads(strict_json(info)) == info
    strict_json(obs)


def test_a_nan_start_is_never_trimmed_to_zero(env: OmniVideoEnv) -> None:
    env.reset()
    _, _, _, _, info = env.step(turn('{"type": "get_frames", "start": "nan", "end": 2, "num": 3}'))
    assert info["error"] == "action_invalid_field" and info["frames_used"] == 0 and not info["notes"]


@pytest.mark.parametrize(
    "text",
    [
        turn({"type": "answer", "content": "B"}, observation="seen \ud800 here"),
        turn('{"type": "answer", "content": "\\udc00"}'),
        turn('{"type": "get_audio", "start": 1, "end": 2}', observation="\ud83d half an emoji"),
        "not json \udfff at all",
        turn('{"type": "answer", "content": "Z\\ud800"}'),
    ],
)
def test_lone_surrogates_never_reach_the_context_or_info(env: OmniVideoEnv, text: str) -> None:
    env.reset()
    obs, _, _, _, info = env.step(text)
    assert json.loads(strict_json(info)) == info
    assert "\ufffd" in strict_json(obs) + strict_json(info)
    assert not re.search("[\ud800-\udfff]", strict_json(obs) + strict_json(info))


@pytest.mark.parametrize(
    ("content", "code", "reward"),
    [
        ("[[" + "1" * 5000 + ", 2]]", "answer_invalid", 0.0),
        ("[" * 5000 + "]" * 5000, "answer_invalid", 0.0),
        ("[[3, NaN]]", "answer_invalid", 0.0),
        ([[3, 4]], None, 1.0),
        ("[[3.0, 4.0]]", None, 1.0),
    ],
)
def test_hostile_interval_answers_are_rejected_and_good_ones_serialise(
    video_path: Path, content: Any, code: str | None, reward: float
) -> None:
    e = OmniVideoEnv(media=str(video_path), question="When?", task_type="tr", answer=[[3.0, 4.0]])
    e.reset()
    _, got, term, _, info = e.step(turn({"type": "answer", "content": content}))
    assert (info["error"], got, term) == (code, reward, code is None)
    assert json.loads(strict_json(info)) == info
    if code is None:
        assert info["answer"] == [[3.0, 4.0]]
    e.close()


# ---------------------------------------------------------------------------- info contract
def test_info_keys_follow_the_typed_dicts(env: OmniVideoEnv) -> None:
    _, info = env.reset()
    assert set(info) == set(ResetInfo.__annotations__)
    assert set(info["task"]) == {"question", "task_type", "choices", "answer"}
    required, optional = StepInfo.__required_keys__, StepInfo.__optional_keys__
    for text in (
        "garbage",
        turn({"type": "get_frames", "start": 0, "end": 2, "num": 2}),
        turn({"type": "answer", "content": "C"}),
    ):
        _, _, term, _, info = env.step(text)
        assert required <= set(info) <= required | optional
    assert term and {"stop_reason", "answer", "reward_available"} <= set(info)
    assert set(StepInfo.__annotations__) == required | optional


def test_the_docs_list_exactly_the_error_codes() -> None:
    page = (ROOT / "docs" / "env-contract.md").read_text(encoding="utf-8")
    start = page.index("**Clamp or reject.**")
    paragraph = page[start : page.index("\n\n", start)]
    listed = {c for c in re.findall(r"`([^`]+)`", paragraph) if re.fullmatch(r"[a-z]+(?:_[a-z0-9]+)+", c)}
    enum = {c.value for c in ErrorCode}
    assert listed - enum == set(), "docs/env-contract.md lists codes the enum lacks"
    assert enum - listed == set(), "ErrorCode has codes docs/env-contract.md does not list"


def test_every_code_literal_in_envs_is_an_error_code() -> None:
    """Codes raised by the media layer (``code="..."``) are part of the same enum."""
    enum = {c.value for c in ErrorCode}
    found: dict[str, str] = {}
    for path in sorted((ROOT / "envs").glob("*.py")):
        for code in re.findall(r"\bcode=\"([a-z_0-9]+)\"", path.read_text(encoding="utf-8")):
            found.setdefault(code, path.name)
    assert found, "no code literals found: the pattern is stale"
    assert {c: f for c, f in found.items() if c not in enum} == {}


# ------------------------------------------------------------------------------ task source
def make_tasks(video_path: Path) -> list[Task]:
    return [
        Task(id="t-mcq", media=str(video_path), question="Which colour?", task_type="mcq",
             choices=["red", "green"], answer="B"),
        Task(id="t-num", media=str(video_path), question="How many beeps?", task_type="num", answer=2),
        Task(id="t-tr", media=str(video_path), question="When is the beep?", task_type="tr",
             answer=[[3.0, 4.0]]),
    ]  # fmt: skip


def test_reset_without_options_draws_the_next_task(video_path: Path) -> None:
    tasks = make_tasks(video_path)
    e = OmniVideoEnv(tasks=tasks)
    ids = [e.reset()[1]["task_id"] for _ in range(4)]
    assert ids == ["t-mcq", "t-num", "t-tr", "t-mcq"]
    _, info = e.reset(seed=3)  # a seed restarts the stream, so seeded runs repeat
    assert info["task_id"] == "t-mcq" and info["task"]["choices"] == ["red", "green"]
    _, info = e.reset(options={"media": str(video_path), "question": "own", "task_type": "num", "id": "x"})
    assert info["task_id"] == "x" and info["task"]["question"] == "own"  # options still win
    _, info = e.reset()
    assert info["task_id"] == "t-num"  # an explicit task did not consume one from the source
    _, info = e.reset(options={"max_turns": 3})
    assert info["task_id"] == "t-tr" and info["max_turns"] == 3  # options without media amend the drawn task
    e.close()


def test_shuffled_source_is_a_permutation_per_epoch_and_seeded(video_path: Path) -> None:
    tasks = make_tasks(video_path)
    orders = []
    for _ in range(2):
        e = OmniVideoEnv(tasks=[t.model_dump() for t in tasks], shuffle=True)
        first = e.reset(seed=7)[1]["task_id"]
        orders.append([first] + [e.reset()[1]["task_id"] for _ in range(5)])
        e.close()
    assert orders[0] == orders[1]
    assert sorted(orders[0][:3]) == sorted(orders[0][3:]) == ["t-mcq", "t-num", "t-tr"]


def test_wrapped_env_from_a_tasks_file_runs_episodes(video_path: Path, tmp_path: Path) -> None:
    path = save_tasks_jsonl(make_tasks(video_path), tmp_path / "tasks.jsonl")
    e = gym.wrappers.RecordEpisodeStatistics(gym.make(envs.ENV_ID, tasks=str(path), limits={"max_turns": 4}))
    answers = {"t-mcq": "B", "t-num": "2", "t-tr": "[[3.0, 4.0]]"}
    returns = []
    for _ in range(3):
        _, info = e.reset()
        _, _, _, _, step_info = e.step(turn({"type": "get_audio", "start": 2.0, "end": 5.0}))
        assert step_info["error"] is None
        _, reward, term, _, step_info = e.step(turn({"type": "answer", "content": answers[info["task_id"]]}))
        assert term and reward == 1.0
        returns.append((info["task_id"], float(step_info["episode"]["r"]), int(step_info["episode"]["l"])))
    assert returns == [("t-mcq", 1.0, 2), ("t-num", 1.0, 2), ("t-tr", 1.0, 2)]
    e.close()


def test_sync_vector_env_autoresets_to_the_next_task(video_path: Path) -> None:
    tasks = make_tasks(video_path)[:2]
    vec = gym.vector.SyncVectorEnv(
        [lambda: OmniVideoEnv(tasks=tasks, limits={"max_turns": 3}) for _ in range(2)]
    )
    obs, infos = vec.reset(seed=0)
    assert list(infos["task_id"]) == ["t-mcq", "t-mcq"]
    assert all("Which colour?" in message_text(o[1]) for o in obs)
    obs, rewards, term, trunc, infos = vec.step((turn({"type": "answer", "content": "B"}), "oops"))
    assert list(rewards) == [1.0, 0.0] and list(term) == [True, False] and list(trunc) == [False, False]
    assert list(infos["error"]) == [None, "format_not_json"]
    obs, rewards, term, _, infos = vec.step(
        ("ignored: this step resets env 0", turn({"type": "answer", "content": "A"}))
    )
    assert "How many beeps?" in message_text(obs[0][1])  # env 0 drew the next task without options
    assert list(rewards) == [0.0, 0.0] and list(term) == [False, True]
    obs, rewards, term, _, _ = vec.step((turn({"type": "answer", "content": "2"}), "ignored"))
    assert rewards[0] == 1.0 and term[0] and "How many beeps?" in message_text(obs[1][1])
    vec.close()


def test_an_empty_task_source_is_refused() -> None:
    with pytest.raises(ValueError, match="no tasks"):
        OmniVideoEnv(tasks=[])
