"""Checks that an evaluation measures what it claims to.

**Observation fidelity** (:func:`run_fidelity`). The agent keeps only text notes of what it saw:
raw media are purged after one turn. After an episode we ask follow-up questions whose answers were
only in media the agent looked at (for synthetic tasks, generated from the task engine's known
events inside the frames and audio the agent fetched), and answer each twice with the same policy:
from the text memory alone (the trajectory's observations) and shown the raw media again. The gap
(raw - memory accuracy, paired bootstrap 95% CI) is what the notes lose.

**Train/eval overlap guard** (:func:`check_overlap`, :func:`guard`). Media are fingerprinted by
content (sha256 of size + first MiB + last MiB: cheap on multi-GB files, blind to renames and
copies) and questions by normalised text. Shared media, or the same question on the same media, is
an overlap; the same question text on other media is reported but not fatal by default (template
questions repeat by design).

The code lives in :mod:`omniagent.fidelity` and :mod:`omniagent.overlap`; this module re-exports
both. Error bars live in :mod:`omniagent.summary`; the passive baseline in :mod:`omniagent.passive`.
"""

from __future__ import annotations

from omniagent.fidelity import (
    FidelityReport,
    Probe,
    memory_notes,
    percepts,
    print_fidelity,
    run_fidelity,
    synthetic_probes,
    synthetic_timeline,
)
from omniagent.overlap import (
    OverlapError,
    OverlapReport,
    check_overlap,
    guard,
    media_hash,
    normalize_question,
)

__all__ = [
    "FidelityReport",
    "OverlapError",
    "OverlapReport",
    "Probe",
    "check_overlap",
    "guard",
    "media_hash",
    "memory_notes",
    "normalize_question",
    "percepts",
    "print_fidelity",
    "run_fidelity",
    "synthetic_probes",
    "synthetic_timeline",
]
