"""Shared fixtures: generated media with known content (see tests/media_factory.py) and a small synthetic benchmark."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from media_factory import make_audio, make_video
from testkit import SMALL_SYNTH

if TYPE_CHECKING:
    from envs.tasks import Task

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
