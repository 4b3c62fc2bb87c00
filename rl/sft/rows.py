"""``ParquetRows``: the rows of SFT parquet files, read one row group at a time, so memory stays flat as the data grows.

``pyarrow.parquet.read_table`` decompresses every column of every row into memory, media blobs included: 6.4 GB for
18,800 turns of the testbed's SFT data, held by each SFT process for the whole run. A ``ParquetRows`` keeps only the
files' metadata. A row is read with its row group (:func:`rl.sft.export.export_parquet` writes groups of 64 rows),
and the last ``cache_groups`` groups read stay decoded, so a pass in file order decodes each group once and a
shuffled pass decodes at most one group per row. One column alone (``column``) is read without the others.

Contract:

- rows are numbered over the files in order; ``select`` keeps a subset in the order given (``max_samples``);
- ``row(i)`` is the same dict ``read_table(...).slice(i, 1).to_pylist()[0]`` gives; an index out of range is an
  ``IndexError``;
- the object pickles without its open files (a ``DataLoader`` worker reopens them).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

CACHE_GROUPS = 2  # decoded row groups kept (each holds row_group_size rows with their media)


class ParquetRows:
    """The rows of ``paths`` (one parquet file or several, in order), read on demand (see the module docs)."""

    def __init__(self, paths: str | Path | Sequence[str | Path], cache_groups: int = CACHE_GROUPS) -> None:
        import pyarrow.parquet as pq

        if isinstance(paths, str | Path):
            paths = [paths]
        self.paths = [str(p) for p in paths]
        if not self.paths:
            raise ValueError("no parquet files given")
        if cache_groups < 1:
            raise ValueError(f"cache_groups={cache_groups} must be >= 1")
        self.cache_groups = int(cache_groups)
        self.groups: list[tuple[int, int]] = []  # (file, row group) in row order
        sizes = []
        for f, path in enumerate(self.paths):
            meta = pq.read_metadata(path)  # the footer only; no file handle kept
            for g in range(meta.num_row_groups):
                self.groups.append((f, g))
                sizes.append(meta.row_group(g).num_rows)
        self.starts = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)])
        self.index = np.arange(int(self.starts[-1]), dtype=np.int64)
        self._files: dict[int, Any] = {}
        self._cache: OrderedDict[int, Any] = OrderedDict()

    def __len__(self) -> int:
        return len(self.index)

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_files": {}, "_cache": OrderedDict()}

    def select(self, indices: Sequence[int] | np.ndarray) -> ParquetRows:
        """A view of the rows at ``indices`` (positions in this view), in that order; it opens the files itself when
        it first reads a row and starts with no decoded group."""
        picked = np.asarray(indices, dtype=np.int64)
        if picked.size and (picked.min() < 0 or picked.max() >= len(self)):
            raise IndexError(f"select: indices outside 0..{len(self) - 1}")
        view = object.__new__(ParquetRows)
        view.__dict__.update(self.__getstate__())
        view.index = self.index[picked]
        return view

    def _group(self, g: int) -> Any:
        """Row group ``g`` as a decoded table (cached)."""
        import pyarrow.parquet as pq

        if g in self._cache:
            self._cache.move_to_end(g)
            return self._cache[g]
        f, local = self.groups[g]
        if f not in self._files:
            self._files[f] = pq.ParquetFile(
                self.paths[f]
            )  # not memory-mapped: mapped pages count as resident
        table = self._files[f].read_row_group(local)
        self._cache[g] = table
        while len(self._cache) > self.cache_groups:
            self._cache.popitem(last=False)
        return table

    def row(self, i: int) -> dict[str, Any]:
        """Row ``i`` of this view as a dict (blobs as ``bytes``)."""
        if not -len(self) <= int(i) < len(self):
            raise IndexError(f"row {i} of {len(self)}")
        j = int(self.index[int(i)])
        g = int(np.searchsorted(self.starts, j, side="right")) - 1
        return self._group(g).slice(j - int(self.starts[g]), 1).to_pylist()[0]

    def column(self, name: str) -> list[Any]:
        """One column of every row of this view, read without the other columns."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        chunks = [chunk for p in self.paths for chunk in pq.read_table(p, columns=[name]).column(name).chunks]
        if not chunks:
            return []
        return pa.concat_arrays(chunks).take(pa.array(self.index)).to_pylist()
