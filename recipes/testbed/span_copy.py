"""The search step with the teacher's Observation given: does the text warm-up teach the agent where to look next?

    python -m recipes.testbed.span_copy train --init runs/testbed/sft_s0/init \\
        --data runs/testbed/sft_s0/sft_data/train.parquet --seed 0 --out runs/testbed/span_copy/w96_s0
    python -m recipes.testbed.span_copy measure --model runs/testbed/span_copy/w96_s0 \\
        --probes runs/testbed/span_copy/fresh_teacher/sft_data/train.parquet --tasks runs/testbed/data/study_5307
    python -m recipes.testbed.span_copy analyse --arm w96=runs/testbed/span_copy/w96 \\
        --arm w480=runs/testbed/span_copy/w480 --seeds 0 1 2 3 4 --primary w480-w96

``train`` builds the untrained agent from ``--init``'s config and tokenizer with its weights drawn from ``--seed``,
and runs the recipe's text warm-up on it (:func:`recipes.tiny_agent.text_warmup.run_text_warmup`: each teacher turn
with its question and latest message, the teacher's Observation given, the Thought and action trained). It saves its
state every ``--save-every`` steps, and a run stopped and started again goes on from there (``--rope-theta`` sets
the text model's RoPE base). ``--keep-state`` keeps its last state beside the saved model, and a longer warm-up run
with ``--start-from`` that folder goes on from it. ``--batch-size``, ``--lr``, ``--lr-warmup`` (steps of a linear
rise) and ``--cosine`` (a decay to a tenth by the last step) change the recipe's settings (:data:`WARMUP`: 16 turns a
step, a constant 2e-3); they are recorded with the loss curve and must match the run gone on from.

``measure`` takes the teacher's second turns of ``--probes`` (SFT rows of teacher episodes on a fresh set) whose
question names a colour (``cue_digit_mcq``, ``cue_pitch_mcq``) and whose first turn looked at frames over at least
half the file. Each probe is the warm-up's own sample: the question, the latest message and the teacher's
Observation of that look. The model continues it greedily (up to ``--max-new`` tokens), and the turn it writes is
scored as :mod:`recipes.testbed.search_step` scores an episode's second turn: cue named, span holds (the Thought's
span contains the evidence), look meets (the action's span meets it). The teacher's own turn is scored the same way.

``analyse`` reads each seed's ``probe.json`` (arm folders ``<prefix>_s<seed>``) and gives each seed's rates with
intervals over videos, then the primary difference of two arms paired by seed: a t-interval over seeds (the seed
is the unit) and a two-level bootstrap (seeds, then videos), as :mod:`recipes.testbed.probe_analysis` computes them.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from envs.jsonl import read_jsonl, write_atomic
from envs.messages import message_text
from recipes.testbed.cli_args import labelled
from recipes.testbed.handover_run import overlaps
from recipes.testbed.probe_analysis import analyse_arguments, analyse_command
from recipes.testbed.search_step import (
    MEASURES,
    TEMPLATES,
    cue_named,
    looks_over_file,
    question_cue,
    rate,
    span_holds,
    span_match,
)

WARMUP = {
    "steps": 1200,
    "batch_size": 16,
    "lr": 2e-3,
    "lr_warmup": 0,  # steps of a linear warm-up of the learning rate (0: none)
    "cosine": False,  # decay the learning rate to a tenth by the last step
}  # the recipe's text warm-up (conf/sft/exp/testbed.yaml): constant 2e-3, 16 turns a step
# what train's options may change, each recorded with the loss curve
SETTINGS = ("batch_size", "lr", "lr_warmup", "cosine")


# --- probes -----------------------------------------------------------------------------------------------------


def parse_reply(text: str) -> tuple[str, dict[str, Any]]:
    """(Thought, action) of a turn reply; a reply that is not the turn's JSON gives ("", {})."""
    try:
        reply = json.loads(text)
    except json.JSONDecodeError:
        return "", {}
    if not isinstance(reply, dict):
        return "", {}
    action = reply.get("action")
    return str(reply.get("thought") or ""), action if isinstance(action, dict) else {}


