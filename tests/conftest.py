"""Shared fixtures: generated media with known content (see tests/media_factory.py), a small synthetic benchmark,
a small SFT set (two replayed episodes, their per-turn parquet, the tiny thinker, the dataset over both), the
TAURA launcher's tiny config, and the local trainer's tiny run (its tasks, config and an oracle's turns)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from media_factory import make_audio, make_video
from testkit import (
    SMALL_SYNTH,
    TRAIN_LOCAL_SMALL,
    compose_taura,
    mcq_tasks,
    sft_dataset,
    sft_trajectories,
    synth_tasks,
)

if TYPE_CHECKING:
    from envs.tasks import Task
    from omniagent.trajectory import Trajectory

BURSTS = [(3.0, 1.0, 1000.0), (12.0, 0.5, 2000.0)]  # (start s, length s, Hz) in every test video


@pytest.fixture(scope="session")
def media_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("media")


@pytest.fixture(scope="session")
def video_path(media_dir: Path) -> Path:
    """20 s, 10 fps, GOP 25, 128x72, barcoded frames, stereo AAC with tone bursts at 3 s and 12 s."""
    return make_video(media_dir / "video.mp4", duration=20.0, fps=10, gop=25, bursts=BURSTS)


@pytest.fixture(scope="session")
def silent_video_path(media_dir: Path) -> Path:
    return make_video(media_dir / "silent.mp4", duration=10.0, fps=10, gop=25, audio=False)


@pytest.fixture(scope="session")
def audio_path(media_dir: Path) -> Path:
    return make_audio(media_dir / "audio.wav", duration=20.0, bursts=BURSTS)


@pytest.fixture(scope="module")
def synth_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder of :func:`tasks` (one per test module, which may add runs and files to it)."""
    return tmp_path_factory.mktemp("synth")


@pytest.fixture(scope="module")
def tasks(synth_dir: Path) -> list[Task]:
    """One 20 s synthetic video and its ~15 tasks of every type, in ``synth_dir`` (``tasks.jsonl``)."""
    from envs.synth import generate_benchmark  # here: most test modules never need the generator

    out = generate_benchmark(synth_dir, seed=0, n_videos=1, durations=[20.0], config=SMALL_SYNTH)
    assert {t.task_type for t in out} >= {"mcq", "tr", "num", "size"}
    return out


@pytest.fixture(scope="module")
def trajectories(video_path: Path, audio_path: Path) -> list[Trajectory]:
    """Two replayed right answers on the shared media (:func:`testkit.sft_trajectories`)."""
    return sft_trajectories(video_path, audio_path)


