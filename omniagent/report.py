"""A self-contained HTML page for one trajectory: what the agent looked at, turn by turn.

``write_report(trajectory, "out.html")`` re-fetches the frames of every turn from the media file at
the exact timestamps the trajectory recorded (small thumbnails, JPEG data URLs; "N of M frames
shown" where a clip is thinned), draws each served audio span as an inline SVG waveform with a
playable ``<audio>`` element (WAV re-decoded from the media), draws a timeline strip of where each
turn looked over the media's duration (with the evidence interval when known), shows the context
as the model saw it before each turn (purged media as their stubs; :mod:`omniagent.report_parts`),
and lays out the observation / thought / action text, errors and notes. Inline CSS, no scripts, no
external requests: the file can be mailed or archived as is.

When the media file is missing or unreadable the page still renders, with the timestamps only.

CLI: ``python -m omniagent.report TRAJECTORY.json OUT.html [--media PATH]``.
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from envs.jsonl import write_atomic
from envs.limits import EnvLimits
from omniagent.report_parts import replay_contexts, timeline_svg, wav_data_url
from omniagent.trajectory import Trajectory

THUMB_SIDE = 160  # longer side of a thumbnail, pixels
MAX_CLIP_THUMBS = 12  # a clip's frames shown (evenly picked)
WAVE_W, WAVE_H, WAVE_BINS = 640, 64, 320

CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;background:#f6f7f9;color:#1d2430}
header{background:#1d2430;color:#fff;padding:18px 28px}
header h1{font-size:19px;margin:0 0 10px}
header table{border-collapse:collapse}
header td{padding:2px 14px 2px 0;vertical-align:top}
header td:first-child{color:#9aa6b8}
.ok{color:#7be495}.bad{color:#ff9a8a}.warn{color:#ffd479}
main{padding:18px 28px;max-width:1200px}
section.turn{background:#fff;border:1px solid #dde2ea;border-radius:8px;margin:0 0 16px;padding:12px 16px}
section.turn.error{border-left:5px solid #d9534f}
section.turn.answer{border-left:5px solid #3c9d5d}
section.turn h2{font-size:15px;margin:0 0 8px}
section.turn h2 .action{font-weight:normal;color:#4a5568;margin-left:8px}
.media{display:flex;flex-wrap:wrap;gap:6px;margin:6px 0 10px}
figure{margin:0}
figure.thumb img{display:block;border-radius:3px;border:1px solid #ccd}
figcaption{font-size:11px;color:#5a6475;text-align:center}
figure.wave svg{background:#f0f3f8;border-radius:3px;border:1px solid #ccd}
dl{margin:0;display:grid;grid-template-columns:110px 1fr;gap:4px 10px}
dt{color:#6b7585}
dd{margin:0;white-space:pre-wrap;word-break:break-word}
pre{margin:0;white-space:pre-wrap;word-break:break-word;font-size:12px;background:#f3f4f7;padding:4px 6px;border-radius:3px}
.err{color:#b52b27}.note{color:#8a6d1f}
.times{font-size:12px;color:#5a6475}
.missing{color:#8a6d1f;font-style:italic}
.stats{font-size:12px;color:#6b7585;margin-top:8px}
.thinned{font-size:12px;color:#8a6d1f;margin:0 0 6px}
section.timeline{background:#fff;border:1px solid #dde2ea;border-radius:8px;margin:0 0 16px;padding:10px 16px}
section.timeline h2{font-size:14px;margin:0 0 6px}
details.context{margin:8px 0 0}
details.context summary{cursor:pointer;color:#4a5568;font-size:12px}
.msg{margin:4px 0}.msg b{font-size:11px;color:#6b7585;text-transform:uppercase}
"""

