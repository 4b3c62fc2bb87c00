"""Ask one question about one video or audio file: ``python -m omniagent.run VIDEO "QUESTION"``.

Examples::

    # the released RL checkpoint (vLLM when installed with a CUDA GPU, else transformers)
    python -m omniagent.run talk.mp4 "What colour is the speaker's shirt?" --choices "red|blue|green|white"

    # a model served elsewhere (vllm serve, SGLang, any OpenAI-compatible API)
    python -m omniagent.run talk.mp4 "How many people speak?" --task-type num \\
        --backend openai --base-url http://127.0.0.1:8000/v1

    # offline on a CPU: the tiny agent shipped in the package (trained on the synthetic benchmark)
    python -m omniagent.run talk.mp4 "Which option?" --choices "a|b" --model tiny --max-turns 3

    # plumbing check without weights: a tiny random model (its answers are noise); Qwen3-Omni's too
    python -m omniagent.run talk.mp4 "Which option?" --choices "a|b" --model tiny-random --max-turns 3
    python -m omniagent.run talk.mp4 "Which option?" --choices "a|b" --model tiny-random-qwen3-omni

    # baselines and test drivers: uniform, oracle, random, replay (see omniagent.backends.scripted)
    python -m omniagent.run talk.mp4 "Which option?" --choices "a|b" --answer B --backend oracle

Each turn is printed as it happens; the trajectory is saved as JSON (``--out``, default
``runs/<timestamp>.json``) and optionally rendered as a self-contained HTML page (``--report``).
Once the arguments are valid a trajectory is always saved, whatever fails (media, backend, the
model's output, the environment): the turns played so far, the stop reason and the error. Secrets
(``--api-key``, ``-P api_key=...``) are never written to it.

Exit codes: 0 the episode ran (answered, or no answer within the turn budget); 1 an unexpected
error during the episode; 2 the media file is unusable (or bad arguments); 3 the policy/backend
failed (dead server, model not available); 130 interrupted with Ctrl-C.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from omniagent.cli_args import (
    SCRIPTED_BACKENDS,
    TINY_AGENT,
    build_parser,
    check_args,
    make_limits,
    parse_answer,
    parse_choices,
    parse_policy_args,
    redact_argv,
)
from omniagent.console import TurnPrinter, clip_line, print_episode_summary, print_error

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_MEDIA = 2
EXIT_POLICY = 3
EXIT_INTERRUPTED = 130


# ------------------------------------------------------------------------------------------- backend
def cuda_available() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:
        return False


def is_small_model(model: str) -> bool:
    """The shipped tiny agent or a tiny random test model (any family): CPU-sized, built in-process."""
    from omniagent.families import family_for_alias

    return model == TINY_AGENT or family_for_alias(model) is not None


def resolve_backend(backend: str, model: str, base_url: str | None) -> str:
    if backend != "auto":
        return backend
    if base_url:
        return "openai"
    if is_small_model(model):
        return "transformers"
    if importlib.util.find_spec("vllm") is not None and cuda_available():
        return "vllm"
    return "transformers"


def shared_settings(args: argparse.Namespace, limits: Any) -> dict[str, Any]:
    """Command-line settings; :func:`omniagent.policy.make_policy` gives each backend the ones it
    declares (an OpenAI-compatible server takes ``max_tokens``, a local model ``max_new_tokens``)."""
    from omniagent.backends.openai_backend import DEFAULT_BASE_URL

    return {
        "model": args.model,
        "base_url": args.base_url or DEFAULT_BASE_URL,
        "api_key": args.api_key,  # None: the openai_client rule ($OPENAI_API_KEY, else EMPTY)
        "temperature": args.temperature,
        "seed": args.seed,
        "max_tokens": args.max_new_tokens,
        "max_new_tokens": args.max_new_tokens,
        "timeout": args.timeout,
        "retries": args.retries,
        "device": args.device,
        "limits": limits,
    }


def build_policy(backend: str, args: argparse.Namespace, limits: Any) -> Any:
    """The policy for ``--backend``: the settings it declares plus ``--policy-arg`` values (an
    argument the backend does not take is an error that lists the ones it does)."""
    from omniagent.policy import make_policy, policy_params

    explicit = parse_policy_args(args.policy_arg)
    if args.constrained:  # explicit, so a backend that cannot constrain says so instead of ignoring it
        explicit["constrained"] = True
    elif args.constrained is False and "constrained" in getattr(policy_params(backend), "model_fields", {}):
        explicit["constrained"] = False  # --no-constrained; a backend without the option never constrains
    return make_policy(backend, shared=shared_settings(args, limits), **explicit)


def what_to_do(backend: str, model: str) -> str:
    if backend == "openai":
        return "check --base-url/--api-key/--model, or run in-process with --backend transformers"
    if backend in SCRIPTED_BACKENDS:
        return "check the --policy-arg values"
    return (
        "use `--model tiny-random` for a smoke run without weights, point --model at a downloaded checkpoint "
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


# ---------------------------------------------------------------------------------------------- main
class Stop(Exception):
    """Ends the run early with an exit code and a one-line message (the trajectory is still saved)."""

    def __init__(self, code: int, message: str, stop_reason: str | None = None) -> None:
        super().__init__(message)
        self.code, self.message, self.stop_reason = code, message, stop_reason


class CliRun:
    """One command-line run, as named steps: check the media, load the policy, play, save, report.

    Whatever fails after the arguments are checked (media, backend, model output, the environment),
    :meth:`save` writes a trajectory: the turns played so far, the stop reason and the error.
    """

    def __init__(self, args: argparse.Namespace, argv: list[str] | None) -> None:
        from rich.console import Console

        self.args = args
        self.argv = redact_argv(sys.argv[1:] if argv is None else list(argv))
        self.console = Console(highlight=False, soft_wrap=False)
        self.err = Console(stderr=True, highlight=False)
        self.choices = parse_choices(args.choices)
        self.task_type = args.task_type or ("mcq" if self.choices else "ff")
        self.answer = parse_answer(args.answer, self.task_type, self.choices)
        self.backend = resolve_backend(args.backend, args.model, args.base_url)
        self.limits = make_limits(args)
        self.out_path = Path(args.out) if args.out else default_out_path()
        self.turns: list[Any] = []  # every finished turn, kept even when the episode then fails
        self.policy: Any = None
        self.load_seconds = 0.0

    def options(self) -> dict[str, Any]:
        a = self.args
        return {
            "media": str(a.media),
            "question": a.question,
            "task_type": self.task_type,
            "choices": self.choices,
            "answer": self.answer,
            "max_turns": a.max_turns,
        }

    def check_media(self) -> None:
        """Refuse an unusable file before loading a model that may take minutes."""
        from envs.errors import MediaError
        from envs.media import MediaConfig, open_media

        try:
            with open_media(str(self.args.media), MediaConfig.from_limits(self.limits)):
                pass
        except MediaError as exc:
            raise Stop(EXIT_MEDIA, f"cannot use {self.args.media}: {exc.reason}", "media_error") from exc

    def print_notes(self) -> None:
        if (
            is_small_model(self.args.model)
            and self.args.model != TINY_AGENT
            and self.backend not in SCRIPTED_BACKENDS
        ):
            self.console.print(
                f"[yellow]note: --model {self.args.model} has random weights: its answers are noise (for "
                "plumbing checks only).[/yellow]"
            )
        if self.args.model == TINY_AGENT and self.backend not in SCRIPTED_BACKENDS:
            self.console.print(
                "[yellow]note: --model tiny is the ~1 M-parameter agent shipped with the package, trained "
                "only on the synthetic benchmark (recipes/tiny_agent): a demo, not a capable model.[/yellow]"
            )
        small = is_small_model(self.args.model)
        if self.backend == "transformers" and not small and not cuda_available():
            self.console.print(
                "[yellow]note: no CUDA GPU: a 7B model on CPU is very slow; consider --backend openai "
                "--base-url ... or --model tiny (the shipped tiny agent).[/yellow]"
            )

    def load_policy(self) -> None:
        from omniagent.policy import PolicyError

        t0 = time.perf_counter()
        try:
            self.policy = build_policy(self.backend, self.args, self.limits)
        except KeyError as exc:
            raise Stop(EXIT_MEDIA, str(exc.args[0] if exc.args else exc), "policy_error") from exc
        except (PolicyError, OSError, ImportError, ValueError, RuntimeError, TypeError) as exc:
            msg = " ".join(str(exc).split())
            hint = _hint(msg, self.backend, self.args.model)
            raise Stop(
                EXIT_POLICY, f"backend {self.backend!r} could not start: {msg}{hint}", "policy_error"
            ) from exc
        self.load_seconds = time.perf_counter() - t0

    def play(self) -> Any:
        """The episode's trajectory; a failure inside it becomes :class:`Stop` with the turns kept."""
        from rich.text import Text

        from envs.env import OmniVideoEnv
        from envs.errors import MediaError
        from omniagent.episode import run_episode

        a = self.args
        name = self.backend if self.backend in SCRIPTED_BACKENDS else f"{self.backend}:{a.model}"
        self.console.print(
            Text(str(a.media), style="bold") + Text(f"  policy {name}  budget {a.max_turns} turns")
        )
        self.console.print(Text("question: ", style="dim") + Text(clip_line(a.question, 300)))
        printer = TurnPrinter(self.console, a.max_turns, a.quiet)

        def on_turn(rec: Any, percept: list[dict[str, Any]]) -> None:
            self.turns.append(rec)
            printer(rec, percept)

        env = OmniVideoEnv(limits=self.limits)
        try:
            return run_episode(env, self.policy, self.options(), seed=a.seed, on_turn=on_turn)
        except MediaError as exc:
            raise Stop(EXIT_MEDIA, f"cannot use {a.media}: {exc.reason}", "media_error") from exc
        except Exception as exc:
            msg = f"the run failed: {type(exc).__name__}: {' '.join(str(exc).split())}"
            raise Stop(EXIT_ERROR, msg) from exc
        finally:
            env.close()

    def partial(self, stop: Stop) -> Any:
        """The trajectory of a run that ended with ``stop``: the turns played so far."""
        from omniagent.trajectory import Trajectory

        last = self.turns[-1] if self.turns else None
        cause = stop.__cause__
        code = getattr(cause, "code", None) or (f"exception:{type(cause).__name__}" if cause else None)
        return Trajectory(
            id=self.out_path.stem,
            media=str(self.args.media),
            question=self.args.question,
            task_type=self.task_type,
            choices=self.choices,
            ground_truth=self.answer,
            max_turns=self.args.max_turns,
            policy=getattr(self.policy, "name", self.backend),
            turns=list(self.turns),
            stop_reason=stop.stop_reason,
            error=stop.message,
            frames_used=last.frames_used if last else 0,
            audio_seconds_used=last.audio_seconds_used if last else 0.0,
            clip_seconds_used=last.clip_seconds_used if last else 0.0,
            meta={"error_code": code},
        )

    def save(self, traj: Any) -> None:
        """Record the run's settings (no secrets) and write the trajectory, whatever it holds."""
        config = getattr(self.policy, "config", None)
        traj.meta["run"] = {
            "backend": self.backend,
            "model": None if self.backend in SCRIPTED_BACKENDS else self.args.model,
            "policy": config() if callable(config) else None,
            "temperature": self.args.temperature,
            "seed": self.args.seed,
            "max_new_tokens": self.args.max_new_tokens,
            "limits": self.limits.model_dump(),
            "load_seconds": round(self.load_seconds, 3),
            "argv": self.argv,
        }
        try:
            save_trajectory(traj, self.out_path)
        except OSError as exc:  # an unwritable --out: keep the trajectory in the temp folder instead
            fallback = Path(tempfile.gettempdir()) / f"omniagent-{os.getpid()}-{self.out_path.name}"
            save_trajectory(traj, fallback)
            print_error(
                self.err, f"cannot write {self.out_path} ({exc.strerror or exc}); saved to {fallback}"
            )
            self.out_path = fallback

    def report(self, traj: Any) -> str | None:
        if not self.args.report:
            return None
        from omniagent.report import write_report

        try:
            write_report(traj, self.args.report, media_path=str(self.args.media), limits=self.limits)
        except Exception as exc:  # the trajectory is saved; a report is a convenience
            print_error(
                self.err, f"could not write the report {self.args.report}: {type(exc).__name__}: {exc}"
            )
            return None
        return self.args.report

    def close(self) -> None:
        if self.policy is not None:
            try:
                self.policy.close()
            except Exception as exc:
                print_error(self.err, f"closing the policy failed: {type(exc).__name__}: {exc}")


