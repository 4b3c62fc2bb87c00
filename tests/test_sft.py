"""Agentic SFT data: per-turn samples reproduce the environment's contexts, the dataset class gives
verl-shaped items with loss on the final assistant message only, and real optimizer steps on the
tiny Qwen2.5-Omni thinker lower the loss."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from testkit import SFT_LIMITS as LIMITS

from envs.env import OmniVideoEnv
from envs.messages import count_media_parts, media_messages
from omniagent.trajectory import Trajectory
from rl.sft import export as sft_export


def live_contexts(traj: Trajectory) -> list[list[dict[str, Any]]]:
    """The observation a live environment shows before each turn, stepping the same texts."""
    env = OmniVideoEnv(limits=LIMITS)
    obs, _ = env.reset(options=traj.env_options())
    out = []
    for t in traj.turns:
        out.append(obs)
        obs, *_ = env.step(t.raw_text)
    env.close()
    return out


def assert_same_messages(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> None:
    assert [m["role"] for m in a] == [m["role"] for m in b]
    for ma, mb in zip(a, b, strict=True):
        assert [p["type"] for p in ma["content"]] == [p["type"] for p in mb["content"]]
        for pa, pb in zip(ma["content"], mb["content"], strict=True):
            assert pa.keys() == pb.keys()
            for key in pa:
                va, vb = pa[key], pb[key]
                if isinstance(va, np.ndarray) or isinstance(vb, np.ndarray):
                    assert np.asarray(va).dtype == np.asarray(vb).dtype
                    np.testing.assert_array_equal(va, vb)
                else:
                    assert va == vb, key


# ----------------------------------------------------------------------------------------- data


def test_rows_reproduce_live_env_contexts(parquet: Path, trajectories: list[Trajectory]) -> None:
    rows = sft_export.read_rows(parquet)
    assert len(rows) == sum(len(t.turns) for t in trajectories)
    by_traj = {t.id: t for t in trajectories}
    for traj in trajectories:
        mine = sorted((r for r in rows if r["trajectory_id"] == traj.id), key=lambda r: r["turn"])
        assert [r["turn"] for r in mine] == list(range(1, len(traj.turns) + 1))
        for row, live, rec in zip(mine, live_contexts(traj), traj.turns, strict=True):
            chat = sft_export.row_messages(row)
            context, target = chat[:-1], chat[-1]
            assert target == {"role": "assistant", "content": [{"type": "text", "text": rec.raw_text}]}
            assert_same_messages(context, live)
            assert media_messages(context) in ([], [len(context) - 1])  # at most the latest percept is raw
            assert row["id"] == f"{traj.id}/t{row['turn']}" and by_traj[row["trajectory_id"]] is traj
    video_rows = sorted(
        (r for r in rows if r["trajectory_id"] == trajectories[0].id), key=lambda r: r["turn"]
    )
    kinds = [[p["type"] for p in sft_export.row_messages(r)[-2]["content"]] for r in video_rows]
    assert "image" in kinds[1] and "audio" in kinds[2] and "video" in kinds[3]
    last = sft_export.row_messages(video_rows[3])
    clip = next(p for p in last[-2]["content"] if p["type"] == "video")
    assert clip["audio"] is not None and clip["audio"].dtype == np.float32  # clip = frames + its sound
    stubs = [p["text"] for m in last for p in m["content"] if "MEDIA REMOVED" in p.get("text", "")]
    assert len(stubs) == 2 and count_media_parts(last) == 1  # frames and audio purged; only the clip is raw


def test_replay_detects_a_different_environment(trajectories: list[Trajectory]) -> None:
    traj = trajectories[0].model_copy(deep=True)
    traj.turns[1].error = "span_too_long"  # pretend the recorded run rejected this action
    with pytest.raises(sft_export.ReplayMismatch, match="turn 2"):
        sft_export.replay_contexts(traj)


def test_synthesis_output_exports(tmp_path: Path, video_path: Path) -> None:
    from envs.tasks import Task, save_tasks_jsonl
    from rl.synthesis.synthesize import run_synthesis

    tasks = save_tasks_jsonl(
        [Task(id="a", media=str(video_path), question="How long is it?", task_type="num", answer=20.0)],
        tmp_path / "tasks.jsonl",
    )
    cfg = {
        "data": {"tasks": str(tasks)},
        "out_dir": str(tmp_path / "out"),
        "seed": 0,
        "n_samples": 1,
        "turn_budget": {"min": 5, "max": 32},
        "teacher": {"backend": "uniform", "kwargs": {"num_frames": 2}, "hindsight": False},
        "env": {"limits": LIMITS},
        "filters": {"outcome": {}, "audit": {"enabled": False}, "leakage": {}},
        "judge": {},
    }
    run_synthesis(cfg, progress=False)  # uniform guesses 0: wrong, rejected -- export the rejected one
    trajs = sft_export.load_trajectories(tmp_path / "out" / "rejected.jsonl")
    assert trajs and sft_export.export_parquet(trajs, tmp_path / "x.parquet") == len(trajs[0].turns) == 2


# -------------------------------------------------------------------------------- dataset class


@pytest.mark.slow
def test_items_and_loss_masks(dataset: Any, trajectories: list[Trajectory]) -> None:
    from omniagent.backends.convert import build_model_inputs

    tok = dataset.tokenizer
    assert len(dataset) == 7
    for i in range(len(dataset)):
        item = dataset[i]
        chat = dataset.messages(i)
        target = chat[-1]["content"][0]["text"]
        ids, mask, pos = item["input_ids"], item["loss_mask"], item["position_ids"]
        n = ids.shape[0]
        assert mask.shape == (n,) and pos.shape == (4, n)
        assert pos[0].tolist() == list(range(n))
        on = mask.nonzero().flatten().tolist()
        assert on == list(range(on[0], on[-1] + 1))  # one contiguous span
        assert ids[on].tolist() == tok(target + "<|im_end|>", add_special_tokens=False)["input_ids"]
        assert tok.decode(ids[on]) == target + "<|im_end|>"
        # Everything before the span is exactly the context with the assistant header ...
        ctx, _ = build_model_inputs(chat[:-1], dataset.processor, add_generation_prompt=True)
        assert ids[: on[0]].tolist() == ctx["input_ids"][0].tolist()
        # ... and after it only the template's newline.
        assert tok.decode(ids[on[-1] + 1 :]) == "\n"
        mm = item.get("multi_modal_inputs", {})
        kinds = {p["type"] for p in chat[-2]["content"]}
        assert ("pixel_values" in mm) == ("image" in kinds)
        assert ("pixel_values_videos" in mm) == ("video" in kinds)
        assert ("input_features" in mm) == bool(kinds & {"audio", "video"})
    # A clip with its sound is sent audio-in-video: the audio sits inside the clip's vision block.
    text = tok.decode(dataset[3]["input_ids"])
    assert "<|vision_bos|><|audio_bos|>" in text and "<|audio_eos|><|vision_eos|>" in text


@pytest.mark.slow
def test_verl_loads_and_collates_the_dataset(parquet: Path, tiny_dir: Path) -> None:
    pytest.importorskip("verl")
    from omegaconf import OmegaConf
    from transformers import AutoTokenizer
    from verl.trainer.sft_trainer import create_sft_dataset
    from verl.utils.dataset.dataset_utils import SFTTensorCollator
    from verl.utils.model import extract_multi_modal_inputs

    from rl.sft.dataset import OmniTurnSFTDataset

    data_cfg = OmegaConf.create(
        {
            "custom_cls": {"path": "pkg://rl.sft.dataset", "name": "OmniTurnSFTDataset"},
            "pad_mode": "no_padding",
            "max_length": 8192,
            "truncation": "error",
            "omni": {"processor_path": None},
        }
    )
    tok = AutoTokenizer.from_pretrained(tiny_dir)
    ds = create_sft_dataset(str(parquet), data_cfg, tok, None, max_samples=4)  # verl's own call
    assert type(ds).__name__ == OmniTurnSFTDataset.__name__ and len(ds) == 4
    batch = SFTTensorCollator("no_padding")([ds[1], ds[2], ds[3]])
    assert batch["input_ids"].is_nested and batch["position_ids"].is_nested
    assert batch["position_ids"].dim() == 3  # what verl's FSDP engine reads as (4, L) mRoPE rows
    mm = extract_multi_modal_inputs(batch["multi_modal_inputs"])
    assert mm["input_features"].shape[0] == 2 and mm["pixel_values"].shape[0] > 0


# ---------------------------------------------------------------------------------- optimization


@pytest.mark.slow
def test_loss_goes_down_on_a_repeated_batch(dataset: Any, tiny_dir: Path) -> None:
    import torch

    from omniagent.tiny_model import load_tiny_thinker
    from rl.sft.step import collate, freeze_modules, sft_loss, train_steps

    torch.manual_seed(0)
    model, _ = load_tiny_thinker(tiny_dir)
    counts = freeze_modules(model)
    assert counts["frozen"] > 0 and counts["trainable"] > 0
    frozen = {k: v.clone() for k, v in model.named_parameters() if k.startswith(("visual", "audio_tower"))}
    head = model.lm_head.weight.clone()
    batch = collate([dataset[0], dataset[1]], dataset.pad_id)  # text-only turn + frames turn
    assert batch["position_ids"].shape[:2] == (4, 2)
    _, n_tokens = sft_loss(model, batch)
    assert n_tokens == int(batch["loss_mask"].sum())  # every loss token is some position's next token
    losses = train_steps(model, [batch] * 3, lr=3e-3)
    assert losses[0] > losses[1] > losses[2], losses
    assert not torch.equal(head, model.lm_head.weight)
    for k, v in model.named_parameters():
        if k in frozen:
            assert torch.equal(frozen[k], v), k


# ------------------------------------------------------------------------------ launcher (verl)


@pytest.fixture(scope="module")
def compose_sft():
    pytest.importorskip("verl")
    from rl.train_sft import compose

    return compose


@pytest.mark.slow
def test_sft_configs(compose_sft: Any, tmp_path: Path) -> None:
    from omegaconf import OmegaConf
    from verl.utils.import_utils import load_extern_object

    from rl.sft.dataset import OmniTurnSFTDataset
    from rl.train_sft import _placeholders, launch, torchrun_command, verl_config, write_verl_config

    cfg = compose_sft(["+exp=7b", f"omni_sft.run_dir={tmp_path}"])
    # verl's SFT trainer builds its dataset from data.custom_cls: it must resolve to our per-turn class
    assert load_extern_object(cfg.data.custom_cls.path, cfg.data.custom_cls.name) is OmniTurnSFTDataset
    assert {p.split("=")[0] for p in _placeholders(cfg)} == {
        "model.path",
        "data.train_files",
        "omni_sft.base_model",
    }
    assert "omni_sft" not in verl_config(cfg) and "sft_trainer_engine" not in OmegaConf.to_yaml(
        verl_config(cfg)
    )
    written = OmegaConf.load(write_verl_config(cfg))  # the frozen modules reach the verl worker's config
    assert (
        list(written.data.omni.freeze) == list(cfg.omni_sft.freeze) and written.model.path == cfg.model.path
    )
    cmd = torchrun_command(cfg, tmp_path / "verl_sft.yaml")
    assert cmd[1:3] == ["-m", "torch.distributed.run"]
    assert f"--nproc_per_node={cfg.trainer.n_gpus_per_node}" in cmd
    assert cmd[-4:] == ["-m", "rl.train_sft", "--verl-worker", str(tmp_path / "verl_sft.yaml")]
    assert launch(OmegaConf.merge(cfg, {"omni_sft": {"mode": "print"}})) == cmd  # nothing runs
    with pytest.raises(SystemExit, match="set these paths first") as refused:
        launch(cfg)
    assert "python -m rl.sft.export --kept" in str(refused.value)  # says how to make the parquet
    tiny = compose_sft(["+exp=tiny"])
    assert tiny.omni_sft.mode == "local" and tiny.omni_sft.tiny.build and tiny.trainer.n_gpus_per_node == 1


@pytest.mark.slow
def test_local_mode_trains_through_the_dataset_class(
    compose_sft: Any, parquet: Path, tiny_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The CPU smoke run (``+exp=tiny``) trains, saves a complete folder under ``omni_sft.run_dir`` by
    default and prints where; the folder loads back with the trained weights."""
    import torch

    from omniagent.checkpoint import check_checkpoint
    from rl.sft.local import load_model
    from rl.sft.step import collate, sft_loss
    from rl.train_sft import launch

    cfg = compose_sft(
        [
            "+exp=tiny",
            f"model.path={tiny_dir}",
            f"data.train_files={parquet}",
            "omni_sft.local.steps=2",
            "omni_sft.local.max_samples=1",
            f"omni_sft.run_dir={tmp_path}",
        ]
    )
    losses = launch(cfg)
    assert len(losses) == 2 and losses[1] < losses[0]
    final = tmp_path / "final"
    assert f"saved: {final}" in capsys.readouterr().out.splitlines()
    check_checkpoint(final)  # weights, config, processor, tokenizer, chat template
    from transformers import AutoTokenizer

    from rl.sft.dataset import OmniTurnSFTDataset

    data = OmniTurnSFTDataset(str(parquet), AutoTokenizer.from_pretrained(final), cfg.data, max_samples=1)
    with torch.no_grad():
        trained = float(sft_loss(load_model(str(final)), collate([data[0]], data.pad_id))[0])
        untrained = float(sft_loss(load_model(str(tiny_dir)), collate([data[0]], data.pad_id))[0])
    assert trained < untrained - 0.1  # the folder holds the trained weights, not the starting ones


