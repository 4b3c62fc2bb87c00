"""SFT checkpoint folders are complete and load everywhere (CLI, transformers backend, HF Auto* loaders,
eval); a folder missing a file is refused with the file named; local SFT resumes after a real SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from testkit import turn_text

from envs.env import OmniVideoEnv
from omniagent.checkpoint import IncompleteCheckpointError, check_checkpoint, missing_files
from omniagent.episode import run_episode
from omniagent.policy import make_policy
from omniagent.trajectory import save_trajectories
from rl.checkpoint import (
    complete_checkpoint,
    latest_checkpoint,
    load_training_state,
    save_checkpoint,
)
from rl.checkpoint import (
    main as checkpoint_main,
)
from rl.sft import export as sft_export

REPO = Path(__file__).resolve().parents[1]
LIMITS = {"max_side": 64, "clip_fps": 2.0}


TEXTS = [
    turn_text("none", "scan the video", {"type": "get_frames", "start": 0, "end": 20, "num": 3}),
    turn_text("grey frames at 0, 10, 20 s", "listen to the first burst", {"type": "get_audio", "start": 2, "end": 5}),
    turn_text("a tone from 3 s", "the first tone is 1000 Hz", {"type": "answer", "content": "B"}),
]  # fmt: skip


@pytest.fixture(scope="module")
def parquet(video_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    import omniagent.backends.scripted  # noqa: F401  (registers "replay")

    env = OmniVideoEnv(limits=LIMITS)
    try:
        task = {"media": str(video_path), "question": "Which tone plays first?", "task_type": "mcq",
                "choices": ["500 Hz", "1000 Hz"], "answer": "B", "max_turns": 4}  # fmt: skip
        traj = run_episode(env, make_policy("replay", texts=TEXTS), task)
    finally:
        env.close()
    traj.meta.update(env_limits=env.limits.model_dump(), task_id=traj.id)
    out = tmp_path_factory.mktemp("sft") / "train.parquet"
    save_trajectories([traj], out.with_name("kept.jsonl"))
    assert sft_export.main(["--kept", str(out.with_name("kept.jsonl")), "--out", str(out)]) == 0
    return out


def _weights_only(tiny_dir: Path, dest: Path) -> Path:
    from omniagent.tiny_model import load_tiny_thinker

    model, _ = load_tiny_thinker(tiny_dir)
    model.save_pretrained(dest)  # what a bare save_pretrained (or verl's HF save) leaves
    return dest


def test_saved_folder_is_complete_and_loads_with_auto_classes(tiny_dir: Path, tmp_path: Path) -> None:
    import torch
    from transformers import AutoConfig, AutoModelForImageTextToText, AutoProcessor, AutoTokenizer

    from omniagent.tiny_model import load_tiny_thinker

    model, processor = load_tiny_thinker(tiny_dir)
    out = save_checkpoint(model, processor, tmp_path / "ckpt", training_state={"step": 3})
    assert missing_files(out) == [] and check_checkpoint(out) == out
    assert load_training_state(out)["step"] == 3
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt"]  # no staging debris
    assert AutoConfig.from_pretrained(out).model_type == "qwen2_5_omni_thinker"
    auto = AutoModelForImageTextToText.from_pretrained(out)  # how verl's FSDP engine loads a thinker
    assert type(auto).__name__ == "Qwen2_5OmniThinkerForConditionalGeneration"
    proc = AutoProcessor.from_pretrained(out)
    assert type(proc).__name__ == "Qwen2_5OmniProcessor"
    assert proc.feature_extractor.feature_size == 128 and proc.video_processor is not None
    tok = AutoTokenizer.from_pretrained(out)
    assert tok.chat_template and len(tok) == len(processor.tokenizer)
    policy = make_policy("transformers", model=str(out), max_new_tokens=4, device="cpu")
    try:
        ref = dict(model.named_parameters())
        for name, p in policy.model.named_parameters():
            assert torch.equal(p, ref[name]), name
        reply = policy.act([{"role": "user", "content": [{"type": "text", "text": "hello"}]}])
        assert reply.completion_tokens >= 1 and reply.prompt_tokens > 3
    finally:
        policy.close()
    # saving again over a published folder replaces it whole
    save_checkpoint(model, processor, out, training_state={"step": 4})
    assert load_training_state(out)["step"] == 4 and [p.name for p in tmp_path.iterdir()] == ["ckpt"]


def test_incomplete_folder_is_refused_naming_the_file(tiny_dir: Path, tmp_path: Path, capsys: Any) -> None:
    folder = _weights_only(tiny_dir, tmp_path / "bare")
    missing = " ".join(missing_files(folder))
    for name in ("tokenizer.json", "processor_config.json", "chat_template.jinja", "tokenizer_config.json"):
        assert name in missing
    assert "config.json (model config)" not in missing and "model.safetensors" not in missing
    with pytest.raises(IncompleteCheckpointError, match="tokenizer.json"):
        make_policy("transformers", model=str(folder), device="cpu")
    assert checkpoint_main(["check", str(folder)]) == 1
    assert "chat template" in capsys.readouterr().err

    copied = complete_checkpoint(folder, tiny_dir)
    assert "tokenizer.json" in copied and "model.safetensors" not in copied
    assert checkpoint_main(["check", str(folder)]) == 0

    (folder / "chat_template.jinja").unlink()
    with pytest.raises(IncompleteCheckpointError, match=r"chat_template\.jinja or chat_template\.json"):
        check_checkpoint(folder)
    cfg = json.loads((folder / "processor_config.json").read_text())
    cfg.pop("feature_extractor")
    (folder / "chat_template.jinja").write_text((tiny_dir / "chat_template.jinja").read_text())
    (folder / "processor_config.json").write_text(json.dumps(cfg))
    assert missing_files(folder) == ["processor_config.json lacks feature_extractor"]


def test_verl_run_folders_are_completed(tiny_dir: Path, tmp_path: Path) -> None:
    pytest.importorskip("verl")
    from rl.checkpoint import complete_run_checkpoints
    from rl.train_sft import compose

    assert "hf_model" in compose(["+exp=7b"]).checkpoint.save_contents  # verl writes weights in HF form
    hf = _weights_only(tiny_dir, tmp_path / "global_step_2" / "huggingface")
    (tmp_path / "global_step_2" / "optim_world_size_1_rank_0.pt").write_bytes(b"x")
    assert missing_files(hf)
    assert complete_run_checkpoints(tmp_path, tiny_dir) == [hf]
    assert missing_files(hf) == []


def test_cli_names_the_missing_file(tiny_dir: Path, video_path: Path, tmp_path: Path, capsys: Any) -> None:
    from omniagent import run as cli

    folder = _weights_only(tiny_dir, tmp_path / "bare")
    code = cli.main([str(video_path), "Q?", "--model", str(folder), "--out", str(tmp_path / "t.json")])
    assert code == 3
    captured = capsys.readouterr()
    assert "tokenizer.json" in captured.err + captured.out


def _train_cmd(tiny_dir: Path, parquet: Path, run_dir: Path, steps: int) -> list[str]:
    return [
        sys.executable, str(REPO / "rl" / "train_sft.py"), "+exp=tiny", f"model.path={tiny_dir}",
        f"data.train_files={parquet}", f"omni_sft.run_dir={run_dir}", f"omni_sft.local.steps={steps}",
        "omni_sft.local.save_every=1", "omni_sft.local.log_every=1", "omni_sft.local.repeat_batch=false",
        f"omni_sft.local.save_dir={run_dir / 'final'}",
    ]  # fmt: skip


def _losses(stdout: str) -> list[float]:
    rows = [json.loads(line) for line in stdout.splitlines() if line.startswith('{"samples"')]
    assert len(rows) == 1, stdout
    return rows[0]["losses"]


@pytest.mark.slow
def test_local_sft_resumes_after_sigkill(tiny_dir: Path, parquet: Path, tmp_path: Path) -> None:
    """A run killed with SIGKILL after its second checkpoint continues from it, and ends with the
    losses and weights an uninterrupted run with the same seed gets."""
    import torch
    from safetensors.torch import load_file

    steps = 12
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    ref_dir = tmp_path / "ref"
    ref = subprocess.run(_train_cmd(tiny_dir, parquet, ref_dir, steps), capture_output=True, text=True,
                         env=env, timeout=600)  # fmt: skip
    assert ref.returncode == 0, ref.stderr[-3000:]
    ref_losses = _losses(ref.stdout)
    assert len(ref_losses) == steps and ref_losses[-1] < ref_losses[0]

    run_dir = tmp_path / "run"
    proc = subprocess.Popen(_train_cmd(tiny_dir, parquet, run_dir, steps), stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, env=env)  # fmt: skip
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and proc.poll() is None:
        if (
            latest_checkpoint(run_dir / "checkpoints") is not None
            and int(load_training_state(latest_checkpoint(run_dir / "checkpoints"))["step"]) >= 2
        ):
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the run finished before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    killed_at = int(load_training_state(latest_checkpoint(run_dir / "checkpoints"))["step"])
    assert 2 <= killed_at < steps and not (run_dir / "final").exists()

    again = subprocess.run(_train_cmd(tiny_dir, parquet, run_dir, steps), capture_output=True, text=True,
                           env=env, timeout=600)  # fmt: skip
    assert again.returncode == 0, again.stderr[-3000:]
    resumed = [json.loads(x) for x in again.stdout.splitlines() if x.startswith('{"resumed_from"')]
    assert resumed and resumed[0]["step"] == killed_at
    logged = [json.loads(x)["step"] for x in again.stdout.splitlines() if x.startswith('{"step"')]
    assert logged == list(range(killed_at + 1, steps + 1))  # no step done twice
    assert _losses(again.stdout) == pytest.approx(ref_losses, rel=1e-4)
    check_checkpoint(run_dir / "final")
    a = load_file(str(ref_dir / "final" / "model.safetensors"))
    b = load_file(str(run_dir / "final" / "model.safetensors"))
    assert all(torch.allclose(a[k], b[k], atol=1e-5) for k in a)
    assert len(list((run_dir / "checkpoints").iterdir())) == 2  # keep_checkpoints
