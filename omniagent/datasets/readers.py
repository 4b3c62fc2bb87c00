"""Reading annotation files (jsonl, json, parquet, csv) into :class:`~omniagent.datasets.core.Row` records."""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from envs.jsonl import JsonlError, JsonlReader
from omniagent.datasets.core import DatasetError, Row
from omniagent.datasets.encoding import text_encoding


def read_rows(path: str | os.PathLike[str], records_key: str | None = None) -> Iterator[Row]:
    """Records of an annotation file, each with its ``file:row`` (1-based line or index).

    Text files are UTF-8, or UTF-16/32 with a byte-order mark; anything else is refused naming the
    encoding detected (:mod:`omniagent.datasets.encoding`).

    ``.json`` files may hold a list of records, ``{records_key: [...]}`` (default keys tried:
    ``data``, ``annotations``, ``questions``), or a dict keyed by id whose values are dicts (the key
    is then added as ``_key``).
    """
    path = Path(path)
    if not path.exists():
        raise DatasetError(f"{path}: annotation file not found")
    suffix = path.suffix.lower()
    codec = text_encoding(path) if suffix in (".jsonl", ".json", ".csv") else "utf-8"
    if suffix == ".jsonl":  # hand-written input: '#' comments allowed, every bad line reported at once
        try:
            for lineno, rec in JsonlReader(path, comments=True, collect=True, encoding=codec):
                yield Row(rec, f"{path}:{lineno}")
        except JsonlError as exc:
            raise DatasetError(str(exc)) from None
    elif suffix == ".json":
        text = path.read_text(encoding=codec)
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as exc:
            from omniagent.datasets.layouts import json_error_message

            raise DatasetError(json_error_message(path, text, exc)) from None
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
        with path.open(encoding=codec, newline="") as fh:
            for i, rec in enumerate(csv.DictReader(fh), start=2):
                yield Row(dict(rec), f"{path}:{i}")
    else:
        raise DatasetError(f"{path}: unsupported annotation format {suffix!r} (jsonl, json, parquet, csv)")


def annotation_files(annotations: str | os.PathLike[str] | list[Any]) -> list[Path]:
    """The annotation files named by ``annotations`` (a path or a list of them), in order: a folder
    stands for its ``*.jsonl``, ``*.json``, ``*.parquet`` and ``*.csv`` files (sorted; an empty folder is a
    :class:`DatasetError`); a file is kept as given, whether or not it exists."""
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
