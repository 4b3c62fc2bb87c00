"""The rule-based auditor's reading of the compact language (:mod:`omniagent.backends.synth_compact`).

The same two checks as for the full language (:mod:`rl.synthesis.audit_rules`), with whole-second times:

- **Observation against the timeline at the served times.** Every clause must parse. The frame clauses, in
  order, must split the served frames into consecutive runs, one per clause, the run's first and last frames
  at the clause's seconds, each frame showing exactly what the clause names (the background, the digit, or a
  flash or static covering the picture) -- so no served frame goes undescribed and none is invented. Field
  clauses (``blue 25-51 digit 9 at 34``, one per colour, in a fixed order) say what a look's frames show in one
  way only, so they must be exactly those the served frames give (the two forms may not be mixed). An audio
  clause must name the served span's seconds and every sound in it: each whole beep by its pitch and the
  second of its middle (within ``MID_TOL``), each cut one as cut.
- **Thought against the memory so far.** Each stated fact (``digit 9 at 34``, ``1000 Hz at 35``,
  ``green at 41``) must have been observed in that second; a fact stated absent (``no 2000 Hz``, ``no red``)
  must not have been.
"""

from __future__ import annotations

from omniagent.backends.synth_compact import CompactClaim, field_clauses, parse_compact, sec, thought_facts
from omniagent.backends.synth_world import Item, Memory, Percept, SynthWorld

MID_TOL = 1.0  # seconds: how far a stated sound's second may be from the middle of its audible part


def _shows(claim: CompactClaim, truth: list[Item]) -> bool:
    """Whether a frame shows exactly the claim's items (kinds and values)."""
    return sorted((i.kind, i.value) for i in claim.items) == sorted((i.kind, i.value) for i in truth)


def _split(world: SynthWorld, claims: list[CompactClaim], times: list[float]) -> bool:
    """Whether the frame claims, in order, split ``times`` into consecutive runs that each claim describes."""

    def fits(i: int, start: int) -> bool:
        if i == len(claims):
            return start == len(times)
        claim = claims[i]
        if start >= len(times) or sec(times[start]) != claim.first:
            return False
        for stop in range(start, len(times)):
            if not _shows(claim, world.frame(times[stop])):
                return False
            if sec(times[stop]) == claim.last and fits(i + 1, stop + 1):
                return True
        return False

    return fits(0, 0)


def _check_frames(
    world: SynthWorld, claims: list[CompactClaim], times: list[float], memory: Memory
) -> list[str]:
    if not claims and not times:
        return []
    if not times:
        return ["describes frames, but none were served"]
    if not _split(world, claims, times):
        shown = ", ".join(f"{t:.2f}s" for t in times[:8])
        return [f"its frame clauses do not describe the served frames in order ({shown})"]
    for t in times:
        memory.add_frame(t, world.frame(t))
    return []


def _check_audio(world: SynthWorld, claim: CompactClaim, percept: Percept, memory: Memory) -> list[str]:
    span = percept.span
    if span is None or (sec(span[0]), sec(span[1])) != (claim.first, claim.last):
        return [f"describes audio {claim.first}-{claim.last}, which was not served"]
    truth = world.sounds(*span)
    left = list(claim.items)
    for sound in truth:
        mid = 0.5 * (float(sound.start) + float(sound.end))
        match = next(
            (
                c
                for c in left
                if c.kind == sound.kind
                and c.full == sound.full
                and (not c.full or c.value == sound.value)
                and abs(float(c.start) - mid) <= MID_TOL
            ),
            None,
        )
        if match is None:
            return [f"does not name {sound.phrase()} (or names it at another second)"]
        left.remove(match)
    if left:
        return [f"names a sound at {int(left[0].start)} that the audio does not hold"]
    memory.add_sounds(span, truth)
    return []


def _field_key(claim: CompactClaim) -> tuple[int, int, list[tuple[str, str, float | None]]]:
    return claim.first, claim.last, [(i.kind, i.value, i.start) for i in claim.items]


def _check_fields(
    world: SynthWorld, claims: list[CompactClaim], times: list[float], memory: Memory
) -> list[str]:
    """Field clauses must be the ones the served frames give, in order (each colour's bounds and digit)."""
    if not times:
        return ["describes frames, but none were served"]
    try:
        truth = parse_compact(", ".join(field_clauses(world, times)))
    except ValueError as exc:
        return [f"field clauses cannot describe the served frames: {exc}"]
    got, want = [_field_key(c) for c in claims], [_field_key(c) for c in truth]
    if got != want:
        wrong = next((i for i, (g, w) in enumerate(zip(got, want, strict=False)) if g != w), None)
        where = f"clause {wrong + 1}" if wrong is not None else f"{len(got)} clauses for {len(want)} colours"
        return [f"its field clauses do not describe the served frames ({where})"]
    for t in times:
        memory.add_frame(t, world.frame(t))
    return []


def audit_compact_observation(
    world: SynthWorld, text: str | None, percept: Percept, memory: Memory
) -> list[str]:
    """Problems of one compact Observation given the percept served before it; true claims go to ``memory``."""
    if text is None:
        return ["the turn did not parse, so it has no observation"]
    claims = parse_compact(text)
    errors = [c.error for c in claims if c.kind == "error"]
    if errors:
        return errors[:3]
    if percept.kind in ("none", "error"):
        return ["describes media, but nothing was served before this turn"] if claims else []
    problems: list[str] = []
    clips = [c for c in claims if c.kind == "clip"]
    if bool(clips) != (percept.kind == "clip") or (
        clips
        and percept.clip
        and (clips[0].first, clips[0].last) != (sec(percept.clip[0]), sec(percept.clip[1]))
    ):
        problems.append("its clip clause does not match what was served")
    frames = [c for c in claims if c.kind == "frames"]
    fields = [c for c in claims if c.kind == "field"]
    if frames and fields:
        problems.append("it mixes frame clauses and field clauses")
    elif fields:
        problems += _check_fields(world, fields, sorted(percept.times), memory)
    else:
        problems += _check_frames(world, frames, sorted(percept.times), memory)
    audio = [c for c in claims if c.kind == "audio"]
    if len(audio) > 1 or (percept.span is not None and not audio):
        problems.append("it must describe the served audio once")
    for claim in audio[:1]:
        problems += _check_audio(world, claim, percept, memory)
    return problems


def _seen_at(memory: Memory, kind: str, value: str, at: int) -> bool:
    if kind == "tone":
        return any(
            s.full and s.value == value and abs(0.5 * (s.start + s.end) - at) <= MID_TOL
            for s in memory.heard("tone")
        )
    return any(
        sec(t) == at and any(i.kind == kind and i.value == value for i in items)
        for t, items in memory.frames.items()
    )


def audit_compact_thought(text: str | None, memory: Memory) -> list[str]:
    """Problems of one compact Thought: facts the memory so far does not hold, absences it contradicts."""
    if text is None:
        return ["the turn did not parse, so it has no thought"]
    problems = []
    for fact in thought_facts(text):
        if fact.at is not None and not _seen_at(memory, fact.kind, fact.value, fact.at):
            problems.append(
                f"the thought states {fact.kind} {fact.value} at {fact.at}, which no observation reported"
            )
        if fact.at is None and (
            memory.hits(fact.kind, fact.value) or memory.heard(fact.kind, fact.value, True)
        ):
            problems.append(f"the thought says no {fact.value}, which was observed")
    return problems
