"""Evidence times written in prose ("At 1:39, the woman said ...") -> ``[start, end]`` intervals.

Some benchmarks (OmniVideoBench's ``reasoning_steps``) give the moment that answers a question only in
a sentence. :func:`evidence_intervals` reads the times a sentence names:

- ``M:SS``, ``MM:SS`` and ``H:MM:SS`` tokens; a range written ``1:02-1:10``, ``1:02 to 1:10``,
  ``from 1:02 until 1:10`` or ``between 1:02 and 1:10`` becomes that interval, a single time the
  second it names (``[t, t + 1]``);
- times inside quoted speech are not evidence times (``'now it's 2:39'`` is a clock in the video), so
  quoted spans are removed first;
- a time past the end of the video (``duration`` + 1 s, the label being rounded down) is counted as
  out of range and dropped.

The counts (:class:`EvidenceCounts`) say how much of the prose could be read, so a loader reports it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["EvidenceCounts", "evidence_intervals", "merge_intervals", "time_tokens"]

_TIME = r"(?<![\d:.])(\d{1,2}):([0-5]\d)(?::([0-5]\d))?(?![\d:])"
_TIME_RE = re.compile(_TIME)
_RANGE_RE = re.compile(
    rf"(?:between\s+{_TIME}\s+and\s+{_TIME})|(?:(?:from\s+)?{_TIME}\s*(?:-|–|—|~|to|until|till)\s*{_TIME})",
    re.IGNORECASE,
)
# a quoted span: an opening quote after a space, colon, comma or the start; the closing quote before a
# space, punctuation or the end (so the apostrophe of "it's" neither opens nor closes one)
_QUOTED = re.compile(r"""(?:(?<=[\s:,])|^)(['"‘“]).*?['"’”](?=[\s.,;:!?)]|$)""")


@dataclass
class EvidenceCounts:
    """How many steps there were, how many name a time (outside quotes), and how many gave intervals."""

    steps: int = 0
    timed: int = 0
    parsed: int = 0
    out_of_range: int = 0

    def as_dict(self) -> dict[str, int]:
        return {
            "steps": self.steps,
            "timed": self.timed,
            "parsed": self.parsed,
            "out_of_range": self.out_of_range,
        }


def _seconds(groups: tuple[str | None, ...]) -> float:
    a, b, c = groups
    if c is None:  # M:SS
        return float(int(a or 0) * 60 + int(b or 0))
    return float(int(a or 0) * 3600 + int(b or 0) * 60 + int(c))  # H:MM:SS


def time_tokens(text: str) -> list[tuple[float, float]]:
    """The intervals a sentence names outside quoted speech (ranges first, then single times)."""
    plain = _QUOTED.sub(" ", str(text))
    spans: list[tuple[float, float]] = []
    for m in _RANGE_RE.finditer(plain):
        g = m.groups()
        g = g[:6] if g[0] is not None else g[6:]  # the "between" form or the dash/to form
        a, b = _seconds(g[:3]), _seconds(g[3:])
        if b >= a:
            spans.append((a, b))
    rest = _RANGE_RE.sub(" ", plain)
    spans.extend((t, t + 1.0) for t in (_seconds(m.groups()) for m in _TIME_RE.finditer(rest)))
    return spans


def merge_intervals(spans: list[tuple[float, float]]) -> list[list[float]]:
    """Sorted, with overlapping or touching intervals joined."""
    out: list[list[float]] = []
    for start, end in sorted(spans):
        if out and start <= out[-1][1]:
            out[-1][1] = max(out[-1][1], end)
        else:
            out.append([start, end])
    return out


def evidence_intervals(
    sentences: list[str], duration: float | None, counts: EvidenceCounts | None = None
) -> list[list[float]]:
    """The merged intervals named by ``sentences``, clipped to ``duration`` + 1 s when it is known;
    ``counts`` (when given) is updated with what was found."""
    counts = counts if counts is not None else EvidenceCounts()
    found: list[tuple[float, float]] = []
    for text in sentences:
        counts.steps += 1
        spans = time_tokens(text)
        if not spans:
            continue
        counts.timed += 1
        limit = None if duration is None else duration + 1.0
        kept = [(a, min(b, limit) if limit else b) for a, b in spans if limit is None or a < limit]
        if len(kept) < len(spans):
            counts.out_of_range += 1
        if kept:
            counts.parsed += 1
            found.extend(kept)
    return merge_intervals(found)
