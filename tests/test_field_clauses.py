"""Field clauses (omniagent/backends/synth_compact.py): a look's frames written by colour, in a fixed order, each
colour with the frames on either side of its own. The teacher's ``field_clauses`` changes only its Observations, the
auditor (rl/synthesis/audit_compact.py) accepts exactly the clauses the served frames give, and on the search
level's random fields the second Thought's span is the cue's clause, verbatim."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from testkit import play_teacher

from envs.synth import generate_benchmark
from envs.tasks import Task
from omniagent.backends.synth_compact import (
    HUES,
    describe_compact,
    field_clauses,
    is_compact,
    parse_compact,
    sec,
)
from omniagent.backends.synth_world import Memory, Percept, SynthWorld
from omniagent.trajectory import Trajectory
from recipes.testbed.options import parse_args
from recipes.testbed.recipe import synth_command
from recipes.testbed.search_step import span_match
from rl.synthesis.audit_compact import audit_compact_observation
from rl.synthesis.audit_rules import RulesAuditor

CUES = ("cue_digit_mcq", "cue_pitch_mcq")


@pytest.fixture(scope="module")
def tasks(tmp_path_factory: pytest.TempPathFactory) -> list[Task]:
    out = tmp_path_factory.mktemp("field_clauses")
    return generate_benchmark(out, seed=23, n_videos=3, durations=[60.0], config={"level": "search"})


def _play(task: Task, fields: bool, seed: int) -> Trajectory:
    return play_teacher(task, seed, compact=True, field_clauses=fields)


def _kinds(text: str) -> set[str]:
    return {c.kind for c in parse_compact(text)}


def _world(task: Task) -> SynthWorld:
    return SynthWorld.for_media(task.media)


def test_each_clause_bounds_its_colour_by_the_frames_beside_it(tasks: list[Task]) -> None:
    world = _world(tasks[0])
    times = [2.0 + 7.25 * k for k in range(8)]  # 2.00 ... 52.75: the first look's spread
    hue = {t: next(i.value for i in world.frame(t) if i.kind == "background") for t in times}
    clauses = field_clauses(world, times)
    named = [c.split(" ")[0] for c in clauses]
    assert named == [h for h in HUES if h in hue.values()]  # the fixed order, each colour seen once
    for clause in clauses:
        colour, a, b = re.match(r"(\w+) (\d+)-(\d+)", clause).groups()
        own = [t for t in times if hue[t] == colour]
        before = [t for t in times if t < own[0]]
        after = [t for t in times if t > own[-1]]
        assert int(a) == (sec(before[-1]) if before else 0) and int(b) == (sec(after[0]) if after else 60)
        assert all(hue[t] != colour for t in before + after)
        digits = [(t, i.value) for t in own for i in world.frame(t) if i.kind == "digit"]
        assert (
            clause.endswith(f" digit {digits[0][1]} at {sec(digits[0][0])}")
            if digits
            else "digit" not in clause
        )
    text = describe_compact(world, Percept("frames", times=times), fields=True)
    assert text == ", ".join(clauses) and is_compact(text)
    assert [c.kind for c in parse_compact(text)] == ["field"] * len(clauses)
    assert describe_compact(world, Percept("frames", times=times)) != text  # the default is the time order


def test_the_auditor_accepts_the_served_clauses_and_nothing_else(tasks: list[Task]) -> None:
    world = _world(tasks[1])
    times = [0.5 + 1.0 * k for k in range(60)]  # one frame a second: every field's digit is seen
    percept = Percept("frames", times=times)
    good = describe_compact(world, percept, fields=True)
    assert good.count(" digit ") == 4
    memory = Memory()
    assert audit_compact_observation(world, good, percept, memory) == []
    assert sorted(memory.frames) == times  # what it saw goes to the memory
    clauses = good.split(", ")
    first = re.match(r"(\w+) (\d+)-(\d+)", clauses[0])
    wrong = [
        ", ".join(clauses[1:]),  # a colour left out
        ", ".join(clauses[::-1]),  # another order
        good.replace(first.group(0), f"{first.group(1)} {int(first.group(2)) + 1}-{first.group(3)}", 1),
        good.replace(first.group(0), f"{first.group(1)} {first.group(2)}-{int(first.group(3)) + 1}", 1),
        good.replace(" at ", " at 1", 1),  # the digit's second
        re.sub(r"digit (\d)", lambda m: f"digit {'4' if m.group(1) != '4' else '7'}", good, count=1),
        f"{good}, {describe_compact(world, Percept('frames', times=times[:1]))}",  # two forms mixed
        f"{good}, cyan 0-60",  # a colour not shown
    ]
    for text in wrong:
        assert text != good
        assert audit_compact_observation(world, text, percept, Memory()), text
    assert "unreadable field clause" in audit_compact_observation(world, "red 4", percept, Memory())[0]


def test_the_teacher_changes_only_its_observations_and_the_span_follows_the_cue(tasks: list[Task]) -> None:
    auditor, copied, rewritten = RulesAuditor(), 0, 0
    for task in tasks:
        for seed in (0, 1):
            plain, fields = _play(task, False, seed), _play(task, True, seed)
            assert auditor.audit(fields).aggregate == auditor.audit(plain).aggregate
            assert auditor.audit(fields).aggregate == 5.0  # every turn holds (scores 1-5)
            assert len(plain.turns) == len(fields.turns)
            for i, (a, b) in enumerate(zip(plain.turns, fields.turns, strict=True)):
                assert (a.thought, a.action) == (b.thought, b.action)
                # a look at frames is written by colour; audio, and the first turn's "none", as before
                kinds = _kinds(b.observation)
                assert (a.observation != b.observation) == ("field" in kinds), (
                    i,
                    a.observation,
                    b.observation,
                )
                assert "frames" not in kinds and ("field" in kinds) == ("frames" in _kinds(a.observation))
                rewritten += "field" in kinds
                m = span_match(b.thought)
                if i != 1 or task.extra["template"] not in CUES or m is None:
                    continue
                # the second Thought's colour and span are the cue's field clause, word for word
                assert f", {m.group(0)}" in f", {b.observation}", (b.observation, b.thought)
                copied += 1
    assert copied >= 6 and rewritten >= 12


def test_the_recipe_flag_turns_it_on(tmp_path: Path) -> None:
    assert not any("field_clauses" in x for x in synth_command(parse_args(["--out", str(tmp_path)])))
    assert "+teacher.kwargs.field_clauses=true" in synth_command(
        parse_args(["--out", str(tmp_path), "--field-clauses", "1"])
    )
