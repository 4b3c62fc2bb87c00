"""The answer action's SFT loss weight (rl/sft/weights.py): which tokens weigh more, the dataset's ``loss_weight``,
the weighted loss, the local trainer, and verl's refusal."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rl.sft.weights import answer_action_start, check_weight, reply_weights, token_weights

ANSWER = json.dumps(
    {"observation": "red 0-17", "thought": "digit 9 at 9: 9.", "action": {"type": "answer", "content": "9"}}
)
LOOK = json.dumps(
    {
        "observation": "none",
        "thought": "look.",
        "action": {"type": "get_frames", "start": 1, "end": 9, "num": 2},
    }
)


def test_the_action_key_of_an_answer_turn_is_found() -> None:
    at = answer_action_start(ANSWER)
    assert at is not None and ANSWER[at:] == '"action": {"type": "answer", "content": "9"}}'
    assert answer_action_start(LOOK) is None  # another action
    assert answer_action_start("not json") is None and answer_action_start('["action"]') is None
    tricky = json.dumps(
        {"observation": 'a "action": b', "thought": "t", "action": {"type": "answer", "content": "x"}}
    )
    assert tricky[answer_action_start(tricky) :].startswith(
        '"action": {"type": "answer"'
    )  # not the escaped one


def test_token_weights_cover_every_token_that_reaches_the_action() -> None:
    offsets = [(0, 4), (4, 9), (9, 12), (12, 20)]
    assert token_weights(offsets, 10, 3.0) == [1.0, 1.0, 3.0, 3.0]  # (9, 12) straddles the start
    assert token_weights(offsets, None, 3.0) == [1.0] * 4
    for bad in (0, -1, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="positive finite"):
            check_weight(bad)


def test_reply_weights_find_the_reply_after_a_reasoning_block() -> None:
    from omniagent.tiny_model import build_tiny_thinker

    tok = build_tiny_thinker(seed=0)[1].tokenizer
    text = "<think>the action is key</think>" + ANSWER + "<|im_end|>\n"
    enc = tok(text, add_special_tokens=False, return_offsets_mapping=True)
    weights, ids = reply_weights(enc["offset_mapping"], text, ANSWER, 2.0), enc["input_ids"]
    heavy = tok.decode([t for t, w in zip(ids, weights, strict=True) if w == 2.0])
    assert heavy.lstrip(" ,").startswith('"action"') and heavy.endswith("<|im_end|>\n")
    with pytest.raises(ValueError, match="not part of the tokenized target"):
        reply_weights([(0, 4)], "something else", ANSWER, 2.0)


def _weighted_dataset(parquet: Path, tiny_dir: Path, weight: float) -> Any:
    from transformers import AutoTokenizer

    from rl.sft.dataset import OmniTurnSFTDataset

    tok = AutoTokenizer.from_pretrained(tiny_dir)
    return OmniTurnSFTDataset(str(parquet), tok, {"omni": {"answer_weight": weight}}, processor=None)


@pytest.mark.slow
def test_items_weigh_the_answer_action_only(parquet: Path, tiny_dir: Path, dataset: Any) -> None:
    import torch

    weighted = _weighted_dataset(parquet, tiny_dir, 5.0)
    tok, answered = weighted.tokenizer, 0
    for i in range(len(weighted)):
        item, plain = weighted[i], dataset[i]
        assert "loss_weight" not in plain  # weight 1: the items are as before
        assert torch.equal(item["input_ids"], plain["input_ids"]) and torch.equal(
            item["loss_mask"], plain["loss_mask"]
        )
        w, mask = item["loss_weight"], item["loss_mask"]
        assert torch.equal(w > 0, mask.bool())  # nothing outside the target weighs anything
        heavy = (w == 5.0).nonzero().flatten()
        target = weighted.messages(i)[-1]["content"][0]["text"]
        if json.loads(target)["action"]["type"] != "answer":
            assert len(heavy) == 0
            continue
        answered += 1
        assert tok.decode(item["input_ids"][heavy]).lstrip(" ,").startswith('"action"')
        assert tok.decode(item["input_ids"][heavy]).endswith("}}<|im_end|>")
        assert heavy.tolist() == list(range(heavy[0], heavy[-1] + 1))  # the turn's last tokens
    assert answered >= 2
    with pytest.raises(ValueError, match="positive finite"):  # 0 is refused, not read as the default
        _weighted_dataset(parquet, tiny_dir, 0)


@pytest.mark.slow
def test_the_weighted_loss_is_the_weighted_mean(parquet: Path, tiny_dir: Path) -> None:
    import torch

    from omniagent.tiny_model import load_tiny_thinker
    from rl.sft.step import collate, sft_loss, token_log_probs

    data = _weighted_dataset(parquet, tiny_dir, 4.0)
    last = len(data) - 1  # an answer turn
    batch = collate([data[0], data[last]], data.pad_id)
    model, _ = load_tiny_thinker(tiny_dir)
    with torch.no_grad():
        loss, n = sft_loss(model, batch)
        lp = token_log_probs(model, batch)
        unweighted, _ = sft_loss(model, {k: v for k, v in batch.items() if k != "loss_weight"})
    w = torch.roll(batch["loss_weight"], -1, dims=1)
    w[:, -1] = 0
    assert n == int(batch["loss_mask"].sum())
    assert float(loss) == pytest.approx(float(-(lp * w).sum() / w.sum()), rel=1e-5)
    assert abs(float(loss) - float(unweighted)) > 1e-4  # the weight changes the loss
    with pytest.raises(ValueError, match="some items carry loss_weight"):
        collate([data[0], {k: v for k, v in data[1].items() if k != "loss_weight"}], data.pad_id)


@pytest.mark.slow
def test_local_sft_trains_with_the_weight_and_verl_refuses_it(
    parquet: Path, tiny_dir: Path, tmp_path: Path
) -> None:
    pytest.importorskip("verl")
    from omegaconf import OmegaConf

    from rl.train_sft import compose, launch, refuse_verl_gaps

    def run(weight: float, out: str) -> list[float]:
        cfg = compose(["+exp=tiny", f"model.path={tiny_dir}", f"data.train_files={parquet}", "omni_sft.local.steps=2",
                       "omni_sft.local.batch_size=7", f"omni_sft.run_dir={tmp_path / out}",
                       f"data.omni.answer_weight={weight}"])  # fmt: skip
        return launch(cfg), cfg

    (weighted, cfg), (plain, _) = run(3.0, "w"), run(1.0, "p")
    assert len(weighted) == 2 and weighted[1] < weighted[0]
    assert (
        abs(weighted[0] - plain[0]) > 1e-4
    )  # every turn in the batch, two of them answers: the weight counts
    with pytest.raises(SystemExit, match="answer_weight=3.0: verl's SFT loss reads only the 0/1 loss mask"):
        refuse_verl_gaps(cfg)
    refuse_verl_gaps(OmegaConf.merge(cfg, {"data": {"omni": {"answer_weight": 1.0}}}))  # the default passes
