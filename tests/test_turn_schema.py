"""The environment's JSON schema of a well-formed turn (envs/turn_schema.py), checked with the
grammar matcher the transformers backend decodes under: what the env accepts, the schema accepts,
and what the schema refuses the env would reject."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envs.env import OmniVideoEnv

xgr = pytest.importorskip("xgrammar")


@pytest.fixture(scope="module")
def compiler():
    from transformers import AutoTokenizer

    from omniagent.tiny_agent import shipped_agent_dir

    tok = AutoTokenizer.from_pretrained(shipped_agent_dir())
    return xgr.GrammarCompiler(xgr.TokenizerInfo.from_huggingface(tok, vocab_size=len(tok)))


def reset(video_path: Path, task_type: str, answer: object, choices: list[str] | None = None) -> dict:
    env = OmniVideoEnv()
    _, info = env.reset(
        options={
            "media": str(video_path),
            "question": "q?",
            "task_type": task_type,
            "choices": choices,
            "answer": answer,
            "max_turns": 4,
        }  # fmt: skip
    )
    env.close()
    return info


def accepts(compiler, schema: dict, turn: dict) -> bool:
    grammar = compiler.compile_json_schema(json.dumps(schema), any_whitespace=False, separators=(", ", ": "))
    matcher = xgr.GrammarMatcher(grammar)
    return matcher.accept_string(json.dumps(turn)) and matcher.is_completed()


def turn(action: dict) -> dict:
    return {"observation": "none", "thought": "look", "action": action}


LOOK = {"type": "get_frames", "start": 1.5, "end": 4, "num": 3}


@pytest.mark.parametrize(
    ("task_type", "answer", "choices", "good", "bad"),
    [
        ("mcq", "B", ["red", "green", "blue"], "C", ["D", "10", [[1, 2]]]),
        ("num", 3, None, 3.5, ["3", "B", [[1, 2]]]),
        ("tr", [[1, 2]], None, [[1.5, 2.0], [3, 4]], [[], [[1, 2, 3]], "B", 2.0, [[1, 25]]]),
        ("ff", "fish", None, "fish", ["", 3]),
    ],
)
def test_schema_takes_each_task_types_answer_and_refuses_other_forms(
    compiler, video_path, task_type, answer, choices, good, bad
) -> None:
    info = reset(video_path, task_type, answer, choices)
    schema = info["turn_schema"]
    assert accepts(compiler, schema, turn({"type": "answer", "content": good}))
    assert accepts(compiler, schema, turn(LOOK))
    for content in bad:
        assert not accepts(compiler, schema, turn({"type": "answer", "content": content})), content
    final = info["final_turn_schema"]
    assert accepts(compiler, final, turn({"type": "answer", "content": good}))
    assert not accepts(compiler, final, turn(LOOK))


def test_schema_holds_times_to_the_file_and_num_to_the_cap(compiler, video_path) -> None:
    schema = reset(video_path, "num", 3)["turn_schema"]  # a 20 s file; max_frames defaults to 32
    for action in (
        {"type": "get_audio", "start": 0, "end": 20},
        {"type": "get_clip", "start": 19.5, "end": 20.0},
        {"type": "get_frames", "start": 0, "end": 20, "num": 32},
    ):
        assert accepts(compiler, schema, turn(action)), action
    for action in (
        {"type": "get_audio", "start": 0, "end": 20.5},
        {"type": "get_audio", "start": 20, "end": 20},
        {"type": "get_frames", "start": -1, "end": 2, "num": 2},
        {"type": "get_frames", "start": 0, "end": 2, "num": 33},
        {"type": "get_frames", "start": 0, "end": 2, "num": 0},
        {"type": "get_frames", "start": 0, "end": 2, "num": 2.5},
        {"type": "get_frames", "start": 0, "end": 2},
        {"type": "get_frames", "start": 0, "end": 2, "num": 2, "extra": 1},
        {"type": "zoom", "start": 0, "end": 2},
    ):
        assert not accepts(compiler, schema, turn(action)), action
    assert not accepts(compiler, schema, {"thought": "t", "observation": "o", "action": LOOK})  # key order
    assert not accepts(compiler, schema, {"observation": "o", "action": LOOK})


def test_schema_offers_only_the_actions_the_media_has(compiler, audio_path, silent_video_path) -> None:
    audio = reset(audio_path, "num", 3)["turn_schema"]
    assert accepts(compiler, audio, turn({"type": "get_audio", "start": 0, "end": 2}))
    assert not accepts(compiler, audio, turn(LOOK))
    silent = reset(silent_video_path, "num", 3)["turn_schema"]
    assert accepts(compiler, silent, turn(LOOK))
    assert not accepts(compiler, silent, turn({"type": "get_audio", "start": 0, "end": 2}))


def test_a_free_form_answer_is_capped_alike_by_the_schema_and_the_env(compiler, video_path) -> None:
    """``max_answer_chars``: the schema refuses one character more, so a constrained decoder must close
    the string there (a small model otherwise ran to its token limit inside it), and the environment
    rejects the same answer, naming the cap, when a free decoder writes it."""
    from envs.scoring import get_scorer

    options = {
        "media": str(video_path),
        "question": "q?",
        "task_type": "ff",
        "answer": "fish",
        "max_turns": 4,
    }
    env = OmniVideoEnv(limits={"max_answer_chars": 8})
    try:
        _, info = env.reset(options=options)
        for schema in (info["turn_schema"], info["final_turn_schema"]):
            assert accepts(compiler, schema, turn({"type": "answer", "content": "a" * 8}))
            assert not accepts(compiler, schema, turn({"type": "answer", "content": "a" * 9}))
        _, reward, terminated, _, step = env.step(json.dumps(turn({"type": "answer", "content": "a" * 9})))
        assert (terminated, reward, step["error"]) == (False, 0.0, "answer_invalid")
        assert "9 characters long; give at most 8" in step["error_message"]
        _, _, terminated, _, step = env.step(json.dumps(turn({"type": "answer", "content": "fish"})))
        assert terminated and step["answer"] == "fish"
    finally:
        env.close()
    # uncapped scorers (the SFT filters' re-scoring) and the default limit accept a long answer
    assert get_scorer("ff").parse("word " * 300) == "word " * 300
    schema = reset(video_path, "ff", "fish")["turn_schema"]
    assert accepts(compiler, schema, turn({"type": "answer", "content": "a" * 900}))
