"""Media names are files: never a protocol, a playlist, a file list or a device, for every decoder
backend and for the ffmpeg command line; links and playlists stay inside ``media_root``.

Each case is built here: files with protocol-like names, an HLS playlist naming a file outside the
media root, an ffconcat list, an image sequence, symbolic links."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from media_factory import make_audio, make_video, read_barcode

from envs.errors import MediaError
from envs.limits import EnvLimits
from envs.media import MediaConfig, open_media
from envs.media_access import MediaAccess, ffmpeg_input_args, input_url, open_options, refused_demuxers
from envs.tasks import Task
from omniagent.datasets import DatasetError, load_dataset

HAS_DECORD = importlib.util.find_spec("decord") is not None
BACKENDS = [
    "pyav",
    pytest.param("decord", marks=pytest.mark.skipif(not HAS_DECORD, reason="decord not installed")),
]
needs_ffmpeg = pytest.mark.skipif(not shutil.which("ffmpeg"), reason="the ffmpeg CLI is needed")


@pytest.fixture()
def named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder (the working directory) with files whose names look like protocols, each a video of
    its own length, so what was opened shows in its duration."""
    monkeypatch.chdir(tmp_path)
    make_video(tmp_path / "secret.mp4", duration=4.0, audio=False)
    make_video(tmp_path / "file:secret.mp4", duration=2.0, audio=False)
    make_video(tmp_path / "clip:01.mp4", duration=3.0, audio=False)
    make_video(tmp_path / "a.mp4", duration=1.0, audio=False)
    make_video(tmp_path / "b.mp4", duration=1.0, audio=False)
    make_video(tmp_path / "concat:a.mp4|b.mp4", duration=5.0, audio=False)
    return tmp_path


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    ("name", "seconds"), [("file:secret.mp4", 2.0), ("clip:01.mp4", 3.0), ("concat:a.mp4|b.mp4", 5.0)]
)
def test_a_relative_name_opens_the_file_of_that_name(
    named: Path, backend: str, name: str, seconds: float
) -> None:
    with open_media(name, MediaConfig(backend=backend)) as m:
        assert m.info.duration == pytest.approx(seconds, abs=0.05)
        (last,) = m.frames(seconds - 0.1, seconds - 0.1, 1)
        assert read_barcode(last.image) == round((seconds - 0.1) * 10)
    assert input_url(name) == "file:" + str(named / name)


def test_a_name_like_a_protocol_without_such_a_file_is_refused(named: Path) -> None:
    for name in [
        "concat:a.mp4|secret.mp4",
        "file:nothing.mp4",
        "subfile:secret.mp4",
        "http://127.0.0.1:9/x.mp4",
    ]:
        with pytest.raises(MediaError) as err:
            open_media(name)
        assert err.value.code == "media_protocol_refused", name
        assert "allow_protocols" in err.value.reason


def test_an_allowed_protocol_reaches_ffmpeg_and_no_other(named: Path) -> None:
    access = MediaAccess(allow_protocols=("http",))
    assert input_url("http://127.0.0.1:9/x.mp4", access) == "http://127.0.0.1:9/x.mp4"
    assert input_url("https://127.0.0.1:9/x.mp4", access).startswith("file:/")  # https is not allowed
    assert open_options(access)["protocol_whitelist"] == "file,http,tcp"
    with pytest.raises(MediaError) as err:  # nobody listens on port 9: FFmpeg tried to connect
        open_media("http://127.0.0.1:9/x.mp4", MediaConfig(access=access))
    assert err.value.code in ("media_unreadable", "media_io_error")
    limits = EnvLimits(allow_protocols="HTTP, https", allow_demuxers=["hls"])
    cfg = MediaConfig.from_limits(limits)
    assert cfg.access == MediaAccess(("http", "https"), ("hls",))
    # an eval folder made before these options existed keeps its fingerprint; setting one changes it
    from omniagent.eval.config import fingerprint_limits

    assert not {"allow_protocols", "allow_demuxers"} & set(fingerprint_limits(EnvLimits()))
    assert fingerprint_limits(limits)["allow_protocols"] == ("http", "https")


