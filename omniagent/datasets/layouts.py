"""Other layouts of the published benchmark files, and load-time checks of what they contain.

Users hold the same benchmark in several shapes: Video-MME as the flat parquet export or as the
nested ``videomme_json_file.json`` (``questions: [...]`` per video, the YouTube id in ``url``), and
most benchmarks as lmms-eval's flat exports (one question per record with ``video_path``). The
adapters in :mod:`~omniagent.datasets.benchmarks` call these helpers so one registered name reads
every layout. The checks here turn facts about a loaded file that are not errors (exact duplicate
rows, options with identical text) into warnings, and an invalid JSON file into a message a user
can act on (the trailing comma of the official Video-MME template).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

from envs.tasks import Task
from omniagent.datasets.core import Row, RowError
from omniagent.datasets.fields import get_field

__all__ = [
    "duplicate_option_warning",
    "json_error_message",
    "nested_videomme_rows",
    "youtube_id",
]

_YT_ID = re.compile(r"^[A-Za-z0-9_-]{11}$")


def youtube_id(url: str) -> str:
    """``https://www.youtube.com/watch?v=ID`` / ``https://youtu.be/ID`` / ``ID`` -> ``ID``."""
    text = str(url).strip()
    if _YT_ID.match(text) or re.fullmatch(r"[A-Za-z0-9_-]+", text):  # a bare id (one published id is 13 long)
        return text
    parsed = urlparse(text)
    if "v" in parse_qs(parsed.query):
        return parse_qs(parsed.query)["v"][0]
    tail = parsed.path.rstrip("/").rsplit("/", 1)[-1]
    if _YT_ID.match(tail):
        return tail
    raise ValueError(f"no YouTube id in {text[:80]!r}")


def nested_videomme_rows(row: Row) -> Iterator[Row]:
    """The per-question records of a nested Video-MME video record, each carrying the video's fields
    (``video_id``, ``duration``, ``domain``, ``sub_category``) and ``videoID`` taken from ``url``."""
    video = {k: v for k, v in row.data.items() if k != "questions"}
    if "videoID" not in video:
        try:
            video["videoID"] = youtube_id(str(get_field(row, "url", "videoID")))
        except ValueError as exc:
            raise RowError(row.where, str(exc)) from None
    for i, q in enumerate(row.data["questions"]):
        where = f"{row.where} questions[{i}]"
        if not isinstance(q, dict):
            raise RowError(where, "each entry of 'questions' must be an object")
        yield Row({**video, **q}, where)


def duplicate_option_warning(where: str, task: Task) -> str | None:
    """A warning line when two options of an mcq task have the same text (case and spacing ignored):
    a model cannot tell them apart, so such a question measures chance on those options."""
    if not task.choices:
        return None
    seen: dict[str, int] = {}
    for i, choice in enumerate(task.choices):
        key = " ".join(choice.split()).lower()
        if key in seen:
            a, b = "ABCDEFGHIJ"[seen[key]], "ABCDEFGHIJ"[i]
            return f"{where}: task {task.id!r}: options {a} and {b} have the same text {choice!r}"
        seen[key] = i
    return None


def json_error_message(path: Path, text: str, exc: json.JSONDecodeError) -> str:
    """``file:line: ...`` for an invalid JSON file; a trailing comma (JSON forbids one before ``}`` or
    ``]``, but the official Video-MME template has them) is named with the line of the comma."""
    before = text[: exc.pos].rstrip()
    if before.endswith(",") and text[exc.pos : exc.pos + 1] in ("}", "]"):
        line = before.count("\n") + 1
        others = len(re.findall(r",\s*[}\]]", text)) - 1
        more = f" ({others} more like it in the file)" if others > 0 else ""
        return (
            f"{path}:{line}: trailing comma before '{text[exc.pos]}' (not valid JSON){more}; "
            "remove the comma(s) after the last item of each object and list"
        )
    return f"{path}:{exc.lineno}: not valid JSON ({exc.msg})"


def dailyomni_domain(value: Any) -> str | None:
    """Daily-Omni's ``content_parent_category``, or None for a missing one: the release writes the
    literal text "No content_parent_category provided" for 550 of 1197 rows, which is not a domain."""
    if value is None:
        return None
    text = str(value).strip()
    if not text or text.lower().startswith("no content_parent_category"):
        return None
    return text
