"""Glyph pretraining (recipes/tiny_agent/glyph_pretrain.py): each frame's labels are the synthetic world's, the shift
moves the picture and never the frame-index barcode, training lowers the heads' loss while changing
the vision encoder alone, and the saved folder is a complete agent. Also the recipe's glyph stage."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from envs.synth import generate_benchmark
from envs.synth.barcode import barcode_height, decode_frame_index
from omniagent.backends.synth_world import SynthWorld
from recipes.tiny_agent.glyph_pretrain import LABELS, frame_labels, labelled_frames, shifted


@pytest.fixture(scope="module")
def media(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("glyphs")
    generate_benchmark(out, seed=23, n_videos=2, durations=[20.0], config={"n_events": 4}, split="train")
    return out


def test_labels_are_the_worlds_items_for_every_sampled_frame(media: Path) -> None:
    frames = labelled_frames([media], seed=4)
    worlds = [SynthWorld.for_media(p) for p in sorted(media.glob("*.mp4"))]
    glyphs = sum(1 for w in worlds for e in w.events if e["kind"] in ("shape", "digit", "word"))
    assert len(frames) == 4 * glyphs  # three inside each glyph, a third as many at random times
    shown = {name: sum(1 for _, lab in frames if lab[name]) for name in ("digit", "word", "shape")}
    assert sum(shown.values()) >= 3 * glyphs - 2  # on the frames drawn inside it (bar an edge frame)
    for _, lab in frames:
        assert (lab["shape"] == 0) == (lab["color"] == 0)
    items = worlds[0].frame(
        next(e for e in worlds[0].events if e["kind"] in ("digit", "word", "shape"))["start"]
    )
    lab = frame_labels(items)
    for item in items:
        if item.kind in ("digit", "word"):
            assert LABELS[item.kind][lab[item.kind]] == item.value
        elif item.kind == "shape":
            assert f"{LABELS['color'][lab['color']]} {LABELS['shape'][lab['shape']]}" == item.value
        elif item.kind == "background":
            assert LABELS["hue"][lab["hue"]] == item.value
    assert [lab for _, lab in labelled_frames([media], seed=4)] == [lab for _, lab in frames]
    with pytest.raises(SystemExit, match="no synthetic video"):
        labelled_frames([media / "missing"], seed=0)


def test_the_shift_rolls_the_picture_and_keeps_the_barcode(media: Path) -> None:
    image = labelled_frames([media], seed=4)[0][0]
    rows = image.shape[0] - barcode_height(image.shape[0])
    rng = np.random.default_rng(0)
    outs = [shifted(image, rng) for _ in range(8)]
    for out in outs:
        assert out.shape == image.shape and np.array_equal(out[rows:], image[rows:])
        assert decode_frame_index(out) == decode_frame_index(image)
        assert any(np.array_equal(out[:rows], np.roll(image[:rows], (dy, dx), axis=(0, 1)))
                   for dy in range(-12, 13) for dx in range(-30, 31))  # fmt: skip
    assert sum(not np.array_equal(out, image) for out in outs) >= 6


def test_training_lowers_the_loss_and_changes_only_the_encoder(media: Path, tmp_path: Path) -> None:
    from transformers import Qwen2_5OmniThinkerForConditionalGeneration as Thinker

    from omniagent.checkpoint import check_checkpoint
    from omniagent.tiny_model import build_tiny_thinker
    from recipes.tiny_agent.glyph_pretrain import main

    build_tiny_thinker(seed=0, out_dir=tmp_path / "tiny")
    before = Thinker.from_pretrained(tmp_path / "tiny", dtype=torch.float32)
    out = tmp_path / "glyphs.json"
    assert main(["--model", str(tmp_path / "tiny"), "--media", str(media), "--eval-dir", str(media),
                 "--steps", "120", "--batch-size", "8", "--lr", "3e-3", "--out", str(out),
                 "--save", str(tmp_path / "seen")]) == 0  # fmt: skip
    res = json.loads(out.read_text())
    assert res["final_loss"] < res["first_loss"]
    assert set(res["frames"]) == set(LABELS) and res["frames"]["hue"] > 0
    assert all(lo <= res[k] <= hi for k, (lo, hi) in res["ci95"].items())
    check_checkpoint(tmp_path / "seen")
    after = dict(Thinker.from_pretrained(tmp_path / "seen", dtype=torch.float32).named_parameters())
    changed = {n for n, p in before.named_parameters() if not torch.equal(p, after[n])}
    assert any(n.startswith("visual.merger") for n in changed)
    assert changed and all(n.startswith("visual.") for n in changed)


def test_mean_pooling_scores_a_frame_by_its_average_token(tmp_path: Path) -> None:
    from transformers import Qwen2_5OmniThinkerForConditionalGeneration as Thinker

    from omniagent.tiny_model import build_tiny_thinker
    from recipes.tiny_agent.glyph_pretrain import GlyphHeads, _pixels
    from rl.sft.dataset import load_processor

    build_tiny_thinker(seed=0, out_dir=tmp_path / "tiny")
    visual = Thinker.from_pretrained(tmp_path / "tiny", dtype=torch.float32).visual.eval()
    rng = np.random.default_rng(0)
    images = [rng.integers(0, 255, (90, 160, 3), dtype=np.uint8) for _ in range(2)]
    pixels, grid = _pixels(load_processor(tmp_path / "tiny"), images)
    lse, mean = (
        GlyphHeads(visual.merger.mlp[-1].out_features),
        GlyphHeads(visual.merger.mlp[-1].out_features, "mean"),
    )
    mean.heads.load_state_dict(lse.heads.state_dict())
    with torch.no_grad():
        tokens = visual(pixels, grid_thw=grid).pooler_output.reshape(
            2, -1, visual.merger.mlp[-1].out_features
        )
        by_lse, by_mean = lse(visual, pixels, grid), mean(visual, pixels, grid)
        for name, head in lse.heads.items():
            per_token = head(tokens)
            assert torch.allclose(by_mean[name], per_token.mean(dim=1), atol=1e-5)
            assert torch.allclose(by_lse[name], torch.logsumexp(per_token, dim=1), atol=1e-5)
            assert (by_lse[name] > by_mean[name]).all()  # log-sum-exp exceeds the mean of several tokens
    with pytest.raises(ValueError, match="pool 'max' is not one of"):
        GlyphHeads(8, "max")


def test_the_recipe_glyph_stage_feeds_sft_with_the_encoder_frozen(tmp_path: Path) -> None:
    """(With the earlier agent's preset, whose recipe has no glyph stage, as the base.)"""
    from recipes.tiny_agent.recipe import glyph_command, parse_args, read_command, sft_command

    earlier = ["--preset", "event-phase"]

    args = parse_args([*earlier, "--out", str(tmp_path), "--caption-pool", "2", "--glyph-steps", "7"])
    cmd = glyph_command(args)
    arg = {k: cmd[cmd.index(k) + 1] for k in ("--model", "--save", "--steps", "--out", "--eval-dir")}
    assert cmd[cmd.index("--pool") + 1] == "lse"
    mean = parse_args(
        [
            *earlier,
            "--out",
            str(tmp_path),
            "--caption-pool",
            "2",
            "--glyph-steps",
            "7",
            "--glyph-pool",
            "mean",
        ]
    )
    assert glyph_command(mean)[glyph_command(mean).index("--pool") + 1] == "mean"
    with pytest.raises(SystemExit):  # refused when the recipe starts, not hours later at the glyph stage
        parse_args(["--out", str(tmp_path), "--glyph-pool", "max"])
    assert arg == {"--model": str(tmp_path / "init"), "--save": str(tmp_path / "init_glyphs"), "--steps": "7",
                   "--out": str(tmp_path / "glyphs.json"), "--eval-dir": str(tmp_path / "synth_eval")}  # fmt: skip
    assert cmd[cmd.index("--media") + 1 : cmd.index("--media") + 3] == [
        str(tmp_path / "synth_train"),
        str(tmp_path / "caption_pool"),
    ]
    sft = sft_command(args)
    assert f"model.path={tmp_path / 'init_glyphs'}" in sft and "omni_sft.freeze=[visual]" in sft
    read = parse_args(
        [*earlier, "--out", str(tmp_path), "--caption-pool", "2", "--glyph-steps", "7", "--read-steps", "3"]
    )
    assert read_command(read)[read_command(read).index("--model") + 1] == str(tmp_path / "init_glyphs")
    assert "omni_sft.freeze=[visual]" in sft_command(read)  # the glyph encoder stays as it is
    assert read_command(read)[read_command(read).index("--train-part") + 1] == "text"
    assert (
        read_command(
            parse_args([*earlier, "--out", str(tmp_path), "--caption-pool", "2", "--read-steps", "3"])
        )[-1]
        == "all"
    )
    plain = parse_args([*earlier, "--out", str(tmp_path), "--caption-pool", "2"])
    assert f"model.path={tmp_path / 'init'}" in sft_command(plain) and "omni_sft.freeze=[]" in sft_command(
        plain
    )
    with pytest.raises(SystemExit, match="needs --caption-pool"):
        glyph_command(parse_args([*earlier, "--out", str(tmp_path), "--glyph-steps", "7"]))
