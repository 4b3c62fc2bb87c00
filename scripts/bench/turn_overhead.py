"""Turn overhead benchmark: how much of a turn is *not* the model.

Runs episodes with the tiny random Qwen2.5-Omni thinker (``tiny-random``) through the transformers
backend on generated media (``envs.synth``: a video with sound and its tasks) and splits every turn into

- **generate**: ``model.generate`` and decoding (the backend's ``model_seconds`` minus prompt building);
- **prompt**: building the model inputs (chat template, processor on the frames / audio / clip);
- **env**: ``env.step`` (parsing the output, serving the percept, purging earlier media) and ``reset``;
- **loop**: everything else in the episode loop (records, callbacks, bookkeeping).

and prints the non-model share ``(prompt + env + loop) / total``. Target: <= 10 %.

The workload is fixed, so a rerun measures the same thing: every episode plays :data:`WORKLOAD`
(10 turns: frames, audio and clips of several sizes, one malformed output, then an answer; spans are
fractions of the media's duration), the model generating on the real context every turn while the
script supplies the actions (the tiny model's own output is noise). ``--episodes 5`` gives 50 turns
per seed; the figure is the **median over seeds** (``--seeds 0,1,2``: media, model weights and
sampling all follow the seed), with each seed's share printed beside it. Torch runs on one thread by
default (``--threads``), which makes the figure least sensitive to other load on the machine.

    python scripts/bench/turn_overhead.py                     # 5 episodes x 10 turns x 3 seeds
    python scripts/bench/turn_overhead.py --seeds 0 --episodes 5 --check   # exit 1 if > target
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from envs.env import OmniVideoEnv
from envs.messages import Message
from omniagent.policy import Policy, TurnOutput


class TimedPolicy(Policy):
    """Wraps the model policy: times each ``act`` call and optionally swaps in scripted actions."""

    def __init__(self, model: Policy, actions: Policy | None) -> None:
        self.model = model
        self.actions = actions
        self.name = model.name
        self.act_seconds: list[float] = []

    def reset(self, info: dict[str, Any]) -> None:
        self.model.reset(info)
        if self.actions is not None:
            self.actions.reset(info)

    def act(self, messages: list[Message]) -> TurnOutput:
        t0 = time.perf_counter()
        out = self.model.act(messages)
        self.act_seconds.append(time.perf_counter() - t0)
        if self.actions is not None:
            out = out.model_copy(update={"text": self.actions.act(messages).text})
        return out


# Every episode's turns: each action type at several sizes, one malformed output, then an answer.
# Spans are fractions of the media's duration (60 s by default: 6 s clips, 9 s and 3 s audio).
WORKLOAD: list[dict[str, Any] | str] = [
    {"type": "get_frames", "start": 0.0, "end": 1.0, "num": 8},
    {"type": "get_audio", "start": 0.10, "end": 0.25},
    {"type": "get_clip", "start": 0.40, "end": 0.50},
    {"type": "get_frames", "start": 0.50, "end": 0.70, "num": 4},
    "I am not sure what to do next.",  # a format error: parsed, rejected, an error percept
    {"type": "get_audio", "start": 0.60, "end": 0.65},
    {"type": "get_clip", "start": 0.80, "end": 0.90},
    {"type": "get_frames", "start": 0.20, "end": 0.30, "num": 16},
    {"type": "get_audio", "start": 0.30, "end": 0.45},
    {"type": "answer", "content": "A"},
]


def workload_texts(duration: float) -> list[str]:
    """:data:`WORKLOAD` as the raw model outputs the environment parses, spans in seconds."""
    texts = []
    for step in WORKLOAD:
        if isinstance(step, str):
            texts.append(step)
            continue
        action = {k: round(v * duration, 3) if k in ("start", "end") else v for k, v in step.items()}
        texts.append(json.dumps({"observation": "noted", "thought": "fixed workload", "action": action}))
    return texts


def make_media(out_dir: Path, n: int, duration: float, seed: int) -> list[Any]:
    """One synthetic video (with sound) per episode, and its first multiple-choice task."""
    from envs.synth import SynthConfig, synthesize

    tasks = []
    for i in range(n):
        cfg = SynthConfig(seed=1000 * seed + i, duration=duration, width=160, height=90, fps=5)
        result = synthesize(cfg, out_dir / f"bench_{1000 * seed + i}_{int(duration)}s.mp4")
        tasks.append(next(t for t in result.tasks if t.task_type == "mcq"))
    return tasks


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--episodes", type=int, default=5, help="episodes per seed, 10 turns each")
    p.add_argument("--max-new-tokens", type=int, default=32)
    p.add_argument("--duration", type=float, default=60.0, help="seconds of generated media per episode")
    p.add_argument("--device", default="cpu")
    p.add_argument(
        "--threads", type=int, default=1, help="torch CPU threads (1: least sensitive to other load)"
    )
    p.add_argument("--seeds", default="0,1,2", help="comma list; the figure is the median over them")
    p.add_argument("--target", type=float, default=0.10, help="largest acceptable non-model share")
    p.add_argument("--check", action="store_true", help="exit 1 when the share is above --target")
    p.add_argument("--media-dir", help="where generated media are kept (default: a temp dir)")
    return p.parse_args(argv)


def time_prompt_builds() -> list[float]:
    """Wrap the transformers backend's input builder; the returned list gets one duration per call."""
    import omniagent.backends.transformers_backend as tb

    seconds: list[float] = []
    build = tb.build_model_inputs

    def timed_build(*a: Any, **k: Any) -> Any:
        s = time.perf_counter()
        try:
            return build(*a, **k)
        finally:
            seconds.append(time.perf_counter() - s)

    tb.build_model_inputs = timed_build
    return seconds


