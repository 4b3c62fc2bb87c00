"""Shards of a batch: which part of the tasks one process runs, and the record its folder keeps of it.

Why: a benchmark of thousands of questions is run by many processes (one per GPU, on several machines),
each on its own part, and the parts are merged afterwards (:mod:`omniagent.eval.merge`). The rules:

- **By task id.** A task belongs to shard ``hash(id) mod N`` (the first 64 bits of its SHA-256): the
  same id always lands in the same shard, whatever the order of the tasks, which other tasks exist,
  or how often a shard was resumed. Shards are disjoint and together hold every task.
- **Spec.** ``shard=I/N`` (``0 <= I < N``) names one shard; ``shard=auto`` reads the rank and world
  size that the launcher set (:func:`shard_from_launcher`): ``RANK``/``WORLD_SIZE`` (torchrun and
  ``accelerate launch``), ``SLURM_PROCID``/``SLURM_NTASKS`` (``srun``), ``OMPI_COMM_WORLD_RANK``/
  ``OMPI_COMM_WORLD_SIZE`` (``mpirun``), else ``LOCAL_RANK``/``LOCAL_WORLD_SIZE``; without any of them
  the process is the only shard (``0/1``).
- **Manifest.** Each shard's folder holds ``shard.json`` (:func:`write_manifest`): its index and count,
  how many tasks it was given, a digest of the whole task list and of the run's settings, and any
  caller facts that must agree between shards (e.g. the summary's bootstrap settings). A merge compares
  these before it reads a row.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from envs.jsonl import write_atomic

__all__ = [
    "MANIFEST",
    "Shard",
    "ShardSpecError",
    "keys_digest",
    "read_manifest",
    "shard_from_launcher",
    "shard_of",
    "write_manifest",
]

MANIFEST = "shard.json"
T = TypeVar("T")

# (rank variable, world-size variable, launcher), in the order they are tried
LAUNCHER_VARS = (
    ("RANK", "WORLD_SIZE", "torchrun / accelerate"),
    ("SLURM_PROCID", "SLURM_NTASKS", "SLURM"),
    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "Open MPI"),
    ("LOCAL_RANK", "LOCAL_WORLD_SIZE", "a local launcher"),
)


class ShardSpecError(ValueError):
    """A shard spec or launcher variable that does not name a shard."""


def shard_of(key: str, count: int) -> int:
    """The shard (0-based) that the task id ``key`` belongs to among ``count``."""
    return int.from_bytes(hashlib.sha256(str(key).encode()).digest()[:8], "big") % count


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` of ``count`` (0-based); ``source`` says where the numbers came from."""

    index: int
    count: int
    source: str = "shard=I/N"

    def __post_init__(self) -> None:
        if self.count < 1 or not 0 <= self.index < self.count:
            raise ShardSpecError(f"shard {self.index}/{self.count} does not exist (need 0 <= I < N)")

    @property
    def name(self) -> str:
        """The shard's folder name, ``shard-I-of-N``."""
        return f"shard-{self.index}-of-{self.count}"

    def holds(self, key: str) -> bool:
        return shard_of(key, self.count) == self.index

    def select(self, items: Iterable[T], key: Callable[[T], str]) -> list[T]:
        """The items of this shard, in their given order."""
        return [item for item in items if self.holds(key(item))]

    @classmethod
    def parse(cls, spec: Any, environ: Mapping[str, str] | None = None) -> Shard | None:
        """``None``/``""`` -> None (no sharding); ``"I/N"`` -> that shard; ``"auto"`` -> the launcher's."""
        if spec is None or str(spec).strip() in ("", "none", "null"):
            return None
        text = str(spec).strip()
        if text == "auto":
            return shard_from_launcher(os.environ if environ is None else environ)
        index, sep, count = text.partition("/")
        try:
            if not sep:
                raise ValueError
            return cls(int(index), int(count))
        except ValueError:
            raise ShardSpecError(
                f"shard={text!r}: write I/N with 0 <= I < N (e.g. shard=0/4), or auto"
            ) from None


def shard_from_launcher(environ: Mapping[str, str]) -> Shard:
    """The shard of this process from the launcher's rank and world size (see the module docstring)."""
    for rank_var, size_var, launcher in LAUNCHER_VARS:
        rank, size = environ.get(rank_var), environ.get(size_var)
        if rank is None or size is None:
            continue
        try:
            return Shard(int(rank), int(size), source=f"{rank_var}/{size_var} ({launcher})")
        except ValueError:
            raise ShardSpecError(
                f"shard=auto: {rank_var}={rank!r} and {size_var}={size!r} do not name a shard"
            ) from None
    return Shard(0, 1, source="no launcher variables: the only shard")


def keys_digest(keys: Iterable[str]) -> str:
    """A digest of a set of task ids (order-free): shards of one run were given the same list."""
    h = hashlib.sha256()
    for key in sorted(set(keys)):
        h.update(key.encode() + b"\n")
    return h.hexdigest()[:16]


def write_manifest(
    folder: str | os.PathLike[str],
    shard: Shard,
    *,
    expected: int,
    all_keys: Iterable[str],
    settings: str,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Write ``folder/shard.json``; refuse a folder that holds another shard's manifest."""
    path = Path(folder) / MANIFEST
    keys = list(all_keys)
    manifest = {
        "index": shard.index,
        "count": shard.count,
        "source": shard.source,
        "expected": expected,
        "total": len(set(keys)),
        "keys_digest": keys_digest(keys),
        "settings": settings,
        "extra": dict(extra or {}),
    }
    old = read_manifest(folder)
    if old is not None and (old["index"], old["count"]) != (shard.index, shard.count):
        raise ShardSpecError(
            f"{folder} holds shard {old['index']}/{old['count']}, not {shard.index}/{shard.count}: "
            "give each shard its own folder"
        )
    write_atomic(path, json.dumps(manifest, indent=1, default=str))
    return manifest


def read_manifest(folder: str | os.PathLike[str]) -> dict[str, Any] | None:
    """``folder/shard.json``, or None when the folder is not a shard."""
    path = Path(folder) / MANIFEST
    if not path.is_file():
        return None
    return json.loads(path.read_text())
