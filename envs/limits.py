"""The environment's limits, declared once: :class:`EnvLimits`.

Why one model: the same settings used to be written in the environment, the media config, the CLI's
argparse defaults, every benchmark preset and the RL config (under other names). Now every consumer
takes these field names, defaults and descriptions from here:

- the environment and :class:`envs.media.MediaConfig` (backend, max_side);
- the CLI, whose limit flags :func:`add_limit_flags` generates (``--max-frames`` for ``max_frames``,
  ``--strict-format/--no-strict-format`` for a bool) and :func:`limits_from_args` reads back;
- the hydra configs: ``conf/limits/default.yaml`` (the benchmark presets' shared limits) and the RL
  config's ``env.limits``, both validated by :func:`limits_from_config` (unknown keys fail).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = ["RETIRED", "EnvLimits", "add_limit_flags", "limit_flag", "limits_from_args", "limits_from_config"]

# Fields that were removed; old trajectories and run files still name them. audio_cache_dir: audio is
# now decoded on demand (envs/audio.py), there is no cache.
RETIRED = frozenset({"audio_cache_dir"})


class EnvLimits(BaseModel):
    """Per-call and per-episode limits; defaults follow the OmniAgent recipe where it states one."""

    model_config = ConfigDict(extra="forbid")

    max_frames: int = Field(
        32, ge=1, description="frames per get_frames call (a larger num is lowered to it)"
    )
    max_audio_s: float = Field(
        300.0, gt=0, description="seconds per get_audio call (Qwen2.5-Omni's audio encoder caps at 300 s)"
    )
    max_clip_s: float = Field(60.0, gt=0, description="seconds per get_clip call")
    min_clip_s: float = Field(
        0.1,
        ge=0,
        description="shortest get_clip span: a shorter clip carries too little sound to encode "
        "(Qwen2.5-Omni's processor gives a 10 ms clip no audio token and the model fails)",
    )
    clip_fps: float = Field(2.0, gt=0, description="frame rate of a get_clip call's frames")
    max_side: int = Field(448, ge=1, description="longer side of every served frame, in pixels")
    max_turns: int = Field(
        16, ge=1, description="turn budget K when an episode does not set one (the last turn must answer)"
    )
    max_answer_chars: int = Field(
        1000,
        ge=1,
        description="characters in a free-form (ff) answer; a longer one is rejected, and the turn schema caps it",
    )
    strict_format: bool = Field(
        True,
        description="reject JSON wrapped in a ``` code fence instead of unwrapping it",
        json_schema_extra={"cli_negations": ["--lenient-format"]},
    )
    mcq_option_text: bool = Field(
        False,
        description="a multiple-choice answer may also be one option's exact text (case and surrounding "
        "spaces ignored), scored as that option's letter; the system prompt and the answer schema say so",
    )
    backend: str = Field(
        "pyav",
        description="video decoder registered in envs.decoders (pyav or decord)",
        json_schema_extra={"cli_aliases": ["--decoder"]},
    )

    decode_threads: int = Field(
        0,
        ge=0,
        description="threads per video decoder: 0 lets the decoder choose (frame threads on every core, "
        "faster for one long clip on idle cores); 1 decodes in the episode's own thread, with less CPU per "
        "frame (an evaluation with many workers, where the workers are the parallelism)",
    )

    allow_protocols: tuple[str, ...] = Field(
        (),
        description="URL protocols a media name may use (comma-separated, e.g. https); by default a name "
        "is always a local file",
    )
    allow_demuxers: tuple[str, ...] = Field(
        (),
        description="demuxers that open further inputs to allow for trusted files (comma-separated, e.g. "
        "hls); by default playlists, concat lists, image sequences and devices are refused",
    )

    media_root: str | None = Field(
        None,
        description="folder every media file must really be inside when it is opened (links resolved "
        "then, not only when a dataset loaded); unset: no confinement, for a user's own file. An "
        "evaluation sets it to its dataset's media_root",
    )
    follow_links_outside_media_root: bool = Field(
        False,
        description="with media_root, judge a media path as written: a link inside media_root may "
        "lead outside it",
    )

    @field_validator("media_root", mode="before")
    @classmethod
    def _folder(cls, value: Any) -> Any:
        """A path object is taken as its text."""
        return os.fspath(value) if isinstance(value, os.PathLike) else value

    @field_validator("allow_protocols", "allow_demuxers", mode="before")
    @classmethod
    def _names(cls, value: Any) -> Any:
        """A comma-separated string (a CLI flag, a YAML scalar) or a list of names."""
        if isinstance(value, str):
            return tuple(v.strip().lower() for v in value.split(",") if v.strip())
        return value

    @model_validator(mode="before")
    @classmethod
    def _drop_retired(cls, data: Any) -> Any:
        """Accept (and ignore) settings that no longer exist, so limits saved with old runs still load."""
        if isinstance(data, Mapping) and RETIRED & set(data):
            return {k: v for k, v in data.items() if k not in RETIRED}
        return data

    @field_validator("backend")
    @classmethod
    def _known_backend(cls, name: str) -> str:
        from envs.decoders import DECODERS  # the decoders register themselves on import

        if name not in DECODERS:
            raise ValueError(f"unknown video decoder {name!r}; known: {', '.join(DECODERS.names())}")
        return name


def limit_flag(name: str) -> str:
    """The CLI flag of an :class:`EnvLimits` field (``max_frames`` -> ``--max-frames``)."""
    return "--" + name.replace("_", "-")


def _extra(name: str) -> dict[str, Any]:
    extra = EnvLimits.model_fields[name].json_schema_extra
    return extra if isinstance(extra, dict) else {}


def add_limit_flags(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup, dests: Mapping[str, str] | None = None
) -> None:
    """Add one flag per :class:`EnvLimits` field: its type, default and help come from the model.

    Each flag's ``dest`` is the field name, or ``dests[field]`` where a CLI already uses the field's
    name for something else (``{"backend": "decoder"}`` gives ``--decoder``); the flag follows the
    dest. Older flag names stay as aliases (``--decoder``, ``--lenient-format``), declared on the field.
    """
    for name, info in EnvLimits.model_fields.items():
        extra = _extra(name)
        dest = (dests or {}).get(name, name)
        flags = [limit_flag(dest)]
        flags += [a for a in extra.get("cli_aliases", []) if a not in flags]
        help_text = info.description or name
        if info.annotation is bool:
            parser.add_argument(
                *flags, dest=dest, action=argparse.BooleanOptionalAction, default=info.default, help=help_text
            )
            for neg in extra.get("cli_negations", []):
                parser.add_argument(
                    neg,
                    dest=dest,
                    action="store_false",
                    default=argparse.SUPPRESS,
                    help=f"same as --no-{flags[0][2:]}",
                )
            continue
        kind = info.annotation if info.annotation in (int, float) else str
        parser.add_argument(*flags, dest=dest, type=kind, default=info.default, help=help_text)


def limits_from_args(ns: argparse.Namespace, dests: Mapping[str, str] | None = None) -> EnvLimits:
    """The validated limits of parsed arguments (``dests`` as given to :func:`add_limit_flags`).

    Fields without a value in ``ns`` take the defaults. Raises pydantic's ``ValidationError`` (a
    ``ValueError``) for values out of range; its ``loc`` is the field name.
    """
    rename = dests or {}
    dests_of = {name: rename.get(name, name) for name in EnvLimits.model_fields}
    return EnvLimits(**{name: getattr(ns, d) for name, d in dests_of.items() if hasattr(ns, d)})


def limits_from_config(node: Any) -> EnvLimits:
    """Validate a config's limits block (a hydra/omegaconf node, a mapping or None for defaults)."""
    if node is None:
        return EnvLimits()
    if isinstance(node, EnvLimits):
        return node
    if not isinstance(node, Mapping):
        from omegaconf import OmegaConf

        node = OmegaConf.to_container(node, resolve=True)
    return EnvLimits.model_validate(dict(node))