def _scrub(value: Any) -> Any:
    """``value`` with every surrogate code point written as its ``\\uXXXX`` escape text."""
    if isinstance(value, str):
        return re.sub("[\ud800-\udfff]", lambda m: f"\\u{ord(m.group()):04x}", value)
    if isinstance(value, dict):
        return {_scrub(k): _scrub(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_scrub(v) for v in value]
    return value


def save_trajectory(traj: Any, path: Path) -> None:
    """Write ``traj`` as JSON; text that cannot be encoded (lone surrogates) is escaped, never lost."""
    from envs.jsonl import write_atomic

    try:
        traj.save_json(path)
    except (ValueError, UnicodeError, TypeError):
        data = _scrub(traj.model_dump(mode="python"))
        write_atomic(path, json.dumps(data, indent=2, ensure_ascii=False, default=str))


def _run(cli: CliRun) -> int:
    """The steps in order; any :class:`Stop` still saves a trajectory of what was done."""
    from rich.text import Text

    from omniagent.episode import EpisodeInterrupted

    try:
        cli.check_media()
        cli.print_notes()
        cli.load_policy()
        traj = cli.play()
    except EpisodeInterrupted as exc:
        cli.save(exc.trajectory)
        cli.report(exc.trajectory)
        cli.err.print(
            Text(
                f"interrupted after {exc.trajectory.num_turns} turns; partial trajectory saved to {cli.out_path}"
            )
        )
        return EXIT_INTERRUPTED
    except KeyboardInterrupt:
        traj = cli.partial(Stop(EXIT_INTERRUPTED, "interrupted before the first turn", "interrupted"))
        cli.save(traj)
        cli.err.print(Text(f"interrupted before the first turn; trajectory saved to {cli.out_path}"))
        return EXIT_INTERRUPTED
    except Stop as stop:
        cli.save(cli.partial(stop))
        print_error(cli.err, f"{stop.message} (trajectory saved to {cli.out_path})")
        return stop.code
    except Exception as exc:  # a failure no step foresaw: still one line and a saved trajectory
        stop = Stop(EXIT_ERROR, f"the run failed: {type(exc).__name__}: {' '.join(str(exc).split())}")
        stop.__cause__ = exc
        cli.save(cli.partial(stop))
        print_error(cli.err, f"{stop.message} (trajectory saved to {cli.out_path})")
        return stop.code
    cli.save(traj)
    report = cli.report(traj)
    print_episode_summary(cli.console, traj, cli.out_path, report, cli.load_seconds)
    if traj.stop_reason == "policy_error":
        msg = " ".join(str(traj.error).split())
        print_error(cli.err, f"the policy failed: {msg}{_hint(msg, cli.backend, cli.args.model)}")
        return EXIT_POLICY
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    check_args(parser, args)
    cli = CliRun(args, argv)
    try:
        return _run(cli)
    finally:
        cli.close()


if __name__ == "__main__":
    sys.exit(main())
