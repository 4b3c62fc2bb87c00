"""The compact language of the search level (omniagent/backends/synth_compact.py): the teacher writes it with
``compact``, the rule-based auditor reads it (rl/synthesis/audit_compact.py) and rejects what is not true at the
served times, and its episodes are a fraction of the full language's length."""

from __future__ import annotations

import json

import pytest
from testkit import play_teacher

from envs.synth import generate_benchmark
from envs.tasks import Task
from omniagent.backends.synth_compact import describe_compact, is_compact, parse_compact, sec, thought_facts
from omniagent.backends.synth_world import Memory, Percept, SynthWorld
from omniagent.trajectory import Trajectory
from rl.synthesis.audit_compact import audit_compact_observation, audit_compact_thought
from rl.synthesis.audit_rules import RulesAuditor


@pytest.fixture(scope="module")
def tasks(tmp_path_factory: pytest.TempPathFactory) -> list[Task]:
    out = tmp_path_factory.mktemp("compact")
    return generate_benchmark(out, seed=9, n_videos=2, durations=[60.0], config={"level": "search"})


def _play(task: Task, compact: bool, seed: int = 0) -> Trajectory:
    return play_teacher(task, seed, compact=compact, option_thought=True)


def _field(world: SynthWorld, color: str) -> tuple[float, float]:
    starts = [s / world.fps for s, _ in world.segments] + [world.duration]
    i = [h for _, h in world.segments].index(color)
    return starts[i], starts[i + 1]


def test_teacher_episodes_in_the_compact_language_pass_the_auditor_and_score(tasks: list[Task]) -> None:
    auditor, rewards = RulesAuditor(), []
    for task in tasks:
        traj = _play(task, compact=True)
        assert traj.stop_reason == "answered", task.id
        for turn in traj.turns[1:]:
            assert is_compact(turn.observation), turn.observation
            assert all(c.kind != "error" for c in parse_compact(turn.observation or ""))
        for turn in traj.turns:
            action = json.loads(turn.raw_text)["action"]
            if action["type"] != "answer":  # looks in whole seconds
                assert action["start"] == int(action["start"]) and action["end"] == int(action["end"])
        result = auditor.audit(traj)
        assert result.aggregate == 5, [s.reason for s in result.scores]
        rewards.append(float(traj.reward or 0.0))
    assert sum(rewards) / len(rewards) >= 0.85  # 0.95 on 96 (notes); 24 questions here


def test_option_thought_writes_the_chosen_options_text_right_before_its_letter(tasks: list[Task]) -> None:
    """With ``option_thought`` a compact answer's Thought ends ``, <option text>: <letter>.`` for the answered
    letter (observed or guessed); without it the letter follows the facts directly, as before."""
    for task in tasks[:12]:
        ends, answers = {}, set()
        for echo in (True, False):
            traj = play_teacher(task, compact=True, option_thought=echo)
            ends[echo] = traj.turns[-1].thought or ""
            answers.add(traj.answer)
        (letter,) = answers  # the echo changes the Thought's words only, not what is answered
        value = task.choices[ord(letter) - ord("A")]
        assert ends[True] == ends[False].removesuffix(f": {letter}.") + f", {value}: {letter}.", ends


def test_compact_episodes_are_a_fraction_of_the_full_language(tasks: list[Task]) -> None:
    def written(compact: bool) -> int:  # what the agent writes beyond the turn's JSON frame and action
        return sum(
            len(t.observation or "") + len(t.thought or "")
            for x in tasks[:12]
            for t in _play(x, compact).turns
        )

    assert written(True) < 0.3 * written(False), (written(True), written(False))


def test_frame_clauses_round_trip_and_name_every_served_frame(tasks: list[Task]) -> None:
    world = SynthWorld.for_media(tasks[0].media)
    times = [round(0.2 * round(x / 0.2), 2) for x in (0.0, 8.6, 17.2, 25.8, 34.4, 43.0, 51.6, 59.8)]
    text = describe_compact(world, Percept("frames", times=times))
    claims = parse_compact(text)
    assert [c.kind for c in claims] == ["frames"] * len(claims) and 1 <= len(claims) <= len(times)
    assert claims[0].first == 0 and claims[-1].last == 59  # 59.80 s is written 59: the fraction dropped
    memory = Memory()
    assert audit_compact_observation(world, text, Percept("frames", times=times), memory) == []
    assert sorted(memory.frames) == times
    # a clause left out, or a frame at a time that was not served, is caught
    fewer = ", ".join(text.split(", ")[1:])
    assert fewer and audit_compact_observation(world, fewer, Percept("frames", times=times), Memory())
    shifted = (
        text.replace(f"{claims[-1].last} ", f"{claims[-1].last - 3} ", 1)
        if claims[-1].first == claims[-1].last
        else text.replace(f"-{claims[-1].last} ", f"-{claims[-1].last - 3} ")
    )
    assert audit_compact_observation(world, shifted, Percept("frames", times=times), Memory())


