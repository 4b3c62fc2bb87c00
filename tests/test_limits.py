"""envs/limits.py: EnvLimits declared once; the CLI flags, the presets' shared limits and the RL config follow it."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path
from typing import Any

import pytest
from omegaconf import OmegaConf
from pydantic import ValidationError

from envs.env import EnvLimits as ReExported
from envs.limits import EnvLimits, add_limit_flags, limit_flag, limits_from_args, limits_from_config
from envs.media import MediaConfig

ROOT = Path(__file__).resolve().parents[1]
PRESETS = sorted(p.stem for p in (ROOT / "conf" / "benchmarks").glob("*.yaml"))


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="x")
    add_limit_flags(parser.add_argument_group("environment limits"))
    return parser


def _compose(config_dir: Path, overrides: list[str], name: str = "eval") -> Any:
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(config_dir), version_base=None):
        return compose(config_name=name, overrides=overrides)


def test_one_model_everywhere() -> None:
    assert ReExported is EnvLimits
    with pytest.raises(ValidationError, match="max_frame\n"):
        EnvLimits(max_frame=8)  # a misspelt key fails instead of being ignored
    with pytest.raises(ValidationError, match="unknown video decoder 'opencv'"):
        EnvLimits(backend="opencv")
    with pytest.raises(ValidationError, match="greater than or equal to 1"):
        EnvLimits(max_frames=0)
    assert all(info.description for info in EnvLimits.model_fields.values())
    # a removed setting that old trajectories still carry loads (and is dropped); it is no field any more
    old = EnvLimits.model_validate({"max_frames": 8, "audio_cache_dir": "/tmp/cache"})
    assert old.max_frames == 8 and "audio_cache_dir" not in old.model_dump()


def test_media_config_takes_its_defaults_from_the_limits() -> None:
    defaults, media = EnvLimits(), MediaConfig()
    assert (media.backend, media.max_side) == (defaults.backend, defaults.max_side)
    cfg = MediaConfig.from_limits(EnvLimits(backend="decord", max_side=64))
    assert (cfg.backend, cfg.max_side) == ("decord", 64)


def test_cli_flags_are_the_model_fields() -> None:
    parser = _parser()
    dests = {a.dest for a in parser._actions if a.dest != "help"}
    assert dests == set(EnvLimits.model_fields)
    flags = {s for a in parser._actions for s in a.option_strings}
    assert {limit_flag(name) for name in EnvLimits.model_fields} <= flags
    assert limits_from_args(parser.parse_args([])) == EnvLimits()  # the flags' defaults are the model's

    text = parser.format_help()
    for info in EnvLimits.model_fields.values():
        assert " ".join(str(info.description).split()[:3]) in " ".join(text.split())


def test_cli_flags_parse_to_typed_validated_limits() -> None:
    parser = _parser()
    ns = parser.parse_args(
        ["--max-frames", "8", "--max-audio-s", "12.5", "--no-strict-format", "--backend", "decord"]
        + ["--max-turns", "3", "--max-clip-s", "5"]
    )
    limits = limits_from_args(ns)
    assert limits.max_frames == 8 and limits.max_audio_s == 12.5 and limits.strict_format is False
    assert limits.backend == "decord" and limits.max_turns == 3 and limits.max_clip_s == 5.0
    # the flag names the CLI had before stay as aliases
    old = limits_from_args(parser.parse_args(["--decoder", "decord", "--lenient-format"]))
    assert old.backend == "decord" and old.strict_format is False
    with pytest.raises(SystemExit):
        parser.parse_args(["--max-frames", "many"])
    with pytest.raises(ValidationError, match="clip_fps"):
        limits_from_args(parser.parse_args(["--clip-fps", "0"]))


def test_a_cli_that_uses_a_field_name_for_something_else_renames_its_flag() -> None:
    parser = argparse.ArgumentParser(prog="x")
    parser.add_argument("--backend", default="auto", help="the policy backend")  # as omniagent.run has
    add_limit_flags(parser, dests={"backend": "decoder"})
    ns = parser.parse_args(["--backend", "openai", "--decoder", "decord", "--max-side", "64"])
    assert ns.backend == "openai" and ns.decoder == "decord"
    limits = limits_from_args(ns, dests={"backend": "decoder"})
    assert limits.backend == "decord" and limits.max_side == 64
    assert limits_from_args(parser.parse_args([]), dests={"backend": "decoder"}) == EnvLimits()


def test_the_run_cli_generates_its_limit_flags_from_the_model() -> None:
    from omniagent.cli_args import LIMIT_DESTS, build_parser

    parser = build_parser()
    (group,) = [g for g in parser._action_groups if g.title == "environment limits"]
    dests = {a.dest for a in group._group_actions}
    assert dests == {LIMIT_DESTS.get(name, name) for name in EnvLimits.model_fields}
    for action in group._group_actions:
        if action.default is not argparse.SUPPRESS:  # (--lenient-format only flips strict_format)
            field = next(n for n in EnvLimits.model_fields if LIMIT_DESTS.get(n, n) == action.dest)
            assert action.default == EnvLimits.model_fields[field].default


PRESET_LIMITS = {"synthetic": {"max_answer_chars": 40}}  # its ff answers are single words


@pytest.mark.parametrize("preset", PRESETS)
def test_every_preset_composes_and_validates(preset: str) -> None:
    cfg = _compose(ROOT / "conf", [f"benchmarks={preset}"])
    shared = OmegaConf.to_container(OmegaConf.load(ROOT / "conf" / "limits" / "default.yaml"))
    composed = OmegaConf.to_container(cfg.benchmark.limits)
    own = PRESET_LIMITS.get(preset, {})
    assert composed == {**shared, **own}  # a preset that differs overrides single keys
    limits = limits_from_config(cfg.benchmark.limits)
    assert limits.model_dump(include=set(composed)) == {**shared, **own}
    local = _compose(ROOT / "conf", [f"benchmarks={preset}", "+benchmark.limits.backend=decord"])
    assert limits_from_config(local.benchmark.limits).backend == "decord"


def test_a_preset_overrides_one_key_and_an_unknown_key_fails(tmp_path: Path) -> None:
    conf = tmp_path / "conf"
    shutil.copytree(ROOT / "conf", conf)
    base = (conf / "benchmarks" / "videomme.yaml").read_text()  # (synthetic.yaml has its own limits)
    (conf / "benchmarks" / "wide.yaml").write_text(base + "limits:\n  max_frames: 64\n")
    (conf / "benchmarks" / "typo.yaml").write_text(base + "limits:\n  max_frame: 64\n")

    wide = limits_from_config(_compose(conf, ["benchmarks=wide"]).benchmark.limits)
    assert wide.max_frames == 64 and wide.max_side == EnvLimits().max_side
    typo = _compose(conf, ["benchmarks=typo"])
    with pytest.raises(ValidationError, match="max_frame\n"):
        limits_from_config(typo.benchmark.limits)
    from omniagent.eval.config import eval_config_from

    with pytest.raises(ValidationError, match="limits.max_frame\n"):
        eval_config_from(typo)  # an evaluation run refuses it before any task runs
    with pytest.raises(ValidationError, match="max_side"):
        limits_from_config(_compose(ROOT / "conf", ["benchmark.limits.max_side=-1"]).benchmark.limits)


def test_turn_scaling_and_rl_configs_use_the_same_names() -> None:
    scaling = _compose(ROOT / "conf", [], name="turn_scaling")
    assert limits_from_config(scaling.benchmark.limits) == limits_from_config(
        _compose(ROOT / "conf", []).benchmark.limits
    )
    checked = []
    for path in sorted((ROOT / "conf").rglob("*.yaml")):  # RL, its experiments, synthesis: every env.limits
        node = OmegaConf.select(OmegaConf.load(path), "env.limits")
        if node is not None:
            limits = limits_from_config(node)  # same field names, validated
            assert all(getattr(limits, k) == v for k, v in node.items())
            checked.append(path.name)
    assert "taura.yaml" in checked


def test_limits_from_config_accepts_plain_values() -> None:
    assert limits_from_config(None) == EnvLimits()
    given = EnvLimits(max_turns=4)
    assert limits_from_config(given) is given
    assert limits_from_config({"max_turns": 4}) == given
