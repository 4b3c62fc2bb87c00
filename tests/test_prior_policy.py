"""The ``prior`` baseline: the training set's best constant answer per question wording, given on turn one."""

from __future__ import annotations

from pathlib import Path

import pytest

from envs.env import OmniVideoEnv
from envs.scoring import get_scorer
from envs.tasks import Task, save_tasks_jsonl
from omniagent.backends.prior import best_constant, question_key
from omniagent.episode import run_episode
from omniagent.eval.judges import ExactMatchJudge
from omniagent.policy import PolicyConfigError, make_policy

BEEPS = "How many beeps (short pure tones) can be heard in total?"
HUE = "What colour is the background at about {t} s?"


def _task(i: int, question: str, task_type: str, answer: object, **kw: object) -> Task:
    return Task(id=f"t{i}", media="v.mp4", question=question, task_type=task_type, answer=answer, **kw)  # type: ignore[arg-type]


def _train(tmp_path: Path) -> Path:
    tasks = [_task(i, BEEPS, "num", float(a)) for i, a in enumerate([2, 2, 3, 5])]
    hues = [("red", ["red", "blue", "green"], "A"), ("red", ["blue", "red", "green"], "B"),
            ("blue", ["green", "red", "blue"], "C"), ("green", ["blue", "green", "red"], "B")]  # fmt: skip
    tasks += [_task(10 + i, HUE.format(t=5 * i), "mcq", a, choices=c) for i, (_, c, a) in enumerate(hues)]
    tasks += [_task(20, "Which word is spoken at about 3 s?", "ff", "apple")]
    tasks += [_task(21, "Which word is spoken at about 9 s?", "ff", "apple")]
    tasks += [_task(22, "Which word is spoken at about 7 s?", "ff", "pear")]
    tasks += [_task(30, "When is the red square on screen?", "tr", [[10.0, 14.0]])]
    tasks += [_task(31, "When is the red square on screen?", "tr", [[11.0, 15.0]])]
    tasks += [_task(32, "When is the red square on screen?", "tr", [[40.0, 41.0]])]
    return save_tasks_jsonl(tasks, tmp_path / "train.jsonl")


def test_the_key_masks_numbers_only() -> None:
    assert question_key("At about 23.5 s, the  2nd beep?") == question_key("at about 7 s, the 3rd beep?")
    assert question_key("A red circle at 4 s?") != question_key("A blue circle at 4 s?")


def test_the_constant_maximises_the_summed_training_score_under_each_scorer(tmp_path: Path) -> None:
    counts = [_task(i, BEEPS, "num", float(a)) for i, a in enumerate([2, 2, 3, 5])]
    # MRA: "2" scores 1, 1, 0.4 (2 vs 3: 33% off) and 0 (2 vs 5); "3" and "5" score less in total
    answer, mean = best_constant(counts)
    assert answer == 2.0 and mean == pytest.approx((1 + 1 + 0.4 + 0) / 4)
    spans = [
        _task(30 + i, "When?", "tr", s)
        for i, s in enumerate([[[10.0, 14.0]], [[11.0, 15.0]], [[40.0, 41.0]]])
    ]
    answer, mean = best_constant(spans)  # [10, 14] and [11, 15] overlap each other (IoU 0.6); [40, 41] alone
    assert answer == [[10.0, 14.0]] and mean == pytest.approx((1 + 0.6 + 0) / 3)


def test_the_policy_answers_at_once_by_wording_then_by_type_then_a_blank_guess(tmp_path: Path) -> None:
    policy = make_policy("prior", train_tasks=str(_train(tmp_path)))

    def answer(question: str, task_type: str, choices: list[str] | None = None) -> object:
        policy.reset({"task": {"question": question, "task_type": task_type, "choices": choices},
                      "media": {"duration": 60.0}, "max_turns": 8})  # fmt: skip
        return policy.answer()

    assert answer(BEEPS, "num") == 2.0
    # red is right twice, under two letters: the prior names red by its text, wherever it stands
    assert answer(HUE.format(t=42), "mcq", ["green", "blue", "red"]) == "C"
    assert answer(HUE.format(t=42), "mcq", ["cyan", "red"]) == "B"
    # no red on offer: the letter most often right under the wording (B, twice)
    assert answer(HUE.format(t=42), "mcq", ["cyan", "pink", "grey"]) == "B"
    assert answer("Which word is spoken at about 55.5 s?", "ff") == "apple"
    assert answer("How many flashes?", "num") == 2.0  # unseen wording: the best constant of all num tasks
    assert answer("How wide is the circle?", "size") == 0  # no size task in training: the blank guess


def test_an_episode_answers_on_turn_one_and_the_env_scores_the_constant(
    tmp_path: Path, tasks: list[Task]
) -> None:
    """On a real synthetic video: the prior never perceives, answers in one turn in the task's own format,
    and each task's reward is its constant scored by the task type's scorer; trained on the tasks
    themselves, a wording held by one task only is answered right."""
    train = save_tasks_jsonl(tasks, tmp_path / "train.jsonl")
    policy = make_policy("prior", train_tasks=str(train))
    env = OmniVideoEnv()
    keys = [question_key(t.question) for t in tasks]
    checked_unique = 0
    for task in tasks:
        traj = run_episode(env, policy, task.env_options(4), episode_id=task.id)
        assert traj.num_turns == 1 and traj.frames_used == 0 and traj.stop_reason == "answered"
        scorer = get_scorer(task.task_type)
        expected = scorer.score(scorer.parse(traj.answer, task.choices), task.answer, judge=ExactMatchJudge(),
                                question=task.question)  # fmt: skip
        if task.task_type != "ff":  # the env has no judge here: ff scores 0
            assert traj.reward == pytest.approx(expected)
        if keys.count(question_key(task.question)) == 1 and task.task_type != "ff":
            assert traj.reward == pytest.approx(1.0), task.id
            checked_unique += 1
    assert checked_unique >= 3


def test_a_missing_or_empty_training_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(PolicyConfigError, match="does not exist"):
        make_policy("prior", train_tasks=str(tmp_path / "nope.jsonl"))
    empty = save_tasks_jsonl([_task(0, BEEPS, "num", None)], tmp_path / "empty.jsonl")
    with pytest.raises(PolicyConfigError, match="no task with an answer"):
        make_policy("prior", train_tasks=str(empty))
    with pytest.raises(PolicyConfigError, match="train_tasks"):
        make_policy("prior")