TEMPLATE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>OmniAgent trajectory {{ t.id }}</title>
<style>{{ css }}</style></head>
<body>
<header id="summary">
<h1>{{ t.question }}</h1>
<table>
{% if t.choices %}<tr><td>options</td><td>{% for c in choices %}{{ c }}{% if not loop.last %} · {% endif %}{% endfor %}</td></tr>{% endif %}
<tr><td>answer</td><td class="{{ answer_class }}">{{ answer_text }}</td></tr>
{% if t.ground_truth is not none %}<tr><td>ground truth</td><td>{{ truth_text }}</td></tr>
<tr><td>reward</td><td>{{ reward_text }}</td></tr>{% endif %}
<tr><td>stop reason</td><td>{{ t.stop_reason or "unknown" }}{% if t.error %}: <span class="bad">{{ t.error }}</span>{% endif %}</td></tr>
<tr><td>turns</td><td>{{ t.turns|length }} of {{ t.max_turns }}</td></tr>
<tr><td>frames used</td><td>{{ t.frames_used }}</td></tr>
<tr><td>audio seconds</td><td>{{ "%.1f"|format(t.audio_seconds_used) }}</td></tr>
<tr><td>time</td><td>model {{ "%.2f"|format(t.model_seconds) }} s · env {{ "%.2f"|format(t.env_seconds) }} s · wall {{ "%.2f"|format(t.wall_seconds) }} s</td></tr>
<tr><td>policy</td><td>{{ t.policy }}</td></tr>
<tr><td>media</td><td>{{ t.media }}{% if media_note %} <span class="warn">({{ media_note }})</span>{% endif %}</td></tr>
</table>
</header>
<main>
{% if timeline %}<section class="timeline" id="timeline"><h2>Where each turn looked (0 to {{ "%.1f"|format(duration or 0) }} s{% if evidence %}; evidence in yellow{% endif %})</h2>{{ timeline|safe }}</section>{% endif %}
{% if context_note %}<p class="missing" id="context-note">{{ context_note }}</p>{% endif %}
{% for turn in turns %}
<section class="turn {{ turn.css }}" id="turn-{{ turn.n }}" data-turn="{{ turn.n }}" data-action="{{ turn.action_type or '' }}">
<h2>Turn {{ turn.n }}<span class="action">{{ turn.summary }}</span></h2>
{% if turn.thumbs or turn.wave or turn.times_only %}
<div class="media">
{% for th in turn.thumbs %}<figure class="thumb" data-time="{{ '%.3f'|format(th.time) }}"><img src="{{ th.src }}" width="{{ th.w }}" height="{{ th.h }}" alt="frame at {{ '%.2f'|format(th.time) }} s"><figcaption>{{ "%.2f"|format(th.time) }} s</figcaption></figure>
{% endfor %}
{% if turn.wave %}<figure class="wave">{{ turn.wave|safe }}<figcaption>audio {{ turn.wave_caption }}</figcaption>{% if turn.audio_src %}<audio controls preload="none" src="{{ turn.audio_src }}" data-start="{{ '%.3f'|format(turn.span[0]) }}" data-end="{{ '%.3f'|format(turn.span[1]) }}"></audio>{% endif %}</figure>{% endif %}
{% if turn.times_only %}<p class="times">{% if turn.missing %}<span class="missing">{{ turn.missing }}</span> {% endif %}timestamps: {{ turn.times_only }}</p>{% endif %}
</div>
{% endif %}
{% if turn.thinned %}<p class="thinned">{{ turn.thinned }}</p>{% endif %}
<dl>
{% if turn.observation is not none %}<dt>observation</dt><dd>{{ turn.observation }}</dd>{% endif %}
{% if turn.thought is not none %}<dt>thought</dt><dd>{{ turn.thought }}</dd>{% endif %}
{% if turn.action %}<dt>action</dt><dd><pre>{{ turn.action }}</pre></dd>{% endif %}
{% if turn.error %}<dt>error</dt><dd class="err">{{ turn.error }}</dd>{% endif %}
{% for note in turn.notes %}<dt>note</dt><dd class="note">{{ note }}</dd>{% endfor %}
{% if turn.raw %}<dt>raw output</dt><dd><pre>{{ turn.raw }}</pre></dd>{% endif %}
</dl>
<p class="stats">{{ turn.stats }}</p>
{% if turn.context %}<details class="context"><summary>context the model saw before this turn ({{ turn.context|length }} messages)</summary>
{% for m in turn.context %}<div class="msg"><b>{{ m.role }}</b><pre>{{ m.text }}</pre></div>{% endfor %}
</details>{% endif %}
</section>
{% endfor %}
{% if not turns %}<p class="missing">No turns were taken.</p>{% endif %}
</main>
</body></html>
"""


# ------------------------------------------------------------------------------------------ drawing
def jpeg_data_url(image: np.ndarray, quality: int = 80) -> str:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(image, dtype=np.uint8)).save(buf, format="JPEG", quality=quality)
    return "data:image/jpeg;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def waveform_svg(
    samples: np.ndarray, start: float, end: float, width: int = WAVE_W, height: int = WAVE_H
) -> str:
    """An inline SVG of the min/max envelope of ``samples`` with the span's start and end times."""
    x = np.asarray(samples, dtype=np.float32).reshape(-1)
    mid = height / 2
    if x.size == 0:
        pts = f"0,{mid} {width},{mid}"
    else:
        bins = min(WAVE_BINS, x.size)
        edges = np.linspace(0, x.size, bins + 1).astype(int)
        hi = np.array([x[a:b].max() if b > a else 0.0 for a, b in zip(edges[:-1], edges[1:], strict=True)])
        lo = np.array([x[a:b].min() if b > a else 0.0 for a, b in zip(edges[:-1], edges[1:], strict=True)])
        peak = max(float(np.abs(x).max()), 0.02)  # near-silence stays flat
        xs = np.linspace(0, width, bins)
        top = [f"{px:.1f},{mid - (h / peak) * (mid - 2):.1f}" for px, h in zip(xs, hi, strict=True)]
        bottom = [
            f"{px:.1f},{mid - (lv / peak) * (mid - 2):.1f}" for px, lv in zip(xs[::-1], lo[::-1], strict=True)
        ]
        pts = " ".join(top + bottom)
    return (
        f'<svg class="waveform" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height + 14}" '
        f'viewBox="0 0 {width} {height + 14}" role="img" aria-label="waveform {start:.2f}-{end:.2f} s">'
        f'<line x1="0" y1="{mid}" x2="{width}" y2="{mid}" stroke="#b8c2d3" stroke-width="0.5"/>'
        f'<polygon points="{pts}" fill="#4f7cc2" stroke="#2f5a9e" stroke-width="0.5"/>'
        f'<text x="2" y="{height + 11}" font-size="10" fill="#5a6475">{start:.2f} s</text>'
        f'<text x="{width - 2}" y="{height + 11}" font-size="10" fill="#5a6475" text-anchor="end">{end:.2f} s</text>'
        "</svg>"
    )


