"""Benchmark loaders: published annotation files on local disk -> :class:`envs.tasks.Task`.

Every loader is registered by name (``@register_dataset("videomme")``) and called through
:func:`load_dataset`, which returns a :class:`LoadedDataset`:

- ``tasks``: the usable tasks, media paths absolute (resolved against ``media_root``);
- ``missing``: one :class:`MissingMedia` per task whose media file is absent or empty, with the
  reason; those tasks are skipped, never a crash.

A malformed annotation (a required field absent, an answer that is not one of the options, a row
that fails :class:`~envs.tasks.Task` validation) raises :class:`DatasetError` naming the file and
the row (``file:row: reason``), all bad rows at once. Duplicate task ids raise it too.

Annotation files are read by suffix: ``.jsonl``, ``.json`` (a list of rows, a dict keyed by video,
or ``{"data": [...]}``), ``.parquet`` (pyarrow) and ``.csv``. Nothing is downloaded.

The adapters follow each benchmark's published release (field names listed in each docstring); when
a release renames a field, pass ``fields={...}`` to the ``generic`` loader or extend the adapter.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from envs.tasks import LETTERS, TASK_TYPES, Task

__all__ = [
    "DATASETS",
    "DatasetError",
    "LoadedDataset",
    "MissingMedia",
    "Row",
    "RowError",
    "check_media",
    "load_dataset",
    "parse_timestamp",
    "read_rows",
    "register_dataset",
    "split_option",
]


class DatasetError(ValueError):
    """Malformed annotations or duplicate task ids; the message names file and row of each problem."""


@dataclass
class MissingMedia:
    task_id: str
    media: str
    reason: str

    def __str__(self) -> str:
        return f"{self.task_id}: {self.media}: {self.reason}"


@dataclass
class LoadedDataset:
    name: str
    tasks: list[Task]
    missing: list[MissingMedia] = field(default_factory=list)
    files: list[str] = field(default_factory=list)

    def summary(self) -> str:
        text = f"{self.name}: {len(self.tasks)} task(s) from {', '.join(self.files) or '-'}"
        if self.missing:
            text += f"; {len(self.missing)} skipped for missing media (first: {self.missing[0]})"
        return text


@dataclass
class Row:
    """One annotation record and where it came from (for error messages)."""

    data: dict[str, Any]
    where: str  # "file:row"


Produced = list[tuple[str, "Task | RowError"]]
DATASETS: dict[str, Callable[..., Produced]] = {}


class RowError(ValueError):
    """One malformed record; ``where`` is ``file:row``."""

    def __init__(self, where: str, message: str) -> None:
        super().__init__(f"{where}: {message}")
        self.where = where


def register_dataset(name: str, per_row: bool = True) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register a dataset adapter under ``name``.

    With ``per_row`` (the default) the decorated function is ``fn(row: Row, media_root, **kw) ->
    Task | list[Task]`` and raises :class:`RowError` for a malformed record; it is applied to every
    record of every annotation file. Otherwise it is ``fn(files, media_root, **kw) -> list of
    (where, Task | RowError)`` and handles the files itself.
    """

    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        if name in DATASETS:
            raise ValueError(f"dataset {name!r} is registered twice")
        if not per_row:
            DATASETS[name] = fn
            return fn

        def run(
            files: list[Path], media_root: Any = None, records_key: str | None = None, **kw: Any
        ) -> Produced:
            if not files:
                raise DatasetError(f"dataset {name!r} needs an annotation file (annotations=...)")
            out: Produced = []
            for f in files:
                for row in read_rows(f, records_key):
                    try:
                        made = fn(row, media_root, **kw)
                    except RowError as exc:
                        out.append((row.where, exc))
                        continue
                    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
                        # a field of the wrong shape the adapter did not anticipate: still name the row
                        out.append((row.where, RowError(row.where, f"{type(exc).__name__}: {exc}")))
                        continue
                    out.extend((row.where, t) for t in (made if isinstance(made, list) else [made]))
            return out

        run.__doc__ = fn.__doc__
        run.__name__ = fn.__name__
        DATASETS[name] = run
        return fn

    return deco


