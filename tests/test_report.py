"""The HTML report: rendered by real headless Chromium, and without the media file."""

from __future__ import annotations

import base64
import io
import json
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from media_factory import read_barcode
from PIL import Image

from envs.env import OmniVideoEnv
from omniagent.backends.scripted import ReplayPolicy
from omniagent.episode import run_episode
from omniagent.report import render_report, waveform_svg, write_report
from omniagent.trajectory import Trajectory

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (/usr/bin/chromium)")


def turn(action: dict) -> str:
    return json.dumps({"observation": "I see <b>things</b> & stuff", "thought": "next", "action": action})


TEXTS = [
    turn({"type": "get_frames", "start": 0.0, "end": 19.0, "num": 5}),
    turn({"type": "get_audio", "start": 2.0, "end": 5.0}),
    "this is not JSON <script>alert(1)</script>",
    turn({"type": "get_clip", "start": 11.0, "end": 14.0}),
    turn({"type": "get_frames", "start": 50.0, "end": 60.0, "num": 2}),  # outside the file: error
    turn({"type": "answer", "content": "B"}),
]
N_THUMBS = 5 + 7  # 5 frames + a 3 s clip at 2 fps (7 frames)


@pytest.fixture(scope="module")
def trajectory(video_path) -> Trajectory:
    env = OmniVideoEnv()
    opts = {"media": str(video_path), "question": "Which beep is higher?", "task_type": "mcq",
            "choices": ["first", "second"], "answer": "B", "max_turns": 8}  # fmt: skip
    traj = run_episode(env, ReplayPolicy(texts=TEXTS), opts)
    env.close()
    assert traj.stop_reason == "answered" and traj.num_turns == len(TEXTS)
    return traj


class DomSummary(HTMLParser):
    """Sections (id, classes) and images with their figure's data-time, from HTML text."""

    def __init__(self) -> None:
        super().__init__()
        self.sections: list[dict[str, str]] = []
        self.images: list[dict[str, str]] = []
        self.svgs = 0
        self.scripts = 0
        self.audios: list[dict[str, str]] = []
        self.timeline: list[dict[str, str]] = []  # the strip's frame ticks, spans and evidence bands
        self.contexts = 0
        self._time: str | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "section":
            self.sections.append(a)
        elif tag == "figure" and "data-time" in a:
            self._time = a["data-time"]
        elif tag == "img":
            self.images.append({**a, "time": self._time, "turn": self.sections[-1]["data-turn"]})
        elif tag == "svg":
            self.svgs += 1
        elif tag == "audio":
            self.audios.append({**a, "turn": self.sections[-1]["data-turn"]})
        elif tag in ("line", "rect") and str(a.get("class", "")).startswith("tl-"):
            self.timeline.append({**a, "tag": tag})
        elif tag == "details":
            self.contexts += 1
        elif tag == "script":
            self.scripts += 1