def probe_of(row: dict[str, Any], task: dict[str, Any]) -> dict[str, Any] | None:
    """The probe of one SFT row: the second turn of a cue question whose first turn looked at frames over at least
    half the file, else None."""
    if row["turn"] != 2 or task.get("extra", {}).get("template") not in TEMPLATES:
        return None
    messages = json.loads(row["messages"])
    first = [m for m in messages[:-1] if m["role"] == "assistant"]
    if len(first) != 1:
        raise ValueError(f"{row['id']}: a second turn's context holds {len(first)} assistant turns")
    if not looks_over_file(parse_reply(message_text(first[0]))[1], float(task["duration"])):
        return None
    return {
        "id": row["id"], "task": task["id"], "video": Path(task["media"]).name,
        "template": task["extra"]["template"], "cue": question_cue(task), "evidence": task["evidence"],
        "duration": float(task["duration"]),
        "task_text": next(message_text(m) for m in messages if m["role"] == "user"),
        "latest": message_text(messages[-2]), "reply": message_text(messages[-1]),
    }  # fmt: skip


def load_probes(parquet: Path, tasks_dir: Path) -> list[dict[str, Any]]:
    """Every probe of ``parquet`` (teacher episodes' SFT rows) against the set's ``tasks.jsonl``."""
    import pyarrow.parquet as pq

    tasks = {str(t["id"]): t for t in read_jsonl(tasks_dir / "tasks.jsonl")}
    columns = ["id", "task_id", "turn", "messages"]
    probes = []
    for row in pq.read_table(str(parquet), columns=columns).to_pylist():
        if row["task_id"] not in tasks:
            raise ValueError(
                f"{parquet}: row {row['id']} answers {row['task_id']}, not a question of {tasks_dir}"
            )
        probe = probe_of(row, tasks[row["task_id"]])
        if probe is not None:
            probes.append(probe)
    return probes


def observation_of(reply: str) -> str:
    """The Observation a turn reply opens with ("" when it is not the turn's JSON)."""
    try:
        return str(json.loads(reply).get("observation") or "")
    except (json.JSONDecodeError, AttributeError):
        return ""


def second_turn_replies(parquet: Path) -> list[str]:
    """The target replies of an SFT parquet's second-turn rows (the teacher's search step)."""
    import pyarrow.parquet as pq

    rows = pq.read_table(str(parquet), columns=["turn", "messages"]).to_pylist()
    return [reply_of_row(row) for row in rows if row["turn"] == 2]


def training_observations(parquets: Sequence[Path]) -> set[str]:
    """Every second-turn Observation of the training rows: a probe whose Observation is among them was seen."""
    return {observation_of(reply) for path in parquets for reply in second_turn_replies(path)}


def reply_of_row(row: dict[str, Any]) -> str:
    """The text of an SFT row's target turn (its ``messages``' last)."""
    return message_text(json.loads(row["messages"])[-1])


def paired_rows(a: Path, b: Path) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """The rows (``id``, ``turn``, ``messages``) of two SFT parquets of the same teacher episodes written two ways,
    paired in order; a ValueError when they do not hold the same turns."""
    import pyarrow.parquet as pq

    x, y = (pq.read_table(str(p), columns=["id", "turn", "messages"]).to_pylist() for p in (a, b))
    if [r["id"] for r in x] != [r["id"] for r in y]:
        raise ValueError(f"{a} and {b} hold different turns")
    return list(zip(x, y, strict=True))


def observation_of_row(row: dict[str, Any]) -> str:
    """The Observation of an SFT row's target turn."""
    return observation_of(reply_of_row(row))


