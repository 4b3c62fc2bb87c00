"""How the perceiving teacher (``synth_teacher``) searches on the ``search`` level of :mod:`envs.synth`.

The level's questions name a cue (a background colour, or a beep's pitch) and ask for what goes with it
(the digit or the pitch in that colour's field, or the colour where the pitch sounds). The teacher finds
the answer the way an agent should, from what it observed only:

- ``cue_visual`` (which digit in the red field): one look over the whole file; the span the red field can
  lie in, from the colours seen (between the last other-coloured frame before the first red one and the first
  other-coloured frame after the last; on a video of equal fields, the field of the grid it was seen in); frames
  spread over the widest unseen gaps of that span until a red frame shows a digit;
- ``cue_audio`` (the beep in the red field): the same, then the audio while that digit is shown (the level
  sounds each field's beep while its digit is on screen);
- ``pitch_visual`` (the colour where the 2000 Hz beep sounds): audio windows of the cap's length, overlapping
  by 2 s, until that pitch is heard whole, then the one frame at the middle of the beep.

Episodes differ through the teacher's random stream (how many frames the first look takes, how wide the
margins of a search span are, the order of the audio windows), so best-of-N samples differ and a run out of
turns answers with a guess. The functions take the :class:`~omniagent.backends.teacher.SynthTeacherPolicy`
whose state they read and extend (its goal, memory, queue, limits, duration and random stream).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from envs.scoring import letters
from omniagent.backends.synth_compact import frame_clauses, sec
from omniagent.backends.synth_world import Item

# the teacher (omniagent.backends.teacher.SynthTeacherPolicy), typed loosely: that module imports this one
SynthTeacherPolicy = Any

SEARCH_GOALS = frozenset({"cue_visual", "cue_audio", "pitch_visual"})
AUDIO_OVERLAP = 2.0  # seconds two audio windows share, so a beep cut at one edge is heard whole in the next
DIGIT_MAX_S = 2.5  # a digit is on screen at most this long (the level's default 1-2 s, with room)


def _grid(t: SynthTeacherPolicy, x: float) -> float:
    """A time on the video's frame grid (what the environment serves), rounded as the teacher writes it."""
    return round(round(x / t.step) * t.step, 2)


def _whole(t: SynthTeacherPolicy, look: dict[str, Any]) -> dict[str, Any]:
    """With the compact language, a look's span in whole seconds, each end the whole second its time is written
    as (:func:`~omniagent.backends.synth_compact.sec`): the agent copies a look's ends from what it wrote."""
    if not t.compact:
        return look
    last = sec(t.duration)
    a, b = min(sec(float(look["start"])), last), min(sec(float(look["end"])), last)
    return {**look, "start": a, "end": max(a, b)}


def plan(t: SynthTeacherPolicy) -> list[dict[str, Any]]:
    """The looks planned at reset: audio windows for a pitch, else one look over the whole file. With the compact
    language the strategy is noisier (window lengths, the first look's frames and margins), so best-of-N samples
    of one task differ more often."""
    if t.goal.search == "pitch_visual":
        length = t.limits.max_audio_s
        if t.compact and t.rng.random() < 0.4:
            length = float(t.rng.choice([24.0, 26.0, 28.0]))
        starts = [0.0]
        while starts[-1] + length < t.duration:
            starts.append(starts[-1] + length - AUDIO_OVERLAP)
        if t.rng.random() < 0.3:  # some episodes listen from the end
            starts.reverse()
        return [_whole(t, t._audio(s, s + length)) for s in starts]
    num = t.limits.max_frames if t.rng.random() < 0.8 else max(4, t.limits.max_frames - 2)
    if not t.compact:
        return [t._frames(0.0, t.duration, num)]
    lo, hi = (float(x) for x in t.rng.integers(0, 4, size=2) * (t.rng.random(2) < 0.5))
    num = int(t.rng.choice([num, num, max(4, num - 1)]))
    return [_whole(t, t._frames(lo, t.duration - hi, num))]


def _cue_times(t: SynthTeacherPolicy) -> tuple[list[float], list[float]]:
    """Frame times seen in the cued colour, and the other frame times seen."""
    color = t.goal.value
    inside, other = [], []
    for x, items in sorted(t.memory.frames.items()):
        background = next((i.value for i in items if i.kind == "background"), None)
        if background is None:
            continue
        (inside if background == color else other).append(x)
    return inside, other


def _cue_digit(t: SynthTeacherPolicy) -> list[float]:
    """Times of frames that show a digit on the cued colour."""
    hits = []
    for x, items in sorted(t.memory.frames.items()):
        kinds = {i.kind: i.value for i in items}
        if kinds.get("background") == t.goal.value and "digit" in kinds:
            hits.append(x)
    return hits