@pytest.fixture()
def root_with_playlist(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A media root holding an HLS playlist whose only segment is an audio file outside the root."""
    root, outside = tmp_path / "root", tmp_path / "private"
    root.mkdir(), outside.mkdir()
    secret = make_audio(outside / "secret.m4a", duration=6.0, bursts=[(1.0, 4.0, 1000.0)])
    playlist = root / "talk.m3u8"
    playlist.write_text(
        f"#EXTM3U\n#EXT-X-TARGETDURATION:6\n#EXT-X-MEDIA-SEQUENCE:0\n#EXTINF:6.0,\n{secret}\n#EXT-X-ENDLIST\n"
    )
    return root, playlist, secret


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_playlist_naming_an_outside_file_is_refused_not_played(
    root_with_playlist: tuple[Path, Path, Path], backend: str
) -> None:
    _, playlist, _ = root_with_playlist
    with pytest.raises(MediaError) as err:
        open_media(playlist, MediaConfig(backend=backend))
    assert err.value.code == "media_format_refused"
    assert "hls" in err.value.reason and "allow_demuxers" in err.value.reason
    # the refusal is by format, not by chance: allowing hls plays the playlist (a trusted-file option)
    with open_media(playlist, MediaConfig(access=MediaAccess(allow_demuxers=("hls",)))) as m:
        assert m.info.duration == pytest.approx(6.0, abs=0.1)


def test_lists_sequences_and_devices_are_refused(tmp_path: Path) -> None:
    from PIL import Image

    make_video(tmp_path / "a.mp4", duration=1.0, audio=False)
    (tmp_path / "list.ffconcat").write_text("ffconcat version 1.0\nfile a.mp4\nfile a.mp4\n")
    for i in range(3):
        Image.fromarray(np.full((8, 8, 3), 40 * i, np.uint8)).save(tmp_path / f"img{i:03d}.png")
    shutil.copy(tmp_path / "img000.png", tmp_path / "img%03d.png")  # FFmpeg reads this name as a sequence
    for name in ["list.ffconcat", "img%03d.png"]:
        with pytest.raises(MediaError) as err:
            open_media(tmp_path / name)
        assert err.value.code == "media_format_refused", name
    refused = {p for name in refused_demuxers() for p in name.split(",")}
    assert {"hls", "concat", "image2", "lavfi", "video4linux2", "sdp", "rtsp"} <= refused
    assert not refused & {"mov", "mp4", "matroska", "mpegts", "mpeg", "wav", "mp3", "ogg", "flac"}


@needs_ffmpeg
def test_the_ffmpeg_command_line_gets_the_same_rules(
    named: Path, root_with_playlist: tuple[Path, Path, Path]
) -> None:
    def decode(name: str | Path) -> subprocess.CompletedProcess[bytes]:
        args = ["ffmpeg", "-nostdin", "-v", "error", *ffmpeg_input_args(name), "-f", "null", "-"]
        return subprocess.run(args, capture_output=True)

    assert decode("clip:01.mp4").returncode == 0
    assert decode("concat:a.mp4|b.mp4").returncode == 0  # the file of that name
    refused = decode(root_with_playlist[1])
    assert refused.returncode != 0 and b"whitelist" in refused.stderr.lower()


# ------------------------------------------------------------------------------------- links
def _dataset(root: Path, media: list[str]) -> Path:
    ann = root / "tasks.jsonl"
    rows = [
        {"id": f"t{i}", "media": m, "question": "Q?", "task_type": "num", "answer": 1}
        for i, m in enumerate(media)
    ]
    ann.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return ann


def test_a_link_inside_media_root_pointing_outside_is_refused_unless_followed(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir(), outside.mkdir()
    make_video(outside / "private.mp4", duration=1.0, audio=False)
    make_video(root / "own.mp4", duration=1.0, audio=False)
    os.symlink(outside / "private.mp4", root / "innocent.mp4")
    os.symlink(root / "own.mp4", root / "alias.mp4")  # a link that stays inside is fine
    os.symlink(outside, root / "library")  # nor may a linked folder lead out
    ann = _dataset(root, ["own.mp4", "alias.mp4", "innocent.mp4", "library/private.mp4"])
    with pytest.raises(DatasetError) as err:
        load_dataset("tasks", ann)
    text = str(err.value)
    assert "2 bad annotation" in text and "innocent.mp4" in text and "library/private.mp4" in text
    assert "follow_links_outside_media_root" in text and str(outside / "private.mp4") in text
    loaded = load_dataset("tasks", ann, follow_links_outside_media_root=True)
    assert [t.id for t in loaded.tasks] == ["t0", "t1", "t2", "t3"]
    # the root itself may be a link: what counts is where the files really are
    os.symlink(root, tmp_path / "root_link")
    ok = load_dataset("tasks", _dataset(root, ["own.mp4"]), media_root=tmp_path / "root_link")
    assert [t.id for t in ok.tasks] == ["t0"]


def test_a_playlist_task_in_media_root_fails_its_row_in_eval(
    root_with_playlist: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    from omniagent.eval.config import EvalConfig
    from omniagent.eval.results import RESULTS
    from omniagent.eval.runner import run_eval

    _, playlist, _ = root_with_playlist
    task = Task(id="hls", media=str(playlist), question="What is heard?", task_type="num", answer=1)
    cfg = EvalConfig(policy="uniform", out_dir=str(tmp_path / "run"), workers=1, progress=False)
    report = run_eval([task], cfg)
    assert (report.failed, report.errors) == (1, 0)
    (row,) = [json.loads(line) for line in (tmp_path / "run" / RESULTS).read_text().splitlines()]
    assert row["status"] == "failed" and row["error_code"] == "media_format_refused"
    assert row["audio_seconds_used"] == 0 and row["turns"] == 0
    again = run_eval([task], cfg)  # permanent: a rerun keeps the failed row instead of retrying it
    assert again.ran == 0 and again.skipped == 1
