"""Per-turn SFT samples from kept teacher trajectories, stored as parquet with media inline.

Each turn of a trajectory is its own sample: the context exactly as the environment presented it at
that turn (system prompt, question, earlier percepts already purged into text stubs, the latest
percept as real media) and the assistant's raw output for that turn as the only target.

Contexts are not stored by the synthesis run; they are reproduced here by replaying the trajectory's
raw texts through a fresh :class:`~envs.env.OmniVideoEnv` (deterministic: same media, same limits,
same budget) and capturing the observation before each step (:func:`replay_contexts`). The replay
checks that every turn gets the same error code as in the recorded trajectory.

Parquet schema (one row per turn; :data:`SCHEMA`):

- ``id`` (``{trajectory id}/t{turn}``), ``trajectory_id``, ``task_id``, ``turn``, ``num_turns``,
  ``task_type``, ``media_path``: bookkeeping;
- ``messages``: JSON text of the chat (context + the target assistant message last), media parts
  replaced by references into ``blobs``; a thinking teacher's target also has ``"thinking"`` (its
  reasoning block, which the environment never parsed; :mod:`rl.sft.dataset` renders it in the family's
  format):

  - image: ``{"type": "image", "blob": i, "timestamp": t}`` (PNG)
  - audio: ``{"type": "audio", "blob": i, "sampling_rate": 16000, "start", "end"}`` (float32 WAV)
  - video: ``{"type": "video", "frame_blobs": [i, ...], "audio_blob": j | null, "timestamps",
    "fps", "sampling_rate", "start", "end"}`` (PNG frames, float32 WAV sound)

- ``blobs``: list of binary blobs (PNG / WAV bytes). PNG and float WAV are lossless, so a decoded
  sample equals the live environment's observation array for array.

CLI: ``python -m rl.sft.export --kept out/kept.jsonl --out data/sft_train.parquet``.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from envs.env import OmniVideoEnv
from envs.limits import EnvLimits
from envs.messages import SAMPLE_RATE, Message, text_part
from omniagent.trajectory import Trajectory, load_trajectories


class ReplayMismatch(RuntimeError):
    """Replaying a trajectory through a fresh environment did not reproduce it."""


# --------------------------------------------------------------------------------------------------
# Replay
# --------------------------------------------------------------------------------------------------


def env_limits_of(traj: Trajectory, override: EnvLimits | dict[str, Any] | None = None) -> EnvLimits:
    if isinstance(override, EnvLimits):
        return override
    return EnvLimits(**{**(traj.meta.get("env_limits") or {}), **(override or {})})


def replay_contexts(
    traj: Trajectory,
    limits: EnvLimits | dict[str, Any] | None = None,
    env: OmniVideoEnv | None = None,
) -> list[tuple[list[Message], str]]:
    """``[(context before turn k, raw text of turn k), ...]`` reproduced through a fresh environment."""
    own = env is None
    env = env or OmniVideoEnv(limits=env_limits_of(traj, limits))
    try:
        obs, _ = env.reset(options=traj.env_options())
        out: list[tuple[list[Message], str]] = []
        for rec in traj.turns:
            out.append((obs, rec.raw_text))
            obs, _, terminated, truncated, info = env.step(rec.raw_text)
            if info["error"] != rec.error:
                raise ReplayMismatch(
                    f"{traj.id} turn {rec.turn}: replay gave error {info['error']!r}, recorded {rec.error!r}"
                )
            if (terminated or truncated) and rec is not traj.turns[-1]:
                raise ReplayMismatch(f"{traj.id}: the replay ended at turn {rec.turn} of {len(traj.turns)}")
        return out
    finally:
        if own:
            env.close()


# --------------------------------------------------------------------------------------------------
# Media <-> bytes
# --------------------------------------------------------------------------------------------------


def encode_png(image: np.ndarray) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(image, dtype=np.uint8)).save(buf, format="PNG", compress_level=1)
    return buf.getvalue()


def decode_png(data: bytes) -> np.ndarray:
    from PIL import Image

    with Image.open(io.BytesIO(data)) as img:
        return np.asarray(img.convert("RGB"), dtype=np.uint8)


def encode_wav(samples: np.ndarray, sampling_rate: int = SAMPLE_RATE) -> bytes:
    """Float32 WAV: lossless for the environment's float32 samples."""
    import soundfile as sf

    buf = io.BytesIO()
    sf.write(
        buf,
        np.asarray(samples, dtype=np.float32).reshape(-1),
        int(sampling_rate),
        format="WAV",
        subtype="FLOAT",
    )
    return buf.getvalue()


