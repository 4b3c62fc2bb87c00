"""``synth_teacher``: a scripted teacher that perceives, for SFT data on the synthetic benchmark.

Unlike ``oracle`` (which answers the ground truth), this policy searches like an agent should: a coarse scan, a
sweep of narrower windows, a zoom around what it found, then an answer computed only from what it observed. Its
Observation states exactly what the percept the environment served showed (read from the timestamps on the served
message parts, evaluated on the benchmark's timeline; see :mod:`omniagent.backends.synth_world`), its Thought cites
observed facts and plans the next look.

Strategies are drawn per episode from ``seed`` and the task (coarse scan or not, frames or clips, spacing, audio
window length, zoom or not, patience, window around a named time), and sweeps are stretched to fit the turn budget,
so best-of-N samples differ and some fail: an event between two sparse frames is missed, an impatient run stops
early, and then the answer is a guess.

With ``error_rate``/``look_error_rate`` it also makes, now and then, the mistakes small agents make (an answer in
another task type's format, a look whose start is after its end); the environment rejects the turn and the next
turn says so and takes the same decision again. The mistaken turn is marked ``scripted_error``: QC accepts it and
the export never makes it a target, so the student learns the recovery, not the mistake.

Every template is solvable by perception; ``ff`` answers (one word by construction) are scored by exact match
when the rule-based auditor (:mod:`rl.synthesis.audit_rules`) stands in for a judge. With ``compact``, turns on
the search level's questions are written in the compact language (:mod:`omniagent.backends.synth_compact`).
Its settings are :class:`~omniagent.backends.teacher_params.SynthTeacherParams`.
"""

from __future__ import annotations

import json
import math
import time
import zlib
from typing import Any

import numpy as np

from envs.messages import Message
from envs.scoring import letters
from omniagent.backends import teacher_search
from omniagent.backends.synth_compact import describe_compact
from omniagent.backends.synth_goals import parse_goal, unit_note
from omniagent.backends.synth_world import Item, Memory, Percept, SynthWorld, WorldError, describe
from omniagent.backends.synth_world import percept_from_parts as read_percept
from omniagent.backends.teacher_params import SynthTeacherParams
from omniagent.backends.teacher_search import SEARCH_GOALS
from omniagent.backends.teacher_style import Style, wrong_format
from omniagent.policy_base import Policy, PolicyError, TurnOutput, register_policy


def _r(x: float) -> float:
    return round(float(x), 2)