def chromium(*args: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    cmd = [
        CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--disable-dev-shm-usage", f"--user-data-dir={tmp / 'chromium-profile'}", *args,
    ]  # fmt: skip
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


@needs_chromium
def test_report_in_headless_chromium(trajectory, tmp_path):
    html = write_report(trajectory, tmp_path / "report.html")
    r = chromium("--dump-dom", html.resolve().as_uri(), tmp=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    dom = DomSummary()
    dom.feed(r.stdout)
    turns = [s for s in dom.sections if "turn" in s.get("class", "")]
    assert [s["id"] for s in turns] == [f"turn-{i}" for i in range(1, len(TEXTS) + 1)]
    assert "error" in turns[2]["class"] and "error" in turns[4]["class"] and "answer" in turns[5]["class"]
    # thumbnails: every fetched frame of turn 1 and an even pick of the clip's frames in turn 4
    assert len(dom.images) == N_THUMBS
    assert {img["turn"] for img in dom.images} == {"1", "4"}
    assert all(img["src"].startswith("data:image/jpeg;base64,") for img in dom.images)
    assert [float(img["time"]) for img in dom.images if img["turn"] == "1"] == pytest.approx(
        trajectory.turns[0].timestamps
    )
    # each thumbnail is the frame at its timestamp (frames carry their index as a barcode)
    for img in dom.images:
        pixels = np.asarray(Image.open(io.BytesIO(base64.b64decode(img["src"].split(",", 1)[1]))))
        assert read_barcode(pixels) == round(float(img["time"]) * 10)
    assert dom.svgs == 3  # the audio turn's and the clip's waveforms, and the timeline strip
    assert dom.scripts == 0 and "alert(1)" in r.stdout  # model text is escaped, never executed
    assert "Which beep is higher?" in r.stdout and "time_out_of_range" in r.stdout


@needs_chromium
def test_report_screenshot_is_not_blank(trajectory, tmp_path):
    html = write_report(trajectory, tmp_path / "report.html")
    png = tmp_path / "shot.png"
    r = chromium("--window-size=1000,1400", f"--screenshot={png}", html.resolve().as_uri(), tmp=tmp_path)
    assert r.returncode == 0 and png.exists(), r.stderr[-2000:]
    pixels = np.asarray(Image.open(png).convert("L"), dtype=np.float32)
    assert pixels.shape == (1400, 1000) and pixels.std() > 20  # the dark header, cards, thumbnails


def test_report_without_media_shows_timestamps(trajectory, tmp_path):
    moved = trajectory.model_copy(update={"media": str(tmp_path / "gone.mp4")})
    html = render_report(moved)
    assert "<img" not in html and "<audio" not in html and 'class="waveform"' not in html
    assert 'class="timeline"' in html  # drawn from the recorded timestamps alone
    assert "media file not found: timestamps only" in html
    for t in trajectory.turns[0].timestamps:
        assert f"{t:.2f} s" in html
    assert "audio 2.00–5.00 s" in html
    assert len(re.findall(r'<section class="turn', html)) == len(TEXTS)


def test_report_from_json_path_and_unreadable_media(trajectory, tmp_path):
    path = tmp_path / "t.json"
    trajectory.save_json(path)
    junk = tmp_path / "junk.mp4"
    junk.write_bytes(b"not media at all" * 10)
    out = write_report(path, tmp_path / "r.html", media_path=junk)
    html = out.read_text()
    assert "media not readable" in html and "<img" not in html


def test_waveform_svg_shape():
    sr = 16000
    x = np.zeros(sr * 2, np.float32)
    x[sr : sr + 4000] = 0.5 * np.sin(np.arange(4000) / 3)
    svg = waveform_svg(x, 10.0, 12.0)
    assert svg.startswith("<svg") and "10.00 s" in svg and "12.00 s" in svg
    ys = [float(p.split(",")[1]) for p in re.search(r'points="([^"]+)"', svg).group(1).split()]
    assert min(ys) < 10 and max(ys) > 50  # the burst reaches the edges; silence stays in the middle
    assert waveform_svg(np.zeros(0), 0, 1).startswith("<svg")


def wav_of(src: str) -> tuple[np.ndarray, int]:
    import soundfile as sf

    assert src.startswith("data:audio/wav;base64,")
    data, rate = sf.read(io.BytesIO(base64.b64decode(src.split(",", 1)[1])), dtype="float32")
    return data, rate


@needs_chromium
def test_report_plays_every_served_span_and_draws_the_timeline(trajectory, tmp_path):
    html = write_report(trajectory, tmp_path / "report.html", evidence=[[11.5, 13.0]])
    r = chromium("--dump-dom", html.resolve().as_uri(), tmp=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    dom = DomSummary()
    dom.feed(r.stdout)
    # one <audio> per served span: the audio turn (2-5 s) and the clip (11-14 s), each the span's sound
    assert [(a["turn"], a["data-start"], a["data-end"]) for a in dom.audios] == [
        ("2", "2.000", "5.000"), ("4", "11.000", "14.000"),
    ]  # fmt: skip
    for a, burst_at in zip(dom.audios, (3.0, 12.0), strict=True):
        x, rate = wav_of(a["src"])
        assert rate == 16000 and len(x) == pytest.approx(3 * rate, abs=rate // 50)
        start = float(a["data-start"])
        loud = np.abs(x[int((burst_at - start) * rate) : int((burst_at - start + 0.4) * rate)]).mean()
        quiet = np.abs(x[: int(0.5 * rate)]).mean()
        assert loud > 5 * quiet + 1e-3  # the tone burst is where the media has it
    # the timeline: a tick per fetched frame (5 + 7), a bar per audio and clip span, the evidence band
    ticks = [e for e in dom.timeline if e["class"] == "tl-frame"]
    assert sorted(e["data-turn"] for e in ticks) == ["1"] * 5 + ["4"] * 7
    spans = [(e["data-turn"], e["data-kind"]) for e in dom.timeline if e["class"] == "tl-span"]
    assert spans == [("2", "get_audio"), ("4", "get_clip")]
    (band,) = [e for e in dom.timeline if e["class"] == "tl-evidence"]
    clip_bar = next(e for e in dom.timeline if e.get("data-kind") == "get_clip")
    assert float(clip_bar["x"]) < float(band["x"]) < float(clip_bar["x"]) + float(clip_bar["width"])
    assert dom.contexts == len(TEXTS)  # every turn shows the context the model was given


def test_report_context_shows_the_stubs(trajectory):
    html = render_report(trajectory)
    contexts = re.findall(r'<details class="context">(.*?)</details>', html, re.S)
    assert len(contexts) == len(TEXTS)
    assert "Question: Which beep is higher?" in contexts[0] and "[image" not in contexts[0]
    assert contexts[1].count("[image ") == 5  # turn 2 still sees turn 1's frames
    # turn 3 sees them purged to the stub the environment wrote, and the audio of turn 2 raw
    assert (
        "Frames 0.00s-19.00s (num=5)" in contexts[2]
        and "[MEDIA REMOVED - see your observation in turn 2]" in contexts[2]
    )
    assert "[image " not in contexts[2] and "[audio 2.00-5.00 s]" in contexts[2]
    assert "[video clip, 7 frames" in contexts[4] and "time_out_of_range" in contexts[5]
    assert "&lt;script&gt;" in contexts[3] and "<script>" not in html  # the bad output, escaped
    assert 'id="context-note"' not in html  # the replay matched the recorded run at every turn


def test_report_says_how_many_frames_were_thinned(trajectory):
    html = render_report(trajectory, max_thumbs_per_turn=3)
    assert "3 of 5 frames shown" in html and "3 of 7 clip frames shown" in html
    assert "of 7 clip frames shown" not in render_report(trajectory)  # a 7-frame clip is shown whole


def test_report_context_replay_that_diverges_says_so(trajectory):
    from envs.limits import EnvLimits

    html = render_report(trajectory, limits=EnvLimits(max_frames=3))  # the run allowed 5 frames
    assert "the replay served other media than the run at turn 1" in html
    assert html.count('<details class="context">') == 1  # only the context before the divergence


def test_eval_trajectories_carry_the_evidence_to_the_timeline(tmp_path):
    from envs.synth import generate_benchmark
    from omniagent.eval.config import EvalConfig
    from omniagent.eval.runner import run_eval
    from omniagent.trajectory import load_trajectories

    tasks = generate_benchmark(
        tmp_path / "synth", n_videos=1, durations=[20.0], config={"width": 112, "height": 64, "fps": 2}
    )
    tr = [t for t in tasks if t.task_type == "tr" and t.evidence][:1]
    assert tr, "the synthetic benchmark has temporal tasks with known evidence"
    run_eval(tr, EvalConfig(out_dir=str(tmp_path / "run"), policy="oracle", workers=1, progress=False))
    (traj,) = load_trajectories(tmp_path / "run" / "trajectories.jsonl")
    assert traj.meta["evidence"] == tr[0].evidence
    html = render_report(traj)
    assert html.count('class="tl-evidence"') == len(tr[0].evidence) and "evidence in yellow" in html
    assert 'class="tl-frame"' in html  # the oracle looked at the evidence span's frames


def test_report_rebuilds_contexts_with_the_runs_limits(video_path):
    from envs.limits import EnvLimits

    limits = EnvLimits(max_frames=3)  # the workload asks for 5 frames: this run got 3, with a note
    env = OmniVideoEnv(limits=limits)
    opts = {"media": str(video_path), "question": "Which beep is higher?", "task_type": "mcq",
            "choices": ["first", "second"], "answer": "B", "max_turns": 8}  # fmt: skip
    traj = run_episode(env, ReplayPolicy(texts=TEXTS), opts)
    env.close()
    assert len(traj.turns[0].timestamps) == 3
    html = render_report(traj, limits=limits)
    assert 'id="context-note"' not in html and html.count('<details class="context">') == len(TEXTS)
    assert "other media than the run at turn 1" in render_report(traj)  # default limits serve 5 frames
