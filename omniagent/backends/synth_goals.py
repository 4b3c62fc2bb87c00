"""What a synthetic benchmark question asks for, read from its text alone.

The question templates of :mod:`envs.synth.tasks` as patterns, each with the kind of search that
answers it; the perceiving teacher (:mod:`omniagent.backends.teacher`) plans from a :class:`Goal`
and never reads the task's answer or evidence.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["KIND_NAMES", "SEARCH_LEVEL_TEMPLATES", "TEMPLATES", "Goal", "parse_goal"]

ORD = r"(\d+)(?:st|nd|rd|th)"
SHAPE = r"(\w+ (?:square|circle|triangle))"
AT = r"at about ([\d.]+) s"
# (pattern, template, search, target kind) -- questions of envs/synth/tasks.py
TEMPLATES: list[tuple[re.Pattern[str], str, str, str]] = [
    (re.compile(rf"Which digit is shown on screen {AT}"), "digit_mcq", "local_visual", "digit"),
    (re.compile(rf"What word is written on screen {AT}"), "screen_word_ff", "local_visual", "word"),
    (re.compile(rf"When does the {SHAPE} appear on screen"), "shape_tr", "find_visual", "shape"),
    (
        re.compile(rf"An? {SHAPE} is on screen {AT}\. How many pixels"),
        "shape_width_size",
        "local_visual",
        "shape",
    ),
    (
        re.compile(r"How many times does the whole screen flash white"),
        "flash_count_num",
        "find_visual",
        "flash",
    ),
    (re.compile(r"When does the screen flash white"), "flash_tr", "find_visual", "flash"),
    (re.compile(r"how many times does the background of the video change"), "scene_change_num", "scene", ""),
    (re.compile(rf"right after the {ORD} beep"), "after_beep_color_mcq", "after_beep", "tone"),
    (re.compile(r"turn into static noise|burst of static noise"), "static_tr", "find_static", "static"),
    (re.compile(r"How many beeps"), "beep_count_num", "find_audio", "tone"),
    (re.compile(rf"frequency, in Hz, of the beep heard {AT}"), "beep_pitch_num", "local_audio", "tone"),
    (re.compile(rf"When is the {ORD} beep heard"), "nth_beep_tr", "find_audio", "tone"),
    (re.compile(rf"pitch of the beep heard {AT}"), "beep_pitch_mcq", "local_audio", "tone"),
    (re.compile(r'When is the word "(\w+)" spoken'), "spoken_word_tr", "find_audio", "speech"),
    (re.compile(rf"Which word is spoken {AT}"), "spoken_word_ff", "local_audio", "speech"),
    (re.compile(r"Which of these words is spoken"), "spoken_word_mcq", "find_audio", "speech"),
]
# the search level of envs/synth/search.py: a cue (a background colour, a beep's pitch) and what goes with it;
# searched by omniagent/backends/teacher_search.py
SEARCH_LEVEL_TEMPLATES: list[tuple[re.Pattern[str], str, str, str]] = [
    (
        re.compile(r"Which digit is shown on screen while the background is (\w+)"),
        "cue_digit_mcq",
        "cue_visual",
        "digit",
    ),
    (
        re.compile(r"pitch of the beep heard while the background is (\w+)"),
        "cue_pitch_mcq",
        "cue_audio",
        "tone",
    ),
    (
        re.compile(r"What colour is the background when the (\d+) Hz beep"),
        "pitch_color_mcq",
        "pitch_visual",
        "tone",
    ),
]
KIND_NAMES = {"digit": "a digit", "word": "a word", "flash": "a white flash", "static": "static noise"}
KIND_NAMES |= {"tone": "a beep", "speech": "a spoken word"}
# what each number or width question counts or measures, and in what unit (the teacher's unit_thought)
UNIT_NOTES = {
    "shape_width_size": "a width in pixels",
    "beep_pitch_num": "a pitch in Hz",
    "flash_count_num": "a count of white flashes",
    "beep_count_num": "a count of beeps",
    "scene_change_num": "a count of background changes",
}


def unit_note(template: str, on: bool) -> str:
    """The teacher's ``unit_thought`` sentence for a number or width answer: what it counts or measures (empty when
    ``on`` is false or the template has no unit)."""
    what = UNIT_NOTES.get(template) if on else None
    return f" The question asks for {what}." if what else ""


@dataclass
class Goal:
    """What the question asks for, read from its text (the only task knowledge the teacher uses)."""

    template: str
    search: str  # local_visual|local_audio (named time), find_visual|find_audio|find_static, scene, cue_visual, ...
    kind: str = ""  # the item kind to look for
    value: str | None = None  # "red square", "apple"; None: any
    at: float | None = None  # "at about T s"
    nth: int | None = None  # "the 3rd beep"

    def target(self) -> str:
        if self.kind == "shape" and self.value:
            return f"the {self.value}"
        if self.kind == "speech" and self.value:
            return f'the word "{self.value}"'
        return KIND_NAMES.get(self.kind, "the evidence")


def parse_goal(question: str) -> Goal:
    for pattern, template, search, kind in SEARCH_LEVEL_TEMPLATES:
        m = pattern.search(question)
        if m:  # the cue is a value (a colour, a pitch), never a time the question names
            return Goal(template, search, kind, value=m.group(1))
    for pattern, template, search, kind in TEMPLATES:
        m = pattern.search(question)
        if not m:
            continue
        goal = Goal(template, search, kind)
        for g in m.groups():
            if re.fullmatch(r"\d+", g) and template in ("after_beep_color_mcq", "nth_beep_tr"):
                goal.nth = int(g)
            elif re.fullmatch(r"[\d.]+", g):
                goal.at = float(g)
            else:
                goal.value = g
        return goal
    return Goal("unknown", "unknown")
