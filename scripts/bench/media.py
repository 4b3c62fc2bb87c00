"""Media access benchmark: prints min/median seconds per operation for each decoder backend on
generated 10-min and 60-min videos (640x360, 30 fps H.264, GOP 250 with B-frames, AAC), beside an
ffmpeg-subprocess-per-frame baseline and exact seeks, plus RSS growth over 300 calls. Audio rows:
10/30/300 s spans decoded directly (what get_audio does), beside the whole-track ffmpeg extraction
that the removed audio cache paid before its first request.

    python scripts/bench/media.py                 # both files, both backends (~5-10 min on 2 cores)
    python scripts/bench/media.py --minutes 10 --reps 3

Targets: sparse scan >= 20x faster than the ffmpeg-per-frame baseline; RSS growth <= 50 MB / 300 calls.
Each backend runs in its own process so that memory figures do not mix.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from envs.media_access import ffmpeg_input_args  # a media name is a file for the ffmpeg CLI too


def make_video(path: Path, minutes: int) -> Path:
    if path.exists():
        return path
    tmp = path.with_suffix(".part.mp4")
    secs = minutes * 60
    cmd = [
        "ffmpeg", "-v", "error", "-y",
        "-f", "lavfi", "-i", f"testsrc2=size=640x360:rate=30:duration={secs}",
        "-f", "lavfi", "-i", f"sine=frequency=440:sample_rate=44100:duration={secs}",
        "-c:v", "libx264", "-preset", "ultrafast", "-g", "250", "-bf", "2", "-pix_fmt", "yuv420p",
        "-c:a", "aac", "-ac", "2", "-shortest", str(tmp),
    ]  # fmt: skip
    subprocess.run(cmd, check=True)
    tmp.rename(path)
    return path


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def timed(fn, reps: int) -> list[float]:  # type: ignore[no-untyped-def]
    out = []
    for r in range(reps):
        t0 = time.perf_counter()
        fn(r)
        out.append(time.perf_counter() - t0)
    return out


def ffmpeg_frame(path: str, t: float, size: tuple[int, int]) -> np.ndarray:
    """The official OmniAgent code's way: one ffmpeg process per frame (accurate seek)."""
    w, h = size
    cmd = ["ffmpeg", "-v", "error", "-ss", f"{t:.3f}", *ffmpeg_input_args(path), "-frames:v", "1", "-s", f"{w}x{h}",
           "-f", "rawvideo", "-pix_fmt", "rgb24", "-"]  # fmt: skip
    raw = subprocess.run(cmd, check=True, capture_output=True).stdout
    return np.frombuffer(raw, np.uint8).reshape(h, w, 3)


def extract_all_ffmpeg(path: str, dst: str) -> None:
    """What the former audio cache paid before its first request: the whole track to a 16 kHz WAV."""
    cmd = [
        "ffmpeg",
        "-v",
        "error",
        "-y",
        *ffmpeg_input_args(path),
        "-vn",
        "-ac",
        "1",
        "-ar",
        "16000",
        "-c:a",
        "pcm_s16le",
        dst,
    ]
    subprocess.run(cmd, check=True)


def audio_rows(m, path: str, dur: float, reps: int, work: str, rng: np.random.Generator) -> dict:  # type: ignore[no-untyped-def]
    """Direct decode of spans anywhere in the file (what get_audio does) beside the cache's one-off cost."""
    res: dict = {}
    for span in (10, 30, 300):
        if dur > span + 1:
            res[f"audio_{span}s"] = timed(
                lambda r, n=span: m.audio(*(lambda s: (s, s + n))(float(rng.uniform(0, dur - n - 1)))), reps
            )
    wav = str(Path(work) / "full_track.wav")
    res["audio_full_extract_ffmpeg"] = timed(lambda r: extract_all_ffmpeg(path, wav), 1)
    Path(wav).unlink(missing_ok=True)
    return res


