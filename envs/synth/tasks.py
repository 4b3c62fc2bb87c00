"""Task templates: the questions a timeline supports, with answers and evidence by construction."""

from __future__ import annotations

from typing import Any

import numpy as np

from envs.synth.config import GENERATOR_VERSION, SHAPE_COLORS, SOURCE_NAME, SPOKEN_WORDS, TONE_FREQS, _rng
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


def make_tasks(
    timeline: Timeline, media: str, id_prefix: str, split: str = "test", config_hash: str = ""
) -> list[Task]:
    """Questions of every type the timeline supports, with answers and evidence by construction."""
    cfg = timeline.config
    rng = _rng(cfg, 4)
    cap = cfg.max_tasks_per_template
    video = cfg.mode == "video"
    tasks: list[Task] = []
    counts: dict[str, int] = {}

    def emit(
        template: str, task_type: str, question: str, answer: Any, evidence: list[list[float]], **kw: Any
    ):
        k = counts.get(template, 0)
        counts[template] = k + 1
        extra = {"template": template, "generator": GENERATOR_VERSION, "seed": cfg.seed, "mode": cfg.mode}
        if config_hash:
            extra["config_hash"] = config_hash
        extra.update(kw.pop("extra", {}))
        tasks.append(
            Task(
                id=f"{id_prefix}-{template}-{k:02d}",
                media=media,
                question=question,
                task_type=task_type,
                answer=answer,
                evidence=evidence,
                source=SOURCE_NAME,
                split=split,
                duration=cfg.duration,
                extra=extra,
                **kw,
            )
        )

    def sample(events: list[Event]) -> list[Event]:
        if len(events) <= cap:
            return events
        keep = sorted(rng.choice(len(events), size=cap, replace=False))
        return [events[i] for i in keep]

    shapes = timeline.of_kind("shape")
    tones = timeline.of_kind("tone")
    speech = timeline.of_kind("speech")
    by_id = {e.id: e for e in timeline.events}

    # --- visual questions
    if video:
        for ev in sample(timeline.of_kind("digit")):
            digits = [str(d) for d in range(10)]
            choices, letter = _mcq(rng, ev.attrs["text"], digits)
            emit(
                "digit_mcq",
                "mcq",
                f"Which digit is shown on screen at about {_at(ev)}?",
                letter,
                [ev.interval],
                choices=choices,
                extra={"event_ids": [ev.id]},
            )
        for ev in sample(timeline.of_kind("word")):
            emit(
                "screen_word_ff",
                "ff",
                f"What word is written on screen at about {_at(ev)}? Answer with the word only.",
                ev.attrs["text"],
                [ev.interval],
                extra={"event_ids": [ev.id], "match": "case_insensitive"},
            )
        for ev in sample(shapes):
            same = [
                s
                for s in shapes
                if (s.attrs["color"], s.attrs["shape"]) == (ev.attrs["color"], ev.attrs["shape"])
            ]
            if counts.get("shape_tr", 0) >= cap or any(
                t.extra.get("key") == [ev.attrs["color"], ev.attrs["shape"]] for t in tasks
            ):
                continue
            intervals = [s.interval for s in same]
            emit(
                "shape_tr",
                "tr",
                f"When does the {ev.attrs['color']} {ev.attrs['shape']} appear on screen? "
                "Give every interval in seconds.",
                intervals,
                intervals,
                extra={"event_ids": [s.id for s in same], "key": [ev.attrs["color"], ev.attrs["shape"]]},
            )
        for ev in sample(shapes):
            emit(
                "shape_width_size",
                "size",
                f"{_article(ev.attrs['color']).capitalize()} {ev.attrs['color']} {ev.attrs['shape']} is on screen at about {_at(ev)}. "
                f"How many pixels wide is it? The frame is {cfg.width}x{cfg.height} pixels.",
                float(ev.attrs["width_px"]),
                [ev.interval],
                extra={"event_ids": [ev.id], "area_px": ev.attrs["area_px"], "rel_tol": 0.1},
            )
        flashes = timeline.of_kind("flash")
        if "flash" in cfg.kinds:
            emit(
                "flash_count_num",
                "num",
                "How many times does the whole screen flash white?",
                float(len(flashes)),
                [f.interval for f in flashes],
                extra={"event_ids": [f.id for f in flashes]},
            )
        if flashes:
            emit(
                "flash_tr",
                "tr",
                "When does the screen flash white? Give every interval in seconds.",
                [f.interval for f in flashes],
                [f.interval for f in flashes],
                extra={"event_ids": [f.id for f in flashes]},
            )
        boundaries = [s.start for s in timeline.segments[1:]]
        half = 1.0 / cfg.fps
        emit(
            "scene_change_num",
            "num",
            "Ignoring the short inserted events (shapes, digits, words, flashes and static), how many times "
            "does the background of the video change?",
            float(len(boundaries)),
            [[round(max(0.0, b - half), 4), round(min(cfg.duration, b + half), 4)] for b in boundaries],
        )
        for tone_id in [e.id for e in tones if e.attrs.get("before_shape")][:cap]:
            tone = by_id[tone_id]
            shape = next(s for s in shapes if s.attrs.get("after_beep") == tone_id)
            nth = tones.index(tone) + 1
            choices, letter = _mcq(rng, shape.attrs["color"], list(SHAPE_COLORS))
            emit(
                "after_beep_color_mcq",
                "mcq",
                f"What colour is the shape that appears right after the {_ordinal(nth)} beep?",
                letter,
                [[tone.interval[0], shape.interval[1]]],
                choices=choices,
                extra={"event_ids": [tone.id, shape.id]},
            )

    # --- static noise (visual + audible in video mode, audible only in audio mode)
    statics = timeline.of_kind("static")
    if statics:
        q = (
            "When does the picture turn into static noise? Give every interval in seconds."
            if video
            else "When is there a burst of static noise? Give every interval in seconds."
        )
        emit("static_tr", "tr", q, [s.interval for s in statics], [s.interval for s in statics])

    # --- audio questions
    if cfg.has_audio and (tones or {"tone", "beep_shape"} & set(cfg.kinds)):
        emit(
            "beep_count_num",
            "num",
            "How many beeps (short pure tones) can be heard in total?",
            float(len(tones)),
            [t.interval for t in tones],
            extra={"event_ids": [t.id for t in tones]},
        )
        for ev in sample(tones):
            emit(
                "beep_pitch_num",
                "num",
                f"What is the frequency, in Hz, of the beep heard at about {_at(ev)}?",
                ev.attrs["freq"],
                [ev.interval],
                extra={"event_ids": [ev.id], "rel_tol": 0.05},
            )
        for ev in sample(tones):
            nth = tones.index(ev) + 1
            emit(
                "nth_beep_tr",
                "tr",
                f"When is the {_ordinal(nth)} beep heard? Give the interval in seconds.",
                [ev.interval],
                [ev.interval],
                extra={"event_ids": [ev.id]},
            )
        if not video:
            for ev in sample(tones):
                choices, letter = _mcq(rng, f"{ev.attrs['freq']:g} Hz", [f"{f:g} Hz" for f in TONE_FREQS])
                emit(
                    "beep_pitch_mcq",
                    "mcq",
                    f"What is the pitch of the beep heard at about {_at(ev)}?",
                    letter,
                    [ev.interval],
                    choices=choices,
                    extra={"event_ids": [ev.id]},
                )
    if speech:
        spoken = sorted({e.attrs["word"] for e in speech})
        unspoken = [w for w in SPOKEN_WORDS if w not in spoken]
        for word in [str(w) for w in rng.permutation(spoken)[:cap]]:
            hits = [e for e in speech if e.attrs["word"] == word]
            emit(
                "spoken_word_tr",
                "tr",
                f'When is the word "{word}" spoken? Give every interval in seconds.',
                [e.interval for e in hits],
                [e.interval for e in hits],
                extra={"event_ids": [e.id for e in hits]},
            )
        for ev in sample(speech):
            emit(
                "spoken_word_ff",
                "ff",
                f"Which word is spoken at about {_at(ev)}? Answer with the word only.",
                ev.attrs["word"],
                [ev.interval],
                extra={"event_ids": [ev.id], "match": "case_insensitive"},
            )
        if len(unspoken) >= 3:
            for word in [str(w) for w in rng.permutation(spoken)[: max(1, cap // 2)]]:
                hits = [e for e in speech if e.attrs["word"] == word]
                choices, letter = _mcq(rng, word, unspoken + [word])
                emit(
                    "spoken_word_mcq",
                    "mcq",
                    "Which of these words is spoken in the recording?",
                    letter,
                    [e.interval for e in hits],
                    choices=choices,
                    extra={"event_ids": [e.id for e in hits]},
                )
    return tasks
