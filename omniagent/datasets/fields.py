"""Reading fields of a record: options, answer letters, timestamps, media paths, and building the
:class:`~envs.tasks.Task` (a validation failure becomes a :class:`~omniagent.datasets.core.RowError`)."""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from envs.tasks import LETTERS, Task
from omniagent.datasets.core import Row, RowError


def get_field(row: Row, *names: str, required: bool = True, default: Any = None) -> Any:
    """The value of the first of ``names`` that ``row`` has (None and ``""`` count as absent). When
    none is present: a :class:`RowError` naming them if ``required``, else ``default``."""
    for name in names:
        if name in row.data and row.data[name] is not None and row.data[name] != "":
            return row.data[name]
    if required:
        raise RowError(row.where, f"missing field {' / '.join(repr(n) for n in names)}")
    return default


_OPTION_PREFIX = re.compile(r"^\s*\(?([A-Za-z])[).:]\s*(.*)$", re.S)


def split_option(text: str, expected_letter: str | None = None) -> str:
    """``"A. a cat"`` / ``"(A) a cat"`` / ``"A: a cat"`` -> ``"a cat"`` (text kept when there is no prefix)."""
    m = _OPTION_PREFIX.match(str(text))
    if m and (expected_letter is None or m.group(1).upper() == expected_letter):
        return m.group(2).strip()
    return str(text).strip()


def parse_options(row: Row, raw: Any) -> list[str]:
    """The answer options of ``row`` from ``raw``: a list, a ``{"A": ...}`` mapping (in key order), a JSON
    string of either, or one option per line; letter prefixes (``"A. "``) are stripped. Fewer than two
    options is a :class:`RowError`."""
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError:
            raw = [line for line in raw.splitlines() if line.strip()]
    if isinstance(raw, dict):  # {"A": "...", "B": "..."}
        raw = [raw[k] for k in sorted(raw)]
    if not isinstance(raw, list | tuple) or len(raw) < 2:
        raise RowError(row.where, f"options must be a list of at least 2, got {raw!r}"[:200])
    return [split_option(str(c), LETTERS[i]) for i, c in enumerate(raw)]


def answer_letter(row: Row, answer: Any, choices: list[str]) -> str:
    """An answer given as a letter, ``"(B)"``, ``"B. text"``, an index, or the option text -> letter."""
    if isinstance(answer, bool):
        raise RowError(row.where, f"answer must be an option letter, got {answer!r}")
    if isinstance(answer, int):
        if 0 <= answer < len(choices):
            return LETTERS[answer]
        raise RowError(row.where, f"answer index {answer} is out of range for {len(choices)} options")
    text = str(answer).strip()
    m = re.match(r"^\(?([A-Za-z])\)?(?:[.:)]\s*.*)?$", text, re.S)
    if m and m.group(1).upper() in LETTERS[: len(choices)]:
        return m.group(1).upper()
    for i, c in enumerate(choices):
        if text.lower() == c.strip().lower():
            return LETTERS[i]
    raise RowError(row.where, f"answer {text[:40]!r} is not one of the options {LETTERS[: len(choices)]}")


_TS = re.compile(r"^\s*(?:(\d+):)?(\d+):(\d+(?:\.\d+)?)\s*$")


def parse_timestamp(text: str | float | int) -> float:
    """``"01:02:03.5"`` / ``"02:03"`` / ``"123.5"`` / ``123`` -> seconds."""
    if isinstance(text, int | float):
        return float(text)
    m = _TS.match(str(text))
    if m:
        h, mnt, s = m.groups()
        return int(h or 0) * 3600 + int(mnt) * 60 + float(s)
    return float(str(text).strip())


def join_media_path(media_root: str | os.PathLike[str] | None, rel: str) -> str:
    """``rel`` joined onto ``media_root`` (both ``~``-expanded); ``rel`` alone when it is absolute or there is
    no root. Nothing is checked on disk."""
    p = Path(os.path.expanduser(str(rel)))
    if p.is_absolute() or media_root is None:
        return str(p)
    return str(Path(os.path.expanduser(str(media_root))) / p)


def first_existing_media(media_root: Any, candidates: list[str]) -> str:
    """The first candidate that exists under ``media_root``; else the first candidate (reported missing)."""
    paths = [join_media_path(media_root, c) for c in candidates]
    for p in paths:
        if os.path.exists(p):
            return p
    return paths[0]


def format_template(template: str, row: Row) -> str:
    """``template`` filled with ``row``'s string-keyed fields (``str.format``); a field it names that the
    row lacks is a :class:`RowError`."""
    try:
        return template.format(**{k: v for k, v in row.data.items() if isinstance(k, str)})
    except (KeyError, IndexError) as exc:
        raise RowError(row.where, f"media template {template!r} needs field {exc}") from None


def build_task(row: Row, **fields: Any) -> Task:
    """``Task(**fields)``; a validation failure becomes one :class:`RowError` for ``row`` listing every
    problem as ``field: message``."""
    try:
        return Task(**fields)
    except ValidationError as exc:
        parts = []
        for e in exc.errors():
            msg = str(e["msg"]).removeprefix("Value error, ")
            loc = ".".join(str(x) for x in e["loc"])
            parts.append(f"{loc}: {msg}" if loc else msg)
        raise RowError(row.where, "; ".join(parts)) from None


def question_hash(text: str) -> str:
    """A 10-hex-digit id for ``text``, stable across case and whitespace changes (SHA-1 of the
    lower-cased, whitespace-normalised text)."""
    return hashlib.sha1(" ".join(text.split()).lower().encode()).hexdigest()[:10]


def media_candidates(template: str | list[str] | None, defaults: list[str]) -> list[str]:
    """The media path templates to try: ``defaults`` when ``template`` is None, else ``template`` (one
    string or a list of them)."""
    if template is None:
        return defaults
    return [template] if isinstance(template, str) else list(template)


_EMBEDDED_OPTION = re.compile(r"^\s*\(([A-Z])\)\s*(.*\S)\s*$")


def embedded_options(row: Row, text: str) -> tuple[str, list[str]]:
    """LVBench puts the options in the question: ``"Q?\n(A) x\n(B) y"`` -> (``"Q?"``, [x, y])."""
    stem: list[str] = []
    options: list[str] = []
    for line in str(text).splitlines():
        m = _EMBEDDED_OPTION.match(line)
        if m and m.group(1) == LETTERS[len(options)]:
            options.append(m.group(2))
        elif options:
            options[-1] += " " + line.strip()
        else:
            stem.append(line)
    if len(options) < 2:
        raise RowError(row.where, "no '(A) ...' option lines found in the question")
    return "\n".join(stem).strip(), options
