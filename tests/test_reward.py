"""The RL reward both trainers share (rl/algo/reward.py): format penalties and the evidence gate, on the spans the real
environment serves; the reading credit, on what the perceiving teacher wrote about synthetic media and on copies of
its Observations with an item left out, an item added, or nothing described."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from testkit import teacher_trajectories

from envs.env import OmniVideoEnv
from envs.scoring import mean_relative_accuracy
from envs.tasks import Task, save_tasks_jsonl
from omniagent.backends.synth_world import SynthWorld, percept_from_record
from omniagent.trajectory import Trajectory, TurnRecord
from rl.algo.reward import (
    RewardConfig,
    TurnText,
    answer_closeness,
    closeness,
    group_credit,
    percept_spans,
    prior_score,
    reading_rate,
    shaped_reward,
    touches_evidence,
)


def _turn(action: dict) -> str:
    return json.dumps({"observation": "none", "thought": "Next.", "action": action})


def _served(video_path: Path, looks: list[dict]) -> tuple[list[tuple[float, float]], float]:
    """The spans the environment served for ``looks`` on the 20 s test video, and the answer's score."""
    task = Task(
        id="t", media=str(video_path), question="Which?", task_type="mcq", choices=["x", "y"], answer="B"
    )
    env = OmniVideoEnv()
    env.reset(options=task.env_options(len(looks) + 1))
    spans: list[tuple[float, float]] = []
    for look in looks:
        _, _, _, _, info = env.step(_turn(look))
        spans += [] if info.get("error") else percept_spans(info["action_type"], info["timestamps"])
    _, reward, terminated, _, _ = env.step(_turn({"type": "answer", "content": "B"}))
    assert terminated
    env.close()
    return spans, float(reward)


def test_served_spans_are_frame_instants_and_audio_or_clip_ranges(video_path: Path) -> None:
    frames, _ = _served(video_path, [{"type": "get_frames", "start": 0.0, "end": 20.0, "num": 3}])
    assert len(frames) == 3 and all(s == e for s, e in frames)  # the served frames' true timestamps
    assert frames[0][0] == pytest.approx(0.0, abs=0.11) and 9.0 <= frames[1][0] <= 11.0 < frames[2][0]
    audio, _ = _served(video_path, [{"type": "get_audio", "start": 2.0, "end": 14.0}])
    assert audio == [(pytest.approx(2.0), pytest.approx(14.0))]
    rejected, _ = _served(video_path, [{"type": "get_frames", "start": 15.0, "end": 5.0, "num": 2}])
    assert rejected == []  # a refused look served nothing
    assert percept_spans("answer", [3.0]) == []


def test_evidence_gate_pays_a_right_answer_only_after_a_look_at_the_evidence(video_path: Path) -> None:
    # three frames over the whole video land near 0 and 10 s and after 11 s: 4-6 s is never served
    spans, score = _served(video_path, [{"type": "get_frames", "start": 0.0, "end": 20.0, "num": 3}])
    assert score == 1.0
    missed, hit = [[4.0, 6.0]], [[9.0, 11.0]]
    assert not touches_evidence(spans, missed) and touches_evidence(spans, hit)
    audio, _ = _served(video_path, [{"type": "get_audio", "start": 2.0, "end": 14.0}])
    assert touches_evidence(audio, missed) and touches_evidence(audio, [[14.0, 15.0]])  # closed intervals
    assert not touches_evidence(audio, [[14.5, 15.0]])

    gate, plain = RewardConfig(evidence_gate=True), RewardConfig()
    for seen, gated in ((touches_evidence(spans, hit), 1.0), (touches_evidence(spans, missed), 0.0)):
        assert shaped_reward(score, 0, True, gate, seen) == gated
        assert shaped_reward(score, 0, True, plain, seen) == 1.0  # off by default: the plain outcome reward
    # the dense credit: a look at the evidence pays, right answer or not; a task without evidence (None) gets none
    dense = RewardConfig(evidence_gate=True, evidence_bonus=0.2)
    assert shaped_reward(score, 0, True, dense, True) == pytest.approx(1.2)
    assert shaped_reward(0.0, 0, True, dense, True) == pytest.approx(0.2)
    assert shaped_reward(score, 0, True, dense, False) == 0.0
    assert shaped_reward(score, 0, True, dense, None) == 1.0
    assert shaped_reward(0.0, 0, True, dense, None) == 0.0
    no_gate = RewardConfig(evidence_bonus=0.2)
    assert shaped_reward(score, 0, True, no_gate, False) == 1.0  # without the gate a guess still pays
    # penalties still apply under the gate, to an answer that earns nothing
    penalised = RewardConfig(format_error_penalty=0.1, no_answer_penalty=0.5, evidence_gate=True)
    assert shaped_reward(1.0, 2, True, penalised, False) == pytest.approx(-0.2)
    assert shaped_reward(0.0, 0, False, penalised, True) == pytest.approx(-0.5)


