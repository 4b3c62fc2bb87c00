"""The short-context text warm-up (rl/text_warmup.py): what a sample holds, and that it trains."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from rl.text_warmup import collate_text, observation_end, run_text_warmup, short_turns

SYSTEM = "You answer a question about a long video. " * 20
TASK = "Media: duration 60.00 s.\nQuestion: Which digit is shown on screen at about 57 s?"
LATEST = "Clip 56.50s-57.50s, 3 frames at [56.40s, 57.00s, 57.40s], with its audio:"
TARGET = '{"observation": "Frames 56.40s-57.40s (3): the digit 7.", "thought": "Answer: C.", "action": {"type": "answer", "content": "C"}}'


def _parquet(tmp_path: Path) -> Path:
    rows = [
        [
            {"role": "system", "content": [{"type": "text", "text": SYSTEM}]},
            {"role": "user", "content": [{"type": "text", "text": TASK}]},
            {"role": "assistant", "content": [{"type": "text", "text": '{"observation": "none"}'}]},
            {
                "role": "user",
                "content": [{"type": "text", "text": LATEST}, {"type": "video", "video": "x.mp4"}],
            },
            {"role": "assistant", "content": [{"type": "text", "text": TARGET}]},
        ]
    ]
    path = tmp_path / "train.parquet"
    pd.DataFrame({"messages": [json.dumps(r) for r in rows]}).to_parquet(path)
    return path


@pytest.fixture(scope="module")
def tiny() -> tuple:
    from omniagent.tiny_model import build_tiny_thinker

    return build_tiny_thinker(seed=0)


def test_a_short_turn_is_task_latest_message_and_target_only(tmp_path: Path, tiny: tuple) -> None:
    _, processor = tiny
    tok = processor.tokenizer
    [(prompt, target)] = short_turns([_parquet(tmp_path)], tok)
    text = tok.decode(prompt)
    assert TASK in text and LATEST in text
    assert "long video" not in text and '"observation": "none"' not in text  # no system prompt, no history
    assert text.startswith("<|im_start|>user\n") and text.endswith("<|im_start|>assistant\n")
    assert tok.decode(target) == TARGET + "<|im_end|>"
    batch = collate_text([(prompt, target), (prompt[:5], target[:3])], pad_id=0)
    assert batch["input_ids"].shape == (2, len(prompt) + len(target))
    assert batch["loss_mask"][0].sum() == len(target) and batch["loss_mask"][1].sum() == 3
    assert batch["loss_mask"][0, : len(prompt)].sum() == 0
    assert batch["attention_mask"][1].sum() == 8


def test_without_observation_loss_the_observation_is_given_and_the_thought_trained(
    tmp_path: Path, tiny: tuple
) -> None:
    tok = tiny[1].tokenizer
    [(prompt, target)] = short_turns([_parquet(tmp_path)], tok)
    [(given, trained)] = short_turns([_parquet(tmp_path)], tok, observation_loss=False)
    assert given + trained == prompt + target  # the same tokens; only the loss mask moves
    assert tok.decode(given).endswith('{"observation": "Frames 56.40s-57.40s (3): the digit 7.",')
    assert tok.decode(trained).strip() == TARGET[TARGET.index('"thought"') :] + "<|im_end|>"
    assert collate_text([(given, trained)], pad_id=0)["loss_mask"].sum() == len(trained)


@pytest.mark.parametrize(
    ("reply", "given"),
    [
        (TARGET, TARGET[: TARGET.index('"thought"')]),
        ('{"observation": "a \\"quoted\\", \\"thought\\": b", "thought": "t"}', None),
        ('{"thought": "t", "observation": "o"}', ""),  # another key order: all of it is trained
        ('{"observation": "unterminated', ""),
        ('{"observation": "o", "action": {}}', ""),  # no Thought follows
    ],
)
def test_observation_end_finds_where_the_thought_starts(reply: str, given: str | None) -> None:
    end = observation_end(reply)
    if given is None:  # an escaped quote or key inside the Observation does not end it
        assert reply[end:].startswith('"thought": "t"') and end > reply.index('\\"thought')
    else:
        assert reply[:end] == given


def test_warmup_lowers_the_target_loss(tmp_path: Path, tiny: tuple) -> None:
    import copy

    model, processor = tiny
    model = copy.deepcopy(model)
    for p in model.parameters():
        p.requires_grad_(True)
    losses = run_text_warmup(
        model, processor.tokenizer, [_parquet(tmp_path)], steps=8, batch_size=2, lr=3e-3, seed=0
    )
    assert len(losses) == 8 and losses[-1] < 0.8 * losses[0]


def test_a_row_without_an_assistant_turn_is_refused(tmp_path: Path, tiny: tuple) -> None:
    path = tmp_path / "bad.parquet"
    rows = [
        [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": "a"},
            {"role": "user", "content": "x"},
        ]
    ]
    pd.DataFrame({"messages": [json.dumps(r) for r in rows]}).to_parquet(path)
    with pytest.raises(ValueError, match="must end with the assistant"):
        short_turns([path], tiny[1].tokenizer)
