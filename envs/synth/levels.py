"""The engine's levels behind one pair of functions: a config's ``level`` picks its timeline and its tasks.

``benchmark`` (the default) is the synthetic benchmark of :mod:`envs.synth.timeline` and :mod:`envs.synth.tasks`;
``search`` is the RL testbed of :mod:`envs.synth.search`. Why a module of its own: both levels build on the
timeline's types, so the choice between them sits above them (no import circle).
"""

from __future__ import annotations

from envs.synth.config import SynthConfig
from envs.synth.search import build_search_timeline, make_search_tasks
from envs.synth.tasks import make_benchmark_tasks
from envs.synth.timeline import Timeline, build_benchmark_timeline
from envs.tasks import Task


def build_timeline(cfg: SynthConfig) -> Timeline:
    """The timeline of ``cfg``'s level (a pure function of the config)."""
    if cfg.level == "search":
        return build_search_timeline(cfg)
    return build_benchmark_timeline(cfg)


def make_tasks(
    timeline: Timeline, media: str, id_prefix: str, split: str = "test", config_hash: str = ""
) -> list[Task]:
    """The questions of the timeline's level, with answers and evidence by construction."""
    if timeline.config.level == "search":
        return make_search_tasks(timeline, media, id_prefix, split, config_hash)
    return make_benchmark_tasks(timeline, media, id_prefix, split, config_hash)
