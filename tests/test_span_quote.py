"""The teacher's ``span_quote`` (omniagent/backends/teacher_search.py): on a colour-cue question the Thought after the
first look opens with that look's Observation clauses around the cue's field, verbatim, and nothing else in the
episode changes; the testbed's search step reads the span after the quote (recipes/testbed/search_step.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from testkit import play_teacher

from envs.synth import generate_benchmark
from envs.tasks import Task
from omniagent.trajectory import Trajectory
from recipes.testbed.options import parse_args
from recipes.testbed.recipe import synth_command
from recipes.testbed.search_step import cue_named, span_holds, span_match
from rl.synthesis.audit_rules import RulesAuditor

CUES = ("cue_digit_mcq", "cue_pitch_mcq")


@pytest.fixture(scope="module")
def tasks(tmp_path_factory: pytest.TempPathFactory) -> list[Task]:
    out = tmp_path_factory.mktemp("span_quote")
    return generate_benchmark(out, seed=21, n_videos=3, durations=[60.0], config={"level": "search"})


def _play(task: Task, quote: bool, seed: int) -> Trajectory:
    return play_teacher(task, seed, compact=True, span_quote=quote)


def _numbers(clause: str) -> list[str]:
    return re.findall(r"\d+", clause.split(" ")[0])  # the clause's time or times, not its digit


def test_the_quote_opens_the_second_thought_and_nothing_else_changes(tasks: list[Task]) -> None:
    auditor, quoted = RulesAuditor(), 0
    for task in tasks:
        for seed in (0, 1):
            plain, cited = _play(task, False, seed), _play(task, True, seed)
            assert len(plain.turns) == len(cited.turns)
            assert auditor.audit(cited).aggregate == auditor.audit(plain).aggregate
            for i, (a, b) in enumerate(zip(plain.turns, cited.turns, strict=True)):
                assert a.observation == b.observation and a.action == b.action
                if a.thought == b.thought:
                    continue
                # only the second turn of a cue question changes, and only by the quote before its Thought
                assert i == 1 and task.extra["template"] in CUES, (task.id, i)
                quote, _, rest = b.thought.partition("; ")
                assert rest == a.thought
                assert f", {quote}, " in f", {b.observation}, "  # whole clauses, verbatim and in order
                cue = re.search(r"background is (\w+)", task.question).group(1)
                clauses = quote.split(", ")
                assert any(c.split(" ")[1] == cue for c in clauses)
                # the span's ends: the last time of the clause before the cue's (or 0), the first time of the one
                # after (or the file's end)
                m = span_match(b.thought)
                assert m is not None and m.group(1) == cue
                first, last = clauses[0].split(" ")[1] != cue, clauses[-1].split(" ")[1] != cue
                assert m.group(2) == (_numbers(clauses[0])[-1] if first else "0")
                assert m.group(3) == (_numbers(clauses[-1])[0] if last else str(int(task.duration)))
                quoted += 1
    assert quoted >= 6  # the set has cue questions whose first look saw the cue


def test_the_quote_is_off_by_default_and_on_the_recipe_flag(tmp_path: Path) -> None:
    base = parse_args(["--out", str(tmp_path / "s")])
    assert not any("span_quote" in x for x in synth_command(base))
    assert "+teacher.kwargs.span_quote=true" in synth_command(
        parse_args(["--out", str(tmp_path / "s"), "--span-quote", "1"])
    )


def test_the_search_step_reads_the_span_after_a_quote() -> None:
    thought = "14-28 red, 42 blue, 57 green; blue 28-57."
    assert span_match(thought).groups() == ("blue", "28", "57")
    assert cue_named(thought, "blue") == 1 and cue_named(thought, "red") == 0
    assert span_holds(thought, "blue", [[40.0, 41.5]]) == 1
    assert span_holds(thought, "blue", [[20.0, 21.0]]) == 0
    # a quote alone, or a quote before a wrong colour, names no cue
    assert cue_named("14-28 red, 42 blue, 57 green", "red") == 0
    assert cue_named("14-28 blue, 42 red; red 28-57.", "blue") == 0
    assert span_holds("blue 28-57.", "blue", [[30.0, 31.0]]) == 1  # today's Thought reads as before