# ------------------------------------------------------------------------------------------ file reading
def read_rows(path: str | os.PathLike[str], records_key: str | None = None) -> Iterator[Row]:
    """Records of an annotation file, each with its ``file:row`` (1-based line or index).

    ``.json`` files may hold a list of records, ``{records_key: [...]}`` (default keys tried:
    ``data``, ``annotations``, ``questions``), or a dict keyed by id whose values are dicts (the key
    is then added as ``_key``).
    """
    path = Path(path)
    if not path.exists():
        raise DatasetError(f"{path}: annotation file not found")
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        with path.open(encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, start=1):
                text = line.strip()
                if not text or text.startswith("#"):
                    continue
                where = f"{path}:{lineno}"
                try:
                    rec = json.loads(text)
                except json.JSONDecodeError as exc:
                    raise DatasetError(f"{where}: not valid JSON ({exc.msg} at column {exc.colno})") from None
                if not isinstance(rec, dict):
                    raise DatasetError(f"{where}: expected a JSON object, got {type(rec).__name__}")
                yield Row(rec, where)
    elif suffix == ".json":
        try:
            obj = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise DatasetError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from None
        if isinstance(obj, dict):
            keys = [records_key] if records_key else ["data", "annotations", "questions"]
            for key in keys:
                if key in obj and isinstance(obj[key], list):
                    obj = obj[key]
                    break
        if isinstance(obj, list):
            for i, rec in enumerate(obj):
                where = f"{path}:{i + 1}"
                if not isinstance(rec, dict):
                    raise DatasetError(f"{where}: expected a JSON object, got {type(rec).__name__}")
                yield Row(rec, where)
        elif isinstance(obj, dict):
            for key, rec in obj.items():
                where = f"{path}:{key}"
                if not isinstance(rec, dict):
                    raise DatasetError(f"{where}: expected a JSON object, got {type(rec).__name__}")
                yield Row({"_key": key, **rec}, where)
        else:
            raise DatasetError(f"{path}: expected a JSON list or object at the top level")
    elif suffix == ".parquet":
        import pyarrow.parquet as pq

        try:
            table = pq.read_table(path)
        except Exception as exc:  # pyarrow raises several unrelated types
            raise DatasetError(f"{path}: not a readable parquet file ({exc})") from None
        for i, rec in enumerate(table.to_pylist()):
            yield Row(rec, f"{path}:{i + 1}")
    elif suffix == ".csv":
        with path.open(encoding="utf-8", newline="") as fh:
            for i, rec in enumerate(csv.DictReader(fh), start=2):
                yield Row(dict(rec), f"{path}:{i}")
    else:
        raise DatasetError(f"{path}: unsupported annotation format {suffix!r} (jsonl, json, parquet, csv)")


def _files(annotations: str | os.PathLike[str] | list[Any]) -> list[Path]:
    items = annotations if isinstance(annotations, list | tuple) else [annotations]
    out: list[Path] = []
    for item in items:
        p = Path(str(item)).expanduser()
        if p.is_dir():
            found = sorted(q for ext in ("jsonl", "json", "parquet", "csv") for q in p.glob(f"*.{ext}"))
            if not found:
                raise DatasetError(f"{p}: no annotation files (jsonl, json, parquet, csv) in this folder")
            out.extend(found)
        else:
            out.append(p)
    return out


# ------------------------------------------------------------------------------------------- helpers
def _get(row: Row, *names: str, required: bool = True, default: Any = None) -> Any:
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


def _choices(row: Row, raw: Any) -> list[str]:
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


def _letter(row: Row, answer: Any, choices: list[str]) -> str:
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


def _media_path(media_root: str | os.PathLike[str] | None, rel: str) -> str:
    p = Path(os.path.expanduser(str(rel)))
    if p.is_absolute() or media_root is None:
        return str(p)
    return str(Path(os.path.expanduser(str(media_root))) / p)


def _resolve(media_root: Any, candidates: list[str]) -> str:
    """The first candidate that exists under ``media_root``; else the first candidate (reported missing)."""
    paths = [_media_path(media_root, c) for c in candidates]
    for p in paths:
        if os.path.exists(p):
            return p
    return paths[0]


def _format(template: str, row: Row) -> str:
    try:
        return template.format(**{k: v for k, v in row.data.items() if isinstance(k, str)})
    except (KeyError, IndexError) as exc:
        raise RowError(row.where, f"media template {template!r} needs field {exc}") from None


def _task(row: Row, **fields: Any) -> Task:
    try:
        return Task(**fields)
    except ValidationError as exc:
        parts = []
        for e in exc.errors():
            msg = str(e["msg"]).removeprefix("Value error, ")
            loc = ".".join(str(x) for x in e["loc"])
            parts.append(f"{loc}: {msg}" if loc else msg)
        raise RowError(row.where, "; ".join(parts)) from None


