"""Shared fixtures: generated media with known content (see tests/media_factory.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from media_factory import make_audio, make_video

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