def worker(backend: str, path: str, reps: int, work: str) -> dict:
    from envs.decoders import ReadPlan
    from envs.media import MediaConfig, open_media

    res: dict = {"backend": backend}
    rss0 = rss_mb()
    t0 = time.perf_counter()
    m = open_media(path, MediaConfig(backend=backend))
    res["open"] = [time.perf_counter() - t0]
    dur = m.info.duration
    rng = np.random.default_rng(0)
    res["sparse_32"] = timed(lambda r: m.frames(r * 0.37, dur - 1 - r * 0.37, 32), reps)
    res["dense_16_in_2s"] = timed(
        lambda r: m.frames(*(lambda s: (s, s + 2))(float(rng.uniform(0, dur - 3))), 16), reps
    )
    res.update(audio_rows(m, path, dur, reps, work, rng))
    res["clip_10s_2fps"] = timed(
        lambda r: m.clip(*(lambda s: (s, s + 10))(float(rng.uniform(0, dur - 11))), 2.0), reps
    )
    if backend == "pyav":
        exact = open_media(path, MediaConfig(backend=backend, plan=ReadPlan(snap_tolerance=0.0)))
        res["sparse_32_exact_seeks"] = timed(
            lambda r: exact.frames(r * 0.37, dur - 1 - r * 0.37, 32), max(1, reps // 2)
        )
        exact.close()
        size = m.frame_size
        res["sparse_32_ffmpeg_per_frame"] = timed(
            lambda r: [ffmpeg_frame(path, t, size) for t in np.linspace(0, dur - 1, 32)], max(1, reps // 2)
        )
        res["dense_16_ffmpeg_per_frame"] = timed(
            lambda r: [ffmpeg_frame(path, t, size) for t in np.linspace(100, 102, 16)], max(1, reps // 2)
        )
    # memory: 300 mixed calls after warm-up
    before = rss_mb()
    for i in range(300):
        s = float(rng.uniform(0, dur - 31))
        if i % 3 == 0:
            m.frames(0, dur - 1, 8)
        elif i % 3 == 1:
            m.frames(s, s + 2, 8)
        else:
            m.audio(s, s + 30)
    time.sleep(2.0)  # give a read-ahead thread time to misbehave while idle
    res["rss_growth_mb_300_calls"] = rss_mb() - before
    res["rss_total_mb"] = rss_mb() - rss0
    m.close()
    return res


def fmt(xs: list[float]) -> str:
    return f"{min(xs):.3f}/{statistics.median(xs):.3f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=int, nargs="+", default=[10, 60])
    ap.add_argument("--backends", nargs="+", default=["pyav", "decord"])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--work-dir", default="/tmp/omniagent-bench")
    ap.add_argument("--worker", nargs=2, metavar=("BACKEND", "PATH"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    work = Path(args.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    if args.worker:
        print(json.dumps(worker(args.worker[0], args.worker[1], args.reps, str(work))))
        return
    rows = []
    for minutes in args.minutes:
        t0 = time.perf_counter()
        path = make_video(work / f"bench_{minutes}min.mp4", minutes)
        print(f"# {path.name}: ready in {time.perf_counter() - t0:.1f} s", flush=True)
        for backend in args.backends:
            cmd = [
                sys.executable,
                __file__,
                "--worker",
                backend,
                str(path),
                "--reps",
                str(args.reps),
                "--work-dir",
                str(work),
            ]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                print(f"{backend}: failed: {proc.stderr.strip().splitlines()[-1:]}")
                continue
            res = json.loads(proc.stdout.strip().splitlines()[-1])
            res["minutes"] = minutes
            rows.append(res)
    ops = ["open", "sparse_32", "sparse_32_exact_seeks", "sparse_32_ffmpeg_per_frame", "dense_16_in_2s",
           "dense_16_ffmpeg_per_frame", "audio_10s", "audio_30s", "audio_300s", "audio_full_extract_ffmpeg",
           "clip_10s_2fps"]  # fmt: skip
    print("\nseconds, min/median")
    print("| file | backend | " + " | ".join(ops) + " | RSS growth / 300 calls (MB) |")
    print("|" + "---|" * (len(ops) + 3))
    for r in rows:
        cells = [fmt(r[o]) if o in r else "-" for o in ops]
        print(
            f"| {r['minutes']} min | {r['backend']} | "
            + " | ".join(cells)
            + f" | {r['rss_growth_mb_300_calls']:.1f} |"
        )
    for r in rows:
        if "sparse_32_ffmpeg_per_frame" in r:
            speedup = statistics.median(r["sparse_32_ffmpeg_per_frame"]) / statistics.median(r["sparse_32"])
            ok = "PASS" if speedup >= 20 else "MISS"
            print(
                f"{r['minutes']} min {r['backend']}: sparse scan {speedup:.0f}x faster than ffmpeg per frame (target >= 20x) {ok}"
            )
        ok = "PASS" if r["rss_growth_mb_300_calls"] <= 50 else "MISS"
        print(
            f"{r['minutes']} min {r['backend']}: RSS growth {r['rss_growth_mb_300_calls']:.1f} MB over 300 calls (target <= 50) {ok}"
        )


if __name__ == "__main__":
    main()