def check_media(tasks: Iterable[Task]) -> tuple[list[Task], list[MissingMedia]]:
    """Split tasks into those whose media file exists and is non-empty, and the rest (with reasons)."""
    ok: list[Task] = []
    missing: list[MissingMedia] = []
    cache: dict[str, str | None] = {}
    for t in tasks:
        if t.media not in cache:
            p = Path(t.media)
            if not p.exists():
                cache[t.media] = "file not found"
            elif not p.is_file():
                cache[t.media] = "not a regular file"
            elif p.stat().st_size == 0:
                cache[t.media] = "file is empty (0 bytes)"
            else:
                cache[t.media] = None
        reason = cache[t.media]
        if reason is None:
            ok.append(t)
        else:
            missing.append(MissingMedia(t.id, t.media, reason))
    return ok, missing


def load_dataset(
    name: str,
    annotations: str | os.PathLike[str] | list[Any] | None = None,
    media_root: str | os.PathLike[str] | None = None,
    *,
    limit: int | None = None,
    check: bool = True,
    task_types: list[str] | None = None,
    **kwargs: Any,
) -> LoadedDataset:
    """Load a registered dataset. ``annotations``: a file, a folder of files, or a list of them.

    ``media_root`` defaults to the folder of the (first) annotation file. ``task_types`` keeps only
    those types; ``limit`` keeps the first N tasks in file order (before dropping missing media, so
    two users with different missing files still attempt the same ids). ``kwargs`` go to
    the adapter (see each adapter's docstring).
    """
    if name not in DATASETS:
        raise KeyError(f"unknown dataset {name!r}; known: {', '.join(sorted(DATASETS))}")
    adapter = DATASETS[name]
    files: list[Path] = []
    if annotations is not None:
        files = _files(annotations)
        if media_root is None:
            media_root = str(files[0].resolve().parent)
    problems: list[str] = []
    tasks: list[Task] = []
    first: dict[str, str] = {}
    for where, item in adapter(files=files, media_root=media_root, **kwargs):
        if isinstance(item, RowError):
            problems.append(str(item))
            continue
        if item.id in first:
            problems.append(f"{where}: duplicate task id {item.id!r} (first at {first[item.id]})")
            continue
        first[item.id] = where
        tasks.append(item)
    if problems:
        shown = problems[:20]
        more = f"\n... and {len(problems) - 20} more" if len(problems) > 20 else ""
        raise DatasetError(
            f"{len(problems)} bad annotation(s) in dataset {name!r}:\n" + "\n".join(shown) + more
        )
    if task_types:
        tasks = [t for t in tasks if t.task_type in task_types]
    if limit is not None:  # before the media check, so every user attempts the same ids
        tasks = tasks[: int(limit)]
    missing: list[MissingMedia] = []
    if check:
        tasks, missing = check_media(tasks)
    return LoadedDataset(name=name, tasks=tasks, missing=missing, files=[str(f) for f in files])


def _qhash(text: str) -> str:
    return hashlib.sha1(" ".join(text.split()).lower().encode()).hexdigest()[:10]


def _candidates(template: str | list[str] | None, defaults: list[str]) -> list[str]:
    if template is None:
        return defaults
    return [template] if isinstance(template, str) else list(template)


# ======================================================================================== adapters
@register_dataset("tasks")
def native_tasks(row: Row, media_root: Any, **_: Any) -> Task:
    """omniagent's own task format (see :class:`envs.tasks.Task`): one task object per record.

    Fields: ``id``, ``media``, ``question``, ``task_type``, ``choices``, ``answer``, ``evidence``,
    ``source``, ``split``, ``duration``, ``extra``. A relative ``media`` is resolved against
    ``media_root`` (default: the annotation file's folder).
    """
    data = dict(row.data)
    if "media" in data and isinstance(data["media"], str):
        data["media"] = _media_path(media_root, data["media"])
    return _task(row, **data)


