"""recipes/testbed/option_echo.py: reading value -> letter off an echo agent's final Thought."""

from __future__ import annotations

import json
from pathlib import Path

from envs.env import OmniVideoEnv
from envs.limits import EnvLimits
from envs.synth import generate_benchmark
from omniagent.episode import run_episode
from omniagent.policy import make_policy
from recipes.testbed.option_echo import echo_of, echo_only, echo_rates, main

CHOICES = ["2", "4", "7", "9"]
LIMITS = {"max_frames": 8, "max_clip_s": 10.0, "max_audio_s": 30.0, "max_answer_chars": 40}


def _row(i: int, thought: str, reward: float, last: int = 1, condition: str = "media") -> dict:
    turn = json.dumps({"observation": "x", "thought": thought, "action": {"type": "answer", "content": "D"}})
    return {"id": f"q{i}", "template": "cue_digit_mcq", "condition": condition, "last": last, "k": 1,
            "reward": reward, "turns": [turn]}  # fmt: skip


def test_each_link_is_counted_from_the_thought_and_the_options() -> None:
    tasks = {f"q{i}": {"choices": CHOICES, "answer": "D"} for i in range(6)}
    rows = [
        _row(0, "red 0-17, digit 9 at 9, 9: D.", 1.0),  # written, follows, right
        _row(1, "red 0-17, digit 7 at 9, 7: D.", 1.0),  # written, letter does not follow, value wrong
        _row(2, "red 0-17, digit 7 at 9, 7: C.", 0.0),  # written, follows, value wrong
        _row(3, "red 0-17, digit 9 at 9: D.", 1.0),  # no echo
        _row(4, "red 0-17, 5: A.", 0.0),  # not an option: no echo
        _row(5, "red 0-17, 9: D.", 1.0, last=0),  # not the final-turn handover: left out
    ]
    rates = echo_rates(rows + [_row(0, "x, 9: D.", 1.0, condition="blind")], tasks)
    assert rates["all"] == {
        "n": 5,
        "written": 0.6,
        "letter follows": 0.667,
        "value right": 0.333,
        "outcome": 0.6,
    }
    assert set(rates) == {"all", "cue_digit_mcq"}
    assert echo_of("no red, not found, 500 Hz: A.", ["500 Hz", "1000 Hz"]) == ("500 Hz", "A")
    assert echo_of("", CHOICES) is None and echo_of("9: D.", CHOICES) is None


def test_the_echo_teachers_answers_read_as_followed_and_right_when_rewarded(tmp_path: Path, capsys) -> None:
    tasks = generate_benchmark(
        tmp_path / "set", seed=9, n_videos=1, durations=[60.0], config={"level": "search"}
    )
    env, rows = OmniVideoEnv(limits=EnvLimits(**LIMITS)), []
    try:
        for task in tasks:
            policy = make_policy("synth_teacher", seed=0, limits=LIMITS, compact=True, option_thought=True)
            traj = run_episode(env, policy, task.env_options(5), episode_id="t", seed=0)
            turns = [t.raw_text for t in traj.turns]
            rows.append({"id": task.id, "template": task.extra["template"], "condition": "media", "last": 1,
                         "reward": traj.reward, "turns": turns})  # fmt: skip
    finally:
        env.close()
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["--rows", str(tmp_path / "rows.jsonl"), "--set", str(tmp_path / "set")]) == 0
    rates = json.loads(capsys.readouterr().out)
    assert rates["all"]["n"] == len(tasks) and rates["all"]["written"] == 1.0
    assert rates["all"]["letter follows"] == 1.0 and rates["all"]["value right"] == rates["all"]["outcome"]


def test_two_syntheses_differ_in_the_echo_only_and_other_changes_are_caught(tmp_path: Path, capsys) -> None:
    tasks = generate_benchmark(
        tmp_path / "set", seed=4, n_videos=1, durations=[60.0], config={"level": "search"}
    )
    env, kept = OmniVideoEnv(limits=EnvLimits(**LIMITS)), {True: [], False: []}
    try:
        for task in tasks[:6]:
            for echo in (True, False):
                policy = make_policy(
                    "synth_teacher", seed=3, limits=LIMITS, compact=True, option_thought=echo
                )
                traj = run_episode(env, policy, task.env_options(5), episode_id=task.id, seed=3)
                kept[echo].append(
                    {**json.loads(traj.model_dump_json()), "id": task.id, "choices": task.choices}
                )
    finally:
        env.close()
    assert echo_only(kept[False], kept[True]) == {"echo only": 6, "other": 0, "unpaired": 0}
    changed = json.loads(json.dumps(kept[True]))
    changed[0]["turns"][0]["raw_text"] += " "  # an earlier turn differs
    changed[1]["turns"][-1]["thought"] = changed[1]["turns"][-1]["thought"].replace(", ", ",  ", 1)
    assert echo_only(kept[False], changed[:5]) == {"echo only": 3, "other": 2, "unpaired": 1}
    assert echo_only(kept[False], kept[False])["other"] == 6  # no echo at all is not "echo only"
    for name, rows in (("plain", kept[False]), ("echo", kept[True])):
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["--kept", str(tmp_path / "plain.jsonl"), str(tmp_path / "echo.jsonl")]) == 0
    assert json.loads(capsys.readouterr().out)["echo only"] == 6
