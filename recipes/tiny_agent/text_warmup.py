"""Short-context text warm-up before agentic SFT: each teacher turn with only its question and its
latest message, no system prompt, no older history and no media.

Why: measured on the tiny agent (README, "The tiny agent"), the per-turn SFT samples are ~1.6 K
tokens of context for ~130 target tokens, and after 1200 batch-1 steps the agent still could not
write a number (1.9 nats per digit on the teacher's turns, ``recipes/tiny_agent/probes/media.py``; 0.58 for the
event-phase agent: this warm-up, then 2500 full-context steps). A short sample is ~300 tokens, so the
same CPU time trains on several times more targets, in batches; number copying (question time ->
action, percept header -> Observation) is learned there first, and the full-context SFT that
follows trains the same turns as the model sees them. The prompt uses the chat format of the model's template (``<|im_start|>role ...``).

``observation_loss=False``: the teacher's Observation is given, not trained. A text-only sample has
no media, so its Observation cannot be predicted from it; trained anyway, it teaches the agent to
write what a percept usually shows (the held-out Observations of the per-frame agent repeat training
events that were not served). Without it, the warm-up trains the Thought and Action on the
Observation they follow: carrying a seen value into the plan and the answer, which the full-context
SFT, where the Observation must come from the media, then builds on.
"""

from __future__ import annotations

import json
import random
import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from envs.messages import message_text
from envs.prompts import option_lines
from envs.scoring import letters
from rl.sft.local import lr_at
from rl.sft.step import optimizer_step
from rl.sft.weights import reply_weights

TextTurn = tuple[list[int], list[int], list[float]]  # prompt ids, target ids, the target's loss weights

OBSERVATION_PREFIX = '{"observation": '  # a reply in the turn schema's key order opens with it
THOUGHT_KEY = '"thought":'


def observation_end(reply: str) -> int:
    """Characters of ``reply`` up to its Thought when it opens with an Observation (the schema's key
    order), else 0: the part a text-only sample gives rather than trains."""
    if not reply.startswith(OBSERVATION_PREFIX):
        return 0
    try:
        end = json.JSONDecoder().raw_decode(reply, len(OBSERVATION_PREFIX))[1]
    except json.JSONDecodeError:
        return 0
    rest = reply[end:]
    gap = len(rest) - len(rest.lstrip(", "))
    return end + gap if rest[gap:].startswith(THOUGHT_KEY) else 0


def split_target(
    tokenizer: Any, reply: str, observation_loss: bool, answer_weight: float = 1.0
) -> tuple[list[int], list[int], list[float]]:
    """The reply's token ids as (given, trained, the trained tokens' loss weights): given is its Observation when
    that is not trained; an answer action's tokens weigh ``answer_weight`` (:mod:`rl.sft.weights`)."""
    text = reply + "<|im_end|>"
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    ids, cut = list(enc["input_ids"]), 0
    if not observation_loss and (end := observation_end(reply)):
        cut = sum(1 for _, stop in enc["offset_mapping"] if stop <= end)
    weights = reply_weights(enc["offset_mapping"], text, reply, answer_weight)
    return ids[:cut], ids[cut:], weights[cut:]


_OPTION_LINE = re.compile(r"^([A-Z])\. (.*)$")
_ANSWER_LETTER = re.compile(r'"content": "([A-Z])"')


def reorder_options(task: str, reply: str, rng: random.Random) -> tuple[str, str] | None:
    """``task`` with its options (``envs.prompts.question_prompt``'s ``Options:`` lines) in a random
    order and ``reply`` with the chosen letter moved along, in its Thought (``'7 is option C.'``,
    ``Answer: "C"``) and its answer; None unless the reply answers by naming an option that way.

    Why: a few dozen multiple-choice answer turns, each with one fixed order, let the agent learn
    which letter is usually right rather than where the value it saw stands among the options."""
    lines = task.split("\n")
    if "Options:" not in lines or not (found := _ANSWER_LETTER.search(reply)):
        return None
    start = end = lines.index("Options:") + 1
    while end < len(lines) and _OPTION_LINE.match(lines[end]):
        end += 1
    texts = [_OPTION_LINE.match(line).group(2) for line in lines[start:end]]  # type: ignore[union-attr]
    old, abc = found.group(1), letters(len(texts))
    if old not in abc or f"is option {old}." not in reply:
        return None
    order = rng.sample(range(len(texts)), len(texts))
    new = abc[order.index(abc.index(old))]
    lines[start:end] = option_lines([texts[j] for j in order])
    for before, after in ((f"is option {old}.", f"is option {new}."), (f'Answer: \\"{old}\\"', f'Answer: \\"{new}\\"'),
                          (found.group(0), f'"content": "{new}"')):  # fmt: skip
        reply = reply.replace(before, after)
    return "\n".join(lines), reply


