"""Single-frame caption batches, interleaved with agentic SFT so the agent learns to read its frames.

Why (measured on the tiny agent, README "The tiny agent"): trained on full-context turns alone, the
agent's Observation loss is the same with real and zeroed media (0.347 vs 0.350): one batch-1 step
on a ~1.6 K-token turn gives the vision pathway too weak a signal, and the agent writes plausible
observations from priors. A caption sample is one frame and one sentence: the environment's own
frame label and image, and the sentence the synthetic teacher writes for that frame
(:func:`omniagent.backends.synth_world.frame_sentences`). Sixteen of them cost ~0.1 s, so one caption
batch after every full-context step is cheap, and because the sentence is exactly the one the agent
writes inside its Observations, what it learns there is used in the full context.

Whole-percept captions (``percepts`` > 0) do the same for a served run of frames: the prompt is the
environment's percept as served (header, frame labels, images), the target the Observation the
teacher wrote of it. They train what single frames cannot: telling which of eight frames shows the
event, as the agent must in its Observations.

Captions need ground truth, so they come only from media built by ``python -m envs.synth`` (a
``.meta.json`` sidecar); rows of other media are skipped.
"""

from __future__ import annotations

import random
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from envs.actions import FormatError, parse_turn
from envs.messages import message_text
from envs.prompts import is_turn_notice
from omniagent.backends.synth_world import SynthWorld, WorldError, frame_sentences, parse_observation
from rl.sft.export import stub_messages, unpack_part
from rl.sft.step import collate


class WorldCache:
    """Each media file's synthetic world, loaded once (None for media without a sidecar)."""

    def __init__(self) -> None:
        self._worlds: dict[str, SynthWorld | None] = {}

    def __call__(self, media: str) -> SynthWorld | None:
        if media not in self._worlds:
            try:
                self._worlds[media] = SynthWorld.for_media(media)
            except WorldError:
                self._worlds[media] = None
        return self._worlds[media]


def two_turn_chat(prompt: list[dict[str, Any]], target: str) -> list[dict[str, Any]]:
    """A training chat of one user turn with ``prompt`` (content parts) and one assistant turn whose only
    text is ``target``."""
    return [
        {"role": "user", "content": prompt},
        {"role": "assistant", "content": [{"type": "text", "text": target}]},
    ]