class Measure:
    """Per-episode rows, per-action timings and totals of the four parts of a turn."""

    def __init__(self) -> None:
        self.rows: list[tuple[int, int, str, float, float, float, float, float]] = []
        self.by_kind: dict[str, list[tuple[float, float]]] = {}  # action -> [(env step, next prompt build)]
        self.totals = {"generate": 0.0, "prompt": 0.0, "env": 0.0, "loop": 0.0}

    def add(self, i: int, traj: Any, policy: TimedPolicy, builds: list[float]) -> None:
        prompt = sum(builds)
        for k, rec in enumerate(traj.turns):  # turn k's percept is processed by the build of turn k+1
            nxt = builds[k + 1] if k + 1 < len(builds) else float("nan")
            self.by_kind.setdefault(rec.action_type or "format error", []).append((rec.env_seconds, nxt))
        model_total = sum(r.model_seconds for r in traj.turns)
        generate = model_total - prompt
        env_s = traj.env_seconds
        act_wall = sum(policy.act_seconds)
        loop = max(0.0, traj.wall_seconds - act_wall - env_s) + (act_wall - model_total)
        non_model = prompt + env_s + loop
        share = non_model / (non_model + generate) if generate > 0 else float("nan")
        kinds = ",".join(r.action_type or "error" for r in traj.turns)
        self.rows.append((i, traj.num_turns, kinds, generate, prompt, env_s, loop, share))
        for key, value in zip(self.totals, (generate, prompt, env_s, loop), strict=True):
            self.totals[key] += value

    def report(self, target: float) -> float:
        """Print the tables; return the non-model share of all turns."""
        print(
            f"\n{'ep':>2} {'turns':>5} {'generate s':>10} {'prompt s':>9} {'env s':>7} {'loop s':>7} {'non-model':>9}  actions"
        )
        for i, n, kinds, gen, prompt, env_s, loop, share in self.rows:
            print(
                f"{i:>2} {n:>5} {gen:>10.3f} {prompt:>9.3f} {env_s:>7.3f} {loop:>7.3f} {share:>9.1%}  {kinds}"
            )
        print(f"\n{'action':<14} {'n':>3} {'env step ms':>11} {'next prompt build ms':>20}")
        for kind, vals in sorted(self.by_kind.items()):
            env_ms = statistics.mean(v[0] for v in vals) * 1e3
            nxt = [v[1] for v in vals if v[1] == v[1]]
            build_ms = f"{statistics.mean(nxt) * 1e3:.0f}" if nxt else "-"
            print(f"{kind:<14} {len(vals):>3} {env_ms:>11.0f} {build_ms:>20}")
        t = self.totals
        non_model = t["prompt"] + t["env"] + t["loop"]
        share = non_model / (non_model + t["generate"])
        turns = sum(r[1] for r in self.rows)
        print(
            f"\nall {turns} turns: generate {t['generate']:.2f} s, prompt {t['prompt']:.2f} s, "
            f"env {t['env']:.2f} s, loop {t['loop']:.3f} s"
        )
        verdict = "OK" if share <= target else "ABOVE TARGET"
        print(f"non-model share of turn time: {share:.1%} (target <= {target:.0%}): {verdict}")
        print(
            f"per turn: generate {t['generate'] / turns * 1e3:.0f} ms, non-model {non_model / turns * 1e3:.0f} ms"
        )
        return share