def decode_wav(data: bytes) -> tuple[np.ndarray, int]:
    import soundfile as sf

    samples, sr = sf.read(io.BytesIO(data), dtype="float32", always_2d=False)
    return np.asarray(samples, dtype=np.float32), int(sr)


def _reasoning(message: Any) -> dict[str, str]:
    """``{"thinking": ...}`` of an assistant message that carries a reasoning block, else nothing."""
    return {"thinking": message["thinking"]} if message.get("thinking") else {}


def pack_messages(messages: list[Message]) -> tuple[list[dict[str, Any]], list[bytes]]:
    """Messages with media replaced by blob references, and the blobs."""
    blobs: list[bytes] = []

    def add(data: bytes) -> int:
        blobs.append(data)
        return len(blobs) - 1

    packed = []
    for m in messages:
        parts = []
        for p in m["content"]:
            kind = p["type"]
            if kind == "text":
                parts.append({"type": "text", "text": p["text"]})
            elif kind == "image":
                parts.append(
                    {"type": "image", "blob": add(encode_png(p["image"])), "timestamp": p.get("timestamp")}
                )
            elif kind == "audio":
                parts.append(
                    {
                        "type": "audio",
                        "blob": add(encode_wav(p["audio"], p.get("sampling_rate", SAMPLE_RATE))),
                        "sampling_rate": int(p.get("sampling_rate", SAMPLE_RATE)),
                        "start": p.get("start"),
                        "end": p.get("end"),
                    }
                )
            elif kind == "video":
                frames = [add(encode_png(f)) for f in np.asarray(p["video"])]
                audio = p.get("audio")
                parts.append(
                    {
                        "type": "video",
                        "frame_blobs": frames,
                        "audio_blob": None
                        if audio is None
                        else add(encode_wav(audio, p.get("sampling_rate", SAMPLE_RATE))),
                        "timestamps": [float(t) for t in p.get("timestamps") or []],
                        "fps": p.get("fps"),
                        "sampling_rate": int(p.get("sampling_rate", SAMPLE_RATE)),
                        "start": p.get("start"),
                        "end": p.get("end"),
                    }
                )
            else:
                raise ValueError(f"unknown content part type {kind!r}")
        packed.append({"role": m["role"], "content": parts, **_reasoning(m)})
    return packed, blobs


def unpack_part(p: dict[str, Any], blobs: list[bytes]) -> dict[str, Any]:
    """One packed content part in the environment's message format, its media decoded from ``blobs``."""
    kind = p["type"]
    if kind == "text":
        return text_part(p["text"])
    if kind == "image":
        return {"type": "image", "image": decode_png(blobs[p["blob"]]), "timestamp": p.get("timestamp")}
    if kind == "audio":
        samples, sr = decode_wav(blobs[p["blob"]])
        return {
            "type": "audio",
            "audio": samples,
            "sampling_rate": sr,
            "start": p.get("start"),
            "end": p.get("end"),
        }
    if kind == "video":
        audio = None if p.get("audio_blob") is None else decode_wav(blobs[p["audio_blob"]])[0]
        return {
            "type": "video",
            "video": np.stack([decode_png(blobs[i]) for i in p["frame_blobs"]]),
            "timestamps": list(p.get("timestamps") or []),
            "fps": p.get("fps"),
            "audio": audio,
            "sampling_rate": p.get("sampling_rate", SAMPLE_RATE),
            "start": p.get("start"),
            "end": p.get("end"),
        }
    raise ValueError(f"unknown content part type {kind!r}")


def unpack_messages(packed: list[dict[str, Any]] | str, blobs: list[bytes]) -> list[Message]:
    """Inverse of :func:`pack_messages`: the environment's message format with numpy media."""
    if isinstance(packed, str):
        packed = json.loads(packed)
    return [
        {"role": m["role"], "content": [unpack_part(p, blobs) for p in m["content"]], **_reasoning(m)}  # type: ignore[typeddict-item]
        for m in packed
    ]


