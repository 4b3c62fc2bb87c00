"""Ask one question about one video or audio file: ``python -m omniagent.run VIDEO "QUESTION"``.

Examples::

    # the released RL checkpoint (vLLM when installed with a CUDA GPU, else transformers)
    python -m omniagent.run talk.mp4 "What colour is the speaker's shirt?" --choices "red|blue|green|white"

    # a model served elsewhere (vllm serve, SGLang, any OpenAI-compatible API)
    python -m omniagent.run talk.mp4 "How many people speak?" --task-type num \\
        --backend openai --base-url http://127.0.0.1:8000/v1

    # plumbing check without weights: the tiny random model (its answers are noise)
    python -m omniagent.run talk.mp4 "Which option?" --choices "a|b" --model tiny --max-turns 3

    # baselines and test drivers: uniform, oracle, random, replay (see omniagent.backends.scripted)
    python -m omniagent.run talk.mp4 "Which option?" --choices "a|b" --answer B --backend oracle

Each turn is printed as it happens; the trajectory is saved as JSON (``--out``, default
``runs/<timestamp>.json``) and optionally rendered as a self-contained HTML page (``--report``).

Exit codes: 0 the episode ran (answered, or no answer within the turn budget); 2 the media file is
unusable (or bad arguments); 3 the policy/backend failed (dead server, model not available);
130 interrupted with Ctrl-C (the partial trajectory is saved first).
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import json
import os
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from omniagent.console import (
    TurnPrinter,
    _clip,
    _error,
    describe_action,  # noqa: F401  (re-exported: it used to live here)
    print_summary,
)

DEFAULT_MODEL = "harryhsing/OmniAgent-RL-7B"  # the released RL checkpoint (SFT: harryhsing/OmniAgent-SFT-7B)
TINY_MODEL = "tiny"
MODEL_BACKENDS = ("transformers", "vllm", "openai")
SCRIPTED_BACKENDS = ("uniform", "oracle", "random", "replay")

EXIT_OK = 0
EXIT_MEDIA = 2
EXIT_POLICY = 3
EXIT_INTERRUPTED = 130


# ------------------------------------------------------------------------------------------ arguments
class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Show defaults, except where the help text already explains one or there is none to show."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if "(default:" in text or action.default in (None, argparse.SUPPRESS, False):
            return text
        return super()._get_help_string(action) or text


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m omniagent.run",
        description="Answer a question about a long video or audio file by active perception.",
        epilog="Exit codes: 0 ok (also 'no answer within the turn budget'), 2 unusable media or bad "
        "arguments, 3 policy/backend error, 130 interrupted (partial trajectory saved).",
        formatter_class=_HelpFormatter,
    )
    p.add_argument("media", help="video or audio file")
    p.add_argument("question", help="the question to answer")
    t = p.add_argument_group("task")
    t.add_argument(
        "--choices",
        action="append",
        metavar="TEXT",
        help='answer options: repeat the flag, or give them at once as "red|blue|green" (implies mcq)',
    )
    t.add_argument(
        "--task-type",
        choices=("mcq", "tr", "num", "size", "ff"),
        help="mcq: option letter; tr: [[start, end], ...] seconds; num/size: a number; ff: free text "
        "(default: mcq with --choices, else ff)",
    )
    t.add_argument("--answer", help="ground truth, to score the answer (mcq: letter or option text)")
    t.add_argument("--max-turns", type=int, default=16, help="turn budget K (the last turn must answer)")

    m = p.add_argument_group("policy")
    m.add_argument(
        "--model",
        default=DEFAULT_MODEL,
        help=f"Hub id or local checkpoint folder; '{TINY_MODEL}' = tiny random model (plumbing only)",
    )
    m.add_argument(
        "--backend",
        default="auto",
        help="auto (openai with --base-url; else vllm when installed and a CUDA GPU is present; else "
        f"transformers), {', '.join(MODEL_BACKENDS)}, or a scripted policy: {', '.join(SCRIPTED_BACKENDS)}",
    )
    m.add_argument(
        "--base-url", help="OpenAI-compatible API root, e.g. http://127.0.0.1:8000/v1 (openai backend)"
    )
    m.add_argument("--api-key", help="API key for --base-url (default: $OPENAI_API_KEY, else 'EMPTY')")
    m.add_argument("--temperature", type=float, default=0.0, help="0 = greedy, deterministic")
    m.add_argument("--seed", type=int, default=0)
    m.add_argument("--max-new-tokens", type=int, default=1024, help="generated tokens per turn")
    m.add_argument("--timeout", type=float, default=300.0, help="seconds per request (openai backend)")
    m.add_argument("--retries", type=int, default=2, help="request retries (openai backend)")
    m.add_argument("--device", default="auto", help="transformers backend: auto, cpu, cuda, cuda:N")
    m.add_argument(
        "--policy-arg",
        "-P",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra keyword argument for the policy (VALUE parsed as JSON when it parses), e.g. "
        "-P 'texts=[\"...\"]' -P delay=0.5 for --backend replay",
    )

    e = p.add_argument_group("environment limits")
    e.add_argument("--max-frames", type=int, default=32, help="frames per get_frames call")
    e.add_argument("--max-side", type=int, default=448, help="longer side of served frames, pixels")
    e.add_argument("--max-audio-s", type=float, default=300.0, help="seconds per get_audio call")
    e.add_argument("--max-clip-s", type=float, default=60.0, help="seconds per get_clip call")
    e.add_argument("--clip-fps", type=float, default=2.0, help="frame rate of get_clip frames")
    e.add_argument("--decoder", default="pyav", help="video decoder: pyav or decord")
    e.add_argument("--lenient-format", action="store_true", help="accept JSON wrapped in a ``` fence")
    e.add_argument("--audio-cache-dir", help="where decoded audio tracks are cached")

    o = p.add_argument_group("output")
    o.add_argument("--out", help="trajectory JSON path (default: runs/<timestamp>.json)")
    o.add_argument("--report", metavar="HTML", help="also write a self-contained HTML report here")
    o.add_argument("--quiet", action="store_true", help="print only the summary")
    return p


def parse_choices(values: list[str] | None) -> list[str] | None:
    if not values:
        return None
    if len(values) == 1 and "|" in values[0]:
        values = values[0].split("|")
    choices = [v.strip() for v in values]
    return choices if any(choices) else None


def parse_answer(raw: str | None, task_type: str, choices: list[str] | None) -> Any:
    """The ground truth from the command line, in the form the scorers take."""
    if raw is None:
        return None
    text = raw.strip()
    if task_type == "mcq":
        if choices:
            from envs.scoring import letters

            for letter, choice in zip(letters(len(choices)), choices, strict=True):
                if text.lower() == choice.lower():
                    return letter
        return text.upper().strip("().: ")
    if task_type in ("tr", "num", "size"):
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            return text
    return text


def parse_policy_args(items: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--policy-arg takes KEY=VALUE, got {item!r}")
        try:
            out[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            out[key.strip()] = value
    return out


# ------------------------------------------------------------------------------------------- backend
def cuda_available() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:
        return False


def resolve_backend(backend: str, model: str, base_url: str | None) -> str:
    if backend != "auto":
        return backend
    if base_url:
        return "openai"
    if model == TINY_MODEL:
        return "transformers"
    if importlib.util.find_spec("vllm") is not None and cuda_available():
        return "vllm"
    return "transformers"


def _accepted(factory: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The subset of ``kwargs`` that ``factory`` takes (all of them when it has ``**kwargs``)."""
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return kwargs
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return kwargs
    return {k: v for k, v in kwargs.items() if k in params}