@register_dataset("generic")
def generic(
    row: Row,
    media_root: Any,
    fields: dict[str, str] | None = None,
    task_type: str | None = None,
    media_template: str | list[str] | None = None,
    id_prefix: str = "",
    source: str = "generic",
    split: str = "test",
    extra_fields: list[str] | None = None,
    **_: Any,
) -> Task:
    """Any JSONL / JSON / parquet / CSV with one question per record, fields mapped by config.

    ``fields`` maps omniagent names to the file's names, e.g. ``{"id": "qid", "media": "video_path",
    "question": "q", "choices": "options", "answer": "gt", "task_type": "kind", "evidence":
    "spans", "duration": "seconds", "category": "question_type"}``; unmapped names are looked up
    as themselves. ``task_type`` fixes the type for every record (else the mapped field is read).
    ``media_template`` (``"videos/{video_id}.mp4"``, or a list tried in order) builds the media path
    from the record when there is no media field. mcq answers may be a letter, ``"(B)"``,
    ``"B. text"``, a 0-based index or the option text; options may carry ``"A. "`` prefixes.
    ``extra_fields`` are copied into ``Task.extra``.
    """
    f = {k: k for k in ("id", "media", "question", "task_type", "choices", "answer", "evidence", "duration")}
    f.update(fields or {})
    kind = task_type or _get(row, f["task_type"])
    if kind not in TASK_TYPES:
        raise RowError(row.where, f"task type {kind!r} is not one of {', '.join(TASK_TYPES)}")
    if media_template is not None and f["media"] not in row.data:
        media = _resolve(media_root, [_format(t, row) for t in _candidates(media_template, [])])
    else:
        media = _media_path(media_root, str(_get(row, f["media"])))
    question = str(_get(row, f["question"]))
    answer = _get(row, f["answer"], required=False)
    choices = None
    if kind == "mcq":
        choices = _choices(row, _get(row, f["choices"]))
        if answer is not None:
            answer = _letter(row, answer, choices)
    elif kind == "tr" and isinstance(answer, str):
        try:
            answer = json.loads(answer)
        except json.JSONDecodeError:
            raise RowError(row.where, f"tr answer must be JSON intervals, got {answer[:40]!r}") from None
    evidence = _get(row, f["evidence"], required=False)
    if isinstance(evidence, str):
        try:
            evidence = json.loads(evidence)
        except json.JSONDecodeError:
            raise RowError(row.where, f"evidence must be JSON intervals, got {evidence[:40]!r}") from None
    extra = {k: row.data[k] for k in (extra_fields or []) if k in row.data}
    if "category" in f and f["category"] in row.data:
        extra["category"] = row.data[f["category"]]
    duration = _get(row, f["duration"], required=False)
    return _task(
        row,
        id=f"{id_prefix}{_get(row, f['id'])}",
        media=media,
        question=question,
        task_type=kind,
        choices=choices,
        answer=answer,
        evidence=evidence,
        source=source,
        split=split,
        duration=float(duration) if duration is not None else None,
        extra=extra,
    )


@register_dataset("videomme")
def videomme(row: Row, media_root: Any, media_template: str | list[str] | None = None, **_: Any) -> Task:
    """Video-MME (the ``videomme/test-*.parquet`` release, or the same records as JSON/JSONL).

    Fields per question: ``video_id`` ("001"), ``duration`` ("short" | "medium" | "long"), ``domain``,
    ``sub_category``, ``url``, ``videoID`` (the YouTube id, also the file name), ``question_id``
    ("001-1"), ``task_type`` (e.g. "Counting Problem"), ``question``, ``options`` (["A. ...", "B. ...",
    "C. ...", "D. ..."]), ``answer`` ("A".."D"). Media: ``{videoID}.mp4`` under the media root (also
    tried: ``data/``, ``videos/`` sub-folders, ``.mkv``). ``Task.extra`` keeps ``category``
    (= task_type), ``duration_label``, ``domain`` and ``sub_category``; subtitles are not used.
    """
    vid = str(_get(row, "videoID", "video_name", "youtube_id"))
    choices = _choices(row, _get(row, "options"))
    defaults = [f"{vid}.mp4", f"data/{vid}.mp4", f"videos/{vid}.mp4", f"{vid}.mkv"]
    cands = [_format(t, row) for t in _candidates(media_template, [])] or defaults
    return _task(
        row,
        id=f"videomme-{_get(row, 'question_id')}",
        media=_resolve(media_root, cands),
        question=str(_get(row, "question")),
        task_type="mcq",
        choices=choices,
        answer=_letter(row, _get(row, "answer"), choices),
        source="videomme",
        extra={
            "category": _get(row, "task_type", required=False),
            "duration_label": _get(row, "duration", required=False),
            "domain": _get(row, "domain", required=False),
            "sub_category": _get(row, "sub_category", required=False),
            "video_id": _get(row, "video_id", required=False),
        },
    )


