"""Every media failure is a typed error: mid-episode the model gets a precise error percept and the
episode goes on; the run CLI saves its trajectory and exits with its documented code; in eval a
permanent failure is a ``failed`` row a rerun keeps, a transient one an ``error`` row it retries."""

from __future__ import annotations

import errno
import json
from pathlib import Path
from typing import Any

import av
import pytest
from media_factory import ffmpeg, make_video

from envs.decoders import PyAVDecoder
from envs.env import OmniVideoEnv
from envs.errors import MEDIA_READ_CODES, MediaError
from envs.media_access import open_container
from envs.tasks import Task
from omniagent import run as cli
from omniagent.eval.config import EvalConfig
from omniagent.eval.runner import run_eval
from omniagent.trajectory import Trajectory


def turn(action: dict[str, Any]) -> str:
    return json.dumps({"observation": "-", "thought": "-", "action": action})


FRAMES_LATE = turn({"type": "get_frames", "start": 15.0, "end": 19.0, "num": 4})
AUDIO_LATE = turn({"type": "get_audio", "start": 15.0, "end": 17.0})
FRAMES_EARLY = turn({"type": "get_frames", "start": 0.0, "end": 2.0, "num": 2})


def test_a_file_damaged_during_the_episode_gives_error_percepts(tmp_path: Path) -> None:
    path = tmp_path / "changing.mp4"  # ~1 MB, video and audio interleaved in time, index at the end
    ffmpeg("-f", "lavfi", "-i", "testsrc2=size=320x240:rate=10", "-f", "lavfi", "-i", "sine=frequency=440",
           "-t", "20", "-c:v", "libx264", "-g", "25", "-c:a", "aac", path)  # fmt: skip
    env = OmniVideoEnv(str(path), "Which?", choices=["a", "b"], limits={"max_turns": 7})
    env.reset()
    _, _, _, _, info = env.step(turn({"type": "get_audio", "start": 0.0, "end": 1.0}))
    assert info["error"] is None
    size = path.stat().st_size
    with open(path, "r+b") as fh:  # the second half of the file zeroed in place, after reset
        fh.seek(size // 2)
        fh.write(b"\0" * (size - size // 2))
    codes = []
    for action in (FRAMES_LATE, AUDIO_LATE):
        _, _, done, _, info = env.step(action)
        assert not done
        codes.append(info["error"])
        if info["error"] is not None:
            assert info["error"] in MEDIA_READ_CODES and info["error_message"]
            assert info["error_message"] in env.messages[-1]["content"][0]["text"]
        else:  # served: then the damage is named in the percept
            assert any("could not be decoded" in n for n in info["notes"])
    assert codes[0] is not None  # no frame exists there any more
    _, _, _, _, info = env.step(FRAMES_EARLY)  # the intact part is still served
    assert info["error"] is None and len(info["timestamps"]) == 2
    _, reward, done, _, info = env.step(turn({"type": "answer", "content": "A"}))
    assert done and info["error"] is None
    env.close()


def test_library_errors_while_reading_become_percepts(
    video_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The error the issue saw (``av.error.PermissionError`` from a seek) is a percept, and the
    decoder starts afresh on the next request."""
    env = OmniVideoEnv(str(video_path), "Which?", choices=["a", "b"], limits={"max_turns": 6})
    env.reset()
    real = PyAVDecoder._read
    calls = [0]

    def failing(self: PyAVDecoder, *args: Any) -> Any:
        calls[0] += 1
        if calls[0] == 1:
            self._container.seek(0)
            raise av.error.PermissionError(errno.EPERM, "Operation not permitted")
        return real(self, *args)

    monkeypatch.setattr(PyAVDecoder, "_read", failing)
    _, _, done, _, info = env.step(FRAMES_LATE)
    assert not done and info["error"] == "media_read_failed"
    assert "Operation not permitted" in info["error_message"]
    _, _, _, _, info = env.step(FRAMES_LATE)
    assert info["error"] is None and len(info["timestamps"]) == 4
    env.close()


def test_os_failures_at_open_are_transient_and_the_rest_permanent(
    video_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    junk = tmp_path / "junk.mp4"
    junk.write_bytes(b"not a video\n" * 100)
    with pytest.raises(MediaError) as err:
        open_container(junk)
    assert err.value.code == "media_unreadable" and not err.value.transient

    def no_handles(*_: Any, **__: Any) -> Any:
        raise av.error.FFmpegError(errno.EMFILE, "Too many open files")

    monkeypatch.setattr(av, "open", no_handles)
    with pytest.raises(MediaError) as err:
        open_container(video_path)
    assert err.value.code == "media_io_error" and err.value.transient


def test_eval_retries_transient_media_errors_and_keeps_permanent_ones(
    tasks: list[Task], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import envs.env

    junk = tmp_path / "junk.mp4"
    junk.write_bytes(b"not a video\n" * 100)
    bad = tasks[0].model_copy(update={"id": "junk", "media": str(junk)})
    flaky = tasks[1].model_copy(update={"id": "flaky", "media": str(tmp_path / "on_a_flaky_disk.mp4")})
    Path(flaky.media).write_bytes(Path(tasks[1].media).read_bytes())
    real = envs.env.MediaSource

    def source(path: str, cfg: Any) -> Any:
        if path == flaky.media:
            raise MediaError(path, "cannot be read (Input/output error)", code="media_io_error")
        return real(path, cfg)

    monkeypatch.setattr(envs.env, "MediaSource", source)
    cfg = EvalConfig(out_dir=str(tmp_path / "run"), policy="oracle", workers=1, progress=False)
    report = run_eval([bad, flaky, tasks[2]], cfg)
    assert (report.failed, report.errors) == (1, 1)
    rows = {json.loads(line)["id"]: json.loads(line) for line in (tmp_path / "run" / "results.jsonl").open()}
    assert rows["junk"]["status"] == "failed" and rows["junk"]["error_code"] == "media_unreadable"
    assert rows["flaky"]["status"] == "error" and rows["flaky"]["error_code"] == "media_io_error"
    monkeypatch.undo()  # the disk is back
    again = run_eval([bad, flaky, tasks[2]], cfg)
    assert again.ran == 1 and again.skipped == 2  # only the transient one is tried again
    rows = {json.loads(line)["id"]: json.loads(line) for line in (tmp_path / "run" / "results.jsonl").open()}
    assert rows["flaky"]["status"] == "ok" and rows["junk"]["status"] == "failed"


# ----------------------------------------------------------------------------------- the CLI
def _playlist(tmp_path: Path) -> Path:
    outside = make_video(tmp_path / "outside.mp4", 4.0)
    playlist = tmp_path / "root" / "talk.m3u8"
    playlist.parent.mkdir()
    playlist.write_text(f"#EXTM3U\n#EXT-X-TARGETDURATION:4\n#EXTINF:4.0,\n{outside}\n#EXT-X-ENDLIST\n")
    return playlist


def test_the_cli_refuses_a_playlist_with_a_saved_trajectory_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "t.json"
    code = cli.main([str(_playlist(tmp_path)), "Q?", "--choices", "a|b", "--backend", "oracle", "--answer", "A",
                     "--out", str(out), "--quiet"])  # fmt: skip
    assert code == cli.EXIT_MEDIA == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "allow_demuxers" in err and str(out) in err
    traj = Trajectory.load_json(out)
    assert traj.stop_reason == "media_error" and traj.meta["error_code"] == "media_format_refused"
    assert traj.num_turns == 0


def test_the_cli_saves_a_trajectory_for_an_unforeseen_failure(
    video_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import envs.media

    def broken(*_: Any, **__: Any) -> Any:
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(envs.media, "open_media", broken)
    out = tmp_path / "t.json"
    code = cli.main([str(video_path), "Q?", "--choices", "a|b", "--backend", "oracle", "--answer", "A",
                     "--out", str(out), "--quiet"])  # fmt: skip
    assert code == cli.EXIT_ERROR == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and "ZeroDivisionError: a bug" in err
    traj = Trajectory.load_json(out)
    assert traj.meta["error_code"] == "exception:ZeroDivisionError" and "a bug" in (traj.error or "")


def test_a_read_failure_mid_episode_in_the_cli_is_a_turn_error_not_a_crash(
    video_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = PyAVDecoder._read

    def failing(self: PyAVDecoder, times: list[float], *args: Any) -> Any:
        if times == [0.0]:  # the first frame, checked at reset
            return real(self, times, *args)
        raise av.error.PermissionError(errno.EPERM, "Operation not permitted")

    out = tmp_path / "t.json"
    texts = [
        turn({"type": "get_frames", "start": 1.0, "end": 3.0, "num": 2}),
        turn({"type": "answer", "content": "A"}),
    ]
    original_check = cli.CliRun.check_media

    def check_then_break(self: cli.CliRun) -> None:
        original_check(self)
        monkeypatch.setattr(PyAVDecoder, "_read", failing)  # the file breaks after the check

    monkeypatch.setattr(cli.CliRun, "check_media", check_then_break)
    code = cli.main([str(video_path), "Q?", "--choices", "a|b", "--backend", "replay", "-P",
                     f"texts={json.dumps(texts)}", "--max-turns", "2", "--out", str(out), "--quiet"])  # fmt: skip
    traj = Trajectory.load_json(out)
    assert code == 0 and traj.stop_reason == "answered"
    assert traj.turns[0].error == "media_read_failed"