@pytest.fixture(scope="module")
def teacher_trajs(tmp_path_factory: pytest.TempPathFactory) -> list[Trajectory]:
    """The perceiving teacher on a synthetic video with sound: its Observations describe each percept exactly."""
    return teacher_trajectories(tmp_path_factory.mktemp("synth_reading"))


def _served_kinds(traj: Trajectory) -> set[str]:
    return {percept_from_record(p.action, p.timestamps, p.error).kind for p in traj.turns[:-1]}


def _with(traj: Trajectory, turn: int, observation: str) -> list[TurnRecord]:
    turns = [t.model_copy(deep=True) for t in traj.turns]
    turns[turn].observation = observation
    return turns


def test_the_teachers_exact_observations_read_everything_served(teacher_trajs: list[Trajectory]) -> None:
    rates = [reading_rate(t.media, t.turns) for t in teacher_trajs]
    kinds = set().union(*(_served_kinds(t) for t in teacher_trajs))
    assert {"frames", "audio"} <= kinds  # both kinds of percept were read
    assert [r for r in rates if r is not None] and all(r in (None, 1.0) for r in rates)
    # the verl agent loop's view of the same turns (TurnText) reads the same
    traj = next(t for t, r in zip(teacher_trajs, rates, strict=True) if r is not None)
    texts = [TurnText(t.observation, t.action, t.timestamps, t.error) for t in traj.turns]
    assert reading_rate(traj.media, texts) == 1.0


def test_a_missing_or_invented_item_or_no_description_loses_what_it_misread(
    teacher_trajs: list[Trajectory],
) -> None:
    traj, k = next(
        (t, k)
        for t in teacher_trajs
        for k in range(1, len(t.turns))
        if t.turns[k - 1].action_type == "get_frames" and not t.turns[k - 1].error
    )
    world = SynthWorld.for_media(traj.media)
    frames = sorted({round(x, 2) for x in traj.turns[k - 1].timestamps})
    served = sum(  # everything the episode served and a later turn described
        len({round(x, 2) for x in p.timestamps})
        + (p.action_type in ("get_audio", "get_clip") and world.has_audio and not p.error)
        for p in traj.turns[:-1]
        if not p.error and p.action_type in ("get_frames", "get_audio", "get_clip")
    )
    sentence = f"Frame {frames[0]:.2f}s: "
    truth = ", ".join(i.phrase() for i in world.frame(frames[0]))
    exact = " ".join(
        f"Frame {t:.2f}s: " + ", ".join(i.phrase() for i in world.frame(t)) + "." for t in frames
    )
    assert reading_rate(traj.media, _with(traj, k, exact)) == 1.0  # per-frame sentences read as well as runs
    others = exact.split(". ", 1)[1] if len(frames) > 1 else ""
    shown = world.frame(frames[0])
    background = next(i.phrase() for i in shown if i.kind == "background")
    wrong = [f"{sentence}{truth}, the digit 7, the digit 8."]  # items that are not there
    if len(shown) > 1:
        wrong.append(f"{sentence}{background}.")  # what else was on screen, left out
    for first in wrong:
        misread = reading_rate(traj.media, _with(traj, k, f"{first} {others}".strip()))
        assert misread == pytest.approx(1 - 1 / served)  # that one frame, and only it, is lost
    assert reading_rate(traj.media, _with(traj, k, "none")) == pytest.approx(1 - len(frames) / served)