def _span(t: SynthTeacherPolicy) -> tuple[float, float]:
    """Where the cued field can lie, from the colours seen so far (the whole file before any is seen). On a video
    of equal fields (the level's ``search_fields='grid'``) it is the field of the grid the cued colour was seen in."""
    inside, other = _cue_times(t)
    if not inside:
        return 0.0, t.duration
    grid = t.world.field_grid
    if grid:
        k = max(i for i, bound in enumerate(grid[:-1]) if bound <= inside[0] + 1e-6)
        return grid[k], grid[k + 1]
    before = [x for x in other if x < inside[0]]
    after = [x for x in other if x > inside[-1]]
    return (before[-1] if before else 0.0), (after[0] if after else t.duration)


OFFSETS = (0.5, 0.0, 0.25, 0.75, 0.125, 0.625, 0.375, 0.875)  # where in its bin a look's frames may fall


def _span_look(t: SynthTeacherPolicy) -> dict[str, Any]:
    """Frames spread evenly over the span the cued field can lie in, one in each of ``max_frames`` equal bins,
    at the offset in the bin whose frames fall farthest from the frames already seen in the span. With the
    compact language: from the span's first to its last second, as the Thought writes them (one frame fewer
    each time the same span is looked at again, so the frames fall elsewhere)."""
    lo, hi = _span(t)
    num = t.limits.max_frames
    if t.compact:
        a, b = sec(lo), sec(hi)
        again = sum(1 for x in t.looks if (x.get("start"), x.get("end")) == (a, b))
        return _whole(t, t._frames(a, b, max(2, num - again)) if b > a else t._frames(a, a, 1))
    width = (hi - lo) / num
    seen = [x for x in t.memory.frames if lo <= x <= hi]

    def novelty(offset: float) -> float:
        times = [lo + (k + offset) * width for k in range(num)]
        return sum(min([0.5 * width, *[abs(x - y) for y in seen]]) for x in times)

    jitter = float(t.rng.uniform(-0.05, 0.05))
    offset = max(OFFSETS, key=lambda o: (novelty(o + jitter), -OFFSETS.index(o))) + jitter
    start, end = _grid(t, lo + offset * width), _grid(t, lo + (num - 1 + offset) * width)
    if end - start < t.step:
        return t._frames(start, start, 1)
    return t._frames(max(0.0, start), min(t.duration, end), num)


def _digit_window(t: SynthTeacherPolicy, digit: list[float]) -> dict[str, Any]:
    """Where to listen for the cued field's beep: it sounds while the digit is shown. Compact: from the frame
    seen before the digit to the frame seen after it (both written in the Observations); else around the digit
    frames by the longest a digit is shown."""
    run = [x for x in digit if abs(x - digit[0]) <= DIGIT_MAX_S]
    if t.compact:
        before = [x for x in t.memory.frames if x < run[0]]
        after = [x for x in t.memory.frames if x > run[-1]]
        a, b = sec(max(before, default=0.0)), sec(min(after, default=t.duration))
        if 0 < b - a <= t.limits.max_audio_s:
            return _whole(t, t._audio(a, b))
    return _whole(t, t._audio(max(0.0, run[-1] - DIGIT_MAX_S), min(t.duration, run[0] + DIGIT_MAX_S)))


def follow_ups(t: SynthTeacherPolicy) -> None:
    """The next look once the planned ones are done: search the cued field, listen at its digit, or look
    at the heard beep."""
    g = t.goal
    if g.search == "pitch_visual":
        beep = _pitch_heard(t)
        if beep is not None and not _frames_during(t, beep) and not _queued(t, "get_frames"):
            mid = 0.5 * (float(beep.start) + float(beep.end))
            mid = float(sec(mid)) if t.compact else _grid(t, mid)  # compact: the second the Thought writes
            t.queue = [_whole(t, t._frames(mid, mid, 1))]
        return
    digit = _cue_digit(t)
    if digit:
        if g.search == "cue_audio" and not _queued(t, "get_audio") and _cue_beep(t) is None:
            part = next((s for s in t.memory.heard("tone") if not s.full and _near(s, digit)), None)
            if part is not None:  # cut at a window's edge: listen again around it
                t.queue = [
                    _whole(
                        t, t._audio(max(0.0, float(part.start) - 1.0), min(t.duration, float(part.end) + 1.0))
                    )
                ]
            else:
                t.queue = [_digit_window(t, digit)]
        return
    if not t.queue:
        t.queue.append(_span_look(t))


