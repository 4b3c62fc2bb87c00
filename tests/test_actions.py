"""The turn parser against hostile model output (envs/actions.py): every case a stable code, never a crash."""

from __future__ import annotations

import json

import pytest

from envs.actions import MAX_DEPTH, FormatError, Turn, parse_turn, safe_text
from envs.errors import ErrorCode


def turn_text(action: str) -> str:
    return '{"observation": "none", "thought": "t", "action": ' + action + "}"


def code_of(text: str) -> str | None:
    result = parse_turn(text)
    return result.code if isinstance(result, FormatError) else None


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 5_000, 200_000])
def test_deep_nesting_is_a_format_error(depth: int) -> None:
    content = "[" * depth + "]" * depth
    assert code_of(turn_text('{"type": "answer", "content": ' + content + "}")) == "format_too_deep"
    assert code_of("[" * depth) in ("format_too_deep", "format_not_json")
    assert code_of("[" * depth + "]" * depth) == "format_too_deep"


def test_nesting_within_the_limit_parses() -> None:
    content = "[" * (MAX_DEPTH - 3) + "1" + "]" * (MAX_DEPTH - 3)
    parsed = parse_turn(turn_text('{"type": "answer", "content": ' + content + "}"))
    assert isinstance(parsed, Turn)


@pytest.mark.parametrize("digits", [301, 5_000, 100_000])
def test_huge_integers_are_a_format_error(digits: int) -> None:
    big = "7" * digits
    for action in (
        '{"type": "get_frames", "start": 0, "end": 1, "num": ' + big + "}",
        '{"type": "answer", "content": [' + big + "]}",
    ):
        result = parse_turn(turn_text(action))
        assert isinstance(result, FormatError) and result.code == "format_number_too_long"
        assert "300 digits" in result.message


def test_long_but_bounded_integers_still_parse() -> None:
    parsed = parse_turn(turn_text('{"type": "get_frames", "start": 0, "end": 1, "num": ' + "9" * 300 + "}"))
    assert isinstance(parsed, Turn) and parsed.action.num == int("9" * 300)


def test_duplicate_keys_are_rejected_not_last_one_wins() -> None:
    text = '{"observation": "a", "thought": "b", "action": {"type": "get_audio", "start": 1, "start": 9, "end": 10}}'
    result = parse_turn(text)
    assert isinstance(result, FormatError) and result.code == "format_duplicate_key"
    assert "'start'" in result.message
    top = '{"observation": "a", "observation": "b", "thought": "t", "action": {"type": "answer", "content": "B"}}'
    assert code_of(top) == "format_duplicate_key"


@pytest.mark.parametrize("field", ["start", "end"])
@pytest.mark.parametrize("value", ['"nan"', '"inf"', '"-Infinity"', '"1e999"', '"10"', '"3.5"'])
def test_times_as_strings_are_rejected(field: str, value: str) -> None:
    fields = {"start": "1", "end": "2"}
    fields[field] = value
    action = '{"type": "get_audio", "start": ' + fields["start"] + ', "end": ' + fields["end"] + "}"
    result = parse_turn(turn_text(action))
    assert isinstance(result, FormatError) and result.code == "action_invalid_field"
    assert field in result.message


@pytest.mark.parametrize("value", ['"10"', '"nan"', "NaN", "1e999", "4.0", "true", '"4"'])
def test_num_must_be_a_json_integer(value: str) -> None:
    result = parse_turn(turn_text('{"type": "get_frames", "start": 1, "end": 2, "num": ' + value + "}"))
    assert isinstance(result, FormatError) and result.code == "action_invalid_field"
    assert "num" in result.message


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", "1e999", "-1e999"])
def test_non_finite_json_times_are_time_not_finite(value: str) -> None:
    assert code_of(turn_text('{"type": "get_clip", "start": ' + value + ', "end": 3}')) == "time_not_finite"
    assert code_of(turn_text('{"type": "get_clip", "start": 1, "end": ' + value + "}")) == "time_not_finite"


