"""The ``search`` level: an RL testbed where the answer is hidden in the media and found only by looking.

A video of this level is four large colour fields in a random order (``SEARCH_COLORS``, each once), of random
lengths or, with the config's ``search_fields='grid'``, four equal ones. In each field, at a random time, one large
digit is shown for a few seconds (``SEARCH_DIGITS``, each once) and while it is shown one pure tone sounds
(``SEARCH_PITCHES``, each once): one landmark per field, seen and heard. Every question names a cue and asks for
what goes with it, so the answer cannot be read off the question and a look in the wrong place finds a wrong
but plausible answer (another field's digit):

- ``cue_digit_mcq``: "Which digit is shown on screen while the background is red?" (find the field, then
  the digit inside it);
- ``cue_pitch_mcq``: "What is the pitch of the beep heard while the background is red?" (find the field and
  its digit by their frames, then listen while the digit is shown);
- ``pitch_color_mcq``: "What colour is the background when the 2000 Hz beep is heard?" (find the beep by
  listening, then look at a frame at its time).

Each video asks every template once per field, and the options of a template are always the same four in
the same order, so within every video each answer (and each answer letter) of a template occurs exactly
once: a policy that does not look scores 1/4 on any set, whatever constant it learnt. The percepts are the
easiest the engine makes: solid saturated fields whose hue has a name (red, yellow, green, blue), a digit
as tall as the picture on a black box at the centre, tones an octave apart over digital near-silence.

Everything is a pure function of the config (its own random streams, none shared with the ``benchmark``
level). The events are ordinary ``digit`` and ``tone`` events, so consumers of the sidecar (the perceiving
teacher's world model, the evidence tests) read this level as they read the benchmark.
"""

from __future__ import annotations

import numpy as np

from envs.synth.config import SEARCH_TONE_SECONDS, SynthConfig, stream_rng
from envs.synth.glyphs import text_bitmap
from envs.synth.tasks import TaskSet
from envs.synth.timeline import Event, Segment, Timeline, content_height_for, snap_to_frame, stamp_frames
from envs.tasks import Task, choice_letter

# name -> RGB; hues 0, 55, 128 and 230 degrees: each inside its own named 60-degree bucket
SEARCH_COLORS: dict[str, tuple[int, int, int]] = {
    "red": (220, 40, 40),
    "yellow": (225, 210, 40),
    "green": (40, 190, 70),
    "blue": (50, 80, 225),
}
SEARCH_DIGITS: tuple[str, ...] = ("2", "4", "7", "9")  # glyphs of the 5x7 font that share no outline
SEARCH_PITCHES: tuple[float, ...] = (500.0, 1000.0, 2000.0, 4000.0)  # an octave apart
SEARCH_TEMPLATES: tuple[str, ...] = ("cue_digit_mcq", "cue_pitch_mcq", "pitch_color_mcq")
FIELD_MIN_SHARE = 0.15  # every colour field lasts at least this share of the video
DIGIT_MARGIN_SHARE = 0.025  # a digit keeps this share of the video away from its field's edges


def grid_bounds(duration: float, fps: int) -> list[float]:
    """The bounds of the four equal colour fields of ``search_fields='grid'`` (the first 0, the last
    ``duration``), on the frame grid: for 60 s, 0, 15, 30, 45 and 60."""
    n = len(SEARCH_COLORS)
    return [0.0] + [snap_to_frame(duration * k / n, fps) for k in range(1, n)] + [float(duration)]


def _fields(cfg: SynthConfig, rng: np.random.Generator) -> list[Segment]:
    """Four solid colour fields in a random order, boundaries on the frame grid. Each lasts FIELD_MIN_SHARE of
    the video plus a random share of the rest, or, with ``search_fields='grid'``, a quarter of the video (the
    random shares are still drawn, so a grid video has the colour order and each field's digit and pitch of its
    random twin)."""
    n = len(SEARCH_COLORS)
    shares = FIELD_MIN_SHARE + (1.0 - n * FIELD_MIN_SHARE) * rng.dirichlet(np.ones(n))
    ends = [snap_to_frame(cfg.duration * float(c), cfg.fps) for c in np.cumsum(shares)[:-1]] + [cfg.duration]
    if cfg.search_fields == "grid":
        ends = grid_bounds(cfg.duration, cfg.fps)[1:]
    names = [str(c) for c in rng.permutation(list(SEARCH_COLORS))]
    out, start = [], 0.0
    for i, (name, end) in enumerate(zip(names, ends, strict=True)):
        rgb = SEARCH_COLORS[name]
        out.append(Segment(i, start, end, "solid", rgb, rgb, 0.0))  # hum 0 Hz: no hum, pure tones only
        start = end
    return out