def policy_kwargs(backend: str, args: argparse.Namespace, limits: Any) -> dict[str, Any]:
    if backend == "openai":
        from omniagent.backends.openai_backend import DEFAULT_BASE_URL

        kw: dict[str, Any] = {
            "model": args.model,
            "base_url": args.base_url or DEFAULT_BASE_URL,
            "api_key": args.api_key or os.environ.get("OPENAI_API_KEY") or "EMPTY",
            "temperature": args.temperature,
            "seed": args.seed,
            "max_tokens": args.max_new_tokens,
            "timeout": args.timeout,
            "retries": args.retries,
        }
    elif backend in SCRIPTED_BACKENDS:
        kw = {"limits": limits, "seed": args.seed}
    else:
        kw = {
            "model": args.model,
            "temperature": args.temperature,
            "seed": args.seed,
            "max_new_tokens": args.max_new_tokens,
            "device": args.device,
        }
    return kw


def build_policy(backend: str, args: argparse.Namespace, limits: Any) -> Any:
    import omniagent.backends  # noqa: F401  (fills the registry)
    from omniagent.policy import POLICIES, make_policy

    if backend not in POLICIES:
        raise KeyError(f"unknown backend {backend!r}; known: auto, {', '.join(sorted(POLICIES))}")
    kwargs = _accepted(POLICIES[backend], policy_kwargs(backend, args, limits))
    kwargs.update(parse_policy_args(args.policy_arg))
    return make_policy(backend, **kwargs)


def what_to_do(backend: str, model: str) -> str:
    if backend == "openai":
        return "check --base-url/--api-key/--model, or run in-process with --backend transformers"
    if backend in SCRIPTED_BACKENDS:
        return "check the --policy-arg values"
    return (
        "use `--model tiny` for a smoke run without weights, point --model at a downloaded checkpoint "
        "folder, or serve the model and use `--backend openai --base-url http://HOST:8000/v1`"
    )


def _hint(msg: str, backend: str, model: str) -> str:
    """A what-to-do sentence, unless the message already names a flag or a command to run."""
    if "--" in msg or "`" in msg:
        return ""
    return f" To fix: {what_to_do(backend, model)}."


def default_out_path() -> Path:
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    path = Path("runs") / f"{stamp}.json"
    k = 1
    while path.exists():
        path = Path("runs") / f"{stamp}-{k}.json"
        k += 1
    return path