@pytest.fixture(scope="module")
def parquet(trajectories: list[Trajectory], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The per-turn SFT parquet of :func:`trajectories` (``python -m rl.sft.export``)."""
    from omniagent.trajectory import save_trajectories
    from rl.sft import export as sft_export

    out = tmp_path_factory.mktemp("sft") / "train.parquet"
    kept = out.with_name("kept.jsonl")
    save_trajectories(trajectories, kept)
    assert sft_export.main(["--kept", str(kept), "--out", str(out), "--row-group-size", "3"]) == 0
    return out


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny random thinker (omniagent/tiny_model.py), seed 0."""
    from omniagent.tiny_model import build_tiny_thinker

    path = tmp_path_factory.mktemp("tiny") / "thinker"
    build_tiny_thinker(seed=0, out_dir=path)
    return path


@pytest.fixture(scope="module")
def tiny3_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny random Qwen3-Omni thinker (omniagent/tiny_model.py), seed 0."""
    from omniagent.tiny_model import build_tiny_thinker

    path = tmp_path_factory.mktemp("qwen3") / "thinker"
    build_tiny_thinker(seed=0, out_dir=path, family="qwen3-omni")
    return path


@pytest.fixture(scope="module")
def dataset(parquet: Path, tiny_dir: Path) -> Any:
    """:class:`rl.sft.dataset.OmniTurnSFTDataset` over :func:`parquet` with the tiny thinker's tokenizer."""
    return sft_dataset(parquet, tiny_dir)


@pytest.fixture(scope="module")
def tiny_thinker(tiny_dir: Path) -> tuple[Any, Any]:
    """``(model, processor)`` of the tiny random thinker of :func:`tiny_dir`."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from omniagent.tiny_model import build_tiny_thinker

    return build_tiny_thinker(seed=0, out_dir=tiny_dir)


@pytest.fixture(scope="module")
def taura_cfg() -> Any:
    """``conf/rl/taura.yaml`` composed with ``+exp=tiny`` (:func:`testkit.compose_taura`; needs verl)."""
    return compose_taura("tiny")


@pytest.fixture(scope="module")
def train_tasks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The mcq tasks of one 30 s synthetic video (seed 1): the local trainer's training set. Every task of that
    video is in ``train_tasks.parent / "s1" / "tasks.jsonl"``."""
    root = tmp_path_factory.mktemp("synth_train")
    return mcq_tasks(synth_tasks(root / "s1", seed=1, n=1), root / "mcq.jsonl")


@pytest.fixture(scope="module")
def random_dir(tiny_dir: Path) -> Path:
    """The random tiny thinker as a checkpoint folder (:func:`tiny_dir`; by path: "tiny" names the shipped agent)."""
    return tiny_dir


@pytest.fixture(scope="module")
def cfg_tiny(train_tasks: Path, random_dir: Path) -> Any:
    """The local trainer's config of a tiny run (:data:`testkit.TRAIN_LOCAL_SMALL`) on :func:`train_tasks`."""
    from rl.train_local import compose_config

    return compose_config(
        [*TRAIN_LOCAL_SMALL, f"actor_rollout_ref.model.path={random_dir}", f"local.train_tasks={train_tasks}"]
    )


@pytest.fixture(scope="module")
def oracle_turns(train_tasks: Path, random_dir: Path) -> tuple[Any, ...]:
    """Contexts and outputs of a looking oracle (frames, then the answer) on one training task, with the
    tiny random policy and its encoder: ``(policy, encoder, task, trajectory, rows)``."""
    from envs.env import OmniVideoEnv
    from envs.tasks import load_tasks_jsonl
    from omniagent.episode import run_episode
    from omniagent.policy import make_policy
    from rl.local.groups import RecordingPolicy
    from rl.local.rollout import TurnEncoder, TurnRow

    policy = make_policy("transformers", model=str(random_dir), dtype="float32", max_new_tokens=8)
    encoder = TurnEncoder(policy.processor, policy.model.config)
    task = load_tasks_jsonl(train_tasks)[0]
    recorder = RecordingPolicy(make_policy("oracle", look=True, evidence=task.evidence, frames_per_span=2))
    traj = run_episode(OmniVideoEnv(), recorder, task.env_options(4))
    rows = []
    for k, ((context, out), rec) in enumerate(zip(recorder.turns, traj.turns, strict=True)):
        item = encoder.encode(
            [*context, {"role": "assistant", "content": [{"type": "text", "text": out.text}]}]
        )
        rows.append(TurnRow(item, 0, 0, k, traj.reward, rec, context))
    return policy, encoder, task, traj, rows


@pytest.fixture
def warmup_rates(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The learning rate of each text warm-up step (recipes.tiny_agent.text_warmup) taken while the test runs, in
    order; the step itself runs as usual."""
    from recipes.tiny_agent import text_warmup

    rates: list[float] = []
    step = text_warmup.optimizer_step

    def recording(model: Any, opt: Any, *args: Any, **kw: Any) -> float:
        rates.append(opt.param_groups[0]["lr"])
        return step(model, opt, *args, **kw)

    monkeypatch.setattr(text_warmup, "optimizer_step", recording)
    return rates
