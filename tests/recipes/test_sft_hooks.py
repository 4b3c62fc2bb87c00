"""The tiny agent's SFT additions run through the framework's hooks (rl/sft/local.py): its text warm-up as
``omni_sft.local.warmup`` and its caption batches as ``omni_sft.local.extra_batches``, configured by
``recipes/tiny_agent/conf/sft/exp/tiny_agent.yaml``; and the recipe's media probe on the shared SFT set."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

RECIPE_SFT = Path(__file__).resolve().parents[2] / "recipes" / "tiny_agent" / "conf" / "sft"


@pytest.fixture(scope="module")
def compose_recipe_sft():
    pytest.importorskip("verl")
    from rl.train_sft import compose

    def compose_with(overrides: list[str]) -> Any:
        return compose(["+exp=tiny_agent", *overrides], config_dirs=[RECIPE_SFT])

    return compose_with


def test_the_framework_config_names_no_recipe_and_the_recipes_config_fills_both_hooks(
    compose_recipe_sft: Any,
) -> None:
    from rl.train_sft import compose

    plain = compose(["+exp=tiny"])
    assert plain.omni_sft.local.warmup is None and dict(plain.omni_sft.local.extra_batches) == {}
    assert "text_warmup" not in plain.omni_sft.local and "captions" not in plain.omni_sft.local
    recipe = compose_recipe_sft([])
    assert recipe.omni_sft.local.warmup._target_ == "recipes.tiny_agent.text_warmup.sft_warmup"
    caption = recipe.omni_sft.local.extra_batches.caption
    assert caption._target_ == "recipes.tiny_agent.frame_captions.sft_caption_batches"
    assert recipe.omni_sft.mode == "local" and recipe.model.path == plain.model.path  # the tiny exp beneath


def test_the_text_warmup_gets_its_option_shuffles_from_the_config(
    compose_recipe_sft: Any, parquet: Path, tiny_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import recipes.tiny_agent.text_warmup
    from rl.train_sft import launch

    assert compose_recipe_sft([]).omni_sft.local.text_warmup.option_shuffles == 0
    seen, real = [], recipes.tiny_agent.text_warmup.short_turns

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(args[3:])
        return real(*args, **kwargs)

    monkeypatch.setattr(recipes.tiny_agent.text_warmup, "short_turns", spy)
    cfg = compose_recipe_sft([f"model.path={tiny_dir}", f"data.train_files={parquet}", f"omni_sft.run_dir={tmp_path}",
                              "omni_sft.local.steps=1", "omni_sft.local.max_samples=1", "omni_sft.local.text_warmup.steps=1",
                              "omni_sft.local.text_warmup.option_shuffles=3", "trainer.seed=5"])  # fmt: skip
    assert len(launch(cfg)) == 1
    assert seen == [(3, 5, 1.0)]  # option shuffles, seeded by the run's seed; the answer weight of full SFT
    seen.clear()
    off = compose_recipe_sft([f"model.path={tiny_dir}", f"data.train_files={parquet}", f"omni_sft.run_dir={tmp_path / 'b'}",
                              "omni_sft.local.steps=1", "omni_sft.local.max_samples=1"])  # fmt: skip
    assert len(launch(off)) == 1 and seen == []  # steps 0: the hook runs nothing


def test_an_extra_batch_hook_takes_one_more_step_after_every_sft_step(
    parquet: Path, tiny_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A factory named in ``extra_batches`` is built with the dataset and seed; its batch of each step is
    trained right after that step and logged as ``<name>_loss``; a factory returning None adds nothing."""
    import json

    from rl.train_sft import compose, launch

    base = ["+exp=tiny", f"model.path={tiny_dir}", f"data.train_files={parquet}", "omni_sft.local.steps=3",
            "omni_sft.local.log_every=1", "omni_sft.local.max_samples=2"]  # fmt: skip
    hook = "+omni_sft.local.extra_batches.again._target_=sft_hook_factories.first_row_batches"
    cfg = compose([*base, f"omni_sft.run_dir={tmp_path / 'a'}", hook])
    launch(cfg)
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines() if x.startswith('{"step"')]
    assert [x["step"] for x in lines] == [1, 2, 3] and all("again_loss" in x for x in lines)
    import sft_hook_factories

    assert sft_hook_factories.CALLS == [0, 1, 2]  # one batch per step, asked for by step number
    off = compose(
        [*base, f"omni_sft.run_dir={tmp_path / 'b'}", hook.replace("first_row_batches", "no_batches")]
    )
    launch(off)
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines() if x.startswith('{"step"')]
    assert len(lines) == 3 and not any("again_loss" in x for x in lines)
    with pytest.raises(ValueError, match="_target_"):
        launch(compose([*base, f"omni_sft.run_dir={tmp_path / 'c'}", "+omni_sft.local.extra_batches.x.n=1"]))