def run_seed(args: argparse.Namespace, seed: int, media_dir: Path) -> Measure:
    """One seed: its media and model weights, a warm-up episode, then the fixed workload."""
    from omniagent.backends.scripted import ReplayPolicy
    from omniagent.episode import run_episode
    from omniagent.policy import make_policy

    tasks = make_media(media_dir, args.episodes, args.duration, seed)
    model = make_policy(  # free decoding, as the recorded figures were measured (the backend constrains by default)
        "transformers", model="tiny-random", device=args.device, max_new_tokens=args.max_new_tokens, seed=seed,
        constrained=False,
    )  # fmt: skip
    prompt_seconds = time_prompt_builds()
    env = OmniVideoEnv()
    texts = workload_texts(args.duration)
    run_episode(env, model, tasks[0].env_options(1))  # warm-up, not counted: first-call allocations, imports
    prompt_seconds.clear()
    measure = Measure()
    for i, task in enumerate(tasks):
        policy = TimedPolicy(model, ReplayPolicy(texts=texts))
        n_prompt = len(prompt_seconds)
        traj = run_episode(env, policy, task.env_options(len(texts)))
        measure.add(i, traj, policy, prompt_seconds[n_prompt:])
    env.close()
    model.close()
    return measure


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    seeds = [int(x) for x in str(args.seeds).split(",") if x.strip()]
    media_dir = Path(args.media_dir or tempfile.mkdtemp(prefix="omniagent-bench-"))
    media_dir.mkdir(parents=True, exist_ok=True)
    print(f"tiny-random (outputs are noise: plumbing only), {len(WORKLOAD)} turns x {args.episodes} episodes "
          f"per seed on {args.duration:g} s videos, {args.threads} torch thread(s), in {media_dir}", flush=True)  # fmt: skip
    shares = []
    for seed in seeds:
        t0 = time.perf_counter()
        measure = run_seed(args, seed, media_dir)
        print(f"\n=== seed {seed} ({time.perf_counter() - t0:.0f} s)")
        shares.append(measure.report(args.target))
        print(flush=True)
    median = statistics.median(shares)
    verdict = "OK" if median <= args.target else "ABOVE TARGET"
    print(
        f"\nnon-model share, median over seeds {seeds}: {median:.1%} "
        f"(per seed: {', '.join(f'{s:.1%}' for s in shares)}; target <= {args.target:.0%}): {verdict}"
    )
    return 1 if args.check and median > args.target else 0


if __name__ == "__main__":
    raise SystemExit(main())