# ------------------------------------------------------------------------------------------- media
class _Media:
    """Thumbnail and audio access that never raises: failures turn into a note."""

    def __init__(self, path: str | None, thumb_side: int) -> None:
        self.src = None
        self.note: str | None = None
        if not path:
            self.note = "no media path: timestamps only"
            return
        if not Path(path).exists():
            self.note = "media file not found: timestamps only"
            return
        try:
            from envs.media import MediaConfig, open_media

            self.src = open_media(path, MediaConfig(max_side=thumb_side))
        except Exception as exc:  # MediaError or a decoder failure: the page still renders
            self.note = f"media not readable ({getattr(exc, 'reason', exc)}): timestamps only"

    def frames(self, times: list[float]) -> list[tuple[float, np.ndarray]] | None:
        if self.src is None or not self.src.info.has_video or not times:
            return None
        wanted = sorted(times)
        try:
            decoder = getattr(self.src, "_decoder", None)
            if decoder is not None:  # one sorted sweep at the exact times (no keyframe snapping)
                got = decoder.read(wanted, 0.0, self.src.config.plan)
            else:
                got = [f for t in wanted for f in self.src.frames(t, t, 1)]
        except Exception:
            return None
        return [(t, f.image) for t, f in zip(wanted, got, strict=False)]

    def audio(self, start: float, end: float) -> np.ndarray | None:
        if self.src is None or not self.src.info.has_audio:
            return None
        start, end = max(0.0, start), min(end, self.src.info.duration)
        if end <= start:
            return None
        try:
            return self.src.audio(start, end)
        except Exception:
            return None

    def close(self) -> None:
        if self.src is not None:
            self.src.close()