def _queued(t: SynthTeacherPolicy, kind: str) -> bool:
    return any(a["type"] == kind for a in t.queue)


def _pitch_heard(t: SynthTeacherPolicy) -> Item | None:
    """The beep of the question's pitch, heard whole."""
    want = float(t.goal.value or "nan")
    return next((s for s in t.memory.heard("tone", full_only=True) if float(s.value or "nan") == want), None)


def _frames_during(t: SynthTeacherPolicy, beep: Item) -> list[float]:
    """Frames seen while the beep sounds (compact: from the whole second its middle is written as, which lies in
    the beep's field: a beep keeps more than a second from its field's edges)."""
    early = (
        float(sec(0.5 * (float(beep.start) + float(beep.end)))) if t.compact else float(beep.start) - t.step
    )
    return [x for x in t.memory.frames if early - 1e-6 <= x <= float(beep.end) + t.step]


def _near(sound: Item, digit: list[float]) -> bool:
    """Whether a sound lies where the cued digit can be on screen (around the frames that showed it)."""
    return digit[-1] - DIGIT_MAX_S <= float(sound.start) <= digit[0] + DIGIT_MAX_S


def _cue_beep(t: SynthTeacherPolicy) -> Item | None:
    """The beep heard, whole, while the cued field's digit can be on screen."""
    digit = _cue_digit(t)
    if not digit:
        return None
    return next((s for s in t.memory.heard("tone", full_only=True) if _near(s, digit)), None)


def evidence_found(t: SynthTeacherPolicy) -> bool:
    g = t.goal
    if g.search == "cue_visual":
        return bool(_cue_digit(t))
    if g.search == "cue_audio":
        return _cue_beep(t) is not None
    beep = _pitch_heard(t)
    return beep is not None and bool(_frames_during(t, beep))


def answer_value(t: SynthTeacherPolicy) -> str | None:
    """The option text the observations support (None: not observed, the answer is a guess)."""
    g = t.goal
    if g.search == "cue_visual":
        digit = _cue_digit(t)
        return (
            next((i.value for i in t.memory.frames[digit[0]] if i.kind == "digit"), None) if digit else None
        )
    if g.search == "cue_audio":
        beep = _cue_beep(t)
        return f"{float(beep.value):g} Hz" if beep is not None else None
    beep = _pitch_heard(t)
    times = _frames_during(t, beep) if beep is not None else []
    if not times:
        return None
    return next((i.value for i in t.memory.frames[times[0]] if i.kind == "background"), None)


@dataclass(frozen=True)
class SearchFacts:
    """What has been observed about the cue and its answer, computed once and rendered in either language: for a
    pitch (``pitch_visual``) the beep heard whole and the first frame seen while it sounds; for a colour cue the
    span its field can lie in (None: not seen), the first frame showing its digit, and the beep heard with it."""

    cue: str
    pitch: bool
    beep: Item | None = None
    frame_at: float | None = None
    answer: str | None = None
    span: tuple[float, float] | None = None
    digit_at: float | None = None
    digit: str = "?"
    cue_beep: Item | None = None


def observed(t: SynthTeacherPolicy) -> SearchFacts:
    g = t.goal
    if g.search == "pitch_visual":
        beep = _pitch_heard(t)
        times = _frames_during(t, beep) if beep is not None else []
        return SearchFacts(
            str(g.value), True, beep, times[0] if times else None, answer_value(t) if times else None
        )
    inside, _ = _cue_times(t)
    if not inside:
        return SearchFacts(str(g.value), False)
    digit = _cue_digit(t)
    beep = _cue_beep(t) if g.search == "cue_audio" else None
    return SearchFacts(str(g.value), False, span=_span(t), digit_at=digit[0] if digit else None,
                       digit=_digit_text(t), cue_beep=beep)  # fmt: skip


def facts(t: SynthTeacherPolicy) -> str:
    """What has been observed about the cue and its answer, for the Thought: every fact stated with a time was
    reported by an Observation at that time (what the offline auditor, rl/audit_rules.py, checks)."""
    f = observed(t)
    if f.pitch:
        if f.beep is None:
            return f"No {f.cue} Hz beep heard so far."
        where = (
            f" At {f.frame_at:.2f}s I saw {_article(f.answer)} {f.answer} background."
            if f.frame_at is not None
            else ""
        )
        return f"The {f.cue} Hz beep is at {float(f.beep.start):.2f}s-{float(f.beep.end):.2f}s.{where}"
    if f.span is None:
        return f"No {f.cue} background seen so far."
    seen = f" The digit {f.digit} is on it at {f.digit_at:.2f}s." if f.digit_at is not None else ""
    heard = f" While it is shown I heard {f.cue_beep.phrase()}." if f.cue_beep is not None else ""
    # "field", not "background": the bounds are where other colours were seen, not sightings of this one
    return f"The {f.cue} field lies between {f.span[0]:.2f}s and {f.span[1]:.2f}s.{seen}{heard}"