def score(thought: str, action: dict[str, Any], probe: dict[str, Any]) -> dict[str, int]:
    """The three measures of one written turn (the keys of :data:`recipes.testbed.search_step.MEASURES`)."""
    cue, evidence = probe["cue"], probe["evidence"]
    return {"cue": cue_named(thought, cue), "span": span_holds(thought, cue, evidence),
            "look": overlaps(action, evidence) or 0}  # fmt: skip


# --- the model ----------------------------------------------------------------------------------------------------


def load_agent(folder: Path) -> tuple[Any, Any]:
    from transformers import AutoProcessor, Qwen2_5OmniThinkerForConditionalGeneration

    processor = AutoProcessor.from_pretrained(folder)
    model = Qwen2_5OmniThinkerForConditionalGeneration.from_pretrained(folder).eval()
    return model, processor


def write_turn(model: Any, tokenizer: Any, probe: dict[str, Any], max_new: int) -> str:
    """The reply the model writes greedily after the probe's prompt and the teacher's Observation, which it is
    given (the warm-up's split, :func:`recipes.tiny_agent.text_warmup.split_target`)."""
    import torch

    from recipes.tiny_agent.text_warmup import split_target

    prompt = f"<|im_start|>user\n{probe['task_text']}\n{probe['latest']}<|im_end|>\n<|im_start|>assistant\n"
    given, _, _ = split_target(tokenizer, probe["reply"], observation_loss=False)
    if not given:
        raise ValueError(f"{probe['id']}: the teacher's reply does not open with an Observation")
    ids = list(tokenizer(prompt, add_special_tokens=False)["input_ids"]) + given
    end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    x = torch.tensor([ids])
    with torch.no_grad():
        out = model.generate(input_ids=x, attention_mask=torch.ones_like(x), max_new_tokens=max_new,
                             do_sample=False, eos_token_id=end, pad_token_id=end)  # fmt: skip
    new = out[0, len(ids) :].tolist()
    if end in new:
        new = new[: new.index(end)]
    return tokenizer.decode(given + new, skip_special_tokens=False)


def measure(
    model_dir: Path, probes: list[dict[str, Any]], max_new: int, seen: set[str] | None = None
) -> dict[str, Any]:
    """Every probe's written turn and scores, the teacher's scores, and the rates over all probes; with ``seen``
    (:func:`training_observations`), the share of probes whose Observation the training rows hold verbatim."""
    model, processor = load_agent(model_dir)
    rows = []
    for probe in probes:
        written = write_turn(model, processor.tokenizer, probe, max_new)
        thought, action = parse_reply(written)
        rows.append({"id": probe["id"], "video": probe["video"], "template": probe["template"],
                     "written": written, **score(thought, action, probe),
                     "seen": int(observation_of(probe["reply"]) in (seen or set())),
                     "teacher": score(*parse_reply(probe["reply"]), probe)})  # fmt: skip
    teacher = [{"video": r["video"], **r["teacher"]} for r in rows]
    return {"model": str(model_dir), "probes": len(rows), "seen": sum(r["seen"] for r in rows),
            "rates": {name: rate(rows, key) for name, key in MEASURES.items()},
            "teacher": {name: rate(teacher, key) for name, key in MEASURES.items()}, "rows": rows}  # fmt: skip


# --- training -----------------------------------------------------------------------------------------------------


def fresh_agent(init: Path, seed: int, rope_theta: float | None = None) -> tuple[Any, Any]:
    """The untrained agent of ``init`` (its config and tokenizer) with fresh weights drawn from ``seed``, and its
    processor. With ``rope_theta`` the text model's RoPE base is set to it (it has no weights: the same seed draws the
    same ones)."""
    import torch
    from transformers import (
        AutoConfig,
        AutoProcessor,
        GenerationConfig,
        Qwen2_5OmniThinkerForConditionalGeneration,
    )

    processor = AutoProcessor.from_pretrained(init)
    torch.manual_seed(seed)
    config = AutoConfig.from_pretrained(init)
    if rope_theta is not None:
        config.text_config.rope_parameters = {
            **config.text_config.rope_parameters,
            "rope_theta": float(rope_theta),
        }
    model = Qwen2_5OmniThinkerForConditionalGeneration(config)
    model.generation_config = GenerationConfig.from_pretrained(init)
    return model, processor