def short_turns(
    parquet_files: Sequence[str | Path],
    tokenizer: Any,
    observation_loss: bool = True,
    option_shuffles: int = 0,
    seed: int = 0,
    answer_weight: float = 1.0,
) -> list[TextTurn]:
    """(prompt ids, target ids, target weights) per exported SFT row: the task message (question, options) and the
    turn's latest user message (percept header or error, turn counter) as one user message, then
    the teacher's reply closed by ``<|im_end|>``; without ``observation_loss`` the reply's Observation
    ends the prompt and the target starts at its Thought. Each answer turn that names an option
    comes ``option_shuffles`` more times with the options reordered (:func:`reorder_options`). An answer action's
    target tokens weigh ``answer_weight``, the rest 1."""
    import pyarrow.parquet as pq

    rng = random.Random(seed)
    out = []
    for path in parquet_files:
        for raw in pq.read_table(str(path), columns=["messages"]).column("messages").to_pylist():
            messages = json.loads(raw)
            if len(messages) < 3 or messages[-1].get("role") != "assistant":
                raise ValueError(f"{path}: an SFT row must end with the assistant's turn")
            task = next(message_text(m) for m in messages if m["role"] == "user")
            latest, reply = message_text(messages[-2]), message_text(messages[-1])
            moved = [reorder_options(task, reply, rng) for _ in range(option_shuffles)]
            variants = [(task, reply), *(m for m in moved if m)]  # None for a turn naming no option
            for task_text, reply_text in variants:
                prompt = f"<|im_start|>user\n{task_text}\n{latest}<|im_end|>\n<|im_start|>assistant\n"
                ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
                given, target, weights = split_target(tokenizer, reply_text, observation_loss, answer_weight)
                out.append((list(ids) + given, target, weights))
    return out


def collate_text(samples: Sequence[TextTurn], pad_id: int) -> dict[str, torch.Tensor]:
    """Right-padded batch with the loss mask on the target tokens (the shape ``optimizer_step`` takes), and
    ``loss_weight`` when any target weight is not 1."""
    width = max(len(p) + len(t) for p, t, _ in samples)
    ids = torch.full((len(samples), width), pad_id, dtype=torch.long)
    attention = torch.zeros_like(ids)
    loss_mask = torch.zeros_like(ids)
    loss_weight = torch.zeros((len(samples), width), dtype=torch.float32)
    for row, (prompt, target, weights) in enumerate(samples):
        seq = prompt + target
        ids[row, : len(seq)] = torch.tensor(seq)
        attention[row, : len(seq)] = 1
        loss_mask[row, len(prompt) : len(seq)] = 1
        loss_weight[row, len(prompt) : len(seq)] = torch.tensor(weights, dtype=torch.float32)
    batch = {"input_ids": ids, "attention_mask": attention, "loss_mask": loss_mask}
    if bool((loss_weight[loss_mask.bool()] != 1.0).any()):
        batch["loss_weight"] = loss_weight
    return batch