# ---------------------------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from rich.console import Console

    console = Console(highlight=False, soft_wrap=False)
    err = Console(stderr=True, highlight=False)

    choices = parse_choices(args.choices)
    task_type = args.task_type or ("mcq" if choices else "ff")
    if task_type == "mcq" and not choices:
        parser.error("an mcq task needs --choices")
    if args.max_turns < 1:
        parser.error("--max-turns must be at least 1")
    try:
        parse_policy_args(args.policy_arg)  # validated before anything slow runs
    except ValueError as exc:
        parser.error(str(exc))
    answer = parse_answer(args.answer, task_type, choices)

    from envs.env import EnvLimits, OmniVideoEnv
    from envs.errors import MediaError
    from envs.media import MediaConfig, open_media

    limits = EnvLimits(
        max_frames=args.max_frames,
        max_side=args.max_side,
        max_audio_s=args.max_audio_s,
        max_clip_s=args.max_clip_s,
        clip_fps=args.clip_fps,
        max_turns=args.max_turns,
        strict_format=not args.lenient_format,
        backend=args.decoder,
        audio_cache_dir=args.audio_cache_dir,
    )
    media = str(args.media)
    # Check the file before loading a model that may take minutes.
    try:
        with open_media(media, MediaConfig(backend=args.decoder, max_side=args.max_side)):
            pass
    except MediaError as exc:
        _error(err, f"cannot use {media}: {exc.reason}")
        return EXIT_MEDIA

    backend = resolve_backend(args.backend, args.model, args.base_url)
    if args.model == TINY_MODEL and backend not in SCRIPTED_BACKENDS:
        console.print(
            "[yellow]note: --model tiny is a tiny randomly initialised model: its answers are noise "
            "(for plumbing checks only).[/yellow]"
        )
    if backend == "transformers" and args.model != TINY_MODEL and not cuda_available():
        console.print(
            "[yellow]note: no CUDA GPU: a 7B model on CPU is very slow; consider --backend openai "
            "--base-url ... or --model tiny.[/yellow]"
        )
    from omniagent.episode import EpisodeInterrupted, run_episode
    from omniagent.policy import PolicyError

    t0 = time.perf_counter()
    try:
        policy = build_policy(backend, args, limits)
    except KeyboardInterrupt:
        err.print("interrupted while loading the policy; nothing was run")
        return EXIT_INTERRUPTED
    except KeyError as exc:
        _error(err, f"{exc.args[0]}")
        return EXIT_MEDIA
    except (PolicyError, OSError, ImportError, ValueError, RuntimeError, TypeError) as exc:
        msg = " ".join(str(exc).split())
        hint = _hint(msg, backend, args.model)
        _error(err, f"backend {backend!r} could not start: {msg}{hint}")
        return EXIT_POLICY
    load_seconds = time.perf_counter() - t0

    name = backend if backend in SCRIPTED_BACKENDS else f"{backend}:{args.model}"
    from rich.text import Text

    console.print(Text(media, style="bold") + Text(f"  policy {name}  budget {args.max_turns} turns"))
    console.print(Text("question: ", style="dim") + Text(_clip(args.question, 300)))
    options = {
        "media": media,
        "question": args.question,
        "task_type": task_type,
        "choices": choices,
        "answer": answer,
        "max_turns": args.max_turns,
    }
    env = OmniVideoEnv(limits=limits)
    out_path = Path(args.out) if args.out else default_out_path()
    printer = TurnPrinter(console, args.max_turns, args.quiet)
    code = EXIT_OK
    try:
        traj = run_episode(env, policy, options, seed=args.seed, on_turn=printer)
    except EpisodeInterrupted as exc:
        traj = exc.trajectory
        code = EXIT_INTERRUPTED
    except KeyboardInterrupt:
        err.print("interrupted before the first turn; nothing was saved")
        return EXIT_INTERRUPTED
    except MediaError as exc:
        _error(err, f"cannot use {media}: {exc.reason}")
        return EXIT_MEDIA
    finally:
        env.close()
        policy.close()
    traj.meta["run"] = {
        "backend": backend,
        "model": None if backend in SCRIPTED_BACKENDS else args.model,
        "temperature": args.temperature,
        "seed": args.seed,
        "max_new_tokens": args.max_new_tokens,
        "limits": limits.model_dump(),
        "load_seconds": round(load_seconds, 3),
        "argv": sys.argv[1:] if argv is None else list(argv),
    }
    traj.save_json(out_path)
    report = None
    if args.report:
        from omniagent.report import write_report

        write_report(traj, args.report, media_path=media)
        report = args.report
    if code == EXIT_INTERRUPTED:
        err.print(Text(f"interrupted after {traj.num_turns} turns; partial trajectory saved to {out_path}"))
        return code
    print_summary(console, traj, out_path, report, load_seconds)
    if traj.stop_reason == "policy_error":
        msg = " ".join(str(traj.error).split())
        _error(err, f"the policy failed: {msg}{_hint(msg, backend, args.model)}")
        return EXIT_POLICY
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
