"""The testbed's handover probe (recipes/testbed/handover.py): the teacher's turns replayed as the agent's context,
the agent's turn scored against the teacher's, the paired summary, and a resumable run on a tiny random agent."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from envs.jsonl import read_jsonl
from omniagent.policy_base import TurnOutput
from recipes.testbed.handover import final_reads, set_difference, summary, table, thought_values, versus
from recipes.testbed.handover_run import agreement, lead, overlaps, play


@pytest.fixture(scope="module")
def search_set(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from envs.synth import generate_benchmark
    from recipes.tiny_agent.sets import blank_media

    out = tmp_path_factory.mktemp("handover") / "set"
    generate_benchmark(out, seed=12, n_videos=1, durations=[60.0], config={"level": "search"}, split="test")
    blank_media(out / "tasks.jsonl", out.parent / "set_blind")
    return out


def turn(obs: str, thought: str, action: dict[str, Any]) -> str:
    return json.dumps({"observation": obs, "thought": thought, "action": action})


class Recorder:
    """A policy that keeps every context it is shown and answers "A"."""

    def __init__(self) -> None:
        self.seen: list[list[dict[str, Any]]] = []

    def reset(self, info: dict[str, Any]) -> None:
        self.seen = []

    def act(self, messages: list[dict[str, Any]]) -> TurnOutput:
        self.seen.append(messages)
        return TurnOutput(text=turn("x", "y", {"type": "answer", "content": "A"}))


def test_the_agent_turn_is_scored_field_by_field_against_the_teachers() -> None:
    teacher = turn(
        "0-8 green, 17 yellow", "green 0-17.", {"type": "get_frames", "start": 0, "end": 17, "num": 8}
    )
    evidence = [[10.4, 11.8]]
    assert agreement(teacher, teacher, evidence) == {"parsed": 1, "obs_same": 1, "thought_same": 1, "type_same": 1,
                                                     "span_same": 1, "look_hits": 1, "teacher_look_hits": 1}  # fmt: skip
    other = turn(
        "0-8 green, 17 red", "green 0-17, digit 7 at 12.", {"type": "get_frames", "start": 20, "end": 30}
    )
    got = agreement(other, teacher, evidence)
    assert (got["obs_same"], got["thought_same"], got["span_same"], got["type_same"], got["look_hits"]) == (
        0,
        0,
        1,
        1,
        0,
    )
    answer = turn("11 green 7", "green 0-17, digit 7 at 11: C.", {"type": "answer", "content": "C"})
    assert (
        agreement(answer, answer, evidence)["letter"] == 1
        and agreement(answer, answer, evidence)["look_hits"] is None
    )
    wrong = turn("11 green 7", "green 0-17, digit 7 at 11: B.", {"type": "answer", "content": "B"})
    assert agreement(wrong, answer, evidence)["letter"] == 0
    broken = agreement('{"observation": "11 gre', answer, evidence)
    assert broken["parsed"] == 0 and broken["letter"] == 0 and broken["span_same"] == 0
    assert lead("yellow 12-36.") == "yellow 12-36" and lead("no 1000 Hz.") == "no 1000 Hz"
    assert (
        overlaps({"type": "get_audio", "start": 12, "end": 10.4}, evidence) == 0
    )  # a swapped span meets nothing
    assert overlaps({"type": "get_frames", "start": "x", "end": 3}, evidence) == 0


def test_replay_shows_the_agent_the_teachers_turns_then_lets_it_finish(search_set: Path) -> None:
    from envs.env import OmniVideoEnv
    from envs.limits import EnvLimits
    from envs.tasks import load_tasks_jsonl
    from omniagent.policy import make_policy

    limits = EnvLimits(max_turns=5)
    env = OmniVideoEnv(limits=limits)
    task = load_tasks_jsonl(search_set / "tasks.jsonl")[0]
    teacher = make_policy("synth_teacher", seed=0, limits=limits, compact=True)
    teacher_turns, reward = play(env, teacher, task, task.media, [])
    assert json.loads(teacher_turns[-1])["action"]["type"] == "answer" and reward in (0.0, 1.0)
    again, _ = play(env, teacher, task, task.media, [])
    assert again == teacher_turns  # the teacher's episode is a function of its seed and the question
    recorder = Recorder()
    for k in range(len(teacher_turns)):
        own, got = play(env, recorder, task, task.media, teacher_turns[:k])
        assert len(own) == 1 and got == float(task.answer == "A")
        shown = [m["content"] for m in recorder.seen[0] if m["role"] == "assistant"]
        assert len(shown) == k and all(str(teacher_turns[i]) in str(shown[i]) for i in range(k))
    with pytest.raises(ValueError, match="ended inside"):
        play(env, recorder, task, task.media, teacher_turns)
    env.close()


def test_the_summary_pairs_the_last_handover_with_the_agents_own_episode() -> None:
    rows: list[dict[str, Any]] = [{"id": "q0", "media": "v0", "left_out": "teacher wrong"}]
    base = {
        "obs_same": 0,
        "thought_same": 0,
        "type_same": 1,
        "span_same": 0,
        "look_hits": 1,
        "teacher_look_hits": 1,
    }
    outcomes = {"q1": (0, 1, 1), "q2": (0, 0, 1), "q3": (1, 1, 1)}  # k = 0, 1, 2 (last)
    for i, rewards in outcomes.items():
        for k, reward in enumerate(rewards):
            for cond in ("media", "blind"):
                rows.append({**base, "id": i, "media": f"v{int(i[1]) % 2}", "template": "cue_digit_mcq",
                             "condition": cond, "k": k, "n_teacher": 3, "last": int(k == 2),
                             "reward": float(reward if cond == "media" else 0), "letter": reward})  # fmt: skip
    res = summary(rows)
    assert res["left_out"] == {"teacher wrong": 1}
    assert (
        res["outcome"]["media k=0"]["mean"] == round(1 / 3, 3) and res["outcome"]["media last"]["mean"] == 1.0
    )
    assert res["outcome"]["media k=2"] == res["outcome"]["media last"]
    assert (
        res["primary"]["n"] == 3
        and res["primary"]["videos"] == 2
        and res["primary"]["mean"] == round(2 / 3, 3)
    )
    assert res["last media - blind"]["mean"] == 1.0
    final = res["agreement"]["media"]["final"]
    assert (
        final["turns"] == 3
        and final["letter"] == 1.0
        and final["obs"] == 0.0
        and final["thought | obs"] is None
    )
    assert res["by_template"]["media k=0 cue_digit_mcq"]["n"] == 3
    text = table(res)
    assert "| media | last | 3 | 1.000" in text and "teacher wrong" in text


def test_the_probe_runs_both_conditions_on_a_tiny_agent_and_resumes(search_set: Path, tmp_path: Path) -> None:
    from omniagent.tiny_model import build_tiny_thinker
    from recipes.testbed.handover_run import run_probe

    build_tiny_thinker(seed=0, out_dir=tmp_path / "agent")
    args = argparse.Namespace(model=tmp_path / "agent", set=search_set, out=tmp_path / "out", seed=0,
                              conditions=["media", "blind"], limit=3)  # fmt: skip
    run_probe(args)
    rows = list(read_jsonl(tmp_path / "out" / "rows.jsonl"))
    played = [r for r in rows if "reward" in r]
    assert played  # the teacher answers at least one of the three
    assert {r["id"] for r in rows} == {t["id"] for t in list(read_jsonl(search_set / "tasks.jsonl"))[:3]}
    for qid in {r["id"] for r in played}:
        mine = [r for r in played if r["id"] == qid]
        n = mine[0]["n_teacher"]
        assert sorted((r["condition"], r["k"]) for r in mine) == sorted(
            (c, k) for c in args.conditions for k in range(n)
        )
        assert [r["last"] for r in mine if r["condition"] == "media"] == [int(k == n - 1) for k in range(n)]
        assert all(1 <= len(r["turns"]) <= 5 - r["k"] and r["reward"] in (0.0, 1.0) for r in mine)
    run_probe(args)  # resumed: nothing is played again
    assert len(list(read_jsonl(tmp_path / "out" / "rows.jsonl"))) == len(rows)
    from recipes.testbed.handover import main

    figure = tmp_path / "handover.png"
    out = str(tmp_path / "out")
    assert (
        main(
            [
                "--set",
                str(search_set),
                "--out",
                out,
                "--summary",
                "--with",
                f"again={out}",
                "--figure",
                str(figure),
            ]
        )
        == 0
    )
    res = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert res == summary(rows) and figure.stat().st_size > 0
    run_probe(argparse.Namespace(**{**vars(args), "out": tmp_path / "last", "last_only": True}))
    last = [r for r in read_jsonl(tmp_path / "last" / "rows.jsonl") if "reward" in r]
    assert last and all(r["last"] == 1 for r in last)
    assert {(r["id"], r["condition"]) for r in last} == {
        (r["id"], r["condition"]) for r in played if r["last"]
    }
    # for an agent that answers with the option's text: the teacher does too, and the same questions are played
    run_probe(
        argparse.Namespace(**{**vars(args), "out": tmp_path / "text", "last_only": True, "option_text": 1})
    )
    text = [r for r in read_jsonl(tmp_path / "text" / "rows.jsonl") if "reward" in r]
    assert {(r["id"], r["condition"]) for r in text} == {(r["id"], r["condition"]) for r in last}
    tasks = {t["id"]: t for t in read_jsonl(search_set / "tasks.jsonl")}
    for row in text:
        answer = json.loads(row["teacher"][-1])["action"]["content"]
        assert answer in tasks[row["id"]]["choices"]  # an option's text, not a letter


def test_two_sets_are_compared_by_their_own_episodes_resampling_each_sets_videos() -> None:
    def rows(rewards: dict[str, list[float]], prefix: str) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = [{"id": f"{prefix}-x", "media": "v", "left_out": "teacher wrong"}]
        for video, values in rewards.items():
            for j, reward in enumerate(values):
                for k in (0, 1):  # k = 1 is "last": not counted at k = 0
                    out.append({"id": f"{prefix}-{video}-{j}", "media": video, "condition": "media", "k": k,
                                "last": k, "reward": 1.0 - reward if k else reward})  # fmt: skip
        out.append(
            {**out[1], "condition": "blind", "reward": 1.0 - out[1]["reward"]}
        )  # blind rows do not count
        return out

    trained = rows({"a": [1, 1, 1, 0], "b": [1, 1, 0, 0], "c": [1, 1, 1, 1]}, "t")
    fresh = rows({"d": [0, 0, 1, 0], "e": [0, 1, 0, 0]}, "f")
    diff = set_difference(trained, fresh)
    assert diff["mean"] == round(9 / 12 - 2 / 8, 3) and (diff["n"], diff["videos"], diff["other_n"]) == (
        12,
        3,
        8,
    )
    assert diff["lo"] <= diff["mean"] <= diff["hi"] and diff["lo"] > 0
    assert set_difference(trained, fresh, point="last")["mean"] == round(3 / 12 - 6 / 8, 3)
    assert set_difference(trained, [])["n"] == 0


def test_the_unseen_subset_keeps_the_videos_the_overlap_guard_passes(
    search_set: Path, tmp_path: Path
) -> None:
    from envs.synth import generate_benchmark
    from envs.tasks import load_tasks_jsonl
    from recipes.testbed.handover import only
    from recipes.testbed.probe_cli import unseen_subset

    other = tmp_path / "other"
    generate_benchmark(other, seed=13, n_videos=1, durations=[60.0], config={"level": "search"}, split="test")
    tasks, dropped = unseen_subset(search_set, other / "tasks.jsonl", tmp_path / "unseen")
    kept = load_tasks_jsonl(tasks)
    assert (
        dropped == [] and len(kept) == 12 and all(Path(t.media).parent == tmp_path / "unseen" for t in kept)
    )
    assert all(Path(t.media).is_file() and Path(f"{t.media}.meta.json").is_file() for t in kept)
    tasks, dropped = unseen_subset(
        search_set, search_set / "tasks.jsonl", tmp_path / "seen"
    )  # itself: all shared
    assert len(dropped) == 1 and load_tasks_jsonl(tasks) == []
    name = Path(kept[0].media).name  # named: left out although the guard passes it
    tasks, dropped = unseen_subset(
        search_set, other / "tasks.jsonl", tmp_path / "named", [name, "absent.mp4"]
    )
    assert dropped == [name] and load_tasks_jsonl(tasks) == []
    rows = [{"id": kept[0].id, "k": 0}, {"id": "elsewhere", "k": 0}]
    assert only(rows, tmp_path / "unseen") == rows[:1] and only(rows, tmp_path / "seen") == []


def test_the_final_turn_is_split_into_read_carried_and_answered() -> None:
    assert thought_values("yellow 17-31, digit 9 at 23: D.", "digit") == {"9"}
    assert thought_values("red 0-17, digit 9 at 8, 4000 Hz at 9: D.", "tone") == {"4000"}
    assert thought_values("1000 Hz at 51, blue at 51: D.", "background") == {"blue"}
    teacher = turn(
        "45 red, 53 yellow 7, 55-59 yellow",
        "yellow 44-60, digit 7 at 53: C.",
        {"type": "answer", "content": "C"},
    )

    def row(obs: str, thought: str, letter: str, condition: str = "media") -> dict[str, Any]:
        return {"condition": condition, "template": "cue_digit_mcq", "k": 1, "last": 1, "teacher": ["", teacher],
                "turns": [turn(obs, thought, {"type": "answer", "content": letter})], "reward": float(letter == "C")}  # fmt: skip

    rows = [row("53 yellow 7", "yellow 44-60, digit 7 at 53: C.", "C"),  # read, carried, right
            row("53 yellow 7", "yellow 44-60, digit 7 at 53: A.", "A"),  # read, carried, wrong letter
            row("53 yellow 7", "yellow 44-60, digit 2 at 53: A.", "A"),  # read, not carried
            row("53 yellow 2", "yellow 44-60, digit 2 at 53: C.", "C"),  # misread, right by chance
            {**row("x", "y", "C"), "turns": ['{"observation": "53 yel']}]  # unparsed: not read  # fmt: skip
    got = final_reads(rows)["media cue_digit_mcq"]
    assert got == {"turns": 5, "read": 0.6, "right | read": round(1 / 3, 3), "right | not read": 1.0,
                   "carried": 0.4, "right | carried": 0.5}  # fmt: skip
    assert final_reads([{**rows[0], "last": 0}]) == {}  # only the final turn counts


def test_two_runs_are_paired_by_question_at_the_last_handover() -> None:
    def rows(rewards: list[float]) -> list[dict[str, Any]]:
        out = []
        for i, reward in enumerate(rewards):
            base = {
                "id": f"q{i}",
                "media": f"v{i % 2}",
                "template": "cue_digit_mcq" if i < 2 else "cue_pitch_mcq",
            }
            out.append({**base, "condition": "media", "k": 1, "last": 1, "reward": reward})
            out.append(
                {**base, "condition": "media", "k": 0, "last": 0, "reward": 1.0 - reward}
            )  # not "last"
            out.append({**base, "condition": "blind", "k": 1, "last": 1, "reward": 1.0})  # not media
        return out

    res = versus(
        rows([1, 1, 1, 0]), rows([0, 1, 0, 0]) + [{"id": "q9", "media": "v9", "left_out": "teacher wrong"}]
    )
    assert res["n"] == 4 and res["mean"] == 0.5 and res["videos"] == 2
    assert res["cue_digit_mcq"]["mean"] == 0.5 and res["cue_pitch_mcq"]["mean"] == 0.5


def test_a_finished_run_is_compared_without_playing_again(tmp_path: Path) -> None:
    """``--summary --versus DIR --versus-name NAME``: the rows already there, paired with another run's, in OUT/NAME."""
    from envs.jsonl import write_jsonl
    from recipes.testbed.handover import main

    def rows(rewards: list[float]) -> list[dict[str, Any]]:
        return [{"id": f"q{i}", "media": f"v{i % 2}", "template": "cue_digit_mcq", "condition": "media", "k": 1,
                 "last": 1, "reward": r, "turns": [], "parsed": 1, "obs_same": 0, "thought_same": 0, "type_same": 0,
                 "span_same": 0, "look_hits": None, "teacher_look_hits": None, "letter": 0, "teacher": []}
                for i, r in enumerate(rewards)]  # fmt: skip

    here, there, tasks = tmp_path / "here", tmp_path / "there", tmp_path / "set"
    for folder, rewards in ((here, [1, 1, 1, 0]), (there, [0, 1, 0, 0])):
        folder.mkdir()
        write_jsonl(folder / "rows.jsonl", rows(rewards))
    assert main(["--set", str(tasks), "--out", str(here), "--summary", "--versus", str(there),
                 "--versus-name", "versus_other.json"]) == 0  # fmt: skip
    got = json.loads((here / "versus_other.json").read_text())
    assert got == versus(rows([1, 1, 1, 0]), rows([0, 1, 0, 0])) and got["mean"] == 0.5
    assert not (here / "versus.json").exists() and len(list(read_jsonl(here / "rows.jsonl"))) == 4