@register_policy("synth_teacher")
class SynthTeacherPolicy(Policy):
    """A perceiving scripted teacher for media built by ``python -m envs.synth`` (see the module doc)."""

    name = "synth_teacher"
    Params = SynthTeacherParams

    def __init__(self, **kwargs: Any) -> None:
        p: SynthTeacherParams = self._init_params(kwargs)
        self.seed = 0 if p.seed is None else int(p.seed)
        self.limits = p.limits
        self.error_rate, self.look_error_rate = float(p.error_rate), float(p.look_error_rate)
        self.per_frame, self.named_frame = bool(p.per_frame), bool(p.named_frame)
        self.span_quote, self.field_clauses = bool(p.span_quote), bool(p.field_clauses)
        self.option_thought, self.answer_text = bool(p.option_thought), bool(p.answer_text)
        self.unit_thought, self.compact_language = bool(p.unit_thought), bool(p.compact)
        self.info: dict[str, Any] = {}

    # ---------------------------------------------------------------------------------- episode
    def reset(self, info: dict[str, Any]) -> None:
        media = info["media"]
        try:
            self.world = SynthWorld.for_media(media["path"])
        except WorldError as exc:
            raise PolicyError(f"synth_teacher: {exc}") from exc
        self.info, self.turn, self.max_turns = info, 0, int(info["max_turns"])
        self.duration = float(media["duration"])
        self.video, self.audio = bool(media["has_video"]), bool(media["has_audio"])
        self.step = 1.0 / float(media.get("fps") or self.world.fps)
        key = zlib.crc32(f"{media['path'].rsplit('/', 1)[-1]}\n{info['task']['question']}".encode())
        self.rng = np.random.default_rng([self.seed & 0xFFFFFFFF, key])
        # mistakes draw from their own stream, so error_rate=0 leaves every other draw as it was
        self.err_rng = np.random.default_rng([self.seed & 0xFFFFFFFF, key, 1])
        self.recovery = ""  # set after a scripted mistake: the next thought says what went wrong
        self.goal = parse_goal(info["task"]["question"])
        self.compact = self.compact_language and self.goal.search in SEARCH_GOALS
        self.style = Style.draw(self.rng, self.limits, self.duration)
        self.memory = Memory()
        self.looks: list[dict[str, Any]] = []  # the looks taken so far
        self.was_cut = False  # the sweep does not cover the whole file (budget or patience)
        self.queue: list[dict[str, Any]] = self._plan()
        self.zoomed: list[list[float]] = []  # runs a zoom was queued for
        self.zooms: list[dict[str, Any]] = []  # the zoom actions (to tell them apart in thoughts)
        self.zooms_done = 0
        self.phase = 0  # after_beep: 0 = find the beep, 1 = look after it
        self.option: tuple[str, str] | None = None  # (observed value, its letter) of an mcq answer

    def act(self, messages: list[Message]) -> TurnOutput:
        t0 = time.perf_counter()
        if not self.info:
            raise PolicyError("synth_teacher: act() before reset(); run it through run_episode")
        self.turn += 1
        percept = read_percept(messages[-1]["content"]) if self.turn > 1 else Percept("none")
        self.memory.add_percept(self.world, percept)
        observation = (
            describe_compact(self.world, percept, fields=self.field_clauses)
            if self.compact
            else describe(self.world, percept, per_frame=self.per_frame)
        )
        action, thought = self._decide()
        if self.recovery:
            thought, self.recovery = f"{self.recovery} {thought}", ""
        mistake = self._mistake(action) if self.turn < self.max_turns else None
        if mistake is not None:
            action = mistake
        text = json.dumps({"observation": observation, "thought": thought, "action": action})
        return TurnOutput(
            text=text, model_seconds=time.perf_counter() - t0, scripted_error=mistake is not None
        )

    # -------------------------------------------------------------------------------- mistakes
    def _mistake(self, action: dict[str, Any]) -> dict[str, Any] | None:
        """With probability ``error_rate`` (answers) or ``look_error_rate`` (looks), the decided action
        spoilt the way small agents spoil it, and the decision undone so that the next turn takes it
        again, after the error percept."""
        rate = self.error_rate if action["type"] == "answer" else self.look_error_rate
        if rate <= 0 or self.err_rng.random() >= rate:
            return None
        if action["type"] == "answer":
            wrong = wrong_format(self.info["task"]["task_type"], self.err_rng, self.duration)
            if wrong is None or (self.answer_text and str(wrong) in (self.info["task"].get("choices") or [])):
                return None  # no other format, or a number that is an option's text (a valid answer then)
            self.recovery = "My last answer was rejected: it was not in the required format."
            return {"type": "answer", "content": wrong}
        if not action["end"] > action["start"]:
            return None
        self.queue.insert(0, action)
        if any(action is z for z in self.zooms):
            self.zooms_done -= 1
        self.recovery = "My last request was rejected: its start was after its end."
        return {**action, "start": action["end"], "end": action["start"]}

    # ----------------------------------------------------------------------------------- plans
    def _frames(self, s: float, e: float, num: int) -> dict[str, Any]:
        s, e = max(0.0, s), min(self.duration, e)
        return {
            "type": "get_frames",
            "start": _r(s),
            "end": _r(e),
            "num": max(1, min(num, self.limits.max_frames)),
        }

    def _audio(self, s: float, e: float) -> dict[str, Any]:
        return {"type": "get_audio", "start": _r(max(0.0, s)), "end": _r(min(self.duration, e))}

    def _clip(self, s: float, e: float) -> dict[str, Any]:
        return {"type": "get_clip", "start": _r(max(0.0, s)), "end": _r(min(self.duration, e))}

    def _budget(self, reserve: int) -> int:
        return max(0, self.max_turns - 1 - reserve)

    def _cut(self, plan: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """An impatient teacher plans only part of its sweep (and may then miss the evidence)."""
        keep = math.ceil(len(plan) * self.style.patience)
        self.was_cut = self.was_cut or keep < len(plan)
        return plan[:keep]

    def _frame_sweep(self, avail: int, spacing: float, num: int) -> list[dict[str, Any]]:
        if avail < 1:
            return []
        spacing = max(spacing, self.duration / (avail * num))  # stretch to fit the budget
        width = spacing * num
        n = math.ceil(self.duration / width - 1e-9)
        return [self._frames(i * width, min(self.duration, (i + 1) * width - spacing), num) for i in range(n)]

    def _audio_sweep(self, avail: int, length: float) -> list[dict[str, Any]]:
        """Windows overlapping by 2 s, so a sound cut at one edge is heard whole in the next."""
        if avail < 1:
            return []
        length = min(self.limits.max_audio_s, max(length, (self.duration + 2 * avail) / avail))
        starts, s = [], 0.0
        while True:
            starts.append(s)
            if s + length >= self.duration:
                break
            s += length - 2.0
        return [self._audio(a, a + length) for a in starts]

    def _visual_sweep(self, avail: int) -> list[dict[str, Any]]:
        st = self.style
        clips = math.ceil(self.duration / st.clip_len - 1e-9)
        if st.sweep == "clips" and clips <= avail:
            return [self._clip(i * st.clip_len, (i + 1) * st.clip_len) for i in range(clips)]
        return self._frame_sweep(avail, st.spacing, st.sweep_num)

    def _plan(self) -> list[dict[str, Any]]:
        """The looks planned at reset (zooms and follow-ups are added as finds come in)."""
        g, st = self.goal, self.style
        if g.search in SEARCH_GOALS:
            return teacher_search.plan(self)
        if g.search in ("local_visual", "local_audio") and g.at is not None:
            if self.named_frame and g.search == "local_visual" and self.video:
                return [self._frames(float(g.at), float(g.at), 1)]
            return [self._local(st.half)]
        if g.search == "scene" and self.video:
            return self._cut(self._frame_sweep(self._budget(0), st.scene_spacing, self.limits.max_frames))
        clips = math.ceil(self.duration / st.clip_len - 1e-9)
        if g.search == "after_beep" and self.video and st.sweep == "clips" and clips <= self._budget(2):
            return self._cut(self._visual_sweep(self._budget(2)))  # clips: the beep and the shape at once
        audio_first = g.search in ("find_audio", "after_beep") or (
            g.search == "find_static" and (st.static_by_audio or not self.video)
        )
        if audio_first and self.audio:
            return self._cut(self._audio_sweep(self._budget(2), st.audio_len))
        if self.video and g.search != "unknown":
            coarse = [self._frames(0.0, self.duration, st.coarse_num)] if st.coarse else []
            reserve = len(coarse) + (2 if st.zoom else 0)
            return coarse + self._cut(self._visual_sweep(self._budget(reserve)))
        if self.video:
            return [self._frames(0.0, self.duration, st.coarse_num)]
        return self._audio_sweep(1, self.duration)[:1] if self.audio else []

    def _local(self, half: float) -> dict[str, Any]:
        t = float(self.goal.at or 0.0)
        if self.goal.search == "local_audio" or not self.video:
            return self._audio(t - half, t + half)
        if self.style.local_clip and 2 * half <= self.limits.max_clip_s:
            return self._clip(t - half, t + half)
        return self._frames(t - half, t + half, self.style.local_num)

    # -------------------------------------------------------------------------------- deciding
    def _local_done(self) -> bool:
        g, t = self.goal, float(self.goal.at or 0.0)
        if g.search == "local_audio" or not self.video:
            return any(s.full and s.start - 0.5 <= t <= s.end + 0.5 for s in self.memory.heard(g.kind))
        return any(abs(x - t) <= 3.0 for x in self.memory.hits(g.kind, g.value))

    def _follow_ups(self) -> None:
        """Add zooms around new finds, widen a local look, look after the n-th beep."""
        g, st, mem = self.goal, self.style, self.memory
        if g.search in SEARCH_GOALS:
            return teacher_search.follow_ups(self)
        if g.search in ("local_visual", "local_audio"):
            if not self.queue and not self._local_done() and self.turn <= 2:
                self.queue.append(self._local(st.half * 2.5 + 1.0))
            return
        if g.search == "after_beep":
            beeps = mem.heard("tone")
            if self.phase == 0 and g.nth and len(beeps) >= g.nth and beeps[g.nth - 1].full:
                self.phase, end = 1, float(beeps[g.nth - 1].end)
                self.queue = (
                    [] if self._shape_after(end) else [self._frames(end, end + 2.5, max(4, st.local_num))]
                )
            return
        if g.search in ("find_visual", "find_static") and st.zoom and self.video:
            for a, b in mem.runs(g.kind, g.value, self.step):
                if any(z[0] - 0.5 <= a <= z[1] + 0.5 for z in self.zoomed):
                    continue
                self.zoomed.append([a - 1.0, b + 1.0])
                zoom = self._frames(a - 1.0, b + 1.0, round((b - a + 2.0) / self.step) + 1)
                self.zooms.append(zoom)
                self.queue.insert(0, zoom)

    def _finished(self) -> bool:
        return self._evidence_found() or not self.queue

    def _evidence_found(self) -> bool:
        """The search can stop before its plan is done: the named thing, or the n-th one, was found."""
        g, mem = self.goal, self.memory
        if g.search in SEARCH_GOALS:
            return teacher_search.evidence_found(self)
        if g.search in ("local_visual", "local_audio"):
            return self._local_done()
        if g.template == "shape_tr" and self.style.stop_at_first and mem.hits(g.kind, g.value):
            return self.zooms_done > 0 or not self.style.zoom  # one occurrence pinned: enough
        if g.template == "nth_beep_tr" and g.nth:
            beeps = mem.heard("tone")
            return len(beeps) >= g.nth and beeps[g.nth - 1].full
        if g.template == "spoken_word_mcq":
            choices = self.info["task"].get("choices") or []
            return any(s.value in choices for s in mem.heard("speech", full_only=True))
        if g.search == "after_beep" and self.phase == 1 and self.goal.nth:
            return self._shape_after(float(mem.heard("tone")[self.goal.nth - 1].end)) is not None
        return False

    def _decide(self) -> tuple[dict[str, Any], str]:
        self._follow_ups()
        left = self.max_turns - self.turn
        if left <= 0 or not self.queue or self._finished():
            answer = self._answer()
            content = teacher_search.answer_content(self, answer)
            return {"type": "answer", "content": content}, self._answer_thought(answer)
        action = self.queue.pop(0)
        self.looks.append(action)
        zoom = any(action is z for z in self.zooms)
        self.zooms_done += zoom
        return action, self._plan_thought(action, zoom)

    # --------------------------------------------------------------------------------- answers
    def _letter(self, value: str | None) -> str:
        choices = [str(c) for c in self.info["task"].get("choices") or []]
        if value is not None and value in choices:
            self.option = (value, letters(len(choices))[choices.index(value)])
            return self.option[1]
        return letters(max(1, len(choices)))[int(self.rng.integers(max(1, len(choices))))]  # a guess

    def _nearest(self, items: list[Item] | list[float]) -> Any:
        t = float(self.goal.at or 0.0)
        times = items and isinstance(items[0], float)
        return min(items, key=lambda x: abs((x if times else x.start) - t)) if items else None

    def _frame_item(self, t: float, kind: str) -> Item | None:
        return next((i for i in self.memory.frames.get(round(t, 2), []) if i.kind == kind), None)

    def _shape_after(self, end: float) -> Item | None:
        times = [t for t in self.memory.hits("shape") if end <= t <= end + 3.0]
        return self._frame_item(times[0], "shape") if times else None

    def _answer(self) -> Any:
        """The answer from the memory alone; a guess where the evidence was never observed."""
        g, mem, tmpl = self.goal, self.memory, self.goal.template
        self.option = None
        if g.search in SEARCH_GOALS:
            return self._letter(teacher_search.answer_value(self))
        if tmpl in ("digit_mcq", "screen_word_ff", "shape_width_size"):
            t = self._nearest(mem.hits(g.kind, g.value))
            item = self._frame_item(t, g.kind) if t is not None else None
            if tmpl == "digit_mcq":
                return self._letter(item.value if item else None)
            if tmpl == "screen_word_ff":
                return item.value if item else "unknown"
            return item.width if item else round(0.3 * float(self.info["media"].get("height") or 90))
        if tmpl in ("beep_pitch_num", "beep_pitch_mcq", "spoken_word_ff"):
            s = self._nearest(mem.heard(g.kind, full_only=True))
            if tmpl == "beep_pitch_num":
                return float(s.value) if s else 1000.0
            if tmpl == "beep_pitch_mcq":
                return self._letter(f"{float(s.value):g} Hz" if s else None)
            return s.value if s else "unknown"
        if tmpl in ("shape_tr", "flash_tr", "static_tr", "spoken_word_tr"):
            spans = [[s.start, s.end] for s in mem.heard(g.kind, g.value)] if self._by_ear() else []
            spans = spans or mem.runs(g.kind, g.value, self.step)
            return spans or [[0.0, _r(self.duration)]]
        if tmpl == "flash_count_num":
            return len(mem.runs("flash", None, self.step))
        if tmpl == "beep_count_num":
            return len(mem.heard("tone"))
        if tmpl == "scene_change_num":
            return mem.background_changes()
        if tmpl == "nth_beep_tr":
            beeps = mem.heard("tone")
            return (
                [[beeps[g.nth - 1].start, beeps[g.nth - 1].end]]
                if g.nth and len(beeps) >= g.nth
                else [[0.0, 1.0]]
            )
        if tmpl == "spoken_word_mcq":
            choices = self.info["task"].get("choices") or []
            heard = [s.value for s in mem.heard("speech", full_only=True) if s.value in choices]
            return self._letter(heard[0] if heard else None)
        if tmpl == "after_beep_color_mcq":
            beeps = mem.heard("tone")
            item = self._shape_after(float(beeps[g.nth - 1].end)) if g.nth and len(beeps) >= g.nth else None
            return self._letter(item.value.split()[0] if item else None)
        return self._fallback()

    def _by_ear(self) -> bool:
        return self.goal.kind in ("speech", "tone") or (
            self.goal.kind == "static" and bool(self.memory.sounds)
        )

    def _fallback(self) -> Any:
        kind = self.info["task"]["task_type"]
        if kind == "mcq":
            return self._letter(None)
        if kind == "tr":
            return [[0.0, _r(self.duration)]]
        return 0 if kind in ("num", "size") else "unknown"

    # -------------------------------------------------------------------------------- thoughts
    def _facts(self) -> str:
        """Observed facts about the target, with the times they were observed."""
        g, mem = self.goal, self.memory
        if g.search in SEARCH_GOALS:
            return teacher_search.facts(self)
        if g.search == "scene":
            return f"I have seen {len(mem.frames)} frames and {mem.background_changes()} background changes."
        if g.kind in ("tone", "speech") or (g.kind == "static" and mem.sounds):
            heard = [s for s in mem.heard(g.kind, g.value)]
            if g.search == "after_beep":
                if not g.nth or len(heard) < g.nth:
                    return f"I heard {len(heard)} beeps so far."
                beep = heard[g.nth - 1]
                shape = self._shape_after(float(beep.end))
                after = next((t for t in mem.hits("shape") if beep.end <= t <= beep.end + 3.0), None)
                seen = f" Right after it I saw {shape.phrase()} at {after:.2f}s." if shape else ""
                return f"Beep number {g.nth} is {beep.phrase()}.{seen}"
            if not heard:
                return f"No {g.target().split(' ', 1)[-1]} heard so far."
            return "I heard " + ", ".join(s.phrase() for s in heard[:6]) + "."
        if not g.kind:
            return "I cannot tell what this question needs."
        runs = mem.runs(g.kind, g.value, self.step)
        hits = mem.hits(g.kind, g.value)
        if not hits:
            return f"No {g.target().split(' ', 1)[-1]} seen so far."
        shown = []
        for a, b in runs[:6]:
            inside = [t for t in hits if a <= t <= b]
            item = self._frame_item(inside[0], g.kind)
            what = item.phrase() if item and item.kind != "background" else g.target()
            span = f"{inside[0]:.2f}s" if len(inside) == 1 else f"{inside[0]:.2f}s-{inside[-1]:.2f}s"
            shown.append(f"{what} at {span}")
        return "I saw " + "; ".join(shown) + "."

    def _plan_thought(self, action: dict[str, Any], zoom: bool) -> str:
        if self.compact:
            return teacher_search.compact_thought(self, action)
        g = self.goal
        a, b = action["start"], action["end"]
        one = self.named_frame and a == b
        how = {
            "get_frames": f"the frame at {a:.2f}s"
            if one
            else f"{action.get('num')} frames from {a:.2f}s to {b:.2f}s",
            "get_audio": f"the audio from {a:.2f}s to {b:.2f}s",
            "get_clip": f"a clip from {a:.2f}s to {b:.2f}s",
        }[action["type"]]
        if self.turn == 1:
            return f"I need to find {g.target()}. Next: {how}."
        why = "to pin down where it starts and ends" if zoom else f"to keep searching for {g.target()}"
        return f"{self._facts()} Next: {how}, {why}."

    def _answer_thought(self, answer: Any) -> str:
        if self.compact:
            return teacher_search.compact_thought(self, {"type": "answer", "content": answer})
        note = ""
        if not self._evidence_found() and self.queue:
            note = " I am out of turns, so I answer from what I have."
        elif not self._evidence_found() and self.was_cut:
            note = " I did not cover the whole file, but I answer from what I have."
        written = json.dumps(teacher_search.answer_content(self, answer))
        unit = unit_note(self.goal.template, self.unit_thought)
        return f"{self._facts()}{note}{self._option_note()}{unit} Answer: {written}."

    def _option_note(self) -> str:
        """With ``option_thought``, where the observed value stands among the options (or that it is not)."""
        if not self.option_thought or self.info["task"]["task_type"] != "mcq":
            return ""
        if self.option is None:
            return " I observed none of the options, so I guess."
        return f" {self.option[0]} is option {self.option[1]}."
