"""The short-context text warm-up (recipes/tiny_agent/text_warmup.py): what a sample holds, and that it trains."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pandas as pd
import pytest

from envs.media import MediaInfo
from envs.prompts import question_prompt
from recipes.tiny_agent.text_warmup import (
    collate_text,
    observation_end,
    reorder_options,
    run_text_warmup,
    short_turns,
)

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
    [(prompt, target, weights)] = short_turns([_parquet(tmp_path)], tok)
    assert weights == [1.0] * len(target)  # answer_weight 1: the plain loss
    text = tok.decode(prompt)
    assert TASK in text and LATEST in text
    assert "long video" not in text and '"observation": "none"' not in text  # no system prompt, no history
    assert text.startswith("<|im_start|>user\n") and text.endswith("<|im_start|>assistant\n")
    assert tok.decode(target) == TARGET + "<|im_end|>"
    batch = collate_text([(prompt, target, weights), (prompt[:5], target[:3], weights[:3])], pad_id=0)
    assert "loss_weight" not in batch
    assert batch["input_ids"].shape == (2, len(prompt) + len(target))
    assert batch["loss_mask"][0].sum() == len(target) and batch["loss_mask"][1].sum() == 3
    assert batch["loss_mask"][0, : len(prompt)].sum() == 0
    assert batch["attention_mask"][1].sum() == 8


def test_without_observation_loss_the_observation_is_given_and_the_thought_trained(
    tmp_path: Path, tiny: tuple
) -> None:
    tok = tiny[1].tokenizer
    [(prompt, target, _)] = short_turns([_parquet(tmp_path)], tok)
    [(given, trained, weights)] = short_turns([_parquet(tmp_path)], tok, observation_loss=False)
    assert given + trained == prompt + target  # the same tokens; only the loss mask moves
    assert tok.decode(given).endswith('{"observation": "Frames 56.40s-57.40s (3): the digit 7.",')
    assert tok.decode(trained).strip() == TARGET[TARGET.index('"thought"') :] + "<|im_end|>"
    assert collate_text([(given, trained, weights)], pad_id=0)["loss_mask"].sum() == len(trained)


def test_answer_weight_weighs_the_answer_action_and_nothing_else(tmp_path: Path, tiny: tuple) -> None:
    tok = tiny[1].tokenizer
    [(given, trained, weights)] = short_turns(
        [_parquet(tmp_path)], tok, observation_loss=False, answer_weight=4.0
    )
    heavy = [t for t, w in zip(trained, weights, strict=True) if w == 4.0]
    light = [t for t, w in zip(trained, weights, strict=True) if w == 1.0]
    assert len(heavy) + len(light) == len(trained)
    assert tok.decode(heavy).strip().startswith('"action"') and tok.decode(heavy).endswith("}}<|im_end|>")
    assert tok.decode(light).strip() == '"thought": "Answer: C.",'
    batch = collate_text([(given, trained, weights)], pad_id=0)
    assert batch["loss_weight"].sum() == 4.0 * len(heavy) + len(light)
    assert batch["loss_weight"][0, : len(given)].sum() == 0


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


def test_the_learning_rate_rises_and_decays_by_the_step(
    tmp_path: Path, tiny: tuple, warmup_rates: list[float]
) -> None:
    import copy

    from rl.sft.local import lr_at

    model, processor = tiny
    seen = warmup_rates

    def rates(**kw: object) -> list[float]:
        seen.clear()
        m = copy.deepcopy(model)
        for p in m.parameters():
            p.requires_grad_(True)
        run_text_warmup(m, processor.tokenizer, [_parquet(tmp_path)], 6, 2, 1e-2, seed=0, **kw)
        return list(seen)

    assert rates() == [1e-2] * 6  # the recipe's constant rate
    rising = rates(lr_warmup=2, cosine=True)
    assert rising == [lr_at(s, 6, 1e-2, 2, True) for s in range(6)]
    assert (
        rising[0] == pytest.approx(5e-3)
        and rising[2] == pytest.approx(1e-2)
        and rising[5] < rising[4] < rising[2]
    )
    assert rates(lr_warmup=3) == [lr_at(s, 6, 1e-2, 3, False) for s in range(6)][:3] + [1e-2] * 3


def test_a_stopped_warmup_goes_on_from_its_state_as_if_it_ran_through(tmp_path: Path, tiny: tuple) -> None:
    import copy

    import torch

    model, processor = tiny
    data = tmp_path / "five.parquet"  # five different rows, so the batch stream matters
    row = json.loads(pd.read_parquet(_parquet(tmp_path))["messages"][0])
    rows = []
    for digit, letter in (("7", "C"), ("4", "A"), ("1", "D"), ("9", "B"), ("3", "A")):
        reply = (
            TARGET.replace("digit 7", f"digit {digit}")
            .replace('"C"', f'"{letter}"')
            .replace(": C.", f": {letter}.")
        )
        rows.append(
            json.dumps([*row[:-1], {"role": "assistant", "content": [{"type": "text", "text": reply}]}])
        )
    pd.DataFrame({"messages": rows}).to_parquet(data)
    data = [data]
    state = tmp_path / "warmup_state.pt"

    def run(steps: int, **kw: object) -> tuple[torch.nn.Module, list[float]]:
        m = copy.deepcopy(model)  # a new process builds the same model again
        for p in m.parameters():
            p.requires_grad_(True)
        torch.manual_seed(0)
        return m, run_text_warmup(m, processor.tokenizer, data, steps, 2, 3e-3, seed=1, **kw)

    through, full = run(10)
    _, part = run(4, state=state, save_every=3)  # stopped after step 4: saved at 3 and at its end
    assert torch.load(state, weights_only=False)["losses"] == part
    again, resumed = run(10, state=state, save_every=3)
    assert resumed[:4] == part and resumed == pytest.approx(full, rel=1e-5)
    for a, b in zip(again.state_dict().values(), through.state_dict().values(), strict=True):
        assert torch.allclose(a, b, atol=1e-6)
    _, done = run(10, state=state)  # a finished warm-up found again takes no step
    assert done == resumed
    # a state saved with other settings is refused, not mixed in; the last step counts only under a cosine decay
    with pytest.raises(ValueError, match=r"lr_warmup 0 \(now 2\)"):
        run(10, state=state, lr_warmup=2)
    with pytest.raises(ValueError, match=r"batch_size 2 \(now 3\)"):
        run_text_warmup(copy.deepcopy(model), processor.tokenizer, data, 10, 3, 3e-3, seed=1, state=state)
    assert run(12, state=state)[1][:10] == resumed  # a longer constant-rate run goes on from it
    cosine = tmp_path / "cosine.pt"
    run(4, state=cosine, cosine=True)
    with pytest.raises(ValueError, match=r"steps 4 \(now 6\)"):
        run(6, state=cosine, cosine=True)
    saved = torch.load(state, weights_only=False)
    del saved["settings"]  # a state from before states held their settings is taken as it is
    torch.save(saved, state)
    assert run(14, state=state, lr_warmup=2)[1][:12] == saved["losses"]


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


CHOICES = ["4", "8", "7", "1"]
OPTION_TASK = (
    question_prompt(
        "Which digit is shown on screen at about 57 s?",
        CHOICES,
        MediaInfo(path="v.mp4", duration=60.0, has_video=True, has_audio=True, fps=5.0, width=160, height=90),
    )
    + "\n[Turn 1 of 13; 12 more after this one.]"
)
OPTION_REPLY = json.dumps(
    {
        "observation": "Frame 57.00s: blue background, the digit 7.",
        "thought": 'I saw the digit 7 at 57.00s. 7 is option C. Answer: "C".',
        "action": {"type": "answer", "content": "C"},
    }
)


def _options(task: str) -> dict[str, str]:
    return dict(line.split(". ", 1) for line in task.split("\n") if line[:1].isupper() and line[1:3] == ". ")


def test_reordered_options_move_the_answer_letter_with_the_value() -> None:
    rng, letters_seen = random.Random(0), set()
    for _ in range(40):
        task, reply = reorder_options(OPTION_TASK, OPTION_REPLY, rng)
        options, parsed = _options(task), json.loads(reply)
        letter = parsed["action"]["content"]
        letters_seen.add(letter)
        assert sorted(options.values()) == sorted(CHOICES) and list(options) == ["A", "B", "C", "D"]
        assert options[letter] == "7"  # the value the agent saw stays the answer
        assert parsed["thought"] == f'I saw the digit 7 at 57.00s. 7 is option {letter}. Answer: "{letter}".'
        assert parsed["observation"] == "Frame 57.00s: blue background, the digit 7."
        assert task.split("Options:")[0] == OPTION_TASK.split("Options:")[0]
        assert task.endswith("[Turn 1 of 13; 12 more after this one.]")
    assert letters_seen == {"A", "B", "C", "D"}


def test_only_answers_that_name_an_option_are_reordered(tmp_path: Path, tiny: tuple) -> None:
    rng = random.Random(0)
    assert reorder_options(TASK, TARGET, rng) is None  # no options in the task
    assert reorder_options(OPTION_TASK, TARGET, rng) is None  # "Answer: C." names no option
    assert reorder_options(OPTION_TASK, OPTION_REPLY.replace("is option C", "is option E"), rng) is None
    path = tmp_path / "rows.parquet"
    rows = [[{"role": "user", "content": OPTION_TASK}, {"role": "assistant", "content": '{"observation": "none"}'},
             {"role": "user", "content": LATEST}, {"role": "assistant", "content": reply}]
            for reply in (OPTION_REPLY, TARGET)]  # fmt: skip
    pd.DataFrame({"messages": [json.dumps(r) for r in rows]}).to_parquet(path)
    tok = tiny[1].tokenizer
    assert len(short_turns([path], tok)) == 2
    samples = short_turns([path], tok, option_shuffles=3, seed=1)
    assert len(samples) == 5  # the option answer 1 + 3 times, the other once
    assert len({tuple(prompt) for prompt, _, _ in samples[:4]}) > 1
    assert samples[4] == short_turns([path], tok)[1]
