"""Benchmark loaders: published annotation files on local disk -> :class:`envs.tasks.Task`.

Every loader is registered by name (``@register_dataset("videomme")``) and called through
:func:`load_dataset`, which returns a :class:`LoadedDataset`:

- ``tasks``: the usable tasks, media paths absolute (resolved against ``media_root``);
- ``missing``: one :class:`MissingMedia` per task whose media file is absent or empty, with the
  reason; those tasks are skipped, never a crash.

A malformed annotation (a required field absent, an answer that is not one of the options, a row
that fails :class:`~envs.tasks.Task` validation) raises :class:`DatasetError` naming the file and
the row (``file:row: reason``), all bad rows at once. A task id repeated with other content raises
it too; a record repeated exactly is dropped, and like options with identical text, reported in
``LoadedDataset.warnings`` (:mod:`~omniagent.datasets.layouts` also reads Video-MME's nested layout
and lmms-eval's flat exports).

Annotation files are read by suffix: ``.jsonl``, ``.json`` (a list of rows, a dict keyed by video,
or ``{"data": [...]}``), ``.parquet`` (pyarrow) and ``.csv``. Nothing is downloaded.

The adapters follow each benchmark's published release (field names listed in each docstring); when
a release renames a field, pass ``fields={...}`` to the ``generic`` loader or extend the adapter.

Modules: :mod:`~omniagent.datasets.core` (records, errors, missing media),
:mod:`~omniagent.datasets.readers` (annotation files), :mod:`~omniagent.datasets.registry`
(registration, :func:`load_dataset`), :mod:`~omniagent.datasets.fields` (field parsing shared by the
adapters), :mod:`~omniagent.datasets.adapters` (``tasks``, ``generic``) and
:mod:`~omniagent.datasets.benchmarks` (the published benchmarks and ``synthetic``),
:mod:`~omniagent.datasets.mlvu`, :mod:`~omniagent.datasets.longvideobench` and
:mod:`~omniagent.datasets.omnivideobench` (one module each), :mod:`~omniagent.datasets.evidence_text`
(evidence times written in prose).
"""

# importing the adapter modules registers them, in this order
from omniagent.datasets.adapters import generic as generic
from omniagent.datasets.adapters import native_tasks as native_tasks
from omniagent.datasets.benchmarks import LONGVALE_QUESTION as LONGVALE_QUESTION
from omniagent.datasets.benchmarks import VSI_NUMERIC as VSI_NUMERIC
from omniagent.datasets.benchmarks import dailyomni as dailyomni
from omniagent.datasets.benchmarks import longvale as longvale
from omniagent.datasets.benchmarks import lvbench as lvbench
from omniagent.datasets.benchmarks import synthetic as synthetic
from omniagent.datasets.benchmarks import videomme as videomme
from omniagent.datasets.benchmarks import vsibench as vsibench
from omniagent.datasets.benchmarks import worldsense as worldsense
from omniagent.datasets.core import (
    DatasetError,
    LoadedDataset,
    MissingMedia,
    Row,
    RowError,
    SkipRow,
    check_media,
)
from omniagent.datasets.fields import parse_timestamp, split_option
from omniagent.datasets.longvideobench import longvideobench as longvideobench
from omniagent.datasets.mlvu import mlvu as mlvu
from omniagent.datasets.omnivideobench import omnivideobench as omnivideobench
from omniagent.datasets.readers import read_rows
from omniagent.datasets.registry import DATASETS, load_dataset, register_dataset
from omniagent.datasets.registry import Produced as Produced

__all__ = [
    "DATASETS",
    "DatasetError",
    "LoadedDataset",
    "MissingMedia",
    "Row",
    "RowError",
    "SkipRow",
    "check_media",
    "load_dataset",
    "parse_timestamp",
    "read_rows",
    "register_dataset",
    "split_option",
]