def _pick(times: list[float], k: int) -> list[float]:
    if len(times) <= k:
        return list(times)
    idx = np.linspace(0, len(times) - 1, k).round().astype(int)
    return [times[i] for i in dict.fromkeys(idx.tolist())]


def _turn_view(rec: Any, media: _Media, max_thumbs: int) -> dict[str, Any]:
    view: dict[str, Any] = {
        "n": rec.turn,
        "action_type": rec.action_type,
        "summary": rec.request(),
        "css": "error" if rec.error else ("answer" if rec.action_type == "answer" else ""),
        "observation": rec.observation,
        "thought": rec.thought,
        "action": json.dumps(rec.action) if rec.action else None,
        "error": f"{rec.error}: {rec.error_message or ''}" if rec.error else None,
        "notes": list(rec.notes),
        "raw": rec.raw_text if rec.action_type is None else None,
        "thumbs": [],
        "wave": None,
        "wave_caption": "",
        "times_only": None,
        "missing": None,
        "audio_src": None,
        "span": None,
        "thinned": None,
        "context": None,
    }
    stats = [f"model {rec.model_seconds:.2f} s", f"env {rec.env_seconds:.3f} s"]
    if rec.entropy is not None:
        stats.append(f"entropy {rec.entropy:.3f}{' (top-k est.)' if rec.entropy_is_estimate else ''}")
    if rec.context_tokens is not None:
        stats.append(f"context {rec.context_tokens} tokens")
    if rec.completion_tokens is not None:
        stats.append(f"{rec.completion_tokens} generated")
    stats.append(f"frames so far {rec.frames_used}, audio so far {rec.audio_seconds_used:.1f} s")
    view["stats"] = " · ".join(stats)

    times = list(rec.timestamps)
    if rec.error or not times or rec.action_type not in ("get_frames", "get_audio", "get_clip"):
        return view
    if rec.action_type in ("get_frames", "get_clip"):
        shown = times if rec.action_type == "get_frames" else _pick(times, MAX_CLIP_THUMBS)
        shown = shown[:max_thumbs]
        if len(shown) < len(times):
            kind = "clip frames" if rec.action_type == "get_clip" else "frames"
            view["thinned"] = f"{len(shown)} of {len(times)} {kind} shown"
        frames = media.frames(shown)
        if frames:
            for t, img in frames:
                view["thumbs"].append(
                    {"time": t, "src": jpeg_data_url(img), "w": img.shape[1], "h": img.shape[0]}
                )
        else:
            view["times_only"] = ", ".join(f"{t:.2f} s" for t in times)
            view["missing"] = media.note or "frames not readable"
    if rec.action_type in ("get_audio", "get_clip"):
        a = rec.action or {}
        start, end = (
            (times[0], times[1])
            if rec.action_type == "get_audio"
            else (
                float(a.get("start", times[0])),
                float(a.get("end", times[-1])),
            )
        )
        samples = media.audio(start, end)
        if samples is not None:
            view["wave"] = waveform_svg(samples, start, end)
            view["audio_src"], view["span"] = wav_data_url(samples), (start, end)
            view["wave_caption"] = f"{start:.2f}–{end:.2f} s ({end - start:.2f} s)"
        elif rec.action_type == "get_audio":
            view["times_only"] = f"audio {start:.2f}–{end:.2f} s"
            view["missing"] = media.note or "audio not readable"
    return view


