"""The recipe reproduces the shipped agent (omniagent/assets/tiny_agent): its data stage with the manifest's
arguments gives the very tasks the agent was trained on."""

from __future__ import annotations

from pathlib import Path

import pytest

from omniagent.tiny_agent import ASSET_DIR, verify_recipe, verify_weights


@pytest.mark.slow
def test_the_shipped_agents_training_tasks_are_what_the_recipe_generates(tmp_path: Path) -> None:
    """The recipe's data stage (~10 s) with the manifest's arguments reproduces the tasks the
    shipped agent was trained on; the later stages' fingerprints need minutes (see the module)."""
    from recipes.tiny_agent.sets import make_synth_set

    args = verify_weights(ASSET_DIR)["recipe_args"]
    make_synth_set(
        tmp_path / "synth_train", args["train_seed"], args["train_videos"], args["durations"], "train"
    )
    assert verify_recipe(ASSET_DIR, tmp_path) == ["train_tasks"]
