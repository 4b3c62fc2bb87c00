"""A user's first evaluation: the scripts/eval.py commands of the README and docs compose (no hydra struct error)
and building the synthetic media shows a progress bar instead of a silent minute."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from doc_texts import doc_text

from envs.synth import generate_benchmark
from omniagent.datasets import load_dataset

ROOT = Path(__file__).resolve().parents[1]


def readme_eval_commands() -> list[list[str]]:
    """Every ``python scripts/eval.py ...`` line of the README and the docs (continuation lines joined)."""
    text = doc_text().replace("\\\n", " ")
    commands = []
    for line in text.splitlines():
        m = re.match(r"\s*python scripts/eval\.py(.*)$", line)
        if m:
            args = shlex.split(m.group(1).split("  #")[0])
            commands.append(args)
    return commands


def test_readme_eval_commands_compose() -> None:
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    commands = readme_eval_commands()
    assert any(any("policy.kwargs.base_url" in a for a in c) for c in commands)
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base=None):
        for args in commands:
            cfg = compose(config_name="eval", overrides=args, return_hydra_config=True)  # struct errors raise
            choices = cfg.hydra.runtime.choices
            cfg = OmegaConf.to_container(cfg, resolve=False)  # an ${oc.env:...} value reads back as written
            for arg in args:
                key, _, value = arg.lstrip("+").partition("=")
                if key in choices:  # a config group choice (benchmarks=, protocol=), not a key
                    assert choices[key] == value, arg
                    continue
                node = cfg
                for part in key.split("."):
                    node = node[part]
                if isinstance(node, list):  # a list override reads back as its items
                    assert "[" + ",".join(str(x) for x in node) + "]" == value, arg
                    continue
                shown = str(node).lower() if isinstance(node, bool) else str(node)  # YAML true/True
                assert shown == value.lower() if isinstance(node, bool) else shown == value, arg


def test_synthetic_media_show_a_progress_bar(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    small = {"width": 112, "height": 64, "fps": 2}
    generate_benchmark(tmp_path, n_videos=2, durations=[10.0, 12.0], config=small, progress=True)
    err = capsys.readouterr().err
    assert "synthetic media in" in err and "22.0/22.0" in err  # seconds of media built
    loaded = load_dataset("synthetic", None, out_dir=str(tmp_path), n_videos=2, durations=[10.0, 12.0],
                          config=small, progress=False)  # fmt: skip
    assert loaded.tasks and "synthetic media" not in capsys.readouterr().err  # cached, and no bar when off
