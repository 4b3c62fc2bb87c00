"""Train/eval overlap guard (:func:`check_overlap`, :func:`guard`).

Media are fingerprinted by content (sha256 of size + first MiB + last MiB: cheap on multi-GB files,
blind to renames and copies) and questions by normalised text. Shared media, or the same question on
the same media, is an overlap; the same question text on other media is reported but not fatal by
default (template questions repeat by design).

The observation-fidelity probe lives in :mod:`omniagent.fidelity`; both are re-exported by
:mod:`omniagent.validity`.
"""

from __future__ import annotations

import hashlib
import os
import re
import unicodedata
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from envs.tasks import Task

__all__ = [
    "OverlapError",
    "OverlapReport",
    "check_overlap",
    "guard",
    "media_hash",
    "normalize_question",
]

HASH_CHUNK = 1 << 20


@lru_cache(maxsize=65536)
def _media_hash_cached(path: str, size: int, mtime_ns: int, chunk: int) -> str:
    h = hashlib.sha256()
    h.update(str(size).encode() + b"\0")
    with open(path, "rb") as fh:
        h.update(fh.read(chunk))
        if size > chunk:
            fh.seek(max(chunk, size - chunk))
            h.update(fh.read(chunk))
    return h.hexdigest()


def media_hash(path: str | os.PathLike[str], chunk: int = HASH_CHUNK) -> str:
    """Content fingerprint of a media file: sha256 of its size, first and last ``chunk`` bytes."""
    st = os.stat(path)
    return _media_hash_cached(str(Path(path).resolve()), st.st_size, st.st_mtime_ns, chunk)


def normalize_question(text: str) -> str:
    """Lower case, NFKC, punctuation dropped, whitespace collapsed."""
    text = unicodedata.normalize("NFKC", str(text)).lower()
    return " ".join(re.sub(r"[^\w\s]", " ", text).split())


class OverlapError(RuntimeError):
    """The evaluation set shares media or questions with the training set."""


@dataclass
class OverlapReport:
    media: dict[str, dict[str, list[str]]] = field(default_factory=dict)  # hash -> {train, eval} ids
    pairs: dict[str, dict[str, list[str]]] = field(default_factory=dict)  # (media, question) key -> ids
    questions: dict[str, dict[str, list[str]]] = field(default_factory=dict)  # question -> ids
    unhashed: list[str] = field(default_factory=list)  # "id: path: reason" (missing files)
    n_train: int = 0
    n_eval: int = 0

    def kinds(self, fail_on: Iterable[str] = ("media", "pair")) -> list[str]:
        found = {"media": self.media, "pair": self.pairs, "question": self.questions}
        return [k for k in fail_on if found[k]]

    def overlaps(self, fail_on: Iterable[str] = ("media", "pair")) -> bool:
        return bool(self.kinds(fail_on))

    def eval_ids(self, fail_on: Iterable[str] = ("media", "pair")) -> set[str]:
        found = {"media": self.media, "pair": self.pairs, "question": self.questions}
        return {i for k in fail_on for v in found[k].values() for i in v["eval"]}

    def describe(self, max_items: int = 10) -> str:
        lines = [
            f"overlap check: {self.n_train} train vs {self.n_eval} eval tasks: "
            f"{len(self.media)} shared media file(s), {len(self.pairs)} shared (media, question) pair(s), "
            f"{len(self.questions)} shared question text(s)"
        ]
        for label, items in (("media", self.media), ("pair", self.pairs), ("question", self.questions)):
            for key, ids in list(items.items())[:max_items]:
                lines.append(
                    f"  {label} {key[:60]}: eval {', '.join(ids['eval'][:3])} <-> train {', '.join(ids['train'][:3])}"
                )
        if self.unhashed:
            lines.append(
                f"  {len(self.unhashed)} media file(s) could not be hashed (first: {self.unhashed[0]})"
            )
        return "\n".join(lines)


def _index(
    tasks: Iterable[Task], unhashed: list[str]
) -> tuple[dict[str, list[str]], dict[str, list[str]], dict[str, list[str]]]:
    media: dict[str, list[str]] = defaultdict(list)
    pairs: dict[str, list[str]] = defaultdict(list)
    questions: dict[str, list[str]] = defaultdict(list)
    for t in tasks:
        q = normalize_question(t.question)
        questions[q].append(t.id)
        try:
            h = media_hash(t.media)
        except OSError as exc:
            unhashed.append(f"{t.id}: {t.media}: {exc.strerror or exc}")
            continue
        media[h].append(t.id)
        pairs[f"{h[:16]}|{q}"].append(t.id)
    return media, pairs, questions


def check_overlap(train: Iterable[Task], evaluation: Iterable[Task]) -> OverlapReport:
    """Shared media (by content hash), shared (media, question) pairs and shared question texts."""
    train, evaluation = list(train), list(evaluation)
    report = OverlapReport(n_train=len(train), n_eval=len(evaluation))
    tm, tp, tq = _index(train, report.unhashed)
    em, ep, eq = _index(evaluation, report.unhashed)
    for mine, theirs, out in ((em, tm, report.media), (ep, tp, report.pairs), (eq, tq, report.questions)):
        for key in sorted(set(mine) & set(theirs)):
            out[key] = {"eval": mine[key], "train": theirs[key]}
    return report


def guard(
    train: Iterable[Task],
    evaluation: Iterable[Task],
    *,
    allow: bool = False,
    fail_on: Iterable[str] = ("media", "pair"),
    printer: Callable[[str], None] = print,
) -> OverlapReport:
    """Raise :class:`OverlapError` when the sets overlap (``fail_on`` kinds); with ``allow`` print the
    overlap and return instead."""
    fail_on = tuple(fail_on)
    bad = [k for k in fail_on if k not in ("media", "pair", "question")]
    if bad:
        raise ValueError(f"unknown overlap kinds {bad}; use media, pair, question")
    report = check_overlap(train, evaluation)
    if report.overlaps(fail_on):
        text = report.describe()
        if not allow:
            raise OverlapError(
                text + "\nrefusing to evaluate on data the model was trained on "
                "(set overlap_guard.allow_overlap=true to run anyway)"
            )
        printer(text + "\nWARNING: continuing despite the overlap (allow_overlap)")
    return report