def warm_up(model: Any, processor: Any, data: list[Path], seed: int, steps: int, state: Path, folder: Path,
            save_every: int = 100, log_every: int = 100, keep: Path | None = None,
            settings: dict[str, Any] | None = None, **info: Any) -> list[float]:  # fmt: skip
    """The recipe's text warm-up (:data:`WARMUP`'s batch and learning rate, or ``settings`` in their place; the
    Observation given) of ``model`` up to ``steps`` steps, saving and resuming its state in ``state`` every
    ``save_every`` steps; the model is saved to ``folder`` with its loss curve (the settings and ``info`` beside it),
    and the last state moved to ``keep`` first when given (a saved model replaces its folder whole). A state already
    past ``steps`` is refused."""
    from recipes.tiny_agent.text_warmup import run_text_warmup
    from rl.checkpoint import save_checkpoint

    s = warmup_settings(settings)
    losses = run_text_warmup(model, processor.tokenizer, data, steps, s["batch_size"], s["lr"], seed,
                             log_every=log_every, observation_loss=False, state=state, save_every=save_every,
                             lr_warmup=s["lr_warmup"], cosine=s["cosine"])  # fmt: skip
    if len(losses) != steps:
        raise RuntimeError(f"{state} is past step {steps} ({len(losses)} steps): remove it to start again")
    if keep is not None:
        state.replace(keep)
    save_checkpoint(model.eval(), processor, folder)
    write_atomic(folder / "warmup_loss.json", json.dumps({"data": [str(p) for p in data], "seed": seed,
                                                          "steps": steps, **info, **s, "loss": losses}))  # fmt: skip
    return losses


def warmup_settings(settings: dict[str, Any] | None = None, recorded: bool = False) -> dict[str, Any]:
    """:data:`SETTINGS` from :data:`WARMUP`, with ``settings`` in their place (another key is refused); with
    ``recorded``, ``settings`` is a saved curve's record, whose keys other than the settings are passed over (a curve
    saved before a setting was an option ran at its default)."""
    settings = dict(settings or {})
    if not recorded and set(settings) - set(SETTINGS):
        raise ValueError(
            f"unknown warm-up settings {sorted(set(settings) - set(SETTINGS))}: known {SETTINGS}"
        )
    return {k: settings.get(k, WARMUP[k]) for k in SETTINGS}


def train(init: Path, data: list[Path], seed: int, out: Path, steps: int, log_every: int = 100,
          rope_theta: float | None = None, save_every: int = 100, keep_state: bool = False,
          start_from: Path | None = None, settings: dict[str, Any] | None = None) -> Path:  # fmt: skip
    """The text warm-up (:func:`warm_up`) from :func:`fresh_agent` (``seed``, ``rope_theta``), saved to ``out``.
    The warm-up saves its state to ``out/warmup_state.pt`` every ``save_every`` steps (0: at its end only), and a
    run started again goes on from there; the saved model replaces the folder, state and all, unless ``keep_state``
    moved the last state beside ``out`` (:func:`kept_state`). ``start_from``, a folder whose warm-up kept its state (the same data, seed and RoPE base),
    is where a longer warm-up starts when ``out`` has no state of its own: the same steps as one run through. It must
    have run with the same ``settings`` (:func:`warmup_settings`), and a cosine decay, whose rate depends on the
    last step, cannot go on from a shorter run."""
    s = warmup_settings(settings)
    if start_from is not None and s["cosine"]:
        raise ValueError(
            "a cosine decay ends at its own last step: a longer run cannot go on from a shorter one"
        )
    model, processor = fresh_agent(init, seed, rope_theta)
    state = out / "warmup_state.pt"
    if start_from is not None and not state.is_file():
        _copy_state(start_from, state, data, seed, rope_theta, s)
    keep = kept_state(out) if keep_state else None
    warm_up(
        model, processor, data, seed, steps, state, out, save_every, log_every, keep, s, rope_theta=rope_theta
    )
    return out


