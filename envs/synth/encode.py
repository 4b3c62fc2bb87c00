"""Writing media files: wav, then an ``ffmpeg`` subprocess (libx264 + AAC, flac, mp3) or PyAV when the
``ffmpeg`` binary is missing; every file is written to a temporary name and renamed into place."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import wave
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from envs.synth.config import SynthConfig
from envs.synth.render import n_audio_blocks, render_audio, render_audio_block, render_frames
from envs.synth.timeline import Timeline


def _to_pcm16(x: np.ndarray) -> bytes:
    return (np.clip(x, -1.0, 1.0) * 32767.0).round().astype("<i2").tobytes()


def _write_wav(timeline: Timeline, path: Path) -> None:
    cfg = timeline.config
    with wave.open(str(path), "wb") as handle:
        handle.setnchannels(1)
        handle.setsampwidth(2)
        handle.setframerate(cfg.sample_rate)
        for block in range(n_audio_blocks(cfg)):
            handle.writeframes(_to_pcm16(render_audio_block(timeline, block)))


FRAME_CHUNK = 256
_BITEXACT = ["-fflags", "+bitexact", "-flags:v", "+bitexact", "-flags:a", "+bitexact", "-map_metadata", "-1"]


def _ffmpeg() -> str | None:
    return shutil.which("ffmpeg")


def _run_ffmpeg(args: list[str], stdin_chunks: Any = None) -> None:
    binary = _ffmpeg()
    if binary is None:
        raise RuntimeError("ffmpeg not found")
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(
            [
                binary,
                "-hide_banner",
                "-loglevel",
                "error",
                *([] if stdin_chunks is not None else ["-nostdin"]),
                "-y",
                *args,
            ],
            stdin=subprocess.PIPE if stdin_chunks is not None else subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
        broken = False
        try:
            if stdin_chunks is not None:
                assert proc.stdin is not None
                try:
                    for chunk in stdin_chunks:
                        proc.stdin.write(chunk)
                except BrokenPipeError:
                    broken = True
                finally:
                    try:
                        proc.stdin.close()
                    except BrokenPipeError:
                        broken = True
        except BaseException:
            proc.kill()
            proc.wait()
            raise
        rc = proc.wait()
        if rc != 0 or broken:
            err.seek(0)
            message = err.read().decode("utf-8", "replace").strip()
            raise RuntimeError(f"ffmpeg failed (exit {rc}): {message[-2000:]}")


def _encode_video_ffmpeg(timeline: Timeline, out: Path, wav: Path | None) -> None:
    cfg = timeline.config
    gop = cfg.keyframe_interval
    args = [
        "-f",
        "rawvideo",
        "-pix_fmt",
        "rgb24",
        "-s",
        f"{cfg.width}x{cfg.height}",
        "-framerate",
        str(cfg.fps),
    ]
    args += ["-i", "pipe:0"]
    if wav is not None:
        args += ["-i", str(wav), "-map", "0:v", "-map", "1:a"]
    args += ["-c:v", "libx264", "-preset", cfg.preset, "-crf", str(cfg.crf), "-g", str(gop)]
    args += [
        "-keyint_min",
        str(gop),
        "-sc_threshold",
        "0",
        "-pix_fmt",
        "yuv420p",
        "-threads",
        str(cfg.threads),
    ]
    if wav is not None:
        args += ["-c:a", "aac", "-aac_coder", "fast", "-b:a", "48k", "-ac", "1", "-ar", str(cfg.sample_rate)]
    args += [*_BITEXACT, "-movflags", "+faststart", "-f", "mp4", str(out)]
    chunks = (
        render_frames(timeline, f, f + FRAME_CHUNK).tobytes() for f in range(0, cfg.n_frames, FRAME_CHUNK)
    )
    _run_ffmpeg(args, chunks)


def _encode_video_pyav(timeline: Timeline, out: Path) -> None:
    import av  # noqa: PLC0415 - optional path

    cfg = timeline.config
    sr = cfg.sample_rate
    with av.open(str(out), "w", format="mp4") as container:
        vstream = container.add_stream("libx264", rate=cfg.fps)
        vstream.width, vstream.height, vstream.pix_fmt = cfg.width, cfg.height, "yuv420p"
        gop = cfg.keyframe_interval
        vstream.options = {"crf": str(cfg.crf), "preset": cfg.preset, "g": str(gop), "sc_threshold": "0"}
        vstream.codec_context.thread_count = cfg.threads
        astream = None
        if cfg.audio:
            astream = container.add_stream("aac", rate=sr)
            astream.layout = "mono"
            astream.bit_rate = 48_000
            astream.options = {"aac_coder": "fast"}
        audio_done = 0
        for f in range(0, cfg.n_frames, FRAME_CHUNK):
            frames = render_frames(timeline, f, f + FRAME_CHUNK)
            for i, img in enumerate(frames):
                vf = av.VideoFrame.from_ndarray(img, format="rgb24")
                vf.pts = f + i
                container.mux(vstream.encode(vf))
            if astream is not None:
                until = min(cfg.n_samples, int(round((f + len(frames)) / cfg.fps * sr)))
                pcm = render_audio(timeline, audio_done / sr, until / sr)
                for k in range(0, len(pcm), 1024):
                    part = pcm[k : k + 1024]
                    af = av.AudioFrame.from_ndarray(part[None, :], format="fltp", layout="mono")
                    af.sample_rate = sr
                    af.time_base = Fraction(1, sr)
                    af.pts = audio_done + k
                    container.mux(astream.encode(af))
                audio_done = until
        container.mux(vstream.encode(None))
        if astream is not None:
            container.mux(astream.encode(None))


def _encode_audio(timeline: Timeline, out: Path, wav: Path) -> None:
    cfg = timeline.config
    fmt = cfg.audio_format
    if fmt == "wav":
        os.replace(wav, out)
        return
    if _ffmpeg() is not None and cfg.encoder != "pyav":
        codec = ["-c:a", "flac"] if fmt == "flac" else ["-c:a", "libmp3lame", "-b:a", "64k"]
        _run_ffmpeg(["-i", str(wav), *codec, *_BITEXACT, "-f", fmt, str(out)])
        return
    if fmt == "flac":
        import soundfile  # noqa: PLC0415 - optional path

        with soundfile.SoundFile(
            str(out), "w", cfg.sample_rate, 1, format="FLAC", subtype="PCM_16"
        ) as handle:
            for block in range(n_audio_blocks(cfg)):
                handle.write(render_audio_block(timeline, block))
        return
    raise RuntimeError("mp3 output needs the ffmpeg binary")


def write_media(timeline: Timeline, out: Path) -> None:
    """Encode ``timeline`` to ``out`` (mp4 in video mode, else ``cfg.audio_format``), writing a temporary
    file beside it and renaming it into place, so ``out`` is either complete or absent (temporaries are removed
    on failure)."""
    cfg = timeline.config
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{out.stem}.", suffix=f".{cfg.extension}", dir=out.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    wav: Path | None = None
    try:
        if cfg.has_audio and not (cfg.mode == "video" and video_encoder(cfg) == "pyav"):
            fd, wav_name = tempfile.mkstemp(prefix=f".{out.stem}.", suffix=".wav", dir=out.parent)
            os.close(fd)
            wav = Path(wav_name)
            _write_wav(timeline, wav)
        if cfg.mode == "video":
            if video_encoder(cfg) == "ffmpeg":
                _encode_video_ffmpeg(timeline, tmp, wav)
            else:
                _encode_video_pyav(timeline, tmp)
        else:
            assert wav is not None
            _encode_audio(timeline, tmp, wav)
        os.chmod(tmp, 0o644)
        os.replace(tmp, out)
    finally:
        for p in (tmp, wav):
            if p is not None and p.exists():
                p.unlink()


def video_encoder(cfg: SynthConfig) -> str:
    """The video encoder ``cfg`` resolves to: ``cfg.encoder`` when it names one, else ``"ffmpeg"``
    when the ffmpeg binary is found and ``"pyav"`` otherwise."""
    if cfg.encoder == "auto":
        return "ffmpeg" if _ffmpeg() is not None else "pyav"
    return cfg.encoder
