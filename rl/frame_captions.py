"""Single-frame caption batches, interleaved with agentic SFT so the agent learns to read its frames.

Why (measured on the tiny agent, README "The tiny agent"): trained on full-context turns alone, the
agent's Observation loss is the same with real and zeroed media (0.347 vs 0.350): one batch-1 step
on a ~1.6 K-token turn gives the vision pathway too weak a signal, and the agent writes plausible
observations from priors. A caption sample is one frame and one sentence: the environment's own
frame label and image, and the sentence the synthetic teacher writes for that frame
(:func:`omniagent.backends.synth_world.frame_sentences`). Sixteen of them cost ~0.1 s, so one caption
batch after every full-context step is cheap, and because the sentence is exactly the one the agent
writes inside its Observations, what it learns there is used in the full context.

Captions need ground truth, so they come only from media built by ``python -m envs.synth`` (a
``.meta.json`` sidecar); rows of other media are skipped.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from omniagent.backends.synth_world import SynthWorld, WorldError, frame_sentences, parse_observation
from rl.sft_step import collate


def caption_chats(rows: list[tuple[str, list[dict[str, Any]]]]) -> list[list[dict[str, Any]]]:
    """One chat per distinct (media, time) frame of the rows' latest percepts.

    ``rows`` are ``(media_path, messages)`` of exported SFT rows; the frames are the image parts of
    the last user message, at the ``timestamp`` the environment attached to each. The prompt is the
    environment's frame label and the image; the target is the teacher's sentence for that one
    frame, e.g. ``Frame 24.40s: green background.``
    """
    chats: list[list[dict[str, Any]]] = []
    seen: set[tuple[str, float]] = set()
    worlds: dict[str, SynthWorld | None] = {}
    for media, messages in rows:
        percept = messages[-2]["content"] if len(messages) >= 2 else ""
        if isinstance(percept, str):
            continue
        for part in percept:
            if part.get("type") != "image" or part.get("timestamp") is None:
                continue
            label = float(part["timestamp"])
            if (media, label) in seen:
                continue
            if media not in worlds:
                try:
                    worlds[media] = SynthWorld.for_media(media)
                except WorldError:
                    worlds[media] = None
            world = worlds[media]
            if world is None:
                break
            seen.add((media, label))
            prompt = [{"type": "text", "text": f"Frame at {label:.2f}s:"}, part]
            target = [{"type": "text", "text": frame_sentences(world, [label])[0]}]
            chats.append([{"role": "user", "content": prompt}, {"role": "assistant", "content": target}])
    return chats


class CaptionBatches:
    """Seeded caption batches for a run: ``batch(step)`` is a function of the seed and the step, so
    a resumed run trains on the batches an uninterrupted one would have."""

    def __init__(self, dataset: Any, batch_size: int, seed: int, event_share: float | None = None) -> None:
        rows = [
            (str(dataset.row(i).get("media_path") or ""), dataset.messages(i)) for i in range(len(dataset))
        ]
        self.chats = caption_chats(rows)
        if not self.chats:
            raise ValueError(
                "omni_sft.local.captions: no frame of the SFT data has a synthetic-benchmark sidecar "
                "(captions need media built by `python -m envs.synth`); set captions.batch_size=0"
            )
        self.encode: Callable[[list[dict[str, Any]]], dict[str, Any]] = dataset.encode
        self.pad_id = int(dataset.pad_id)
        self.batch_size, self.seed = batch_size, seed
        # About 1 served frame in 5 shows more than the background; without oversampling those, the
        # agent learns the background hues but not the events that questions ask about.
        self.event_share = event_share
        self.events = [i for i, chat in enumerate(self.chats) if _shows_event(chat)]
        self.plain = [i for i, chat in enumerate(self.chats) if not _shows_event(chat)]
        self._items: dict[int, dict[str, Any]] = {}

    def _item(self, index: int) -> dict[str, Any]:
        if index not in self._items:  # encode each caption once: image decoding dominates a step
            self._items[index] = self.encode(self.chats[index])
        return self._items[index]

    def picked(self, step: int) -> list[int]:
        """Indices into ``chats`` of ``step``'s batch (``event_share`` of them showing an event)."""
        rng = random.Random(self.seed * 1_000_003 + step)
        if self.event_share is None or not self.events or not self.plain:
            return rng.sample(range(len(self.chats)), min(self.batch_size, len(self.chats)))
        return [
            rng.choice(self.events if rng.random() < self.event_share else self.plain)
            for _ in range(self.batch_size)
        ]

    def batch(self, step: int) -> dict[str, Any]:
        return collate([self._item(i) for i in self.picked(step)], self.pad_id)


def _shows_event(chat: list[dict[str, Any]]) -> bool:
    """Whether a caption names more than the background (``Frame 3.00s: red background, ...``)."""
    claims = parse_observation(chat[1]["content"][0]["text"])
    return any(item.kind != "background" for claim in claims for item in claim.items)