_EMBEDDED_OPTION = re.compile(r"^\s*\(([A-Z])\)\s*(.*\S)\s*$")


def _embedded_options(row: Row, text: str) -> tuple[str, list[str]]:
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


def _span(text: Any) -> list[float] | None:
    """``"00:15-00:19"`` / ``"1:02:03-1:02:10"`` -> [start, end] seconds; None when unparseable."""
    if not isinstance(text, str) or "-" not in text:
        return None
    a, _, b = text.partition("-")
    try:
        start, end = parse_timestamp(a), parse_timestamp(b)
    except ValueError:
        return None
    return [start, end] if 0 <= start <= end else None


@register_dataset("lvbench")
def lvbench(row: Row, media_root: Any, media_template: str | list[str] | None = None, **_: Any) -> list[Task]:
    """LVBench (``video_info.meta.jsonl``): one record per video holding its questions.

    Fields: ``key`` (the YouTube id, also the file name), ``type`` (video category), ``video_info``
    ({``duration_minutes``, ``fps``, ...}), ``qa``: a list of {``uid``, ``question`` (the stem followed
    by option lines ``"(A) ..."``), ``answer`` ("A".."D"), ``question_type`` (a list of categories),
    ``time_reference`` ("MM:SS-MM:SS", the evidence span)}. Media: ``{key}.mp4``. Each question
    becomes one mcq task with ``evidence`` from ``time_reference`` when it parses.
    """
    key = str(_get(row, "key", "video_id"))
    defaults = [f"{key}.mp4", f"videos/{key}.mp4", f"{key}.mkv"]
    cands = [_format(t, row) for t in _candidates(media_template, [])] or defaults
    media = _resolve(media_root, cands)
    qa = _get(row, "qa")
    if not isinstance(qa, list):
        raise RowError(row.where, "'qa' must be a list of questions")
    tasks = []
    for i, q in enumerate(qa):
        sub = Row(q if isinstance(q, dict) else {}, f"{row.where} qa[{i}]")
        if not isinstance(q, dict):
            raise RowError(sub.where, "each qa entry must be an object")
        stem, options = _embedded_options(sub, _get(sub, "question"))
        span = _span(q.get("time_reference"))
        qtype = q.get("question_type")
        tasks.append(
            _task(
                sub,
                id=f"lvbench-{_get(sub, 'uid', default=f'{key}-{i}', required=False)}",
                media=media,
                question=stem,
                task_type="mcq",
                choices=options,
                answer=_letter(sub, _get(sub, "answer"), options),
                evidence=[span] if span else None,
                source="lvbench",
                extra={
                    "category": ", ".join(qtype) if isinstance(qtype, list) else qtype,
                    "video_type": row.data.get("type"),
                    "time_reference": q.get("time_reference"),
                },
            )
        )
    return tasks


@register_dataset("dailyomni")
def dailyomni(row: Row, media_root: Any, media_template: str | list[str] | None = None, **_: Any) -> Task:
    """Daily-Omni (``qa.json``): a list of audio-visual multiple-choice questions.

    Fields: ``video_id``, ``Question``, ``Choice`` (["A. ...", ...]), ``Answer`` ("A".."D"), ``Type``
    (question category, e.g. "AV Event Alignment"), ``video_duration`` ("30s" | "60s"),
    ``content_parent_category``, ``content_fine_category``. Media (first that exists):
    ``{video_id}/{video_id}_video.mp4``, ``Videos/{video_id}/{video_id}_video.mp4``, ``{video_id}.mp4``.
    The id is ``dailyomni-{video_id}-{hash of the question}`` (the release has no question id).
    """
    vid = str(_get(row, "video_id"))
    question = str(_get(row, "Question", "question"))
    choices = _choices(row, _get(row, "Choice", "choices", "options"))
    defaults = [f"{vid}/{vid}_video.mp4", f"Videos/{vid}/{vid}_video.mp4", f"{vid}.mp4"]
    cands = [_format(t, row) for t in _candidates(media_template, [])] or defaults
    return _task(
        row,
        id=f"dailyomni-{_get(row, 'id', 'qid', required=False, default=f'{vid}-{_qhash(question)}')}",
        media=_resolve(media_root, cands),
        question=question,
        task_type="mcq",
        choices=choices,
        answer=_letter(row, _get(row, "Answer", "answer"), choices),
        source="dailyomni",
        extra={
            "category": _get(row, "Type", "type", required=False),
            "duration_label": _get(row, "video_duration", required=False),
            "domain": _get(row, "content_parent_category", required=False),
        },
    )


