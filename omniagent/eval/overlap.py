"""Train/eval overlap guard (:func:`check_overlap`, :func:`guard`).

Media are fingerprinted twice. The byte hash (sha256 of size + first MiB + last MiB: cheap on
multi-GB files, blind to renames and copies) finds the same file. The content fingerprint
(:func:`content_fingerprint`: the duration plus an 8x8 RGB thumbnail of the frames at fixed relative
times 0.1 ... 0.9, or the loudness envelope for audio-only files) finds the same media re-encoded,
resized or remuxed, which the bytes cannot: two files match when their durations agree within
``max(0.5 s, 1%)`` and their signatures correlate so that 1 - mean correlation is at most
:data:`CONTENT_THRESHOLD`. Frames of one solid colour say little (a colour-field video of another seed often
shares most of its colours), so two videos are compared by content only when at least :data:`MIN_TEXTURED` of
the sampled times show structure (not one solid colour) in one of them; otherwise their bytes decide. At a time
where one video shows a solid field and the other a glyph or other strong structure, the two differ (a glyph on a
field correlates highly with the bare field, and two fresh colour-field videos once matched that way). A content
match counts as shared media, and its questions as shared pairs. Questions are compared by normalised text.
Shared media, or the same question on the same media, is an overlap; the same question text on other media is
reported but not fatal by default (template questions repeat by design).
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

import numpy as np

from envs.tasks import Task

__all__ = [
    "CONTENT_THRESHOLD",
    "MIN_TEXTURED",
    "Fingerprint",
    "OverlapError",
    "OverlapReport",
    "check_overlap",
    "content_fingerprint",
    "guard",
    "media_hash",
    "normalize_question",
]

HASH_CHUNK = 1 << 20
CONTENT_POINTS = 9  # frames at relative times 0.1, 0.2, ..., 0.9 of the duration
THUMB = 8  # signature side, pixels
# at most this distance (1 - mean correlation) is the same content: the same synthetic video at another
# resolution or re-encoded measures <= 0.01, other synthetic videos >= 0.2
CONTENT_THRESHOLD = 0.07
# at least this many of the CONTENT_POINTS times must show structure in one of two videos to compare their content:
# a fresh colour-field video (the search level) with one or two glyph frames matched a training video's colours
MIN_TEXTURED = 3


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
    content: list[dict[str, object]] = field(default_factory=list)  # {eval, train, distance}
    unread: list[str] = field(default_factory=list)  # "path: reason": hashed by bytes only
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
        for match in self.content[:max_items]:
            lines.append(
                f"  same content, other bytes (distance {float(match['distance']):.3f}): eval {match['eval']} "
                f"<-> train {match['train']}"
            )
        for label, items in (("media", self.media), ("pair", self.pairs), ("question", self.questions)):
            for key, ids in list(items.items())[:max_items]:
                lines.append(
                    f"  {label} {key[:60]}: eval {', '.join(ids['eval'][:3])} <-> train {', '.join(ids['train'][:3])}"
                )
        if self.unread:
            lines.append(
                f"  {len(self.unread)} media file(s) compared by bytes only (first: {self.unread[0]})"
            )
        if self.unhashed:
            lines.append(
                f"  {len(self.unhashed)} media file(s) could not be hashed (first: {self.unhashed[0]})"
            )
        return "\n".join(lines)


def _thumb(image: np.ndarray) -> np.ndarray:
    """A frame as its 8x8 RGB area average (192 values): what survives resize and re-encode."""
    from PIL import Image

    return np.asarray(Image.fromarray(image).resize((THUMB, THUMB), Image.BOX), dtype=np.float32).reshape(-1)


def _picture(x: np.ndarray) -> np.ndarray | None:
    """A thumbnail's rows above its bottom one, as (pixels, RGB) (None for an audio signature): the bottom row
    holds the strip where synthetic media stamp the frame index, which two videos of one length share."""
    return x.reshape(THUMB, THUMB, 3)[:-1].reshape(-1, 3) if x.size == THUMB * THUMB * 3 else None


def _uniform(x: np.ndarray) -> bool:
    """A picture of one colour all over: each channel's std below 6 levels above the bottom row (codec noise on
    a solid field measures 1-4; a gradient, glyph or noise frame 8 and more)."""
    picture = _picture(x)
    return picture is not None and float(picture.std(0).max()) < 6.0


def _strong(x: np.ndarray) -> bool:
    """A picture with strong structure: some channel's std at least 24 levels above the bottom row (a glyph on a
    field measures 55-80; the same synthetic frame rendered at another size can sit near the uniform line, 4-8)."""
    picture = _picture(x)
    return picture is not None and float(picture.std(0).max()) >= 24.0


def _similarity(x: np.ndarray, y: np.ndarray) -> float:
    """Pearson correlation of two signatures; two flat ones (std < 2 levels) match when their
    brightness agrees, a flat and a textured one do not; two frames of one colour each match when their colours
    agree (each channel within 16 levels): the correlation of two solid colours says little about their hue. A frame
    of one colour and a frame with structure do not match: re-encoding does not draw or erase a glyph, and the
    correlation of a glyph on a field with the bare field is high (the field's colour sets most of the values)."""
    if _uniform(x) and _uniform(y):
        return 1.0 if np.abs(_picture(x).mean(0) - _picture(y).mean(0)).max() < 16 else 0.0  # type: ignore[union-attr]
    if (_uniform(x) and _strong(y)) or (_uniform(y) and _strong(x)):
        return 0.0
    sx, sy = float(x.std()), float(y.std())
    if sx < 2.0 or sy < 2.0:
        return 1.0 if sx < 2.0 and sy < 2.0 and abs(float(x.mean() - y.mean())) < 16 else 0.0
    return float(np.corrcoef(x, y)[0, 1])


@dataclass(frozen=True)
class Fingerprint:
    """What survives re-encode, resize and remux: the duration, and per sampled point a signature
    (an 8x8 RGB thumbnail of the frame, or 64 loudness bins of the audio)."""

    duration: float
    kind: str  # "video" | "audio"
    points: np.ndarray  # (CONTENT_POINTS, n)

    def distance(self, other: Fingerprint) -> float | None:
        """1 - mean correlation of the signatures at the same relative times; None when the
        durations (``max(0.5 s, 1%)``) or kinds differ, or when fewer than :data:`MIN_TEXTURED` sampled times
        show structure (not one solid colour) in either video."""
        if abs(self.duration - other.duration) > max(0.5, 0.01 * max(self.duration, other.duration)):
            return None
        if self.kind != other.kind or self.points.shape != other.points.shape:
            return None
        if self.kind == "video":
            textured = sum(
                not (_uniform(a) and _uniform(b)) for a, b in zip(self.points, other.points, strict=True)
            )
            if textured < MIN_TEXTURED:
                return None  # solid colours cannot tell two videos apart (colour-field media): bytes decide
        return 1.0 - float(
            np.mean([_similarity(a, b) for a, b in zip(self.points, other.points, strict=True)])
        )


@lru_cache(maxsize=4096)
def _fingerprint_cached(path: str, size: int, mtime_ns: int) -> Fingerprint:
    from envs.media import MediaConfig, open_media

    with open_media(path, MediaConfig(max_side=128)) as src:
        d = src.info.duration
        if src.info.has_video:
            frames = src.frames(0.1 * d, 0.9 * d, CONTENT_POINTS)
            return Fingerprint(round(float(d), 3), "video", np.stack([_thumb(f.image) for f in frames]))
        x = src.audio(0.0, d)  # audio only: loudness (dB) in 64 bins around each point
        bins = np.array_split(x, CONTENT_POINTS * 64)
        db = 20 * np.log10(np.array([np.sqrt(np.mean(np.square(b))) if b.size else 0.0 for b in bins]) + 1e-4)
        return Fingerprint(round(float(d), 3), "audio", db.reshape(CONTENT_POINTS, 64).astype(np.float32))


def content_fingerprint(path: str | os.PathLike[str]) -> Fingerprint:
    """The content fingerprint of a media file (see the module docstring); cached per file version."""
    st = os.stat(path)
    return _fingerprint_cached(str(Path(path).resolve()), st.st_size, st.st_mtime_ns)


def _byte_keys(tasks: list[Task], unhashed: list[str]) -> dict[str, str]:
    keys: dict[str, str] = {}
    for t in tasks:
        if t.media in keys:
            continue
        try:
            keys[t.media] = media_hash(t.media)
        except OSError as exc:
            unhashed.append(f"{t.id}: {t.media}: {exc.strerror or exc}")
    return keys


def _content_matches(
    eval_keys: dict[str, str], train_keys: dict[str, str], threshold: float, unread: list[str]
) -> list[dict[str, object]]:
    """Eval media whose bytes are new but whose content matches a training file; each eval key is
    re-pointed at that file's key so their questions count as shared pairs."""

    def fp(path: str) -> Fingerprint | None:
        try:
            return content_fingerprint(path)
        except Exception as exc:  # unreadable media: still hashed by bytes, reported here
            unread.append(f"{path}: no content fingerprint ({getattr(exc, 'reason', None) or exc})")
            return None

    train_seen = set(train_keys.values())
    todo = {p: k for p, k in eval_keys.items() if k not in train_seen}
    if not todo:
        return []
    train_fps = [(p, k, f) for p, k in train_keys.items() if (f := fp(p)) is not None]
    matches: list[dict[str, object]] = []
    for path in sorted(todo):
        mine = fp(path)
        if mine is None:
            continue
        scored = [
            (d, p, k) for p, k, f in train_fps if (d := mine.distance(f)) is not None and d <= threshold
        ]
        if scored:
            dist, train_path, key = min(scored)
            eval_keys[path] = key
            matches.append({"eval": path, "train": train_path, "distance": round(dist, 4)})
    return matches


def _index(
    tasks: list[Task], keys: dict[str, str]
) -> tuple[dict[str, list[str]], dict[str, list[str]], dict[str, list[str]]]:
    media: dict[str, list[str]] = defaultdict(list)
    pairs: dict[str, list[str]] = defaultdict(list)
    questions: dict[str, list[str]] = defaultdict(list)
    for t in tasks:
        q = normalize_question(t.question)
        questions[q].append(t.id)
        h = keys.get(t.media)
        if h is None:
            continue
        media[h].append(t.id)
        pairs[f"{h[:16]}|{q}"].append(t.id)
    return media, pairs, questions


def check_overlap(
    train: Iterable[Task],
    evaluation: Iterable[Task],
    *,
    content: bool = True,
    threshold: float = CONTENT_THRESHOLD,
) -> OverlapReport:
    """Shared media (by byte hash, and with ``content`` by content fingerprint), shared (media,
    question) pairs and shared question texts."""
    train, evaluation = list(train), list(evaluation)
    report = OverlapReport(n_train=len(train), n_eval=len(evaluation))
    train_keys = _byte_keys(train, report.unhashed)
    eval_keys = _byte_keys(evaluation, report.unhashed)
    if content:
        report.content = _content_matches(eval_keys, train_keys, threshold, report.unread)
    tm, tp, tq = _index(train, train_keys)
    em, ep, eq = _index(evaluation, eval_keys)
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
    content: bool = True,
) -> OverlapReport:
    """Raise :class:`OverlapError` when the sets overlap (``fail_on`` kinds); with ``allow`` print the
    overlap and return instead. ``content=False`` compares bytes only (no decoding: faster on huge
    sets, blind to re-encodes)."""
    fail_on = tuple(fail_on)
    bad = [k for k in fail_on if k not in ("media", "pair", "question")]
    if bad:
        raise ValueError(f"unknown overlap kinds {bad}; use media, pair, question")
    report = check_overlap(train, evaluation, content=content)
    if report.overlaps(fail_on):
        text = report.describe()
        if not allow:
            raise OverlapError(
                text + "\nrefusing to evaluate on data the model was trained on "
                "(set overlap_guard.allow_overlap=true to run anyway)"
            )
        printer(text + "\nWARNING: continuing despite the overlap (allow_overlap)")
    return report