def kept_state(folder: Path) -> Path:
    """Where the warm-up saved to ``folder`` keeps its last state (``train --keep-state``): ``FOLDER.state.pt``."""
    return folder.with_name(folder.name + ".state.pt")


def _copy_state(folder: Path, state: Path, data: list[Path], seed: int, rope_theta: float | None,
                settings: dict[str, Any]) -> None:  # fmt: skip
    """The kept warm-up state of ``folder`` copied to ``state``, once its data, seed, RoPE base and settings are
    checked."""
    kept, info = kept_state(folder), folder / "warmup_loss.json"
    if not (kept.is_file() and info.is_file()):
        raise FileNotFoundError(
            f"{folder}: no finished warm-up with its state kept (train it with --keep-state)"
        )
    record = json.loads(info.read_text())
    was = {**record, **warmup_settings(record, recorded=True)}
    now = {"data": [str(p) for p in data], "seed": seed, "rope_theta": rope_theta, **settings}
    for key, value in now.items():
        if was.get(key) != value:
            raise ValueError(f"{folder}'s warm-up had {key} {was.get(key)!r}, this one {value!r}")
    state.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(kept, state)


# --- breakdown (exploratory) --------------------------------------------------------------------------------------

BREAKDOWN = ("exact span", "left end", "right end", "ends from the Observation", "answers at once")


def span_parts(reply: str, probe: dict[str, Any]) -> dict[str, Any]:
    """How one written turn's span relates to the teacher's on the same probe: each end equal to the teacher's, and
    both ends numbers the Observation writes or a file edge (0, the last second); only ``answers`` (1 when the turn
    answers instead of looking) where the Thought does not lead with the cue and a span."""
    thought, action = parse_reply(reply)
    teacher = span_match(parse_reply(probe["reply"])[0])
    mine = span_match(thought)
    out: dict[str, Any] = {"answers": int(action.get("type") == "answer")}
    if mine is None or teacher is None or mine.group(1) != probe["cue"]:
        return out
    edges = {"0", str(int(float(probe["duration"])))}
    known = set(re.findall(r"\d+", observation_of(probe["reply"]))) | edges
    left, right = mine.group(2) == teacher.group(2), mine.group(3) == teacher.group(3)
    return {**out, "left": int(left), "right": int(right), "exact": int(left and right),
            "from_obs": int(mine.group(2) in known and mine.group(3) in known)}  # fmt: skip


def breakdown(runs: dict[str, Path], probes: list[dict[str, Any]]) -> str:
    """Per run (and the teacher): the shares of :data:`BREAKDOWN` over the turns that name the cue with a span
    (answers at once: over all probes)."""
    by_id = {p["id"]: p for p in probes}
    keys = ("exact", "left", "right", "from_obs")
    lines = ["| run | cue and span | " + " | ".join(BREAKDOWN) + " |", "| --- " * (2 + len(BREAKDOWN)) + "|"]

    def line(name: str, parts: list[dict[str, Any]]) -> str:
        spans = [p for p in parts if "exact" in p]
        shares = [np.mean([p[k] for p in spans]) if spans else float("nan") for k in keys]
        shares.append(np.mean([p["answers"] for p in parts]))
        return f"| {name} | {len(spans)} | " + " | ".join(f"{x:.3f}" for x in shares) + " |"

    lines.append(line("teacher", [span_parts(p["reply"], p) for p in probes]))
    for name, folder in runs.items():
        rows = json.loads((folder / "probe.json").read_text())["rows"]
        lines.append(line(name, [span_parts(r["written"], by_id[r["id"]]) for r in rows]))
    return "\n".join(lines)