def test_a_warm_up_is_published_as_step_0_and_a_resumed_run_does_not_repeat_it(
    parquet: Path, tiny_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With ``save_every``, the warm-up's result is saved as ``checkpoints/step-0`` before the first SFT step.
    A run stopped there resumes after the warm-up (not running it again) and ends where an uninterrupted run
    does: the same losses and weights."""
    import json

    import sft_hook_factories
    import torch
    from safetensors.torch import load_file

    from rl.checkpoint import latest_checkpoint, load_training_state
    from rl.train_sft import compose, launch

    def run(run_dir: Path, steps: int) -> list[float]:
        return launch(compose(["+exp=tiny", f"model.path={tiny_dir}", f"data.train_files={parquet}",
                               f"omni_sft.run_dir={run_dir}", f"omni_sft.local.steps={steps}", "omni_sft.local.save_every=1",
                               "omni_sft.local.max_samples=2", f"omni_sft.local.save_dir={run_dir / 'final'}",
                               "trainer.seed=3", "+omni_sft.local.warmup._target_=sft_hook_factories.noise_warmup"]))  # fmt: skip

    sft_hook_factories.WARMUPS.clear()
    ref = run(tmp_path / "ref", 3)
    assert sft_hook_factories.WARMUPS == [3]
    stopped = run(tmp_path / "run", 0)  # a run stopped right after its warm-up
    assert stopped == [] and sft_hook_factories.WARMUPS == [3, 3]
    step0 = latest_checkpoint(tmp_path / "run" / "checkpoints")
    assert step0 is not None and step0.name == "step-000000" and load_training_state(step0)["step"] == 0
    capsys.readouterr()
    assert run(tmp_path / "run", 3) == pytest.approx(ref, rel=1e-5)
    assert sft_hook_factories.WARMUPS == [3, 3]  # not warmed up a second time
    resumed = [json.loads(x) for x in capsys.readouterr().out.splitlines() if x.startswith('{"resumed_from"')]
    assert resumed == [{"resumed_from": str(step0), "step": 0}]
    a = load_file(str(tmp_path / "ref" / "final" / "model.safetensors"))
    b = load_file(str(tmp_path / "run" / "final" / "model.safetensors"))
    assert all(torch.allclose(a[k], b[k], atol=1e-6) for k in a)
    plain = load_file(str(tiny_dir / "model.safetensors"))
    assert any(not torch.allclose(plain[k], b[k]) for k in plain if k in b)


def test_media_probe_compares_real_and_zeroed_media_by_region(dataset: Any, tiny_dir: Path) -> None:
    import torch

    from recipes.tiny_agent.probes.media import MEDIA_INPUTS, media_dependence, region_of, zero_media
    from rl.sft.local import load_model
    from rl.sft.step import collate

    assert region_of('{"observation": "a') == "observation"
    assert region_of('{"observation": "a", "thought": "b') == "thought"
    assert region_of('{"observation": "a", "thought": "b", "action": {"type') == "action"
    with_media = [i for i in range(len(dataset)) if dataset[i].get("multi_modal_inputs")]
    batch = collate([dataset[with_media[0]]])
    zeroed = zero_media(batch)
    assert torch.equal(zeroed["input_ids"], batch["input_ids"])
    assert any(k in batch for k in MEDIA_INPUTS)
    assert all(not zeroed[k].any() for k in MEDIA_INPUTS if k in batch)
    model = load_model(str(tiny_dir)).eval()
    report = media_dependence(model, dataset.tokenizer, dataset, n_samples=len(dataset))
    assert report["samples"] == len(with_media)  # turns without media are not scored
    by = report["by"]
    assert by["all"]["tokens"] == sum(
        by[r]["tokens"] for r in ("observation", "thought", "action") if r in by
    )
    assert by["all"]["tokens"] == by["digit"]["tokens"] + by["other"]["tokens"]
    assert abs(by["all"]["gap"]) > 1e-4  # the random model's output does depend on its media inputs