def _digit_geometry(cfg: SynthConfig) -> tuple[int, int, int]:
    """(scale, x, y) of a one-digit box as tall as the picture above the barcode, centred."""
    content_h = content_height_for(cfg)
    cols = text_bitmap("0").shape[1]
    scale = max(1, min(content_h // 9, cfg.width // (cols + 2)))
    return scale, (cfg.width - (cols + 2) * scale) // 2, (content_h - 9 * scale) // 2


def build_search_timeline(cfg: SynthConfig) -> Timeline:
    """The search level's fields, digits and tones for ``cfg`` (a pure function of the config)."""
    if cfg.level != "search":
        raise ValueError(f"build_search_timeline needs level='search', got {cfg.level!r}")
    fields = _fields(cfg, stream_rng(cfg, 10))
    rng = stream_rng(cfg, 11)
    digits = [str(d) for d in rng.permutation(list(SEARCH_DIGITS))]
    pitches = [float(p) for p in rng.permutation(list(SEARCH_PITCHES))]
    scale, x, y = _digit_geometry(cfg)
    margin = DIGIT_MARGIN_SHARE * cfg.duration
    lo, hi = cfg.search_digit_seconds
    events: list[Event] = []
    for seg, digit, pitch in zip(fields, digits, pitches, strict=True):
        frames = int(rng.integers(max(1, round(lo * cfg.fps)), max(1, round(hi * cfg.fps)) + 1))
        length = frames / cfg.fps
        first = np.ceil((seg.start + margin) * cfg.fps - 1e-9)
        last = np.floor((seg.end - margin - length) * cfg.fps + 1e-9)
        centre = round(0.5 * (seg.start + seg.end - length) * cfg.fps)  # a field too short for the margins
        pick = int(rng.integers(int(first), int(last) + 1)) if last >= first else centre
        start = round(pick / cfg.fps, 6)
        events.append(
            Event(
                "",
                "digit",
                start,
                round(start + length, 6),
                seg.index,
                {"text": digit, "scale": scale, "x": x, "y": y},
            )
        )
        # the field's beep sounds while its digit is shown: one landmark per field, seen and heard
        tone = round(float(rng.uniform(start, start + length - SEARCH_TONE_SECONDS)), 2)
        events.append(
            Event("", "tone", tone, round(tone + SEARCH_TONE_SECONDS, 6), seg.index, {"freq": pitch})
        )
    events.sort(key=lambda e: (e.start, e.kind))
    for i, ev in enumerate(events):
        ev.id = f"e{i:04d}"
    stamp_frames(events, cfg.fps)
    return Timeline(cfg, fields, events, "tone")


def _field_of(timeline: Timeline, ev: Event) -> Segment:
    return timeline.segments[ev.group]


def _hz(freq: float) -> str:
    return f"{freq:g} Hz"


def make_search_tasks(
    timeline: Timeline, media: str, id_prefix: str, split: str = "test", config_hash: str = ""
) -> list[Task]:
    """Every template once per colour field, in field order: 12 multiple-choice tasks with fixed options."""
    ts = TaskSet(timeline, media, id_prefix, split, config_hash)
    colors = {
        seg.index: name
        for seg in timeline.segments
        for name, rgb in SEARCH_COLORS.items()
        if rgb == seg.color_a
    }
    digits = {e.group: e for e in timeline.of_kind("digit")}
    tones = {e.group: e for e in timeline.of_kind("tone")}
    asks: dict[str, list[tuple[str, str, tuple[str, ...], Event]]] = {name: [] for name in SEARCH_TEMPLATES}
    for seg in timeline.segments:
        color, digit, tone = colors[seg.index], digits[seg.index], tones[seg.index]
        asks["cue_digit_mcq"].append(
            (
                f"Which digit is shown on screen while the background is {color}?",
                digit.attrs["text"],
                SEARCH_DIGITS,
                digit,
            )
        )
        asks["cue_pitch_mcq"].append(
            (
                f"What is the pitch of the beep heard while the background is {color}?",
                _hz(tone.attrs["freq"]),
                tuple(_hz(p) for p in SEARCH_PITCHES),
                tone,
            )
        )
        asks["pitch_color_mcq"].append(
            (
                f"What colour is the background when the {tone.attrs['freq']:g} Hz beep is heard?",
                color,
                tuple(SEARCH_COLORS),
                tone,
            )
        )
    for template in SEARCH_TEMPLATES:
        for question, truth, options, ev in asks[template]:
            seg = _field_of(timeline, ev)
            ts.emit(
                template,
                "mcq",
                question,
                choice_letter(options.index(truth)),
                [ev.interval],
                choices=list(options),
                extra={"event_ids": [ev.id], "level": "search", "field": [seg.start, seg.end]},
            )
    return ts.tasks
