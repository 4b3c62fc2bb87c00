"""The command line of ``python -m omniagent.run``: its flags, how their values are read, and which
of them are secrets (never recorded)."""

from __future__ import annotations

import argparse
import json
import re
from typing import Any

from pydantic import ValidationError

from envs.limits import EnvLimits, add_limit_flags, limit_flag, limits_from_args

DEFAULT_MODEL = "harryhsing/OmniAgent-RL-7B"  # the released RL checkpoint (SFT: harryhsing/OmniAgent-SFT-7B)
TINY_MODEL = "tiny-random"  # random weights: plumbing only (Qwen2.5-Omni; tiny-random-qwen3-omni: Qwen3-Omni)
TINY_AGENT = "tiny"  # the trained tiny agent shipped in the package (omniagent.tiny_agent)
MODEL_BACKENDS = ("transformers", "vllm", "openai")
SCRIPTED_BACKENDS = ("uniform", "oracle", "random", "replay")
LIMIT_DESTS = {"backend": "decoder"}  # --backend is the policy here; the video decoder is --decoder


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
        epilog="Exit codes: 0 ok (also 'no answer within the turn budget'), 1 unexpected error, 2 unusable "
        "media or bad arguments, 3 policy/backend error, 130 interrupted. A trajectory is saved in every case "
        "but bad arguments.",
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

    m = p.add_argument_group("policy")
    m.add_argument(
        "--model",
        default=DEFAULT_MODEL,
        help=f"Hub id or local checkpoint folder; '{TINY_AGENT}' = the shipped trained tiny agent (CPU, "
        f"offline), '{TINY_MODEL}' / 'tiny-random-qwen3-omni' = tiny random models (plumbing only)",
    )
    m.add_argument(
        "--backend",
        default="auto",
        help="auto (openai with --base-url; else vllm when installed and a CUDA GPU is present; else "
        f"transformers), {', '.join(MODEL_BACKENDS)}, or a scripted policy: {', '.join(SCRIPTED_BACKENDS)}",
    )
    m.add_argument(
        "--base-url",
        help="OpenAI-compatible API root, e.g. http://127.0.0.1:8000/v1 (openai backend); several servers of "
        "one model comma-separated (the least loaded answers; a failing one is skipped for a while)",
    )
    m.add_argument("--api-key", help="API key for --base-url (default: $OPENAI_API_KEY, else 'EMPTY')")
    m.add_argument("--temperature", type=float, default=0.0, help="0 = greedy, deterministic")
    m.add_argument("--seed", type=int, default=0)
    m.add_argument("--max-new-tokens", type=int, default=1024, help="generated tokens per turn")
    m.add_argument("--timeout", type=float, default=300.0, help="whole-request deadline, s (openai)")
    m.add_argument("--retries", type=int, default=2, help="request retries (openai backend)")
    m.add_argument("--device", default="auto", help="transformers backend: auto, cpu, cuda, cuda:N")
    m.add_argument(
        "--constrained",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="decode every turn under the environment's JSON schema of a valid turn (default: on for the "
        "transformers backend, off for the others; --no-constrained opts out)",
    )
    m.add_argument(
        "--policy-arg",
        "-P",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra keyword argument for the policy (VALUE parsed as JSON when it parses), e.g. "
        "-P 'texts=[\"...\"]' -P delay=0.5 for --backend replay",
    )

    # one flag per EnvLimits field (envs/limits.py), --max-turns the budget K of this question
    add_limit_flags(p.add_argument_group("environment limits"), dests=LIMIT_DESTS)

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


# ------------------------------------------------------------------------------------------- secrets
SECRET_FLAGS = ("--api-key",)
SECRET_KEY = re.compile(r"key|token|secret|password", re.I)
REDACTED = "**********"


def redact_argv(argv: list[str]) -> list[str]:
    """``argv`` safe to record: the values of ``--api-key`` and of secret ``-P KEY=VALUE`` masked."""
    out: list[str] = []
    mask_next = False
    for arg in argv:
        key = arg.split("=", 1)[0]
        if mask_next:
            out.append(REDACTED)
            mask_next = False
        elif arg in SECRET_FLAGS:
            out.append(arg)
            mask_next = True
        elif "=" in arg and (key in SECRET_FLAGS or SECRET_KEY.search(key)):
            out.append(f"{key}={REDACTED}")
        else:
            out.append(arg)
    return out


def make_limits(args: argparse.Namespace) -> EnvLimits:
    """The validated environment limits of the parsed flags."""
    return limits_from_args(args, dests=LIMIT_DESTS)


def check_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if (args.task_type or ("mcq" if parse_choices(args.choices) else "ff")) == "mcq" and not parse_choices(
        args.choices
    ):
        parser.error("an mcq task needs --choices")
    try:
        make_limits(args)
    except ValidationError as exc:  # a limit out of range: name its flag
        flags = (limit_flag(LIMIT_DESTS.get(str(e["loc"][0]), str(e["loc"][0]))) for e in exc.errors())
        parser.error("; ".join(f"{flag}: {e['msg']}" for flag, e in zip(flags, exc.errors(), strict=True)))
    try:
        parse_policy_args(args.policy_arg)  # validated before anything slow runs
    except ValueError as exc:
        parser.error(str(exc))
    from omniagent.policy import policy_names

    if args.backend != "auto" and args.backend not in policy_names():
        parser.error(f"unknown backend {args.backend!r}; known: auto, {', '.join(policy_names())}")
