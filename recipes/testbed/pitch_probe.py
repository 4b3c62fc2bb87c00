"""Does the testbed agent's audio encoder carry the beep's pitch? A linear probe on the audio tokens its text model
receives (docs/experiments/testbed-pitch-encoder.md has the plan and the result).

For every beep of a search-level set the environment serves a ``get_audio`` look of :data:`WINDOW_S` seconds centred
on it, at the recipe's caps; the thinker's ``get_audio_features`` (audio encoder and projection, 25 tokens a second)
encodes it, and the tokens inside the beep are averaged. A multinomial logistic regression learns the pitch from a
training set's beeps and is scored on a test set's, with a by-video interval.

    python -m recipes.testbed.pitch_probe --model runs/testbed/attempt5/sft_s0/agent \\
        --train runs/testbed/data/pool --test runs/testbed/data/handover5305 --out runs/testbed/pitch_probe/attempt5_s0
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from envs.jsonl import write_atomic
from omniagent.backends.synth_world import SynthWorld
from recipes.testbed.cli_args import labelled
from recipes.testbed.digit_probe import video_interval

PITCHES = ("500", "1000", "2000", "4000")
WINDOW_S = 4.0
TOKENS_PER_S = 25
STEPS, LR, L2 = 500, 0.05, 1e-3


def beeps(tasks_file: Path) -> list[dict[str, Any]]:
    """Every tone of the set's videos, once: the media, a task on it (to reset the environment), its span and pitch."""
    from envs.tasks import load_tasks_jsonl

    out, seen = [], set()
    for task in load_tasks_jsonl(tasks_file):
        if task.media in seen:
            continue
        seen.add(task.media)
        world = SynthWorld.for_media(task.media)
        for item in world.sounds(0.0, float(world.duration)):
            if item.kind == "tone" and item.value in PITCHES:
                out.append(
                    {"task": task, "start": float(item.start), "end": float(item.end), "pitch": item.value}
                )
    return out


def window(beep: dict[str, Any], duration: float) -> tuple[int, int]:
    """A look of about :data:`WINDOW_S` seconds around the beep, whole seconds inside the file (the compact
    language's looks are whole seconds)."""
    mid = 0.5 * (beep["start"] + beep["end"])
    start = int(max(0.0, min(duration - WINDOW_S, mid - WINDOW_S / 2)))
    return start, int(min(duration, start + WINDOW_S))


def served_audio(env: Any, beep: dict[str, Any]) -> tuple[np.ndarray, float]:
    """The samples the environment serves for the look around ``beep``, and the look's start second."""
    task = beep["task"]
    _, info = env.reset(options=task.env_options(max_turns=env.limits.max_turns))
    start, end = window(beep, float(info.get("duration") or SynthWorld.for_media(task.media).duration))
    obs, *_ = env.step(json.dumps({"observation": "none", "thought": "listen.",
                                   "action": {"type": "get_audio", "start": start, "end": end}}))  # fmt: skip
    parts = [p for p in obs[-1]["content"] if isinstance(p, dict) and p.get("type") == "audio"]
    if len(parts) != 1:
        raise ValueError(f"{task.id}: the look {start}-{end} served {len(parts)} audio parts")
    return np.asarray(parts[0]["audio"], dtype=np.float32), float(parts[0]["start"])


def beep_vector(
    model: Any, processor: Any, audio: np.ndarray, offset: float, beep: dict[str, Any]
) -> np.ndarray:
    """The mean of the audio tokens (as the text model receives them) that fall inside the beep."""
    import torch

    feats = processor.feature_extractor(
        audio, sampling_rate=16000, return_attention_mask=True, return_tensors="pt"
    )
    with torch.no_grad():
        out = model.get_audio_features(
            feats["input_features"], feature_attention_mask=feats["attention_mask"]
        )
    tokens = out.last_hidden_state.float().numpy()
    lo = int(np.floor((beep["start"] - offset) * TOKENS_PER_S))
    hi = int(np.ceil((beep["end"] - offset) * TOKENS_PER_S))
    inside = tokens[max(0, lo) : min(len(tokens), hi)]
    if not len(inside):
        raise ValueError(f"no audio token inside the beep at {beep['start']:.2f}-{beep['end']:.2f}s")
    return inside.mean(axis=0)


