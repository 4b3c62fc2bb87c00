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
    assert dom.svgs == 2  # the audio turn and the clip's sound
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
    assert "<img" not in html and "<svg" not in html
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