def test_the_events_scope_counts_only_frames_and_sounds_with_something_to_read(
    teacher_trajs: list[Trajectory],
) -> None:
    """``reading_scope: events``: an Observation that leaves out an empty frame (or says nothing of a silent span)
    loses nothing, one that misreads an event frame still loses it; the teacher still reads everything."""
    rates = [reading_rate(t.media, t.turns, "events") for t in teacher_trajs]
    assert [r for r in rates if r is not None] and all(r in (None, 1.0) for r in rates)
    worlds = {t.media: SynthWorld.for_media(t.media) for t in teacher_trajs}

    def frames_of(traj: Trajectory, k: int) -> list[float]:
        return sorted({round(x, 2) for x in traj.turns[k - 1].timestamps})

    def empty(traj: Trajectory, t: float) -> bool:
        return all(i.kind == "background" for i in worlds[traj.media].frame(t))

    traj, k = next(  # a frame look that served both an empty frame and a frame with an event
        (t, k)
        for t in teacher_trajs
        for k in range(1, len(t.turns))
        if t.turns[k - 1].action_type == "get_frames"
        and not t.turns[k - 1].error
        and {empty(t, x) for x in frames_of(t, k)} == {True, False}
    )
    world = worlds[traj.media]
    events = [t for t in frames_of(traj, k) if not empty(traj, t)]
    only_events = " ".join(
        f"Frame {t:.2f}s: " + ", ".join(i.phrase() for i in world.frame(t)) + "." for t in events
    )
    assert reading_rate(traj.media, _with(traj, k, only_events), "events") == 1.0
    assert (
        reading_rate(traj.media, _with(traj, k, only_events)) < 1.0
    )  # "all" counts the empty frames left out
    without_first = ". ".join(only_events.split(". ")[1:]) if len(events) > 1 else "none"
    assert reading_rate(traj.media, _with(traj, k, without_first), "events") < 1.0  # an event frame left out
    with pytest.raises(ValueError, match="reading_scope"):
        RewardConfig(reading_scope="frames")  # type: ignore[arg-type]


def test_media_without_a_ground_truth_earn_no_reading_credit(
    video_path: Path, teacher_trajs: list[Trajectory]
) -> None:
    turns = teacher_trajs[0].turns
    assert (
        reading_rate(str(video_path), turns) is None
    )  # a real video: nothing to check the Observations against
    assert reading_rate(teacher_trajs[0].media, turns[:1]) is None  # nothing served before a later turn
    credit = RewardConfig(evidence_gate=True, evidence_bonus=0.2, reading_credit=0.5)
    assert shaped_reward(1.0, 0, True, credit, True, 0.5) == pytest.approx(1.45)
    assert shaped_reward(0.0, 0, True, credit, False, 1.0) == pytest.approx(0.5)  # the gate does not stop it
    assert shaped_reward(1.0, 0, True, credit, None, None) == 1.0
    assert shaped_reward(1.0, 0, True, RewardConfig(), True, 1.0) == 1.0  # off by default


def test_the_prior_floor_pays_only_the_score_above_the_no_look_constant(tmp_path: Path) -> None:
    plain = RewardConfig()
    assert shaped_reward(1.0, 0, True, plain, prior=0.4) == pytest.approx(0.6)
    assert shaped_reward(0.3, 0, True, plain, prior=0.4) == 0.0  # no better than the constant: nothing
    shaping = RewardConfig(evidence_gate=True, evidence_bonus=0.2, format_error_penalty=0.1)
    assert shaped_reward(1.0, 1, True, shaping, False, prior=0.4) == pytest.approx(-0.1)  # gated first
    assert shaped_reward(1.0, 1, True, shaping, True, prior=0.4) == pytest.approx(0.6 + 0.2 - 0.1)
    # the constant is fitted on the file (MRA: "2" scores 1, 1 and 0.4 there) and scored on the task
    tasks = [Task(id=f"c{i}", media="v.mp4", question=f"How many beeps before {10 * i} s?", task_type="num",
                  answer=float(a)) for i, a in enumerate([2, 2, 3])]  # fmt: skip
    cfg = RewardConfig(prior_tasks=str(save_tasks_jsonl(tasks, tmp_path / "train.jsonl")))
    assert prior_score(cfg, tasks[2]) == pytest.approx(0.4) and prior_score(cfg, tasks[0]) == 1.0
    assert prior_score(RewardConfig(), tasks[2]) is None
    assert prior_score(cfg, tasks[2].model_copy(update={"answer": None})) is None
    with pytest.raises(ValueError, match="prior_tasks: training task file .* does not exist"):
        RewardConfig(prior_tasks=str(tmp_path / "none.jsonl"))