def encode_set(
    model: Any, processor: Any, env: Any, tasks_file: Path
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Every beep of the set: its vector, its pitch's class, its video."""
    xs, ys, videos = [], [], []
    for beep in beeps(tasks_file):
        audio, offset = served_audio(env, beep)
        xs.append(beep_vector(model, processor, audio, offset, beep))
        ys.append(PITCHES.index(beep["pitch"]))
        videos.append(Path(beep["task"].media).name)
    return np.stack(xs), np.array(ys), videos


def fit_probe(x: np.ndarray, y: np.ndarray, seed: int = 0) -> Any:
    """A multinomial logistic regression on standardised features (full-batch Adam); returns a predict function."""
    import torch

    torch.manual_seed(seed)
    mu, sd = x.mean(axis=0), x.std(axis=0) + 1e-6
    xt, yt = torch.tensor((x - mu) / sd, dtype=torch.float32), torch.tensor(y)
    head = torch.nn.Linear(x.shape[1], len(PITCHES))
    opt = torch.optim.Adam(head.parameters(), lr=LR)
    for _ in range(STEPS):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(head(xt), yt) + L2 * head.weight.pow(2).sum()
        loss.backward()
        opt.step()

    def predict(z: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return head(torch.tensor((z - mu) / sd, dtype=torch.float32)).argmax(dim=1).numpy()

    return predict


def run(args: argparse.Namespace) -> dict[str, Any]:
    from transformers import AutoProcessor

    from recipes.testbed.probe_cli import probe_env
    from rl.sft.local import load_model

    env = probe_env()
    model = load_model(str(args.model)).eval()
    processor = AutoProcessor.from_pretrained(args.model)
    x_train, y_train, _ = encode_set(model, processor, env, args.train / "tasks.jsonl")
    x_test, y_test, videos = encode_set(model, processor, env, args.test / "tasks.jsonl")
    env.close()
    predict = fit_probe(x_train, y_train, args.seed)
    right = predict(x_test) == y_test
    rows = [
        {"video": v, "pitch": PITCHES[t], "right": int(r)}
        for v, t, r in zip(videos, y_test, right, strict=True)
    ]
    return {"model": str(args.model), "train_beeps": len(y_train), "train_accuracy": round(float((predict(x_train) == y_train).mean()), 3),
            "test": video_interval({str(i): (r["video"], r["right"]) for i, r in enumerate(rows)}),
            "by_pitch": {p: round(float(np.mean([r["right"] for r in rows if r["pitch"] == p])), 3) for p in PITCHES},
            "rows": rows}  # fmt: skip


def table(results: dict[str, dict[str, Any]]) -> str:
    lines = ["| encoder | training beeps: fit | fresh beeps | accuracy [95% CI] | " + " | ".join(f"{p} Hz" for p in PITCHES) + " |",
             "| --- " * (4 + len(PITCHES)) + "|"]  # fmt: skip
    for label, r in results.items():
        t = r["test"]
        lines.append(f"| {label} | {r['train_beeps']}: {r['train_accuracy']:.3f} | {t['n']} | {t['mean']:.3f} "
                     f"[{t['lo']:.3f}, {t['hi']:.3f}] | " + " | ".join(f"{r['by_pitch'][p]:.3f}" for p in PITCHES) + " |")  # fmt: skip
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m recipes.testbed.pitch_probe", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("--model", type=Path, help="the agent's (or an untrained agent's) folder")
    p.add_argument("--train", type=Path, help="search-level tasks folder whose beeps train the probe")
    p.add_argument("--test", type=Path, help="search-level tasks folder whose beeps score it")
    p.add_argument("--out", type=Path, help="folder of result.json")
    p.add_argument("--seed", type=int, default=0, help="the probe's initialisation")
    p.add_argument(
        "--table",
        type=labelled,
        nargs="*",
        metavar="LABEL=DIR",
        help="only print the results of these folders",
    )
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.table:
        results = {label: json.loads((folder / "result.json").read_text()) for label, folder in args.table}
        print(table(results))
        return 0
    if None in (args.model, args.train, args.test, args.out):
        raise SystemExit("pitch_probe: --model, --train, --test and --out are required (or --table)")
    if (args.out / "result.json").exists():
        res = json.loads((args.out / "result.json").read_text())
    else:
        res = run(args)
        args.out.mkdir(parents=True, exist_ok=True)
        write_atomic(args.out / "result.json", json.dumps(res, indent=2))
    print(table({args.out.name: res}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