def warmup_arguments(t: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """A warm-up command's options: ``--init``, ``--data``, ``--seed``, ``--save-every``, ``--out``."""
    t.add_argument("--init", type=Path, required=True, help="the untrained agent (config and tokenizer)")
    t.add_argument("--data", type=Path, nargs="+", required=True, help="SFT parquets of teacher episodes")
    t.add_argument("--seed", type=int, required=True)
    t.add_argument("--save-every", type=int, default=100, help="steps between the warm-up's resumable saves")
    t.add_argument("--out", type=Path, required=True)
    return t


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m recipes.testbed.span_copy", description=__doc__.split("\n")[0]
    )
    sub = p.add_subparsers(dest="command", required=True)
    t = warmup_arguments(sub.add_parser("train", help="the text warm-up from fresh weights"))
    t.add_argument("--steps", type=int, default=WARMUP["steps"])
    t.add_argument("--rope-theta", type=float, help="the text model's RoPE base (default: --init's)")
    t.add_argument(
        "--keep-state", action="store_true", help="keep the last state (OUT.state.pt) for a longer warm-up"
    )
    t.add_argument("--start-from", type=Path, help="a shorter warm-up's folder (--keep-state) to go on from")
    t.add_argument("--batch-size", type=int, default=WARMUP["batch_size"], help="turns a step")
    t.add_argument("--lr", type=float, default=WARMUP["lr"], help="the (peak) learning rate")
    t.add_argument(
        "--lr-warmup", type=int, default=WARMUP["lr_warmup"], help="steps of a linear rise to --lr"
    )
    t.add_argument(
        "--cosine", action="store_true", help="decay the learning rate to a tenth by the last step"
    )
    m = sub.add_parser("measure", help="the probes' second turns, written by a model")
    m.add_argument("--model", type=Path, required=True)
    m.add_argument("--probes", type=Path, required=True, help="SFT parquet of teacher episodes on the set")
    m.add_argument("--tasks", type=Path, required=True, help="the set's folder (its tasks.jsonl)")
    m.add_argument("--max-new", type=int, default=48, help="tokens written after the Observation")
    m.add_argument(
        "--train", type=Path, nargs="*", default=[], help="the training rows (counts seen Observations)"
    )
    m.add_argument("--out", type=Path, help="default: MODEL/probe.json")
    analyse_arguments(sub.add_parser("analyse", help="rows per seed and the primary difference"))
    b = sub.add_parser("breakdown", help="how each run's spans relate to the teacher's (exploratory)")
    b.add_argument(
        "--run", type=labelled, action="append", required=True, metavar="NAME=DIR", help="a measured run"
    )
    b.add_argument("--probes", type=Path, required=True)
    b.add_argument("--tasks", type=Path, required=True)
    args = p.parse_args(argv)
    if args.command == "breakdown":
        print(breakdown(dict(args.run), load_probes(args.probes, args.tasks)))
    elif args.command == "train":
        if (args.out / "config.json").exists():
            print(f"{args.out}: done")
            return 0
        settings = {k: getattr(args, k) for k in SETTINGS}
        train(args.init, args.data, args.seed, args.out, args.steps, rope_theta=args.rope_theta,
              save_every=args.save_every, keep_state=args.keep_state, start_from=args.start_from,
              settings=settings)  # fmt: skip
    elif args.command == "measure":
        out = args.out or args.model / "probe.json"
        seen = training_observations(args.train) if args.train else None
        res = measure(args.model, load_probes(args.probes, args.tasks), args.max_new, seen)
        write_atomic(out, json.dumps(res, indent=1))
        print(
            json.dumps({"probes": res["probes"], **{k: round(v["mean"], 3) for k, v in res["rates"].items()}})
        )
    else:
        print(analyse_command(args))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