def _article(word: str | None) -> str:
    return "an" if (word or "x")[0] in "aeiou" else "a"


def _digit_text(t: SynthTeacherPolicy) -> str:
    digit = _cue_digit(t)
    return next((i.value for i in t.memory.frames[digit[0]] if i.kind == "digit"), "?") if digit else "?"


def _middle(sound: Item) -> int:
    return sec(0.5 * (float(sound.start) + float(sound.end)))


def compact_facts(t: SynthTeacherPolicy) -> str:
    """What has been observed about the cue and its answer, in the compact language (whole seconds)."""
    f = observed(t)
    if f.pitch:
        if f.beep is None:
            return f"no {f.cue} Hz"
        where = f", {f.answer} at {sec(f.frame_at)}" if f.frame_at is not None else ""
        return f"{f.cue} Hz at {_middle(f.beep)}{where}"
    if f.span is None:
        return f"no {f.cue}"
    seen = f", digit {f.digit} at {sec(f.digit_at)}" if f.digit_at is not None else ""
    heard = f", {f.cue_beep.value} Hz at {_middle(f.cue_beep)}" if f.cue_beep is not None else ""
    return f"{f.cue} {sec(f.span[0])}-{sec(f.span[1])}{seen}{heard}"


def compact_thought(t: SynthTeacherPolicy, action: dict[str, Any]) -> str:
    """A compact Thought: the cue on the first turn, then the facts so far; an answer's ends with its letter
    (``not found`` before it when the evidence was never observed). With the teacher's ``option_thought`` the
    chosen option's text stands right before the letter (``red 0-17, digit 9 at 9, 9: D.``), so the letter is
    looked up from the value just written, whether observed or guessed. With ``span_quote`` the second Thought
    opens with :func:`span_quote` and ``; `` (``14-28 red, 42 blue, 57 green; blue 28-57.``)."""
    g = t.goal
    if action["type"] == "answer":
        found = "" if evidence_found(t) else ", not found"
        letter = str(action["content"])
        body = f"{compact_facts(t)}{found}{_option_echo(t, letter)}: {answer_content(t, letter)}."
    elif t.turn == 1:
        return f"listen for {g.value} Hz." if g.search == "pitch_visual" else f"look for {g.value}."
    else:
        body = f"{compact_facts(t)}."
    cited = span_quote(t)
    return f"{cited}; {body}" if cited else body


def span_quote(t: SynthTeacherPolicy) -> str:
    """With the teacher's ``span_quote``, on the second turn of a colour-cue question (after the first look): the
    clauses of that look's Observation from the one before the cue's first to the one after the cue's last, verbatim
    (the field's span is then the last number of the first clause and the first number of the last, or a file edge).
    Empty otherwise, and when no frame of the cue has been seen (a first look that was rejected shows none)."""
    if not t.span_quote or t.turn != 2 or t.goal.search not in ("cue_visual", "cue_audio"):
        return ""
    clauses = frame_clauses(t.world, sorted(t.memory.frames))  # only the first look's frames are known
    cue = [i for i, c in enumerate(clauses) if c.split()[1] == t.goal.value]
    return ", ".join(clauses[max(0, cue[0] - 1) : cue[-1] + 2]) if cue else ""


def answer_content(t: SynthTeacherPolicy, letter: Any) -> Any:
    """The answer as the teacher writes it: with ``answer_text`` on a multiple-choice task the option's text
    (``9``, ``1000 Hz``, ``green``), else ``letter`` itself."""
    text = _option_text(t, letter)
    return text if t.answer_text and text is not None else letter


def _option_echo(t: SynthTeacherPolicy, letter: str) -> str:
    """``, <option text>`` of the answered letter with ``option_thought`` on a multiple-choice task, else empty."""
    text = _option_text(t, letter)
    return f", {text}" if t.option_thought and text is not None else ""


def _option_text(t: SynthTeacherPolicy, letter: Any) -> str | None:
    """The text of the option ``letter`` names on a multiple-choice task, else None."""
    choices = [str(c) for c in t.info["task"].get("choices") or []]
    options = letters(len(choices))
    if t.info["task"]["task_type"] != "mcq" or letter not in options:
        return None
    return choices[options.index(letter)]