@pytest.mark.slow
def test_freeze_patch_wraps_verl_engine(
    compose_sft: Any, tiny_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from verl.workers.engine.fsdp import transformer_impl as ti

    from omniagent.tiny_model import load_tiny_thinker
    from rl.train_sft import install_freeze_patch

    monkeypatch.setattr(ti.FSDPEngine, "_build_module", lambda self: load_tiny_thinker(tiny_dir)[0])
    install_freeze_patch(["visual", "audio_tower"])
    install_freeze_patch(["visual", "audio_tower"])  # idempotent: wraps the original once
    module = ti.FSDPEngine._build_module(object())
    assert not any(p.requires_grad for p in module.visual.parameters())
    assert not any(p.requires_grad for p in module.audio_tower.parameters())
    assert all(p.requires_grad for p in module.model.parameters())


@pytest.mark.slow
def test_prepare_thinker_from_full_checkpoint(tiny_dir: Path, tmp_path: Path) -> None:
    import torch
    from safetensors.torch import save_file
    from transformers import Qwen2_5OmniConfig

    from omniagent.tiny_model import load_tiny_thinker
    from rl.train_sft import prepare_thinker

    model, processor = load_tiny_thinker(tiny_dir)
    full = tmp_path / "full"
    Qwen2_5OmniConfig(thinker_config=model.config.to_dict(), enable_audio_output=False).save_pretrained(full)
    processor.save_pretrained(full)
    weights = {f"thinker.{k}": v.clone().contiguous() for k, v in model.state_dict().items()}
    save_file({**weights, "talker.proj.weight": torch.zeros(2, 2)}, str(full / "model.safetensors"))
    out = prepare_thinker(str(full), str(tmp_path / "thinker"), dtype="float32")
    assert json.loads((out / "config.json").read_text())["model_type"] == "qwen2_5_omni_thinker"
    again, _ = load_tiny_thinker(out)
    for (k, a), (_, b) in zip(model.state_dict().items(), again.state_dict().items(), strict=True):
        assert torch.equal(a, b), k
    assert prepare_thinker(str(full), str(out)) == out  # already there: nothing redone


def test_encoders_only_training_skips_turns_without_media(dataset: Any, tiny_dir: Path) -> None:
    """``omni_sft.freeze=[model, lm_head]`` (align the encoders to a trained text model): a text-only
    turn has no trainable parameter on its path, so the step is skipped instead of failing."""
    import torch

    from rl.sft.local import load_model
    from rl.sft.step import collate, freeze_modules, optimizer_step

    model = load_model(str(tiny_dir))
    freeze_modules(model, ["model", "lm_head"])
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-2)
    text_only = next(i for i in range(len(dataset)) if not dataset[i].get("multi_modal_inputs"))
    with_media = next(i for i in range(len(dataset)) if dataset[i].get("multi_modal_inputs"))
    before = [p.detach().clone() for p in params]
    loss = optimizer_step(model, opt, params, collate([dataset[text_only]]), 1.0)
    assert loss > 0 and all(torch.equal(a, b) for a, b in zip(before, params, strict=True))
    optimizer_step(model, opt, params, collate([dataset[with_media]]), 1.0)
    assert any(not torch.equal(a, b) for a, b in zip(before, params, strict=True))
    assert all(
        not p.requires_grad for n, p in model.named_parameters() if n.startswith(("model.", "lm_head"))
    )