def test_the_auditor_rejects_a_wrong_digit_colour_or_pitch(tasks: list[Task]) -> None:
    world = SynthWorld.for_media(tasks[0].media)
    digit = next(e for e in world.events if e["kind"] == "digit")
    t = round((digit["start_frame"] + 1) / world.fps, 2)
    shown = str(digit["text"])
    text = describe_compact(world, Percept("frames", times=[t]))
    assert text.endswith(f" {shown}") and text.startswith(f"{sec(t)} ")
    other = next(d for d in "2479" if d != shown)
    hue = text.split()[1]
    other_hue = next(h for h in ("red", "yellow", "green", "blue") if h != hue)
    for wrong in (
        text.replace(f" {shown}", f" {other}"),
        text.replace(hue, other_hue),
        text.replace(f" {shown}", ""),
    ):
        assert audit_compact_observation(world, wrong, Percept("frames", times=[t]), Memory()), wrong
    tone = next(e for e in world.events if e["kind"] == "tone")
    span = (max(0.0, float(tone["start"]) - 3.0), float(tone["end"]) + 3.0)
    heard = describe_compact(world, Percept("audio", span=span))
    mid = sec(0.5 * (float(tone["start"]) + float(tone["end"])))
    assert heard == f"audio {sec(span[0])}-{sec(span[1])}: {tone['freq']:g} Hz at {mid}"
    memory = Memory()
    assert audit_compact_observation(world, heard, Percept("audio", span=span), memory) == []
    pitch = f"{tone['freq']:g} Hz"
    assert audit_compact_observation(
        world, heard.replace(pitch, "123 Hz"), Percept("audio", span=span), Memory()
    )
    assert audit_compact_observation(
        world, heard.replace(f"at {mid}", f"at {mid + 3}"), Percept("audio", span=span), Memory()
    )
    assert audit_compact_observation(
        world, f"audio {sec(span[0])}-{sec(span[1])}: none", Percept("audio", span=span), Memory()
    )
    # the thought may state what was heard, in that second, and nothing else
    assert audit_compact_thought(f"{pitch} at {mid}.", memory) == []
    assert audit_compact_thought(f"{pitch} at {mid + 5}.", memory)
    assert audit_compact_thought(f"no {tone['freq']:g} Hz.", memory)
    assert audit_compact_thought("digit 7 at 3.", memory)


def test_thought_facts_read_the_compact_thought() -> None:
    facts = thought_facts("red 17-43, digit 9 at 34, 1000 Hz at 35, green at 41: B.")
    assert {(f.kind, f.value, f.at) for f in facts} == {
        ("digit", "9", 34),
        ("tone", "1000", 35),
        ("background", "green", 41),
    }
    assert {(f.kind, f.value, f.at) for f in thought_facts("no 2000 Hz, no red.")} == {
        ("tone", "2000", None),
        ("background", "red", None),
    }
    assert thought_facts("look for red.") == [] and thought_facts("red 17-43.") == []


def test_compact_is_only_for_the_search_level_and_the_default_stays(tasks: list[Task]) -> None:
    assert not is_compact("Frame 30.00s: blue background.") and not is_compact("none")
    assert is_compact("0-17 blue, 26 yellow 9") and is_compact("audio 0-30: none") and is_compact("rejected")
    full = _play(tasks[0], compact=False)
    assert full.turns[1].observation.startswith(("Frame", "Audio"))
    with pytest.raises(ValueError, match="no compact form"):
        from omniagent.backends.synth_compact import _frame_text
        from omniagent.backends.synth_world import Item

        _frame_text([Item("background", "red"), Item("shape", "red square", width=20)])


def test_answer_text_answers_with_the_options_text_which_the_auditor_passes_and_the_env_scores(
    tasks: list[Task],
) -> None:
    """With ``answer_text`` (and the environment's ``mcq_option_text``) the teacher's answer is the chosen option's
    text and its Thought ends ``: <text>.``; everything else is the letter-answering teacher's, the rule-based
    auditor passes the episode, and the environment records and scores it as that option's letter."""
    auditor = RulesAuditor()
    for task in tasks[:12]:
        played = {}
        for text in (True, False):
            played[text] = play_teacher(
                task, env_limits={"mcq_option_text": text}, compact=True, answer_text=text
            )
        letter = played[False].answer
        value = task.choices[ord(letter) - ord("A")]
        assert played[True].turns[-1].action == {"type": "answer", "content": value}, task.id
        assert (
            played[True].answer == letter and played[True].reward == played[False].reward
        )  # scored as its letter
        assert played[True].turns[-1].thought == played[False].turns[-1].thought.removesuffix(
            f": {letter}."
        ) + (f": {value}.")
        assert [t.raw_text for t in played[True].turns[:-1]] == [t.raw_text for t in played[False].turns[:-1]]
        assert auditor.audit(played[True]).aggregate == 5, task.id
