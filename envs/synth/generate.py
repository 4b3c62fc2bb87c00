"""Building media files and their tasks, cached by a hash of the config, one file or a benchmark."""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from envs.jsonl import write_atomic
from envs.synth.config import GENERATOR_VERSION, SynthConfig
from envs.synth.encode import video_encoder, write_media
from envs.synth.levels import build_timeline, make_tasks
from envs.synth.speech import package_speech_backend
from envs.synth.timeline import Timeline
from envs.tasks import Task, load_tasks_jsonl, save_tasks_jsonl


def config_hash(cfg: SynthConfig) -> str:
    """A short hash of everything that decides the media bytes and the tasks."""
    payload = {
        "version": GENERATOR_VERSION,
        "config": cfg.model_dump(mode="json"),
        "speech_backend": package_speech_backend(cfg),
        "video_encoder": video_encoder(cfg) if cfg.mode == "video" else None,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]


@dataclass
class SynthResult:
    media: Path
    tasks: list[Task]
    config_hash: str
    cached: bool
    timeline: Timeline | None = None  # None when the files were reused from the cache
    seconds: float = 0.0


def _meta_path(media: Path) -> Path:
    return media.with_name(media.name + ".meta.json")


def synthesize(
    cfg: SynthConfig,
    media_path: str | os.PathLike[str],
    id_prefix: str | None = None,
    split: str = "test",
    force: bool = False,
) -> SynthResult:
    """Write one media file and its tasks (reusing them when a sidecar with the same hash exists).

    The sidecar ``<media>.meta.json`` holds the config, its hash, the timeline and the tasks; tasks
    in it name the media by file name, and the returned tasks carry the absolute media path.
    """
    t0 = time.perf_counter()
    media = Path(media_path).resolve()
    digest = config_hash(cfg)
    prefix = id_prefix or f"synth-{digest[:8]}"
    meta_path = _meta_path(media)
    if not force and media.exists() and meta_path.exists():
        try:
            meta = json.loads(meta_path.read_text())
        except (OSError, json.JSONDecodeError):
            meta = {}
        if (
            meta.get("config_hash") == digest
            and meta.get("id_prefix") == prefix
            and meta.get("split") == split
        ):
            tasks = [Task.model_validate(t | {"media": str(media)}) for t in meta["tasks"]]
            return SynthResult(media, tasks, digest, True, None, time.perf_counter() - t0)
    timeline = build_timeline(cfg)
    write_media(timeline, media)
    tasks = make_tasks(timeline, str(media), prefix, split=split, config_hash=digest)
    meta = {
        "generator": GENERATOR_VERSION,
        "config_hash": digest,
        "id_prefix": prefix,
        "split": split,
        "config": cfg.model_dump(mode="json"),
        "timeline": timeline.to_dict(),
        "tasks": [t.model_dump(mode="json") | {"media": media.name} for t in tasks],
    }
    write_atomic(meta_path, json.dumps(meta, indent=1))
    return SynthResult(media, tasks, digest, False, timeline, time.perf_counter() - t0)


def video_seed(seed: int, index: int) -> int:
    """The seed of the ``index``-th file of a benchmark built from ``seed``."""
    return int(np.random.SeedSequence([seed & 0xFFFFFFFF, index]).generate_state(1, dtype=np.uint32)[0])


def generate_benchmark(
    out_dir: str | os.PathLike[str],
    seed: int = 0,
    n_videos: int = 4,
    durations: list[float] | tuple[float, ...] = (60.0, 600.0),
    *,
    mode: Literal["video", "audio"] = "video",
    config: SynthConfig | dict[str, Any] | None = None,
    split: str = "test",
    force: bool = False,
    tasks_file: str = "tasks.jsonl",
    verbose: bool = False,
    progress: bool = False,
) -> list[Task]:
    """Write ``n_videos`` media files and ``out_dir/tasks_file``; return the tasks (absolute media paths).

    File ``i`` lasts ``durations[i % len(durations)]`` seconds and uses seed ``video_seed(seed, i)``;
    ``config`` supplies every other setting. Files whose sidecar hash matches are not rebuilt.
    ``progress`` shows a tqdm bar in seconds of media (a first run builds minutes of it).
    """
    if n_videos < 1 or not durations:
        raise ValueError("need n_videos >= 1 and at least one duration")
    out = Path(out_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    base = config.model_dump() if isinstance(config, SynthConfig) else dict(config or {})
    tasks: list[Task] = []
    from tqdm import tqdm

    total = sum(float(durations[i % len(durations)]) for i in range(n_videos))
    bar = tqdm(total=total, unit="s media", desc=f"synthetic media in {out}", disable=not progress)
    for i in range(n_videos):
        dur = float(durations[i % len(durations)])
        cfg = SynthConfig.model_validate(base | {"seed": video_seed(seed, i), "duration": dur, "mode": mode})
        kind = "search" if cfg.level == "search" else mode  # the level's files and task ids name it
        stem = f"synth_{kind}_s{seed}_{i:03d}_{int(round(dur))}s"
        result = synthesize(cfg, out / f"{stem}.{cfg.extension}", id_prefix=stem, split=split, force=force)
        if verbose:
            state = "cached" if result.cached else "built"
            print(
                f"{result.media.name}: {state} in {result.seconds:.1f} s, {len(result.tasks)} tasks",
                flush=True,
            )
        tasks.extend(result.tasks)
        bar.update(dur)
    bar.close()
    relative = [t.model_copy(update={"media": os.path.relpath(t.media, out)}) for t in tasks]
    target = out / tasks_file
    if not target.exists() or [t.model_dump() for t in load_tasks_jsonl(target, resolve_media=False)] != [
        t.model_dump() for t in relative
    ]:
        save_tasks_jsonl(relative, target)
    return tasks
