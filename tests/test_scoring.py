"""Scorers against hand-computed cases (envs/scoring.py)."""

from __future__ import annotations

import pytest

from envs.scoring import (
    AnswerFormatError,
    get_scorer,
    letters,
    mean_relative_accuracy,
    temporal_iou,
    union_length,
)

CHOICES = ["red", "green", "blue", "white"]


# ---------------------------------------------------------------------------------------------- mcq
@pytest.mark.parametrize("text", ["B", "b", "(B)", "B.", "B:", " B ", "(b)", "B)"])
def test_mcq_letter_forms_parse_to_the_letter(text: str) -> None:
    assert get_scorer("mcq").parse(text, CHOICES) == "B"


@pytest.mark.parametrize("text", ["AB", "Option B", "B. green", "", "green", "1"])
def test_mcq_rejects_non_letters(text: str) -> None:
    with pytest.raises(AnswerFormatError):
        get_scorer("mcq").parse(text, CHOICES)


def test_mcq_rejects_a_letter_beyond_the_options() -> None:
    with pytest.raises(AnswerFormatError, match="not an option"):
        get_scorer("mcq").parse("E", CHOICES)
    assert get_scorer("mcq").parse("E") == "E"  # without choices any letter parses


@pytest.mark.parametrize("text", ["green", "Green", " GREEN ", "B", "(b)"])
def test_mcq_option_text_opt_in_takes_an_options_exact_text_as_its_letter(text: str) -> None:
    scorer = get_scorer("mcq", option_text=True)
    assert scorer.parse(text, CHOICES) == "B" and scorer.score(scorer.parse(text, CHOICES), "B") == 1.0
    assert "exact text" in scorer.format_hint and "exact text" not in get_scorer("mcq").format_hint


@pytest.mark.parametrize("text", ["gree", "green blue", "B. green", "purple", "", "E"])
def test_mcq_option_text_still_rejects_what_names_no_option(text: str) -> None:
    with pytest.raises(AnswerFormatError, match="exact text|not an option"):
        get_scorer("mcq", option_text=True).parse(text, CHOICES)


def test_mcq_option_text_refuses_an_ambiguous_text() -> None:
    scorer = get_scorer("mcq", option_text=True)
    with pytest.raises(AnswerFormatError, match="another option's letter"):
        scorer.parse("a", ["b", "a", "c"])  # option B's text, option A's letter
    assert scorer.parse("a", ["a", "x", "c"]) == "A"  # option A's text and A's letter: the same option
    with pytest.raises(AnswerFormatError, match="options A, C"):
        scorer.parse("red", ["red", "blue", "Red"])


def test_mcq_answer_schema_lists_the_option_texts_only_with_the_opt_in() -> None:
    plain = get_scorer("mcq").content_schema(CHOICES, 60.0)
    assert plain == {"type": "string", "enum": ["A", "B", "C", "D"]}
    texts = get_scorer("mcq", option_text=True).content_schema(["9", "1000 Hz", " 9 ", "B"], 60.0)
    assert texts["enum"] == ["A", "B", "C", "D", "9", "1000 Hz"]  # deduplicated; a text that is a letter once


@pytest.mark.parametrize(
    "text", ["[[" + "1" * 5000 + ", 2]]", "[" * 5000 + "]" * 5000, "[[1, NaN]]", "[[2, 1]]"]
)
def test_tr_rejects_hostile_interval_text(text: str) -> None:
    with pytest.raises(AnswerFormatError):
        get_scorer("tr").parse(text)


def test_letters_stop_at_z() -> None:
    assert letters(3) == ["A", "B", "C"] and letters(26)[-1] == "Z"
    with pytest.raises(ValueError, match="at most 26"):
        letters(27)


def test_mcq_exact_match_is_case_insensitive_on_the_truth() -> None:
    s = get_scorer("mcq")
    assert s.score("C", "C") == 1.0
    assert s.score("C", " c ") == 1.0
    assert s.score("C", "D") == 0.0


# ----------------------------------------------------------------------------------------------- tr
def test_union_length_merges_overlaps() -> None:
    assert union_length([(0, 10), (5, 15), (20, 25)]) == 20
    assert union_length([]) == 0


def test_multi_interval_iou_by_hand() -> None:
    # |P ∩ G| = [5,10] + [20,25] = 10; |P ∪ G| = [0,30] = 30
    assert temporal_iou([(0, 10), (20, 30)], [(5, 25)]) == pytest.approx(1 / 3)
    # two truth intervals, one prediction covering the first only: 10 / 20
    assert temporal_iou([(0, 10)], [(0, 10), (20, 30)]) == pytest.approx(0.5)
    # overlapping predictions are merged before intersecting (no double counting)
    assert temporal_iou([(0, 10), (5, 15)], [(0, 15)]) == pytest.approx(1.0)
    # disjoint
    assert temporal_iou([(0, 1)], [(2, 3)]) == 0.0
    # both zero-length points: no union, 0
    assert temporal_iou([(1, 1)], [(1, 1)]) == 0.0