def test_num_credit_grades_number_answers_on_a_log_scale_where_mra_is_flat() -> None:
    # a pitch question (truth 2000 Hz) answered with timestamps or with pitches: MRA is 0 for all but the last
    answers = [14.0, 240.0, 900.0, 2000.0]
    assert [mean_relative_accuracy(a, 2000.0) for a in answers[:3]] == [0.0, 0.0, 0.0]
    close = [closeness(a, 2000.0, 1000.0) for a in answers]
    assert (
        close == sorted(close)
        and close[-1] == 1.0
        and close[0] == pytest.approx(1 - math.log(2001 / 15) / math.log(1000))
    )
    assert closeness(2000.0 * 1000 - 1, 2000.0, 1000.0) == pytest.approx(0.0, abs=1e-3)  # the span: 0
    assert closeness(-5.0, 0.0, 1000.0) == 1.0  # a negative count is read as 0; the 1 + keeps 0 finite
    assert closeness(None, 3.0, 10.0) is None and closeness("abc", 3.0, 10.0) is None
    assert closeness(True, 1.0, 10.0) is None  # a boolean is not a number answer
    cfg = RewardConfig(num_credit=0.5, evidence_gate=True)
    assert answer_closeness(cfg, "mcq", "B", "B") is None  # only number and size questions are graded
    assert answer_closeness(RewardConfig(), "num", 14.0, 2000.0) is None  # off by default
    c = answer_closeness(cfg, "size", 20.0, 22.0)
    assert c == pytest.approx(closeness(20.0, 22.0, 1000.0))
    assert shaped_reward(0.0, 0, True, cfg, True, close=c) == pytest.approx(0.5 * c)
    assert shaped_reward(0.0, 0, True, cfg, False, close=c) == 0.0  # paid under the same gate as the score
    assert (
        shaped_reward(1.0, 0, True, RewardConfig(num_credit=0.5), None, close=1.0) == 1.5
    )  # no evidence: no gate
    with pytest.raises(ValueError, match="num_credit_span must be above 1"):
        RewardConfig(num_credit=0.5, num_credit_span=1.0)


def test_the_flat_scope_pays_the_closeness_only_in_a_group_where_every_episode_scored_0() -> None:
    flat = RewardConfig(num_credit=1.0, num_credit_scope="flat", evidence_gate=True)
    # a pitch group: four far-off answers, all MRA 0; the credit ranks them by closeness
    closes = [0.4, 0.6, None, 0.5]  # None: an answer that does not parse
    assert group_credit(flat, [0.0] * 4, closes, [True] * 4) == [0.4, 0.6, 0.0, 0.5]
    # one episode never served the evidence: gated out, like its score
    assert group_credit(flat, [0.0] * 4, closes, [True, False, True, None]) == [0.4, 0.0, 0.0, 0.5]
    # a count group with one right answer is ranked by the score alone (batch 18: the credit diluted that answer)
    assert group_credit(flat, [0.0, 1.0, 0.0, 0.0], closes, [True] * 4) == [0.0] * 4
    # ... but a right answer scored without a look (gated out) does not count as a score
    assert group_credit(flat, [0.0, 1.0, 0.0, 0.0], closes, [True, False, True, True]) == [0.4, 0.0, 0.0, 0.5]
    # scope all pays per episode in shaped_reward, never here; flat pays nothing there
    every = RewardConfig(num_credit=1.0, evidence_gate=True)
    assert group_credit(every, [0.0] * 4, closes, [True] * 4) == [0.0] * 4
    assert shaped_reward(0.0, 0, True, every, True, close=0.4) == pytest.approx(0.4)
    assert shaped_reward(0.0, 0, True, flat, True, close=0.4) == 0.0
    assert group_credit(RewardConfig(num_credit_scope="flat"), [0.0] * 4, closes, [True] * 4) == [0.0] * 4
    with pytest.raises(ValueError, match="one score, closeness and evidence flag per episode"):
        group_credit(flat, [0.0] * 3, closes, [True] * 4)
    with pytest.raises(ValueError, match="num_credit_scope must be one of"):
        RewardConfig(num_credit_scope="groups")  # type: ignore[arg-type]
