"""The search level's grid of equal colour fields (``search_fields='grid'``, envs/synth/search.py): its config is
recorded and hashed while the random fields' stays as it was, its fields are the grid's quarters with the colours,
digits and beeps of the random twin, and the teacher's span for a colour is the field of the grid it saw it in."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError
from testkit import play_teacher

from envs.synth import SEARCH_TEMPLATES, SynthConfig, build_timeline, config_hash, generate_benchmark
from envs.synth.search import grid_bounds
from envs.tasks import Task
from omniagent.backends.synth_world import SynthWorld
from recipes.testbed.search_step import span_match
from rl.synthesis.audit_rules import RulesAuditor

RANDOM = SynthConfig(seed=3, duration=60.0, level="search")
GRID = RANDOM.model_copy(update={"search_fields": "grid"})


def test_the_grid_is_recorded_and_hashed_and_random_fields_keep_their_hash() -> None:
    assert "search_fields" not in RANDOM.model_dump(mode="json")  # the sidecars of sets made before the grid
    assert config_hash(RANDOM) == config_hash(
        SynthConfig(seed=3, duration=60.0, level="search", search_fields="random")
    )
    dumped = GRID.model_dump(mode="json")
    assert dumped["search_fields"] == "grid" and SynthConfig.model_validate(dumped) == GRID
    assert config_hash(GRID) != config_hash(RANDOM)
    assert "search_fields" not in SynthConfig(seed=3, duration=60.0).model_dump(
        mode="json"
    )  # benchmark level
    with pytest.raises(ValidationError):
        SynthConfig(seed=3, duration=60.0, level="search", search_fields="equal")


def test_the_command_line_makes_grid_videos(tmp_path) -> None:
    from envs import synth

    argv = ["--out", str(tmp_path), "--seed", "4", "--n", "1", "--durations", "40", "--level", "search"]
    assert synth.main([*argv, "--search-fields", "grid"]) == 0
    meta = json.loads((tmp_path / "synth_search_s4_000_40s.mp4.meta.json").read_text())
    assert meta["config"]["search_fields"] == "grid"
    assert [s["start"] for s in meta["timeline"]["segments"]] == [0.0, 10.0, 20.0, 30.0]
    with pytest.raises(SystemExit):
        synth.main(
            ["--out", str(tmp_path / "b"), "--search-fields", "grid"]
        )  # the benchmark level has no fields


def test_grid_bounds_are_quarters_on_the_frame_grid() -> None:
    assert grid_bounds(60.0, 5) == [0.0, 15.0, 30.0, 45.0, 60.0]
    assert grid_bounds(50.0, 5) == [0.0, 12.4, 25.0, 37.6, 50.0]  # a quarter of 50 s snapped to a frame


@pytest.mark.parametrize("seed", range(8))
def test_grid_fields_are_equal_and_keep_the_random_twins_colours_digits_and_beeps(seed: int) -> None:
    random_cfg = SynthConfig(seed=seed, duration=40.0 + 10.0 * (seed % 3), level="search")
    grid_cfg = random_cfg.model_copy(update={"search_fields": "grid"})
    twin, grid = build_timeline(random_cfg), build_timeline(grid_cfg)
    bounds = grid_bounds(grid_cfg.duration, grid_cfg.fps)
    assert [(f.start, f.end) for f in grid.segments] == list(zip(bounds[:-1], bounds[1:], strict=True))
    assert [(f.start, f.end) for f in twin.segments] != [(f.start, f.end) for f in grid.segments]
    assert [f.color_a for f in grid.segments] == [f.color_a for f in twin.segments]
    for kind, key in (("digit", "text"), ("tone", "freq")):
        assert [(e.group, e.attrs[key]) for e in grid.of_kind(kind)] == [
            (e.group, e.attrs[key]) for e in twin.of_kind(kind)
        ]
    margin = 0.025 * grid_cfg.duration
    for ev in grid.of_kind("digit"):
        field = grid.segments[ev.group]
        assert field.start + margin - 1e-6 <= ev.start < ev.end <= field.end - margin + 1e-6, ev


@pytest.fixture(scope="module")
def grid_tasks(tmp_path_factory: pytest.TempPathFactory) -> list[Task]:
    out = tmp_path_factory.mktemp("grid")
    config = {"level": "search", "search_fields": "grid"}
    return generate_benchmark(out, seed=9, n_videos=2, durations=[60.0], config=config)


def _play(task: Task, seed: int = 0):
    return play_teacher(task, seed, compact=True)


def test_the_teachers_span_is_the_grid_field_of_the_cue(grid_tasks: list[Task]) -> None:
    auditor, rewards, spans = RulesAuditor(), [], set()
    world = SynthWorld.for_media(grid_tasks[0].media)
    assert world.field_grid == [0.0, 15.0, 30.0, 45.0, 60.0]
    for task in grid_tasks:
        traj = _play(task)
        assert traj.stop_reason == "answered" and auditor.audit(traj).aggregate == 5, task.id
        rewards.append(float(traj.reward or 0.0))
        if task.extra["template"] == "pitch_color_mcq" or len(traj.turns) < 2:
            continue
        m = span_match(json.loads(traj.turns[1].raw_text)["thought"])
        assert m is not None and m.group(1) in task.question, traj.turns[1].raw_text
        start, end = int(m.group(2)), int(m.group(3))
        field = [int(x) for x in task.extra["field"]]
        assert [start, end] == field, (task.question, traj.turns[1].raw_text, field)
        spans.add((start, end))
    assert spans == {(0, 15), (15, 30), (30, 45), (45, 60)}  # one of four spans, each used
    assert sum(rewards) / len(rewards) >= 0.85
    assert {t.extra["template"] for t in grid_tasks} == set(SEARCH_TEMPLATES)


def test_the_teacher_on_random_fields_still_spans_between_other_colours(tmp_path) -> None:
    tasks = generate_benchmark(tmp_path, seed=9, n_videos=1, durations=[60.0], config={"level": "search"})
    assert SynthWorld.for_media(tasks[0].media).field_grid is None
    ends = set()
    for task in (t for t in tasks if t.extra["template"] == "cue_digit_mcq"):
        m = span_match(json.loads(_play(task).turns[1].raw_text)["thought"])
        assert m is not None
        ends |= {int(m.group(2)), int(m.group(3))}
    assert not ends <= {0, 15, 30, 45, 60}
