"""Caption batches in the compact language, interleaved with the testbed agent's SFT so it learns to read its media.

Why (measured, docs/experiments/taura-testbed.md, attempt 2): trained on full-context turns alone, the agent copied
the question's cue and the frames' times but wrote the same colours whatever the frames showed (0.323 on the
development set). The tiny agent's recipe met the same wall and taught reading with caption batches
(``recipes/tiny_agent/frame_captions.py``); these are its batches with compact targets:

- **single frames** of the served percepts and of the glyph pool's videos (half of them showing a digit): the
  frame label and image, captioned as the agent writes that frame (``34 yellow 9``);
- **whole served looks** of two or more frames: the percept as served, captioned with the teacher's Observation
  of it (``0-17 blue, 25 yellow, 34 yellow 9, ...``);
- **served audio**: the audio part as served, captioned with the teacher's Observation (``audio 30-38: 1000 Hz at
  34``).

Each batch is a function of the seed and the step, so a resumed SFT run trains on the batches an uninterrupted one
would have.
"""

from __future__ import annotations

import random
from collections import OrderedDict
from pathlib import Path
from typing import Any

from omniagent.backends.synth_compact import describe_compact, parse_compact
from omniagent.backends.synth_world import Percept, SynthWorld, WorldError
from recipes.tiny_agent.frame_captions import (
    CaptionBatches,
    WorldCache,
    decoded_frames,
    event_times,
    frame_prompt,
    latest_percept,
    percept_chats,
    stub_rows,
    teacher_observation,
    two_turn_chat,
    without_turn_notice,
)
from rl.sft.step import collate


def frame_chats(rows: list[tuple[str, list[dict[str, Any]]]]) -> list[list[dict[str, Any]]]:
    """One chat per distinct (media, time) frame of the rows' latest percepts, captioned compactly."""
    chats, seen, worlds = [], set(), WorldCache()
    for media, messages in rows:
        for part in latest_percept(messages):
            if part.get("type") != "image" or part.get("timestamp") is None:
                continue
            label, world = float(part["timestamp"]), worlds(media)
            if world is None:
                break
            if (media, label) not in seen:
                seen.add((media, label))
                chats.append(
                    two_turn_chat(
                        frame_prompt(label, part), describe_compact(world, Percept("frames", times=[label]))
                    )
                )
    return chats


def pool_chats(media_dir: str | Path, seed: int, per_event: int = 2) -> list[list[dict[str, Any]]]:
    """Frames of videos no SFT row comes from: ``per_event`` inside every digit, as many at random times."""
    rng, chats = random.Random(seed), []
    for path in sorted(Path(media_dir).glob("*.mp4")):
        try:
            world = SynthWorld.for_media(path)
        except WorldError:
            continue
        for frame in decoded_frames(path, event_times(world, ("digit",), per_event, rng)):
            label = round(frame.time, 2)
            prompt = frame_prompt(label, {"type": "image", "image": frame.image, "timestamp": label})
            chats.append(
                two_turn_chat(prompt, describe_compact(world, Percept("frames", times=[frame.time])))
            )
    return chats


def audio_chats(rows: list[tuple[str, list[dict[str, Any]]]]) -> list[list[dict[str, Any]]]:
    """One chat per distinct served audio span of the rows' latest percepts, with the teacher's Observation."""
    chats, seen = [], set()
    for media, messages in rows:
        parts = latest_percept(messages)
        spans = [(float(p["start"]), float(p["end"])) for p in parts if p.get("type") == "audio"]
        observation = teacher_observation(messages[-1])
        if (
            len(spans) != 1
            or (media, spans[0]) in seen
            or not observation
            or not observation.startswith("audio ")
        ):
            continue
        seen.add((media, spans[0]))
        chats.append(two_turn_chat(without_turn_notice(parts), observation))
    return chats


def shows_digit(chat: list[dict[str, Any]]) -> bool:
    claims = parse_compact(chat[1]["content"][0]["text"])
    return any(item.kind == "digit" for claim in claims for item in claim.items)


class CompactCaptions(CaptionBatches):
    """:class:`~recipes.tiny_agent.frame_captions.CaptionBatches` with compact targets and audio captions."""

    def __init__(self, dataset: Any, settings: dict[str, Any], seed: int) -> None:  # noqa: D107
        rows = stub_rows(dataset)
        pool = settings.get("pool")
        self.chats = frame_chats(rows) + (pool_chats(pool, seed) if pool else [])
        self.whole = percept_chats(rows)
        self.sounds = audio_chats(rows)
        if not self.chats or not self.whole:
            raise ValueError("testbed captions: no frame of the SFT data has a synthetic sidecar")
        self.dataset, self.pad_id = dataset, int(dataset.pad_id)
        self.batch_size, self.seed = int(settings["batch_size"]), seed
        self.percepts, self.audio = int(settings.get("percepts") or 0), int(settings.get("audio") or 0)
        share = settings.get("event_share")
        self.event_share = None if share is None else float(share)
        self.events = [i for i, c in enumerate(self.chats) if shows_digit(c)]
        self.plain = [i for i, c in enumerate(self.chats) if not shows_digit(c)]
        self.whole_events = [i for i, c in enumerate(self.whole) if shows_digit(c)]
        self.whole_plain = [i for i, c in enumerate(self.whole) if not shows_digit(c)]
        self._items: OrderedDict[tuple[str, int], dict[str, Any]] = OrderedDict()

    def _item(self, kind: str, index: int) -> dict[str, Any]:
        if kind != "audio":
            return super()._item(kind, index)
        return self._cached((kind, index), lambda: self.encode(self.sounds[index]))

    def batch(self, step: int) -> dict[str, Any]:
        items = [self._item("frame", i) for i in self.picked(step)]
        items += [self._item("percept", i) for i in self.picked_percepts(step)]
        if self.audio and self.sounds:
            rng = random.Random(self.seed * 1_000_003 + step + 15_485_863)
            items += [self._item("audio", rng.randrange(len(self.sounds))) for _ in range(self.audio)]
        return collate(items, self.pad_id)


def testbed_caption_batches(dataset: Any, seed: int, settings: dict[str, Any]) -> CompactCaptions | None:
    """The SFT loop's per-step hook (``omni_sft.local.extra_batches.caption`` of conf/sft/exp/testbed.yaml)."""
    return CompactCaptions(dataset, settings, seed) if int(settings.get("batch_size") or 0) > 0 else None
