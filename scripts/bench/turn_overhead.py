"""Turn overhead benchmark: how much of a turn is *not* the model.

Runs a few episodes with the tiny random Qwen2.5-Omni thinker through the transformers backend on
generated media (``envs.synth``: a video with sound and its tasks) and splits every turn into

- **generate**: ``model.generate`` and decoding (the backend's ``model_seconds`` minus prompt building);
- **prompt**: building the model inputs (chat template, processor on the frames / audio / clip);
- **env**: ``env.step`` (parsing the output, serving the percept, purging earlier media) and ``reset``;
- **loop**: everything else in the episode loop (records, callbacks, bookkeeping).

and prints the non-model share ``(prompt + env + loop) / total``. Target: <= 10 %.

The tiny model's own output is noise and never asks for a percept, so by default
(``--actions random``) the model generates on the real context every turn and a seeded random
policy supplies the actions: frames, audio and clips are served and processed as in a real episode.
``--actions model`` plays the model's own text instead (format errors only; no percepts).

    python scripts/bench/turn_overhead.py                     # 3 episodes, 5 turns, 32 new tokens
    python scripts/bench/turn_overhead.py --episodes 5 --max-new-tokens 64 --check   # exit 1 if > target
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from envs.env import OmniVideoEnv  # noqa: E402
from envs.messages import Message  # noqa: E402
from omniagent.policy import Policy, TurnOutput  # noqa: E402


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


def make_media(out_dir: Path, n: int, duration: float, seed: int) -> list[Any]:
    """One synthetic video (with sound) per episode, and its first task."""
    from envs.synth import SynthConfig, synthesize

    tasks = []
    for i in range(n):
        cfg = SynthConfig(seed=seed + i, duration=duration, width=160, height=90, fps=5)
        result = synthesize(cfg, out_dir / f"bench_{seed + i}_{int(duration)}s.mp4")
        tasks.append(result.tasks[i % len(result.tasks)])
    return tasks


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--episodes", type=int, default=3)
    p.add_argument("--max-turns", type=int, default=5)
    p.add_argument("--max-new-tokens", type=int, default=32)
    p.add_argument("--duration", type=float, default=60.0, help="seconds of generated media per episode")
    p.add_argument("--actions", choices=("random", "model"), default="random")
    p.add_argument("--device", default="cpu")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--target", type=float, default=0.10, help="largest acceptable non-model share")
    p.add_argument("--check", action="store_true", help="exit 1 when the share is above --target")
    p.add_argument("--media-dir", help="where generated media are kept (default: a temp dir)")
    args = p.parse_args(argv)

    import omniagent.backends.transformers_backend as tb
    from omniagent.backends.scripted import RandomPolicy
    from omniagent.episode import run_episode
    from omniagent.policy import make_policy

    media_dir = Path(args.media_dir or tempfile.mkdtemp(prefix="omniagent-bench-"))
    media_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    tasks = make_media(media_dir, args.episodes, args.duration, args.seed)
    print(
        f"media: {len(tasks)} x {args.duration:g} s video in {time.perf_counter() - t0:.1f} s ({media_dir})"
    )

    t0 = time.perf_counter()
    model = make_policy(
        "transformers", model="tiny", device=args.device, max_new_tokens=args.max_new_tokens, seed=args.seed
    )
    print(f"tiny model loaded in {time.perf_counter() - t0:.1f} s (its outputs are noise: plumbing only)")

    prompt_seconds: list[float] = []
    build = tb.build_model_inputs

    def timed_build(*a: Any, **k: Any) -> Any:
        s = time.perf_counter()
        try:
            return build(*a, **k)
        finally:
            prompt_seconds.append(time.perf_counter() - s)

    tb.build_model_inputs = timed_build
    # warm-up turn, not counted: first-call allocations and lazy imports
    env = OmniVideoEnv()
    run_episode(env, model, tasks[0].env_options(1))
    prompt_seconds.clear()

    rows = []
    by_kind: dict[str, list[tuple[float, float]]] = {}  # action -> [(env step, prompt build of its percept)]
    totals = {"generate": 0.0, "prompt": 0.0, "env": 0.0, "loop": 0.0}
    for i, task in enumerate(tasks):
        actions = (
            RandomPolicy(seed=args.seed + i, max_looks=args.max_turns - 1)
            if args.actions == "random"
            else None
        )
        policy = TimedPolicy(model, actions)
        n_prompt = len(prompt_seconds)
        traj = run_episode(env, policy, task.env_options(args.max_turns))
        builds = prompt_seconds[n_prompt:]
        prompt = sum(builds)
        for k, rec in enumerate(traj.turns):  # turn k's percept is processed by the build of turn k+1
            nxt = builds[k + 1] if k + 1 < len(builds) else float("nan")
            by_kind.setdefault(rec.action_type or "format error", []).append((rec.env_seconds, nxt))
        model_total = sum(r.model_seconds for r in traj.turns)
        generate = model_total - prompt
        env_s = traj.env_seconds
        act_wall = sum(policy.act_seconds)
        loop = max(0.0, traj.wall_seconds - act_wall - env_s) + (act_wall - model_total)
        non_model = prompt + env_s + loop
        share = non_model / (non_model + generate) if generate > 0 else float("nan")
        kinds = ",".join(r.action_type or "error" for r in traj.turns)
        rows.append((i, traj.num_turns, kinds, generate, prompt, env_s, loop, share))
        for key, value in zip(totals, (generate, prompt, env_s, loop), strict=True):
            totals[key] += value
    env.close()
    model.close()

    print(
        f"\n{'ep':>2} {'turns':>5} {'generate s':>10} {'prompt s':>9} {'env s':>7} {'loop s':>7} {'non-model':>9}  actions"
    )
    for i, n, kinds, gen, prompt, env_s, loop, share in rows:
        print(f"{i:>2} {n:>5} {gen:>10.3f} {prompt:>9.3f} {env_s:>7.3f} {loop:>7.3f} {share:>9.1%}  {kinds}")
    print(f"\n{'action':<14} {'n':>3} {'env step ms':>11} {'next prompt build ms':>20}")
    for kind, vals in sorted(by_kind.items()):
        env_ms = statistics.mean(v[0] for v in vals) * 1e3
        nxt = [v[1] for v in vals if v[1] == v[1]]
        build_ms = f"{statistics.mean(nxt) * 1e3:.0f}" if nxt else "-"
        print(f"{kind:<14} {len(vals):>3} {env_ms:>11.0f} {build_ms:>20}")
    non_model = totals["prompt"] + totals["env"] + totals["loop"]
    share = non_model / (non_model + totals["generate"])
    turns = sum(r[1] for r in rows)
    print(
        f"\nall {turns} turns: generate {totals['generate']:.2f} s, prompt {totals['prompt']:.2f} s, "
        f"env {totals['env']:.2f} s, loop {totals['loop']:.3f} s"
    )
    print(
        f"non-model share of turn time: {share:.1%} (target <= {args.target:.0%}): {'OK' if share <= args.target else 'ABOVE TARGET'}"
    )
    print(
        f"per turn: generate {totals['generate'] / turns * 1e3:.0f} ms, non-model {non_model / turns * 1e3:.0f} ms"
    )
    return 1 if args.check and share > args.target else 0


if __name__ == "__main__":
    raise SystemExit(main())