def test_tr_scorer_parses_json_text_and_a_single_pair() -> None:
    s = get_scorer("tr")
    assert s.parse("[[10.5, 20]]") == [(10.5, 20.0)]
    assert s.parse("[10, 20]") == [(10.0, 20.0)]
    assert s.parse([[0, 1], [2, 3]]) == [(0.0, 1.0), (2.0, 3.0)]
    # truth [[0, 10], [20, 30]], prediction [[5, 25]]: inter 10, union 30
    assert s.score(s.parse("[[5, 25]]"), [[0, 10], [20, 30]]) == pytest.approx(1 / 3)


@pytest.mark.parametrize("bad", ["[[20, 10]]", "[]", "[[1, 2, 3]]", "10-20", '[["a", 2]]', "[[0, Infinity]]"])
def test_tr_scorer_rejects_malformed_intervals(bad: str) -> None:
    with pytest.raises(AnswerFormatError):
        get_scorer("tr").parse(bad)


# -------------------------------------------------------------------------------------- num / size
@pytest.mark.parametrize(
    ("prediction", "expected"),
    [
        (100, 1.0),  # exact
        (96, 1.0),  # rel 0.04 < 0.05 = 1 - 0.95: every threshold
        (104, 1.0),
        (94, 0.9),  # rel 0.06: thresholds 0.50..0.90 (9 of 10)
        (76, 0.6),  # rel 0.24: 0.50..0.75
        (74, 0.5),  # rel 0.26: 0.50..0.70
        (60, 0.2),  # rel 0.40: 0.50, 0.55
        (50, 0.0),  # rel 0.50: none (strict <)
        (300, 0.0),
    ],
)
def test_mra_thresholds_by_hand(prediction: float, expected: float) -> None:
    assert mean_relative_accuracy(prediction, 100.0) == pytest.approx(expected)


def test_mra_zero_truth_needs_an_exact_answer() -> None:
    assert mean_relative_accuracy(0.0, 0.0) == 1.0
    assert mean_relative_accuracy(0.001, 0.0) == 0.0


def test_mra_negative_truth_uses_the_magnitude() -> None:
    assert mean_relative_accuracy(-94, -100) == pytest.approx(0.9)


@pytest.mark.parametrize("kind", ["num", "size"])
def test_numeric_scorers_parse_and_score(kind: str) -> None:
    s = get_scorer(kind)
    assert s.parse("10.3") == 10.3
    assert s.parse(" 7 ") == 7.0
    assert s.score(s.parse("94"), "100") == pytest.approx(0.9)
    for bad in ["ten", "nan", "inf", True, "1 2"]:
        with pytest.raises(AnswerFormatError):
            s.parse(bad)


# ----------------------------------------------------------------------------------------------- ff
def test_ff_scores_zero_without_a_judge_and_the_judge_value_with_one() -> None:
    s = get_scorer("ff")
    assert s.score("a cat", "a cat") == 0.0  # no judge: unscored (the env flags reward_available=False)
    assert s.score("a cat", "a cat", judge=lambda q, r, p: 0.75, question="q") == 0.75
    with pytest.raises(AnswerFormatError):
        s.parse("   ")


def test_unknown_task_type() -> None:
    with pytest.raises(ValueError, match="unknown task type"):
        get_scorer("essay")


def test_reordered_choices_keep_the_answer_on_its_text() -> None:
    from envs.tasks import Task

    task = Task(
        id="t", media="m.mp4", question="Which?", task_type="mcq", choices=["6", "1", "4", "5"], answer="D"
    )
    moved = task.with_choices_in_order([3, 0, 2, 1])
    assert moved.choices == ["5", "6", "4", "1"] and moved.answer == "A"
    assert moved.answer_choice() == task.answer_choice() == "5" and task.choices == ["6", "1", "4", "5"]
    assert task.with_choices_in_order([0, 1, 2, 3]) == task
    with pytest.raises(ValueError, match=r"is not an order of the 4 choices"):
        task.with_choices_in_order([0, 0, 1, 2])
    count = Task(id="n", media="m.mp4", question="How many?", task_type="num", answer=3.0)
    assert count.with_choices_in_order([1, 0]) is count  # no choices: nothing to reorder
