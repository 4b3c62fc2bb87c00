"""Clamp-or-reject rules for a parsed request, as pure functions of the request and the limits.

Why separate: the rules are the environment's policy (README "Clamp or reject") and are easier to
read and test without media. Each function either returns the adjusted request plus notes for the
model, or raises :class:`envs.errors.ActionRejected` with a stable code.
"""

from __future__ import annotations

from envs.errors import ActionRejected, ErrorCode


def clamp_span(start: float, end: float, duration: float) -> tuple[float, float, list[str]]:
    """Trim [start, end] to [0, duration]; reject a reversed span or one wholly outside the file."""
    if end < start:
        raise ActionRejected(ErrorCode.TIME_REVERSED, f"end ({end:g}) is before start ({start:g}).")
    if start >= duration or end < 0:
        raise ActionRejected(
            ErrorCode.TIME_OUT_OF_RANGE,
            f"[{start:g}, {end:g}] lies outside the file, which spans 0 to {duration:.2f} s.",
        )
    s, e = max(0.0, float(start)), min(duration, float(end))
    notes = [f"Times trimmed to the file: [{s:.2f}, {e:.2f}]."] if (s, e) != (start, end) else []
    return s, e, notes


def frame_count(num: int, cap: int, start: float, end: float) -> tuple[int, list[str]]:
    """How many frames to serve: at least 1, at most ``cap``, exactly 1 for a zero-length span."""
    if num < 1:
        raise ActionRejected(ErrorCode.NUM_INVALID, f"num must be at least 1 (got {num}).")
    notes = []
    if num > cap:
        notes.append(f"num lowered from {num} to the cap of {cap}.")
        num = cap
    if end == start and num > 1:
        notes.append("start equals end, so one frame was taken.")
        num = 1
    return num, notes


def check_length(start: float, end: float, cap: float, what: str, floor: float = 0.0) -> None:
    """Audio and clip spans must be longer than zero, at least ``floor`` and at most ``cap`` seconds."""
    if end - start <= 0:
        raise ActionRejected(ErrorCode.SPAN_EMPTY, f"the {what} span [{start:g}, {end:g}] has zero length.")
    if end - start < floor - 1e-9:
        raise ActionRejected(
            ErrorCode.SPAN_TOO_SHORT,
            f"a {what} must be at least {floor:g} s long (after trimming to the file); you asked for "
            f"{end - start:.3f} s. For one instant use get_frames.",
        )
    if end - start > cap + 1e-6:
        raise ActionRejected(
            ErrorCode.SPAN_TOO_LONG,
            f"a {what} may be at most {cap:g} s long; you asked for {end - start:.2f} s.",
        )


def damage_notes(damaged: list[tuple[float, float]]) -> list[str]:
    """A note naming the parts of a served span whose audio could not be decoded (silent there)."""
    if not damaged:
        return []
    spans = ", ".join(f"{a:.2f}s-{b:.2f}s" for a, b in damaged)
    return [f"The audio could not be decoded at {spans} (damaged data); it is silence there."]