def test_max_samples_keeps_the_tables_rows_and_the_data_is_read_on_demand(
    parquet: Path, tiny_dir: Path
) -> None:
    """A subset (first rows, or a seeded sample in file order) holds the same rows a whole-table read gives; the
    dataset keeps no decoded table, only its row reader (rl/sft/rows.py)."""
    import pyarrow.parquet as pq
    import torch
    from transformers import AutoTokenizer

    from rl.sft.dataset import OmniTurnSFTDataset
    from rl.sft.export import row_messages
    from rl.sft.rows import ParquetRows

    tok = AutoTokenizer.from_pretrained(tiny_dir)
    eager = pq.read_table(parquet).to_pylist()
    first = OmniTurnSFTDataset(str(parquet), tok, {"max_length": 8192}, processor=None, max_samples=3)
    assert [first.row(i) for i in range(len(first))] == eager[:3]
    cfg = {"max_length": 8192, "shuffle": True, "seed": 5}
    sample = OmniTurnSFTDataset(str(parquet), tok, cfg, processor=None, max_samples=4)
    picked = np.sort(np.random.default_rng(5).choice(len(eager), size=4, replace=False))
    assert [sample.row(i)["id"] for i in range(4)] == [eager[i]["id"] for i in picked]
    assert isinstance(sample.rows, ParquetRows) and not hasattr(sample, "table")
    assert sample.rows.cache_groups == 2  # conf/sft/sft.yaml's data.omni.row_group_cache default
    wider = OmniTurnSFTDataset(str(parquet), tok, {"omni": {"row_group_cache": 5}}, processor=None)
    assert wider.rows.cache_groups == 5
    whole = OmniTurnSFTDataset(str(parquet), tok, {"max_length": 8192}, processor=None)
    item, eager_item = whole[len(whole) - 1], whole.encode(row_messages(eager[-1]))  # read on demand vs whole
    assert all(torch.equal(item[k], eager_item[k]) for k in ("input_ids", "loss_mask", "position_ids"))
    mm, eager_mm = item["multi_modal_inputs"], eager_item["multi_modal_inputs"]
    assert mm.keys() == eager_mm.keys() and all(torch.equal(mm[k], eager_mm[k]) for k in mm)
