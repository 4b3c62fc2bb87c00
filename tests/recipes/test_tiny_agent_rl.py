"""The tiny agent's RL experiment (``recipes/tiny_agent/conf/exp/tiny_agent.yaml``), composed as
``python rl/train_local.py --config-dir recipes/tiny_agent/conf +exp=tiny_agent`` composes it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from rl.algo.turn_budget import turn_budget
from rl.local.args import Args
from rl.local.bookkeeping import load_policy
from rl.train_local import compose_config

ROOT = Path(__file__).resolve().parents[2]
RECIPE_CONF = ROOT / "recipes" / "tiny_agent" / "conf"


def test_trained_tiny_agent_experiment_uses_the_recipes_caps_and_budget(tmp_path: Path) -> None:
    """``+exp=tiny_agent`` plays episodes as the recipe evaluated its agent: the same caps, K = 16 and the
    same generation limit, so RL starts from the behaviour the held-out table measured."""
    from recipes.tiny_agent.recipe import limit_overrides, parse_args

    cfg = compose_config(
        ["+exp=tiny_agent", "actor_rollout_ref.model.path=x", f"local.train_tasks={tmp_path / 't.jsonl'}"],
        config_dirs=[RECIPE_CONF],
    )
    args, recipe = Args.from_config(cfg), parse_args([])
    assert {k: float(v) for k, v in args.env["limits"].items()} == limit_overrides(recipe)
    assert args.max_new_tokens == recipe.max_new_tokens and args.local["device"] == "cpu"
    assert turn_budget(60.0, args.env["turns"]) == turn_budget(600.0, args.env["turns"]) == 16
    assert args.local["constrained"] is bool(recipe.constrained) is True
    policy = load_policy(
        "tiny", args
    )  # the shipped agent, decoding under the turn schema as the recipe's eval
    try:
        assert policy.grammar is not None and policy.temperature == args.temperature
    finally:
        policy.close()


def test_the_command_line_finds_the_experiment_only_through_the_recipes_config_dir() -> None:
    """The framework's conf/rl has no tiny_agent experiment; ``--config-dir`` (before or after the overrides)
    adds the recipe's, and the trainer's own ``local`` group still joins."""
    base = [sys.executable, "rl/train_local.py"]
    tail = ["+exp=tiny_agent", "actor_rollout_ref.model.path=x", "local.train_tasks=t.jsonl", "--cfg", "job"]
    run = [subprocess.run(base + args, cwd=ROOT, capture_output=True, text=True, timeout=300)
           for args in (["--config-dir", str(RECIPE_CONF), *tail], tail)]  # fmt: skip
    assert run[0].returncode == 0, run[0].stderr
    assert "run_dir: runs/taura_tiny_agent" in run[0].stdout and "max_answer_chars: 40" in run[0].stdout
    assert run[1].returncode != 0 and "tiny_agent" in run[1].stderr
    assert not (ROOT / "conf" / "rl" / "exp" / "tiny_agent.yaml").exists()