def test_non_finite_numbers_in_an_answer_are_rejected() -> None:
    for content in ("NaN", "[1, Infinity]", "[[0, 1e999]]", '{"x": -Infinity}'):
        result = parse_turn(turn_text('{"type": "answer", "content": ' + content + "}"))
        assert isinstance(result, FormatError) and result.code == "action_invalid_field", content


def test_booleans_are_not_times() -> None:
    assert code_of(turn_text('{"type": "get_audio", "start": true, "end": 3}')) == "action_invalid_field"


def test_plain_json_numbers_still_parse() -> None:
    parsed = parse_turn(turn_text('{"type": "get_frames", "start": 1, "end": 2.5e1, "num": 3}'))
    assert isinstance(parsed, Turn)
    assert (parsed.action.start, parsed.action.end, parsed.action.num) == (1.0, 25.0, 3)


@pytest.mark.parametrize(
    "text",
    [
        turn_text('{"type": "answer", "content": "\\ud800"}'),  # escaped lone high surrogate
        '{"observation": "x\\udfff", "thought": "\\ud83d", "action": {"type": "answer", "content": "B"}}',
        '{"observation": "\ud800 raw", "thought": "t", "action": {"type": "answer", "content": ["\udc00"]}}',
        '{"observation": "a", "thought": "b", "action": {"type": "answer", "content": [{"\\ud800": 1}]}}',
    ],
)
def test_lone_surrogates_are_replaced_so_the_turn_serialises(text: str) -> None:
    parsed = parse_turn(text)
    assert isinstance(parsed, Turn)
    dumped = json.dumps(parsed.model_dump(), ensure_ascii=False)
    assert json.loads(dumped.encode("utf-8").decode("utf-8")) == parsed.model_dump()
    assert "\ufffd" in dumped


def test_safe_text_keeps_pairs_and_replaces_only_lone_surrogates() -> None:
    assert safe_text("plain ä 😀") == "plain ä 😀"
    assert safe_text("\ud83d\ude00") == "😀"  # a pair of surrogate code points is one character
    assert safe_text("a\ud800b\udfffc") == "a\ufffdb\ufffdc"
    assert safe_text("\ude00\ud83d") == "\ufffd\ufffd"  # wrong order: both lone
    safe_text("x\ud800").encode("utf-8")  # would raise UnicodeEncodeError without the repair


def test_escaped_surrogate_pair_still_decodes_to_its_character() -> None:
    parsed = parse_turn(turn_text('{"type": "answer", "content": "\\ud83d\\ude00"}'))
    assert isinstance(parsed, Turn) and parsed.action.content == "😀"


def test_lenient_mode_unwraps_fences_without_a_language_tag() -> None:
    body = turn_text('{"type": "answer", "content": "B"}')
    for text in ("```\n" + body + "\n```", "```json " + body + "```", "```JSON\n" + body):
        assert isinstance(parse_turn(text, strict=False), Turn), text
        assert code_of(text) == "format_code_fence"


def test_non_string_input_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        parse_turn(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        parse_turn(b'{"observation": ""}')  # type: ignore[arg-type]


def test_every_code_the_parser_returns_is_an_error_code() -> None:
    samples = [
        "",
        "```x```",
        "hello",
        "{",
        '{"a": 1} tail',
        "[]",
        "{}",
        '{"observation": "", "thought": "", "action": 1, "x": 2}',
        '{"observation": 1, "thought": "", "action": {}}',
        turn_text("{}"),
        turn_text('{"type": "zoom"}'),
        turn_text('{"type": "get_frames"}'),
        turn_text('{"type": "get_audio", "start": NaN, "end": 1}'),
    ]
    codes = {code_of(t) for t in samples}
    assert None not in codes and codes <= {c.value for c in ErrorCode}
    assert len(codes) == len(samples) - 1  # each sample shows a different failure ("hello"/"{" share one)
