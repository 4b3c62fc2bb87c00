"""Task templates: the questions a timeline supports, with answers and evidence by construction."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from envs.synth.config import (
    GENERATOR_VERSION,
    SHAPE_COLORS,
    SOURCE_NAME,
    SPOKEN_WORDS,
    TONE_FREQS,
    stream_rng,
)
from envs.synth.timeline import Event, Timeline
from envs.tasks import Task, choice_letter


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _article(word: str) -> str:
    return "an" if word[:1].lower() in "aeiou" else "a"


def _at(ev: Event) -> str:
    """A time inside the event, for 'at about ...' in questions (whole seconds when they fit)."""
    mid = 0.5 * (ev.start + ev.end)
    whole = round(mid)
    if ev.start <= whole < ev.end:
        return f"{whole} s"
    return f"{round(mid, 1):.1f} s"


def _mcq(rng: np.random.Generator, correct: str, pool: list[str], n: int = 4) -> tuple[list[str], str]:
    others = [p for p in dict.fromkeys(pool) if p != correct]
    picked = [str(o) for o in rng.permutation(others)[: n - 1]]
    choices = [correct, *picked]
    order = rng.permutation(len(choices))
    choices = [choices[i] for i in order]
    return choices, choice_letter(choices.index(correct))


@dataclass
class TaskSet:
    """The tasks made so far for one timeline, with the random stream every template draws from.

    Why one object: templates run in a fixed order and share the stream (the task list is a pure
    function of the seed), the per-template counters that number task ids, and the list itself
    (``shape_tr`` looks at what was already asked).
    """

    timeline: Timeline
    media: str
    id_prefix: str
    split: str
    config_hash: str
    tasks: list[Task] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.cfg = self.timeline.config
        self.rng = stream_rng(self.cfg, 4)
        self.cap = self.cfg.max_tasks_per_template
        self.video = self.cfg.mode == "video"

    def emit(
        self,
        template: str,
        task_type: str,
        question: str,
        answer: Any,
        evidence: list[list[float]],
        *,
        extra: dict[str, Any] | None = None,
        **kw: Any,
    ) -> None:
        """Append one task; its id numbers it within its template, its extra says where it came from."""
        k = self.counts.get(template, 0)
        self.counts[template] = k + 1
        cfg = self.cfg
        meta: dict[str, Any] = {
            "template": template,
            "generator": GENERATOR_VERSION,
            "seed": cfg.seed,
            "mode": cfg.mode,
        }
        if self.config_hash:
            meta["config_hash"] = self.config_hash
        meta.update(extra or {})
        self.tasks.append(
            Task(
                id=f"{self.id_prefix}-{template}-{k:02d}",
                media=self.media,
                question=question,
                task_type=task_type,
                answer=answer,
                evidence=evidence,
                source=SOURCE_NAME,
                split=self.split,
                duration=cfg.duration,
                extra=meta,
                **kw,
            )
        )

    def sample(self, events: list[Event]) -> list[Event]:
        """At most ``cap`` of ``events``, in timeline order."""
        if len(events) <= self.cap:
            return events
        keep = sorted(self.rng.choice(len(events), size=self.cap, replace=False))
        return [events[i] for i in keep]

    def emit_mcq(
        self,
        template: str,
        question: str,
        correct: str,
        pool: list[str],
        evidence: list[list[float]],
        events: list[str],
    ) -> None:
        """An mcq task: ``correct`` among distractors drawn from ``pool`` (from the shared stream, before the
        task is made); ``events`` are the ids of the timeline events it asks about."""
        choices, letter = _mcq(self.rng, correct, pool)
        self.emit(template, "mcq", question, letter, evidence, choices=choices, extra={"event_ids": events})


# ---------------------------------------------------------------------------------------------- visual
def _digit_tasks(ts: TaskSet) -> None:
    for ev in ts.sample(ts.timeline.of_kind("digit")):
        question = f"Which digit is shown on screen at about {_at(ev)}?"
        ts.emit_mcq(
            "digit_mcq", question, ev.attrs["text"], [str(d) for d in range(10)], [ev.interval], [ev.id]
        )


def _screen_word_tasks(ts: TaskSet) -> None:
    for ev in ts.sample(ts.timeline.of_kind("word")):
        ts.emit(
            "screen_word_ff",
            "ff",
            f"What word is written on screen at about {_at(ev)}? Answer with the word only.",
            ev.attrs["text"],
            [ev.interval],
            extra={"event_ids": [ev.id], "match": "case_insensitive"},
        )


def _shape_interval_tasks(ts: TaskSet) -> None:
    """Every interval of one colour+shape; each pair is asked about once."""
    shapes = ts.timeline.of_kind("shape")
    for ev in ts.sample(shapes):
        key = [ev.attrs["color"], ev.attrs["shape"]]
        if ts.counts.get("shape_tr", 0) >= ts.cap or any(t.extra.get("key") == key for t in ts.tasks):
            continue
        same = [s for s in shapes if [s.attrs["color"], s.attrs["shape"]] == key]
        intervals = [s.interval for s in same]
        ts.emit(
            "shape_tr",
            "tr",
            f"When does the {ev.attrs['color']} {ev.attrs['shape']} appear on screen? "
            "Give every interval in seconds.",
            intervals,
            intervals,
            extra={"event_ids": [s.id for s in same], "key": key},
        )


def _shape_width_tasks(ts: TaskSet) -> None:
    cfg = ts.cfg
    for ev in ts.sample(ts.timeline.of_kind("shape")):
        color = ev.attrs["color"]
        ts.emit(
            "shape_width_size",
            "size",
            f"{_article(color).capitalize()} {color} {ev.attrs['shape']} is on screen at about {_at(ev)}. "
            f"How many pixels wide is it? The frame is {cfg.width}x{cfg.height} pixels.",
            float(ev.attrs["width_px"]),
            [ev.interval],
            extra={"event_ids": [ev.id], "area_px": ev.attrs["area_px"], "rel_tol": 0.1},
        )


def _flash_tasks(ts: TaskSet) -> None:
    flashes = ts.timeline.of_kind("flash")
    if "flash" in ts.cfg.kinds:  # asked even with no flash placed: zero is then the answer
        ts.emit(
            "flash_count_num",
            "num",
            "How many times does the whole screen flash white?",
            float(len(flashes)),
            [f.interval for f in flashes],
            extra={"event_ids": [f.id for f in flashes]},
        )
    if flashes:
        ts.emit(
            "flash_tr",
            "tr",
            "When does the screen flash white? Give every interval in seconds.",
            [f.interval for f in flashes],
            [f.interval for f in flashes],
            extra={"event_ids": [f.id for f in flashes]},
        )


def _scene_change_task(ts: TaskSet) -> None:
    cfg = ts.cfg
    boundaries = [s.start for s in ts.timeline.segments[1:]]
    half = 1.0 / cfg.fps
    ts.emit(
        "scene_change_num",
        "num",
        "Ignoring the short inserted events (shapes, digits, words, flashes and static), how many times "
        "does the background of the video change?",
        float(len(boundaries)),
        [[round(max(0.0, b - half), 4), round(min(cfg.duration, b + half), 4)] for b in boundaries],
    )


def _after_beep_tasks(ts: TaskSet) -> None:
    tones = ts.timeline.of_kind("tone")
    shapes = ts.timeline.of_kind("shape")
    for tone in [e for e in tones if e.attrs.get("before_shape")][: ts.cap]:
        shape = next(s for s in shapes if s.attrs.get("after_beep") == tone.id)
        nth = tones.index(tone) + 1
        question = f"What colour is the shape that appears right after the {_ordinal(nth)} beep?"
        evidence = [[tone.interval[0], shape.interval[1]]]
        ts.emit_mcq(
            "after_beep_color_mcq",
            question,
            shape.attrs["color"],
            list(SHAPE_COLORS),
            evidence,
            [tone.id, shape.id],
        )


# ---------------------------------------------------------------------------------------------- sound
def _static_tasks(ts: TaskSet) -> None:
    """Static is visual and audible in video mode, audible only in audio mode."""
    statics = ts.timeline.of_kind("static")
    if not statics:
        return
    q = (
        "When does the picture turn into static noise? Give every interval in seconds."
        if ts.video
        else "When is there a burst of static noise? Give every interval in seconds."
    )
    ts.emit("static_tr", "tr", q, [s.interval for s in statics], [s.interval for s in statics])


def _beep_tasks(ts: TaskSet) -> None:
    tones = ts.timeline.of_kind("tone")
    if not (ts.cfg.has_audio and (tones or {"tone", "beep_shape"} & set(ts.cfg.kinds))):
        return
    ts.emit(
        "beep_count_num",
        "num",
        "How many beeps (short pure tones) can be heard in total?",
        float(len(tones)),
        [t.interval for t in tones],
        extra={"event_ids": [t.id for t in tones]},
    )
    for ev in ts.sample(tones):
        ts.emit(
            "beep_pitch_num",
            "num",
            f"What is the frequency, in Hz, of the beep heard at about {_at(ev)}?",
            ev.attrs["freq"],
            [ev.interval],
            extra={"event_ids": [ev.id], "rel_tol": 0.05},
        )
    for ev in ts.sample(tones):
        ts.emit(
            "nth_beep_tr",
            "tr",
            f"When is the {_ordinal(tones.index(ev) + 1)} beep heard? Give the interval in seconds.",
            [ev.interval],
            [ev.interval],
            extra={"event_ids": [ev.id]},
        )
    if not ts.video:
        _beep_pitch_mcq_tasks(ts, tones)


def _beep_pitch_mcq_tasks(ts: TaskSet, tones: list[Event]) -> None:
    for ev in ts.sample(tones):
        question = f"What is the pitch of the beep heard at about {_at(ev)}?"
        pitches = [f"{f:g} Hz" for f in TONE_FREQS]
        ts.emit_mcq("beep_pitch_mcq", question, f"{ev.attrs['freq']:g} Hz", pitches, [ev.interval], [ev.id])


def _speech_tasks(ts: TaskSet) -> None:
    speech = ts.timeline.of_kind("speech")
    if not speech:
        return
    spoken = sorted({e.attrs["word"] for e in speech})
    for word in [str(w) for w in ts.rng.permutation(spoken)[: ts.cap]]:
        hits = [e for e in speech if e.attrs["word"] == word]
        ts.emit(
            "spoken_word_tr",
            "tr",
            f'When is the word "{word}" spoken? Give every interval in seconds.',
            [e.interval for e in hits],
            [e.interval for e in hits],
            extra={"event_ids": [e.id for e in hits]},
        )
    for ev in ts.sample(speech):
        ts.emit(
            "spoken_word_ff",
            "ff",
            f"Which word is spoken at about {_at(ev)}? Answer with the word only.",
            ev.attrs["word"],
            [ev.interval],
            extra={"event_ids": [ev.id], "match": "case_insensitive"},
        )
    _spoken_word_mcq_tasks(ts, speech, spoken)


def _spoken_word_mcq_tasks(ts: TaskSet, speech: list[Event], spoken: list[str]) -> None:
    """Which word was spoken, among words that were not (needs three distractors)."""
    unspoken = [w for w in SPOKEN_WORDS if w not in spoken]
    if len(unspoken) < 3:
        return
    for word in [str(w) for w in ts.rng.permutation(spoken)[: max(1, ts.cap // 2)]]:
        hits = [e for e in speech if e.attrs["word"] == word]
        question = "Which of these words is spoken in the recording?"
        ts.emit_mcq(
            "spoken_word_mcq",
            question,
            word,
            unspoken + [word],
            [e.interval for e in hits],
            [e.id for e in hits],
        )


# The order is part of the output: templates draw from one random stream in this order.
_VISUAL_TEMPLATES: tuple[Callable[[TaskSet], None], ...] = (
    _digit_tasks,
    _screen_word_tasks,
    _shape_interval_tasks,
    _shape_width_tasks,
    _flash_tasks,
    _scene_change_task,
    _after_beep_tasks,
)
_SOUND_TEMPLATES: tuple[Callable[[TaskSet], None], ...] = (_static_tasks, _beep_tasks, _speech_tasks)


def make_benchmark_tasks(
    timeline: Timeline, media: str, id_prefix: str, split: str = "test", config_hash: str = ""
) -> list[Task]:
    """Questions of every type a ``benchmark``-level timeline supports, with answers and evidence by
    construction; :func:`envs.synth.make_tasks` picks the templates of any level."""
    if timeline.config.level != "benchmark":
        raise ValueError(
            f"make_benchmark_tasks needs a level='benchmark' timeline, got {timeline.config.level!r}"
        )
    ts = TaskSet(timeline, media, id_prefix, split, config_hash)
    templates = (*_VISUAL_TEMPLATES, *_SOUND_TEMPLATES) if ts.video else _SOUND_TEMPLATES
    for template in templates:
        template(ts)
    return ts.tasks
