"""recipes/testbed/option_text.py: reading the final turn of an agent that answers with the option's text."""

from __future__ import annotations

import json
from pathlib import Path

from envs.env import OmniVideoEnv
from envs.limits import EnvLimits
from envs.synth import generate_benchmark
from omniagent.episode import run_episode
from omniagent.policy import make_policy
from recipes.testbed.option_text import final_turn, form_only, main, text_rates, written_text

CHOICES = ["2", "4", "7", "9"]
LIMITS = {"max_frames": 8, "max_clip_s": 10.0, "max_audio_s": 30.0, "max_answer_chars": 40}


def _row(i: int, thought: str, content: str, reward: float, last: int = 1, condition: str = "media") -> dict:
    turn = json.dumps(
        {"observation": "x", "thought": thought, "action": {"type": "answer", "content": content}}
    )
    return {"id": f"q{i}", "template": "cue_digit_mcq", "condition": condition, "last": last, "k": 1,
            "reward": reward, "turns": [turn]}  # fmt: skip


def test_each_link_is_counted_from_the_thought_the_answer_and_the_options() -> None:
    tasks = {f"q{i}": {"choices": CHOICES, "answer": "D"} for i in range(6)}
    rows = [
        _row(0, "red 0-17, digit 9 at 9: 9.", "9", 1.0),  # written, copied, right
        _row(1, "red 0-17, digit 7 at 9: 7.", "9", 1.0),  # written, not copied, value wrong
        _row(2, "red 0-17, digit 7 at 9: 7.", "7", 0.0),  # written, copied, value wrong
        _row(3, "red 0-17, digit 9 at 9: D.", "9", 1.0),  # a letter, not an option's text: not written
        _row(4, "red 0-17: 5.", "2", 0.0),  # not an option: not written
        _row(5, "red 0-17: 9.", "9", 1.0, last=0),  # not the final-turn handover: left out
    ]
    rates = text_rates(rows + [_row(0, "x: 9.", "9", 1.0, condition="blind")], tasks)
    assert rates["all"] == {
        "n": 5,
        "written": 0.6,
        "answer copies": 0.667,
        "value right": 0.333,
        "outcome": 0.6,
    }
    assert set(rates) == {"all", "cue_digit_mcq"}
    assert written_text("no red, not found: 500 Hz.", ["500 Hz", "1000 Hz"]) == "500 Hz"
    assert written_text("", CHOICES) is None and written_text("9", CHOICES) is None
    look = json.dumps({"thought": "red 0-17: 9.", "action": {"type": "get_frames", "start": 0, "end": 9}})
    assert final_turn([look]) == ("red 0-17: 9.", None) and final_turn(["{"]) == ("", None)


def _teacher_episodes(tmp_path: Path, seed: int, n: int) -> tuple[list, dict[bool, list[dict]]]:
    tasks = generate_benchmark(
        tmp_path / "set", seed=seed, n_videos=1, durations=[60.0], config={"level": "search"}
    )
    kept: dict[bool, list[dict]] = {True: [], False: []}
    for text in (True, False):
        env = OmniVideoEnv(limits=EnvLimits(**LIMITS, mcq_option_text=text))
        try:
            for task in tasks[:n]:
                policy = make_policy("synth_teacher", seed=3, limits=LIMITS, compact=True, answer_text=text)
                traj = run_episode(env, policy, task.env_options(5), episode_id=task.id, seed=3)
                kept[text].append({**json.loads(traj.model_dump_json()), "id": task.id, "choices": task.choices,
                                   "template": task.extra["template"]})  # fmt: skip
        finally:
            env.close()
    return tasks[:n], kept


def test_the_text_teachers_answers_read_as_copied_and_right_when_rewarded(tmp_path: Path, capsys) -> None:
    tasks, kept = _teacher_episodes(tmp_path, 9, 99)
    rows = [{"id": r["id"], "template": r["template"], "condition": "media", "last": 1, "reward": r["reward"],
             "turns": [t["raw_text"] for t in r["turns"]]} for r in kept[True]]  # fmt: skip
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["--rows", str(tmp_path / "rows.jsonl"), "--set", str(tmp_path / "set")]) == 0
    rates = json.loads(capsys.readouterr().out)
    assert rates["all"]["n"] == len(tasks) and rates["all"]["written"] == 1.0
    assert rates["all"]["answer copies"] == 1.0 and rates["all"]["value right"] == rates["all"]["outcome"]


def test_two_syntheses_differ_in_the_answers_form_only_and_other_changes_are_caught(
    tmp_path: Path, capsys
) -> None:
    _, kept = _teacher_episodes(tmp_path, 4, 6)
    assert form_only(kept[False], kept[True]) == {"form only": 6, "other": 0, "unpaired": 0}
    changed = json.loads(json.dumps(kept[True]))
    changed[0]["turns"][0]["raw_text"] += " "  # an earlier turn differs
    changed[1]["turns"][-1]["action"]["content"] = "B"  # the letter after a text Thought
    assert form_only(kept[False], changed[:5]) == {"form only": 3, "other": 2, "unpaired": 1}
    assert form_only(kept[False], kept[False])["other"] == 6  # letter answers are not text answers
    for name, rows in (("letter", kept[False]), ("text", kept[True])):
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["--kept", str(tmp_path / "letter.jsonl"), str(tmp_path / "text.jsonl")]) == 0
    assert json.loads(capsys.readouterr().out)["form only"] == 6
