"""Property-based tests (hypothesis): whatever text a model writes, ``parse_turn`` and ``env.step``
never raise, and the observation and info serialise as strict UTF-8 JSON and reload."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from testkit import strict_json

from envs.actions import ACTION_TYPES, FormatError, Turn, parse_turn
from envs.env import OmniVideoEnv
from envs.errors import ErrorCode

CODES = {c.value for c in ErrorCode}
FUZZ = settings(max_examples=200, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])

# JSON-like values, including what strict JSON forbids (NaN, huge numbers) and lone surrogates
leaves = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.sampled_from([10**400, -(10**301), 2**63])
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20)
    | st.sampled_from(["nan", "inf", "1e999", "10", "-0", "\ud800", "B", "[[1, 2]]"])
)
json_values = st.recursive(
    leaves, lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids, max_size=4),
    max_leaves=12,
)  # fmt: skip
# mostly plausible values, so that percepts and answers are served as well as rejected
times = st.one_of(st.floats(-5, 30), st.integers(-5, 30), leaves)
nums = st.one_of(st.integers(-2, 40), st.integers(1, 3), leaves)
ANSWERS = [
    "A",
    "B",
    "(b)",
    "Z",
    "",
    "\ud800",
    "[[1, 2]]",
    "[[3.0, 4.5]]",
    "[[1e999, 2]]",
    "2",
    "nan",
    "1e999",
]
HOSTILE = ["[[" + "1" * 5000 + ", 2]]", "[" * 3000 + "]" * 3000, "9" * 5000]
contents = st.one_of(st.sampled_from(ANSWERS + HOSTILE), json_values)
FIELDS = {"get_frames": ("start", "end", "num"), "get_audio": ("start", "end"), "get_clip": ("start", "end")}
STRATEGY = {"start": times, "end": times, "num": nums, "content": contents}


@st.composite
def well_formed_actions(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(ACTION_TYPES))
    return {"type": kind, **{f: draw(STRATEGY[f]) for f in FIELDS.get(kind, ("content",))}}


actions = st.one_of(
    well_formed_actions(),
    well_formed_actions(),
    st.fixed_dictionaries(
        {"type": st.sampled_from([*ACTION_TYPES, "zoom"])},
        optional={"start": times, "end": times, "num": nums, "content": contents, "extra": json_values},
    ),
    json_values,
)
turn_objects = st.one_of(
    st.fixed_dictionaries({"observation": st.text(max_size=30), "thought": st.text(max_size=30), "action": actions}),
    st.fixed_dictionaries(
        {"observation": st.text(max_size=30) | leaves, "thought": st.text(max_size=30), "action": actions},
        optional={"memo": json_values},
    ),
)  # fmt: skip


@st.composite
def model_texts(draw: st.DrawFn) -> str:
    """Free text, or a JSON turn (possibly fenced, truncated or with trailing text)."""
    if draw(st.booleans()):
        return draw(st.text(max_size=200))
    text = json.dumps(draw(turn_objects), ensure_ascii=draw(st.booleans()))
    wrap = draw(st.sampled_from(["", "fence", "cut", "tail", "dup", "deep", "digits", "surrogate"]))
    head = '{"observation": "", "thought": "", "action": '
    if wrap == "deep":
        n = draw(st.integers(1, 3000))
        text = head + '{"type": "answer", "content": ' + "[" * n + "]" * n + "}}"
    elif wrap == "digits":
        text = (
            head
            + '{"type": "get_frames", "start": 0, "end": 1, "num": '
            + "9" * draw(st.integers(1, 6000))
            + "}}"
        )
    elif wrap == "surrogate":
        text = text.replace('"observation": "', '"observation": "\\udc00', 1)
    elif wrap == "fence":
        text = "```json\n" + text + "\n```"
    elif wrap == "cut":
        text = text[: draw(st.integers(0, len(text)))]
    elif wrap == "tail":
        text += draw(st.text(max_size=10))
    elif wrap == "dup":
        text = text.replace('"thought"', '"observation": "x", "thought"', 1)
    return text


@FUZZ
@given(text=model_texts(), strict=st.booleans())
def test_parse_turn_never_raises_and_serialises(text: str, strict: bool) -> None:
    result = parse_turn(text, strict=strict)
    assert isinstance(result, Turn | FormatError)
    if isinstance(result, FormatError):
        assert result.code in CODES
    dumped = result.model_dump()
    assert json.loads(strict_json(dumped)) == dumped


TASKS = {
    "mcq": {"task_type": "mcq", "choices": ["a", "b", "c"], "answer": "B"},
    "tr": {"task_type": "tr", "answer": [[3.0, 4.0]]},
    "num": {"task_type": "num", "answer": 2},
    "ff": {"task_type": "ff", "answer": "a grey screen"},
}


@pytest.fixture(scope="module")
def fuzz_env(video_path: Path) -> OmniVideoEnv:
    limits = {"max_frames": 2, "max_clip_s": 1.0, "max_audio_s": 2.0, "max_turns": 3}
    e = OmniVideoEnv(media=str(video_path), question="Which?", limits=limits)
    yield e
    e.close()


@FUZZ
@given(task=st.sampled_from(sorted(TASKS)), texts=st.lists(model_texts(), min_size=1, max_size=3))
def test_env_step_never_raises_and_everything_serialises(
    fuzz_env: OmniVideoEnv, task: str, texts: list[str]
) -> None:
    obs, info = fuzz_env.reset(options=TASKS[task])
    strict_json(obs)
    for k, text in enumerate(texts, start=1):
        obs, reward, term, trunc, info = fuzz_env.step(text)
        assert info["turn"] == k and info["error"] in CODES | {None}
        assert isinstance(reward, float) and 0.0 <= reward <= 1.0
        assert json.loads(strict_json(info)) == info
        reloaded = json.loads(strict_json(obs))
        assert [m["role"] for m in reloaded] == [m["role"] for m in obs]
        if term or trunc:
            break
