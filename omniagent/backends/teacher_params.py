"""The settings of the perceiving scripted teacher ``synth_teacher`` (:mod:`omniagent.backends.teacher`): its strategy
seed, the environment's caps it fits every look into, the scripted mistakes it makes, and the forms its turns take."""

from __future__ import annotations

from pydantic import Field

from envs.limits import EnvLimits
from omniagent.policy_base import PolicyParams

__all__ = ["SynthTeacherParams"]


class SynthTeacherParams(PolicyParams):
    seed: int | None = Field(
        0, description="strategy seed, mixed per episode with the media name and question"
    )
    limits: EnvLimits = Field(
        default_factory=EnvLimits, description="the environment's caps: every look fits"
    )
    error_rate: float = Field(
        0.0,
        ge=0.0,
        le=1.0,
        description="chance that an answer is first given in another task type's format (a scripted mistake "
        "the next turn recovers from; marked, never an SFT target)",
    )
    look_error_rate: float = Field(
        0.0, ge=0.0, le=1.0, description="the same for a look: its start and end swapped"
    )
    per_frame: bool = Field(
        False,
        description="Observations of a get_frames look: one sentence per frame, not per run of alike frames",
    )
    named_frame: bool = Field(False, description="first look at a named time: that frame (its number copied)")
    option_thought: bool = Field(
        False,
        description="a multiple-choice answer's Thought names the option holding the observed value "
        "('7 is option C.'; in the compact language the option's text right before the letter: '7: C.'), "
        "so the letter is looked up in the question's options, not recalled",
    )
    answer_text: bool = Field(
        False,
        description="a multiple-choice answer is its option's text, not its letter (needs mcq_option_text)",
    )
    compact: bool = Field(
        False,
        description="on the search level's questions: compact Observations, Thoughts and whole-second looks",
    )
    unit_thought: bool = Field(
        False,
        description="a number or width answer's Thought names what it counts or measures and in what unit "
        "('The question asks for a count of beeps.'), so each question type's number follows its own words",
    )
    span_quote: bool = Field(
        False, description="compact: Thought 2 first quotes the Observation clauses around the cue's field"
    )
    field_clauses: bool = Field(
        False,
        description="compact: a look's frames are written as one clause per colour in a fixed order, each with the "
        "frames on either side of that colour's ('blue 25-51 digit 9 at 34'; omniagent/backends/synth_compact.py)",
    )