def stub_messages(packed: list[dict[str, Any]] | str, tag: dict[str, Any]) -> list[dict[str, Any]]:
    """:func:`unpack_messages` without decoding: text parts as they unpack, each media part left packed (its type,
    times and blob indices) with ``tag``'s keys added, so that a caller can hold many rows' chats in little memory
    and decode a part later with :func:`unpack_part` (after removing ``tag``'s keys)."""
    if isinstance(packed, str):
        packed = json.loads(packed)
    return [
        {
            "role": m["role"],
            "content": [text_part(p["text"]) if p["type"] == "text" else {**p, **tag} for p in m["content"]],
            **_reasoning(m),
        }
        for m in packed
    ]


# --------------------------------------------------------------------------------------------------
# Rows and parquet
# --------------------------------------------------------------------------------------------------


def _schema() -> Any:
    import pyarrow as pa

    return pa.schema(
        [
            ("id", pa.string()),
            ("trajectory_id", pa.string()),
            ("task_id", pa.string()),
            ("turn", pa.int32()),
            ("num_turns", pa.int32()),
            ("task_type", pa.string()),
            ("media_path", pa.string()),
            ("messages", pa.string()),
            ("blobs", pa.list_(pa.large_binary())),
        ]
    )


def trajectory_rows(
    traj: Trajectory, limits: EnvLimits | dict[str, Any] | None = None
) -> Iterator[dict[str, Any]]:
    """One parquet row per turn of ``traj`` (replayed through a fresh environment), except a teacher's
    scripted mistakes: they stay in later turns' contexts, where the recovery is the target."""
    for k, (context, target) in enumerate(replay_contexts(traj, limits), start=1):
        if traj.turns[k - 1].scripted_error:
            continue
        target_message: dict[str, Any] = {"role": "assistant", "content": [text_part(target)]}
        target_message.update(_reasoning({"thinking": traj.turns[k - 1].thinking}))
        chat = [*context, target_message]
        packed, blobs = pack_messages(chat)
        yield {
            "id": f"{traj.id}/t{k}",
            "trajectory_id": traj.id,
            "task_id": str(traj.meta.get("task_id", traj.id)),
            "turn": k,
            "num_turns": len(traj.turns),
            "task_type": traj.task_type,
            "media_path": traj.media,
            "messages": json.dumps(packed, ensure_ascii=False),
            "blobs": blobs,
        }


def export_parquet(
    trajectories: Iterable[Trajectory],
    out_path: str | Path,
    limits: EnvLimits | dict[str, Any] | None = None,
    row_group_size: int = 64,
) -> int:
    """Write every turn of every trajectory as a row of ``out_path``; returns the number of rows.

    Rows are streamed in row groups, so memory holds at most ``row_group_size`` samples' media.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_path.with_name(f".{out_path.name}.tmp")
    schema = _schema()
    n = 0
    buffer: list[dict[str, Any]] = []
    with pq.ParquetWriter(tmp, schema) as writer:
        for traj in trajectories:
            for row in trajectory_rows(traj, limits):
                buffer.append(row)
                if len(buffer) >= row_group_size:
                    writer.write_table(pa.Table.from_pylist(buffer, schema=schema))
                    n += len(buffer)
                    buffer = []
        if buffer:
            writer.write_table(pa.Table.from_pylist(buffer, schema=schema))
            n += len(buffer)
    tmp.replace(out_path)
    return n


def read_rows(paths: str | Path | list[str | Path], columns: list[str] | None = None) -> list[dict[str, Any]]:
    """All rows of one or more parquet files as dicts (blobs as ``bytes``)."""
    import pyarrow.parquet as pq

    if isinstance(paths, str | Path):
        paths = [paths]
    rows: list[dict[str, Any]] = []
    for p in paths:
        rows.extend(pq.read_table(str(p), columns=columns).to_pylist())
    return rows


def row_messages(row: dict[str, Any]) -> list[Message]:
    """The chat of a row (context + target assistant message) with media decoded."""
    return unpack_messages(row["messages"], row["blobs"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rl.sft.export", description=__doc__.split("\n\n")[0])
    parser.add_argument("--kept", required=True, nargs="+", help="kept.jsonl file(s) from rl/synthesize.py")
    parser.add_argument("--out", required=True, help="output parquet file")
    parser.add_argument("--row-group-size", type=int, default=64)
    args = parser.parse_args(argv)
    trajs = [t for path in args.kept for t in load_trajectories(path)]
    n = export_parquet(trajs, args.out, row_group_size=args.row_group_size)
    print(f"{n} samples from {len(trajs)} trajectories -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