@register_dataset("worldsense")
def worldsense(
    row: Row, media_root: Any, media_template: str | list[str] | None = None, **_: Any
) -> list[Task]:
    """WorldSense (``worldsense_qa.json``): a dict keyed by video id, each holding ``task1``, ``task2``...

    Per video: ``video_id`` (else the dict key), ``duration``, ``domain``, ``sub_category``, and
    ``taskN`` = {``question``, ``candidates`` (["A. ...", ...]), ``answer`` ("A".."D"),
    ``task_domain``, ``task_type``}. Flat records (the lmms-eval parquet: ``video``/``video_id``,
    ``question``, ``candidates``, ``answer``, ``task_type``, ``task_domain``, ``index``) work too.
    Media: ``{video_id}.mp4`` (also ``videos/{video_id}.mp4``).
    """
    vid = str(_get(row, "video_id", "video", "_key"))
    vid = Path(vid).stem if vid.endswith(".mp4") else vid
    defaults = [f"{vid}.mp4", f"videos/{vid}.mp4"]
    data = {**row.data, "video_id": vid}
    cands = [_format(t, Row(data, row.where)) for t in _candidates(media_template, [])] or defaults
    media = _resolve(media_root, cands)
    if "question" in row.data:
        items = [
            (str(_get(row, "index", "id", required=False, default=_qhash(str(row.data["question"])))), row)
        ]
    else:
        keys = sorted((k for k in row.data if re.fullmatch(r"task\d+", str(k))), key=lambda k: int(k[4:]))
        if not keys:
            raise RowError(row.where, "no 'question' field and no 'task1', 'task2', ... entries")
        items = []
        for k in keys:
            if not isinstance(row.data[k], dict):
                raise RowError(f"{row.where} {k}", "each taskN entry must be an object")
            items.append((k, Row(row.data[k], f"{row.where} {k}")))
    tasks = []
    for suffix, sub in items:
        choices = _choices(sub, _get(sub, "candidates", "options"))
        tasks.append(
            _task(
                sub,
                id=f"worldsense-{vid}-{suffix}",
                media=media,
                question=str(_get(sub, "question")),
                task_type="mcq",
                choices=choices,
                answer=_letter(sub, _get(sub, "answer"), choices),
                source="worldsense",
                extra={
                    "category": _get(sub, "task_type", required=False),
                    "task_domain": _get(sub, "task_domain", required=False),
                    "domain": row.data.get("domain"),
                },
            )
        )
    return tasks


LONGVALE_QUESTION = (
    'When does the following happen in the video: "{sentence}"? Give the interval [start, end] in seconds.'
)


@register_dataset("longvale")
def longvale(
    row: Row,
    media_root: Any,
    media_template: str | list[str] | None = None,
    question_template: str = LONGVALE_QUESTION,
    **_: Any,
) -> list[Task]:
    """LongVALE temporal grounding (ActivityNet-Captions style ``{video_id: {...}}`` JSON).

    Per video: ``duration`` (seconds), ``timestamps`` ([[start, end], ...]) and ``sentences`` (one
    omni-modal event caption per timestamp). Each (sentence, span) becomes one ``tr`` task whose
    answer is ``[[start, end]]``; spans running past ``duration`` are clipped to it (recorded in
    ``extra.clipped``). Media: ``{video_id}.mp4`` (also ``videos/{video_id}.mp4``).
    """
    vid = str(_get(row, "video_id", "_key"))
    data = {**row.data, "video_id": vid}
    defaults = [f"{vid}.mp4", f"videos/{vid}.mp4"]
    cands = [_format(t, Row(data, row.where)) for t in _candidates(media_template, [])] or defaults
    media = _resolve(media_root, cands)
    try:
        duration = float(_get(row, "duration"))
    except (TypeError, ValueError):
        raise RowError(row.where, f"duration must be a number, got {row.data.get('duration')!r}") from None
    spans, sentences = _get(row, "timestamps"), _get(row, "sentences")
    if not isinstance(spans, list) or not isinstance(sentences, list) or len(spans) != len(sentences):
        raise RowError(row.where, "'timestamps' and 'sentences' must be lists of the same length")
    tasks = []
    for i, (span, sentence) in enumerate(zip(spans, sentences, strict=True)):
        where = f"{row.where} [{i}]"
        if not isinstance(span, list | tuple) or len(span) != 2:
            raise RowError(where, f"timestamp must be [start, end], got {span!r}")
        try:
            start, end = float(span[0]), float(span[1])
        except (TypeError, ValueError):
            raise RowError(where, f"timestamp bounds must be numbers, got {span!r}") from None
        clipped = end > duration
        end = min(end, duration)
        tasks.append(
            _task(
                Row({}, where),
                id=f"longvale-{vid}-{i}",
                media=media,
                question=question_template.format(sentence=str(sentence).strip()),
                task_type="tr",
                answer=[[start, end]],
                evidence=[[start, end]],
                source="longvale",
                duration=duration,
                extra={"category": "temporal_grounding", "sentence": sentence, "clipped": clipped},
            )
        )
    return tasks