# ------------------------------------------------------------------------------------------ public
def render_report(
    trajectory: Trajectory | str | os.PathLike[str],
    media_path: str | os.PathLike[str] | None = None,
    *,
    thumb_side: int = THUMB_SIDE,
    max_thumbs_per_turn: int = 32,
    evidence: list[list[float]] | None = None,
    limits: EnvLimits | None = None,
) -> str:
    """The report's HTML as a string (see :func:`write_report`)."""
    import jinja2

    traj = trajectory if isinstance(trajectory, Trajectory) else Trajectory.load_json(trajectory)
    path = str(media_path) if media_path is not None else traj.media
    media = _Media(path, thumb_side)
    try:
        turns = [_turn_view(rec, media, max_thumbs_per_turn) for rec in traj.turns]
        duration = media.src.info.duration if media.src is not None else None
    finally:
        media.close()
    duration = duration or (traj.meta.get("media_info") or {}).get("duration")
    evidence = evidence if evidence is not None else traj.meta.get("evidence")
    contexts, context_note = replay_contexts(traj, path, limits) if media.src is not None else ([], None)
    for view, context in zip(turns, contexts, strict=False):
        view["context"] = context
    if traj.stop_reason == "answered":
        answer_text, answer_class = json.dumps(traj.answer), "ok" if traj.reward > 0 else ""
    elif traj.stop_reason == "turn_budget":
        answer_text, answer_class = f"no answer within the turn budget ({traj.max_turns} turns)", "warn"
    else:
        answer_text, answer_class = f"none ({traj.stop_reason or 'unknown'})", "bad"
    if traj.stop_reason == "answered" and traj.meta.get("reward_available", True):
        reward_text = f"{traj.reward:.3f}"
    elif traj.stop_reason == "answered":
        reward_text = "not scored (free-form answers need a judge)"
    else:
        reward_text = "0 (no answer)"
    letters = [chr(ord("A") + i) for i in range(len(traj.choices or []))]
    env = jinja2.Environment(autoescape=True, trim_blocks=True, lstrip_blocks=True)
    return env.from_string(TEMPLATE).render(
        t=traj,
        css=CSS,
        turns=turns,
        choices=[f"{letter}. {c}" for letter, c in zip(letters, traj.choices or [], strict=True)],
        answer_text=answer_text,
        answer_class=answer_class,
        truth_text=json.dumps(traj.ground_truth),
        reward_text=reward_text,
        media_note=media.note,
        timeline=timeline_svg(traj.turns, duration, evidence),
        duration=duration,
        evidence=evidence,
        context_note=context_note,
    )


def write_report(
    trajectory: Trajectory | str | os.PathLike[str],
    path: str | os.PathLike[str],
    media_path: str | os.PathLike[str] | None = None,
    *,
    thumb_side: int = THUMB_SIDE,
    max_thumbs_per_turn: int = 32,
    evidence: list[list[float]] | None = None,
    limits: EnvLimits | None = None,
) -> Path:
    """Write a self-contained HTML report of ``trajectory`` (a :class:`Trajectory` or a JSON path).

    ``media_path`` defaults to the trajectory's own ``media``; when the file is missing or
    unreadable the page shows timestamps instead of thumbnails and waveforms. ``evidence``
    (``[[start, end], ...]``, default ``meta["evidence"]``) is drawn on the timeline; ``limits`` are
    the run's environment limits, used to rebuild each turn's context (default limits otherwise).
    """
    html = render_report(
        trajectory, media_path, thumb_side=thumb_side, max_thumbs_per_turn=max_thumbs_per_turn,
        evidence=evidence, limits=limits,
    )  # fmt: skip
    write_atomic(path, html)
    return Path(path)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m omniagent.report", description=__doc__.splitlines()[0])
    p.add_argument("trajectory", help="trajectory JSON written by omniagent.run")
    p.add_argument("out", help="HTML file to write")
    p.add_argument("--media", help="media file (default: the path recorded in the trajectory)")
    p.add_argument("--thumb-side", type=int, default=THUMB_SIDE)
    p.add_argument(
        "--evidence", help='evidence intervals as JSON, e.g. "[[12.0, 15.5]]" (shown on the timeline)'
    )
    p.add_argument(
        "--limits", default="{}", help="JSON EnvLimits of the run (to rebuild the contexts exactly)"
    )
    args = p.parse_args(argv)
    path = write_report(
        args.trajectory, args.out, args.media, thumb_side=args.thumb_side,
        evidence=json.loads(args.evidence) if args.evidence else None, limits=EnvLimits(**json.loads(args.limits)),
    )  # fmt: skip
    print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