def latest_percept(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The content parts of the last user message before the final (assistant) message of an exported
    row; empty when that message is plain text or the row is too short."""
    percept = messages[-2]["content"] if len(messages) >= 2 else ""
    return [] if isinstance(percept, str) else list(percept)


def percept_chats(rows: list[tuple[str, list[dict[str, Any]]]]) -> list[list[dict[str, Any]]]:
    """One chat per distinct served run of two or more frames (``get_frames``) in the rows' latest
    percepts: the percept's parts as served, without the turn notice, and the Observation the
    teacher wrote of it in that row, e.g. ``Frames 0.00s-20.00s (3): red background. Frame 30.00s:
    red background, the digit 7.`` (or one sentence per frame with ``per_frame``). Rows of media
    without a synthetic sidecar are skipped, as for single frames."""
    chats: list[list[dict[str, Any]]] = []
    seen: set[tuple[str, tuple[float, ...]]] = set()
    worlds = WorldCache()
    for media, messages in rows:
        parts = latest_percept(messages)
        times = tuple(
            float(p["timestamp"])
            for p in parts
            if p.get("type") == "image" and p.get("timestamp") is not None
        )
        if len(times) < 2 or (media, times) in seen or worlds(media) is None:
            continue
        observation = teacher_observation(messages[-1])
        if observation is None:
            continue
        seen.add((media, times))
        chats.append(two_turn_chat(without_turn_notice(parts), observation))
    return chats


def teacher_observation(turn: dict[str, Any]) -> str | None:
    """The Observation of an exported teacher turn (None when the environment's parser rejects it)."""
    parsed = parse_turn(message_text(turn))
    return None if isinstance(parsed, FormatError) else parsed.observation


def caption_chats(rows: list[tuple[str, list[dict[str, Any]]]]) -> list[list[dict[str, Any]]]:
    """One chat per distinct (media, time) frame of the rows' latest percepts.

    ``rows`` are ``(media_path, messages)`` of exported SFT rows; the frames are the image parts of
    the last user message, at the ``timestamp`` the environment attached to each. The prompt is the
    environment's frame label and the image; the target is the teacher's sentence for that one
    frame, e.g. ``Frame 24.40s: green background.``
    """
    chats: list[list[dict[str, Any]]] = []
    seen: set[tuple[str, float]] = set()
    worlds = WorldCache()
    for media, messages in rows:
        for part in latest_percept(messages):
            if part.get("type") != "image" or part.get("timestamp") is None:
                continue
            label = float(part["timestamp"])
            if (media, label) in seen:
                continue
            world = worlds(media)
            if world is None:
                break
            seen.add((media, label))
            chats.append(two_turn_chat(frame_prompt(label, part), frame_sentences(world, [label])[0]))
    return chats


VISUAL_EVENTS = ("shape", "digit", "word", "flash")


def without_turn_notice(parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A served percept's content parts without the environment's turn notice (what a caption prompt shows)."""
    return [p for p in parts if not (p.get("type") == "text" and is_turn_notice(p.get("text", "")))]


def greedy_caption(model: Any, processor: Any, prompt: list[dict[str, Any]], max_new_tokens: int) -> str:
    """The model's greedy reply to one user turn of ``prompt`` (content parts): a caption."""
    import torch

    from omniagent.backends.convert import build_model_inputs

    batch, _ = build_model_inputs(
        [{"role": "user", "content": prompt}], processor, add_generation_prompt=True
    )
    with torch.no_grad():
        out = model.generate(**batch, max_new_tokens=max_new_tokens, do_sample=False)
    return processor.tokenizer.decode(out[0, batch["input_ids"].shape[1] :], skip_special_tokens=True)


def frame_prompt(label: float, image_part: dict[str, Any]) -> list[dict[str, Any]]:
    """A single-frame caption's prompt: the environment's frame label, then the image (one source for
    the served-frame captions, the pool's, and the reading probe's held-out frames)."""
    return [{"type": "text", "text": f"Frame at {label:.2f}s:"}, image_part]


def decoded_frames(path: str | Path, times: list[float]) -> list[Any]:
    """The frame the environment's media reader serves at each of ``times`` (``DecodedFrame``s)."""
    from envs.media import open_media

    source = open_media(path)
    try:
        return [source.frames(t, t, 1)[0] for t in times]
    finally:
        source.close()


def event_times(
    world: SynthWorld,
    kinds: Sequence[str],
    per_event: int,
    rng: random.Random,
    random_every: int = 1,
    margin: float = 0.0,
) -> list[float]:
    """``per_event`` random times inside each event of ``kinds``, then one random time in the
    video (up to ``margin`` s before its end) per ``random_every`` of those (mostly background)."""
    events = [e for e in world.events if e["kind"] in kinds]
    times = [rng.uniform(e["start"], e["end"]) for e in events for _ in range(per_event)]
    return times + [rng.uniform(0.0, world.duration - margin) for _ in range(len(times) // random_every)]


def pool_chats(media_dir: str | Path, seed: int, per_event: int = 2) -> list[list[dict[str, Any]]]:
    """Caption chats from a folder of synthetic videos that no SFT row comes from: ``per_event``
    frames at random times inside every visual event, and as many frames at random times.

    Why: the frames the teacher served on the training set hold few distinct events (16 videos,
    28 digits), so captions of them are learnt by heart: on held-out frames the agent then names
    the right kind of event but a digit no better than chance (README, "Reading values").
    A pool of cheap extra videos (``python -m envs.synth``; about 0.3 s each) shows each glyph,
    colour and width many times. Frames are decoded through the environment's own media reader,
    so they look exactly like served frames. Seeded: the same chats for the same folder and seed.
    """
    rng = random.Random(seed)
    chats: list[list[dict[str, Any]]] = []
    for path in sorted(Path(media_dir).glob("*.mp4")):
        try:
            world = SynthWorld.for_media(path)
        except WorldError:
            continue
        times = event_times(world, VISUAL_EVENTS, per_event, rng)
        for frame in decoded_frames(path, times):
            label = round(frame.time, 2)
            prompt = frame_prompt(label, {"type": "image", "image": frame.image, "timestamp": label})
            chats.append(two_turn_chat(prompt, frame_sentences(world, [frame.time])[0]))
    if not chats:
        raise ValueError(
            f"caption pool {media_dir}: no synthetic video with a sidecar (python -m envs.synth)"
        )
    return chats


CACHE_ITEMS = 2048  # encoded captions kept in memory (a whole look's pixel values are a few MB)
ROW_KEY = "_sft_row"  # a caption's media part not yet decoded: the SFT row whose blobs hold it


def stub_rows(dataset: Any) -> list[tuple[str, list[dict[str, Any]]]]:
    """``(media_path, messages)`` of every SFT row with its media parts left packed and tagged with the row
    (:func:`rl.sft.export.stub_messages`): the caption chats are built from these and hold no pixels or samples,
    so their memory does not grow with the SFT data (decoded, 18,800 turns held 17 GB); :func:`decoded` restores
    a chat's media when it is encoded. Only the two columns are read (:meth:`rl.sft.rows.ParquetRows.column`)."""
    paths, messages = dataset.rows.column("media_path"), dataset.rows.column("messages")
    return [
        (str(p or ""), stub_messages(m, {ROW_KEY: i}))
        for i, (p, m) in enumerate(zip(paths, messages, strict=True))
    ]


def decoded(dataset: Any, chat: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``chat`` with every stub media part decoded from its row's blobs: the part :func:`rl.sft.export.row_messages`
    gives (parts without a stub, such as the pool's decoded frames, stay as they are)."""
    blobs: dict[int, list[bytes]] = {}

    def part(p: dict[str, Any]) -> dict[str, Any]:
        if ROW_KEY not in p:
            return p
        row = int(p[ROW_KEY])
        if row not in blobs:
            blobs[row] = dataset.row(row)["blobs"]
        return unpack_part({k: v for k, v in p.items() if k != ROW_KEY}, blobs[row])

    return [
        m if isinstance(m["content"], str) else {**m, "content": [part(p) for p in m["content"]]}
        for m in chat
    ]


class CaptionBatches:
    """Seeded caption batches for a run: ``batch(step)`` is a function of the seed and the step, so
    a resumed run trains on the batches an uninterrupted one would have. Each batch holds
    ``batch_size`` single frames and, with ``percepts`` > 0, that many whole served percepts.
    ``pool``: a folder of extra synthetic videos whose frames join the single frames
    (:func:`pool_chats`)."""

    def __init__(
        self,
        dataset: Any,
        batch_size: int,
        seed: int,
        event_share: float | None = None,
        percepts: int = 0,
        pool: str | Path | None = None,
    ) -> None:
        rows = stub_rows(dataset)
        self.chats = caption_chats(rows) + (pool_chats(pool, seed) if pool else [])
        self.whole = percept_chats(rows) if percepts > 0 else []
        if not self.chats or (percepts > 0 and not self.whole):
            raise ValueError(
                "omni_sft.local.captions: no frame of the SFT data has a synthetic-benchmark sidecar "
                "(captions need media built by `python -m envs.synth`); set captions.batch_size=0"
            )
        self.dataset = dataset
        self.pad_id = int(dataset.pad_id)
        self.batch_size, self.seed, self.percepts = batch_size, seed, percepts
        # About 1 served frame in 5 shows more than the background; without oversampling those, the
        # agent learns the background hues but not the events that questions ask about.
        self.event_share = event_share
        self.events = [i for i, chat in enumerate(self.chats) if _shows_event(chat)]
        self.plain = [i for i, chat in enumerate(self.chats) if not _shows_event(chat)]
        self.whole_events = [i for i, chat in enumerate(self.whole) if _shows_event(chat)]
        self.whole_plain = [i for i, chat in enumerate(self.whole) if not _shows_event(chat)]
        self._items: OrderedDict[tuple[str, int], dict[str, Any]] = OrderedDict()

    def encode(self, chat: list[dict[str, Any]]) -> dict[str, Any]:
        """One caption chat as a training item, its media decoded from the SFT rows (:func:`decoded`)."""
        return self.dataset.encode(decoded(self.dataset, chat))

    def _cached(self, key: tuple[str, int], make: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """An encoded caption, kept for reuse (encoding the images dominates a step); the least recently used is
        dropped beyond :data:`CACHE_ITEMS`, so a long run's memory stays bounded."""
        if key in self._items:
            self._items.move_to_end(key)
        else:
            self._items[key] = make()
            if len(self._items) > CACHE_ITEMS:
                self._items.popitem(last=False)
        return self._items[key]

    def _item(self, kind: str, index: int) -> dict[str, Any]:
        return self._cached(
            (kind, index), lambda: self.encode((self.chats if kind == "frame" else self.whole)[index])
        )

    def _pick(self, rng: random.Random, size: int, events: list[int], plain: list[int]) -> list[int]:
        if self.event_share is None or not events or not plain:
            return rng.sample(range(len(events) + len(plain)), min(size, len(events) + len(plain)))
        return [rng.choice(events if rng.random() < self.event_share else plain) for _ in range(size)]

    def picked(self, step: int) -> list[int]:
        """Indices into ``chats`` of ``step``'s batch (``event_share`` of them showing an event)."""
        return self._pick(
            random.Random(self.seed * 1_000_003 + step), self.batch_size, self.events, self.plain
        )

    def picked_percepts(self, step: int) -> list[int]:
        """Indices into ``whole`` of ``step``'s batch (its own stream: ``picked`` is the same with or
        without percepts)."""
        if not self.percepts:
            return []
        rng = random.Random(self.seed * 1_000_003 + step + 7_919 * 1_000_003)
        return self._pick(rng, self.percepts, self.whole_events, self.whole_plain)

    def batch(self, step: int) -> dict[str, Any]:
        items = [self._item("frame", i) for i in self.picked(step)]
        items += [self._item("percept", i) for i in self.picked_percepts(step)]
        return collate(items, self.pad_id)


def _shows_event(chat: list[dict[str, Any]]) -> bool:
    """Whether a caption names more than the background (``Frame 3.00s: red background, ...``)."""
    claims = parse_observation(chat[1]["content"][0]["text"])
    return any(item.kind != "background" for claim in claims for item in claim.items)


def sft_caption_batches(dataset: Any, seed: int, settings: dict[str, Any]) -> CaptionBatches | None:
    """The SFT loop's per-step hook (``omni_sft.local.extra_batches.caption`` in
    ``recipes/tiny_agent/conf/sft/exp/tiny_agent.yaml``): :class:`CaptionBatches` with
    ``omni_sft.local.captions``' settings; None (off) when its ``batch_size`` is 0."""
    size = int(settings.get("batch_size") or 0)
    if size <= 0:
        return None
    share = settings.get("event_share")
    return CaptionBatches(
        dataset,
        size,
        seed,
        None if share is None else float(share),
        int(settings.get("percepts") or 0),
        settings.get("pool") or None,
    )