VSI_NUMERIC = {
    "object_counting": "num",
    "object_abs_distance": "num",
    "object_size_estimation": "size",
    "room_size_estimation": "size",
}


@register_dataset("vsibench")
def vsibench(row: Row, media_root: Any, media_template: str | list[str] | None = None, **_: Any) -> Task:
    """VSI-Bench (``test-*.parquet`` / ``test.jsonl``): spatial questions about indoor scene videos.

    Fields: ``id`` (int), ``dataset`` ("arkitscenes" | "scannet" | "scannetpp"), ``scene_name``,
    ``question_type``, ``question``, ``options`` (["A. ...", ...] or null), ``ground_truth`` (a number as
    text for numeric types, else a letter). Numeric types become ``num`` (object_counting,
    object_abs_distance) or ``size`` (object_size_estimation, room_size_estimation) tasks scored by
    MRA; the rest are mcq. Media: ``{dataset}/{scene_name}.mp4`` (also ``{scene_name}.mp4``).
    """
    scene = str(_get(row, "scene_name"))
    qtype = str(_get(row, "question_type"))
    defaults = [f"{row.data.get('dataset', '')}/{scene}.mp4", f"{scene}.mp4"]
    cands = [_format(t, row) for t in _candidates(media_template, [])] or defaults
    truth = _get(row, "ground_truth", "answer")
    choices = None
    if qtype in VSI_NUMERIC:
        kind = VSI_NUMERIC[qtype]
        try:
            answer: Any = float(str(truth).strip())
        except ValueError:
            raise RowError(row.where, f"{qtype} ground_truth must be a number, got {truth!r}") from None
    else:
        kind = "mcq"
        choices = _choices(row, _get(row, "options"))
        answer = _letter(row, truth, choices)
    return _task(
        row,
        id=f"vsibench-{_get(row, 'id')}",
        media=_resolve(media_root, cands),
        question=str(_get(row, "question")),
        task_type=kind,
        choices=choices,
        answer=answer,
        source="vsibench",
        extra={"category": qtype, "dataset": row.data.get("dataset")},
    )


@register_dataset("synthetic", per_row=False)
def synthetic(
    files: list[Path],
    media_root: Any = None,
    out_dir: str | None = None,
    seed: int = 0,
    n_videos: int = 2,
    durations: list[float] | tuple[float, ...] = (60.0, 600.0),
    mode: str = "video",
    config: dict[str, Any] | None = None,
    split: str = "test",
    **_: Any,
) -> Produced:
    """The synthetic long-media benchmark of :mod:`envs.synth`, generated (or reused) in ``out_dir``.

    Deterministic in (``seed``, ``n_videos``, ``durations``, ``mode``, ``config``); files whose
    sidecar hash matches are reused. Annotation files, if given, are ignored.
    """
    from envs.synth import generate_benchmark

    target = out_dir or media_root
    if target is None:
        raise DatasetError("the synthetic dataset needs out_dir (where to write media and tasks)")
    tasks = generate_benchmark(
        os.path.expanduser(str(target)),
        seed=int(seed),
        n_videos=int(n_videos),
        durations=[float(d) for d in durations],
        mode=mode,  # type: ignore[arg-type]
        config=dict(config or {}),
        split=split,
    )
    where = str(Path(os.path.expanduser(str(target))) / "tasks.jsonl")
    return [(f"{where}:{i + 1}", t) for i, t in enumerate(tasks)]