def run_text_warmup(
    model: torch.nn.Module,
    tokenizer: Any,
    parquet_files: Sequence[str | Path],
    steps: int,
    batch_size: int,
    lr: float,
    seed: int,
    clip: float = 1.0,
    log_every: int = 0,
    observation_loss: bool = True,
    option_shuffles: int = 0,
    answer_weight: float = 1.0,
    state: Path | None = None,
    save_every: int = 0,
    lr_warmup: int = 0,
    cosine: bool = False,
) -> list[float]:
    """``steps`` AdamW updates on seeded batches of short turns (its own optimizer; ``lr`` constant, or reached by a
    linear warm-up over ``lr_warmup`` steps and, with ``cosine``, decayed to a tenth by the last step:
    :func:`rl.sft.local.lr_at`); returns the loss before each step. With ``state`` (a file) the warm-up saves itself
    there every ``save_every`` steps and at its end (weights, optimizer, batch stream, losses, settings), and a warm-up
    that finds the file goes on from it: a run stopped and started again takes the same steps as one that ran through.
    A state saved with other settings (batch, rate, schedule, seed, loss options; the last step too under a cosine
    decay) is refused, not mixed into this run."""
    samples = short_turns(parquet_files, tokenizer, observation_loss, option_shuffles, seed, answer_weight)
    if not samples:
        raise ValueError("text warm-up: no SFT rows")
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    rng = random.Random(seed)
    losses: list[float] = []
    settings = {"batch_size": batch_size, "lr": lr, "seed": seed, "clip": clip, "lr_warmup": lr_warmup,
                "cosine": cosine, "observation_loss": observation_loss, "option_shuffles": option_shuffles,
                "answer_weight": answer_weight, **({"steps": steps} if cosine else {})}  # fmt: skip
    if state is not None and state.is_file():
        losses = _resume(state, model, opt, rng, settings)
    model.train()
    start = time.monotonic()
    for step in range(len(losses), steps):
        for group in opt.param_groups:  # a function of the step: a resumed warm-up needs no scheduler state
            group["lr"] = lr_at(step, steps, lr, lr_warmup, cosine)
        batch = collate_text(rng.sample(samples, min(batch_size, len(samples))), pad)
        losses.append(optimizer_step(model, opt, params, batch, clip))
        if state is not None and ((save_every and (step + 1) % save_every == 0) or step + 1 == steps):
            _save_state(state, model, opt, rng, losses, settings)
        if log_every and (step + 1) % log_every == 0:
            line = {
                "warmup_step": step + 1,
                "loss": round(losses[-1], 4),
                "s": round(time.monotonic() - start),
            }
            print(json.dumps(line), flush=True)
    return losses


def _save_state(path: Path, model: torch.nn.Module, opt: torch.optim.Optimizer, rng: random.Random,
                losses: list[float], settings: dict[str, Any]) -> None:  # fmt: skip
    """The warm-up's state and the settings it ran with, written whole or not at all (a temporary file renamed over
    the old one)."""
    tmp = path.with_name(path.name + ".tmp")
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "rng": rng.getstate(),
                "torch_rng": torch.get_rng_state(), "losses": losses, "settings": settings}, tmp)  # fmt: skip
    tmp.replace(path)


def _resume(
    path: Path,
    model: torch.nn.Module,
    opt: torch.optim.Optimizer,
    rng: random.Random,
    settings: dict[str, Any],
) -> list[float]:
    """Load the state :func:`_save_state` wrote into ``model``, ``opt`` and ``rng``; the losses so far. A state saved
    with other ``settings`` is refused (one saved before states held their settings is taken as it is)."""
    saved = torch.load(path, map_location="cpu", weights_only=False)
    was = saved.get("settings", settings)
    changed = sorted(k for k in set(was) | set(settings) if was.get(k) != settings.get(k))
    if changed:
        raise ValueError(
            f"{path}: saved by a warm-up with other settings "
            + ", ".join(f"{k} {was.get(k)!r} (now {settings.get(k)!r})" for k in changed)
            + "; remove it to start afresh"
        )
    model.load_state_dict(saved["model"])
    opt.load_state_dict(saved["opt"])
    rng.setstate(saved["rng"])
    torch.set_rng_state(saved["torch_rng"])
    return list(saved["losses"])


def sft_warmup(
    model: torch.nn.Module,
    tokenizer: Any,
    train_files: Sequence[str | Path],
    seed: int,
    lr: float,
    clip: float,
    log_every: int,
    settings: dict[str, Any],
) -> list[float] | None:
    """The SFT loop's warm-up hook (``omni_sft.local.warmup`` in ``recipes/tiny_agent/conf/sft/exp/tiny_agent.yaml``):
    :func:`run_text_warmup` with ``omni_sft.local.text_warmup``'s settings; nothing when its ``steps`` is 0."""
    steps = int(settings.get("steps") or 0)
    if steps <= 0:
        return None
    return run_text_warmup(
        model, tokenizer, list(train_files), steps, int(settings.get("batch_size") or 16),
        float(settings.get("lr") or lr), seed, clip, log_every,
        bool(settings.get("observation_loss", True)), int(settings.get("option_shuffles") or 0),
        1.0 if settings.get("answer_weight") is None else float(settings["answer_weight"]),
    )  # fmt: skip
