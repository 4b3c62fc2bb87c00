"""The adapter registry (:func:`register_dataset`, :data:`DATASETS`) and :func:`load_dataset`.

``DATASETS`` is an :class:`envs.registry.Registry`, so datasets follow the same duplicate rule as
scorers, decoders and policies: the same adapter again is a no-op, a different one raises.
"""

from __future__ import annotations

import functools
import logging
import os
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from envs.confinement import escape, normal_path
from envs.registry import Registry
from envs.tasks import Task
from omniagent.datasets.core import (
    DatasetError,
    LoadedDataset,
    MissingMedia,
    RowError,
    SkipRow,
    check_media,
)
from omniagent.datasets.layouts import duplicate_option_warning
from omniagent.datasets.readers import annotation_files, read_rows

log = logging.getLogger(__name__)
Produced = list[tuple[str, "Task | RowError | SkipRow"]]
DATASETS: Registry[Callable[..., Produced]] = Registry("dataset")


def register_dataset(name: str, per_row: bool = True) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register a dataset adapter under ``name``.

    With ``per_row`` (the default) the decorated function is ``fn(row: Row, media_root, **kw) ->
    Task | list[Task]`` and raises :class:`RowError` for a malformed record (or :class:`SkipRow` for
    one it leaves out on purpose, counted in ``LoadedDataset.skipped``); it is applied to every record
    of every annotation file. Otherwise it is ``fn(files, media_root, **kw) -> list of
    (where, Task | RowError)`` and handles the files itself.
    """

    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        held = DATASETS.get(name)
        if held is not None and getattr(held, "__wrapped__", held) is fn:
            return fn  # the same adapter again (its per-row wrapper is a new object each time)
        if not per_row:
            DATASETS.add(name, fn)
            return fn

        @functools.wraps(fn)
        def run(
            files: list[Path], media_root: Any = None, records_key: str | None = None, **kw: Any
        ) -> Produced:
            if not files:
                raise DatasetError(f"dataset {name!r} needs an annotation file (annotations=...)")
            out: Produced = []
            for f in files:
                for row in read_rows(f, records_key):
                    try:
                        made = fn(row, media_root, **kw)
                    except (RowError, SkipRow) as exc:
                        out.append((row.where, exc))
                        continue
                    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
                        # a field of the wrong shape the adapter did not anticipate: still name the row
                        out.append((row.where, RowError(row.where, f"{type(exc).__name__}: {exc}")))
                        continue
                    out.extend((row.where, t) for t in (made if isinstance(made, list) else [made]))
            return out

        DATASETS.add(name, run)
        return fn

    return deco


def outside_media_root(
    where: str, task: Task, media_root: str | os.PathLike[str], follow_links: bool = False
) -> list[str]:
    """A problem line when ``task.media`` does not resolve inside ``media_root``: ``..`` and absolute
    paths are normalised, and symbolic links resolved (on both sides), so a link inside the root
    that points outside it is outside. ``follow_links`` judges the path as written instead. The rule
    is :func:`envs.confinement.escape`, the one the environment applies again when it opens the file."""
    out = escape(task.media, media_root, follow_links)
    if out is None:
        return []
    if out.target is None:
        return [
            f"{where}: media {task.media!r} of task {task.id!r} is outside media_root {out.root} "
            "(allow it with allow_outside_media_root=True; in scripts/eval.py: "
            "+benchmark.dataset_kwargs.allow_outside_media_root=true)"
        ]
    return [
        f"{where}: media {task.media!r} of task {task.id!r} is a link to {out.target}, outside media_root "
        f"{out.root} (follow such links with follow_links_outside_media_root=True; in scripts/eval.py: "
        "+benchmark.dataset_kwargs.follow_links_outside_media_root=true)"
    ]


def bad_annotations(name: str, problems: list[str]) -> DatasetError:
    """One error listing a dataset's bad annotations (the first 20, then how many more)."""
    more = f"\n... and {len(problems) - 20} more" if len(problems) > 20 else ""
    return DatasetError(
        f"{len(problems)} bad annotation(s) in dataset {name!r}:\n" + "\n".join(problems[:20]) + more
    )


def load_dataset(
    name: str,
    annotations: str | os.PathLike[str] | list[Any] | None = None,
    media_root: str | os.PathLike[str] | None = None,
    *,
    limit: int | None = None,
    check: bool = True,
    task_types: list[str] | None = None,
    allow_outside_media_root: bool = False,
    follow_links_outside_media_root: bool = False,
    **kwargs: Any,
) -> LoadedDataset:
    """Load a registered dataset. ``annotations``: a file, a folder of files, or a list of them.

    ``media_root`` defaults to the folder of the (first) annotation file. Every media path must
    resolve inside it: an annotation naming ``../x.mp4`` or an absolute path elsewhere is refused
    (:class:`DatasetError`) unless ``allow_outside_media_root``, so a downloaded annotation file
    cannot point the run at arbitrary files. Links are resolved first: a link inside the root
    pointing outside it is refused too, unless ``follow_links_outside_media_root``. The root the
    tasks were held to is ``LoadedDataset.media_root``; :meth:`LoadedDataset.confinement` hands it to
    the environment, which checks again when it opens each file. A record repeated exactly (same task) is dropped with
    a warning (``LoadedDataset.warnings``); the same id with other content is an error. ``task_types`` keeps only
    those types; ``limit`` keeps the first N tasks in file order (before dropping missing media, so
    two users with different missing files still attempt the same ids). ``kwargs`` go to
    the adapter (see each adapter's docstring).
    """
    adapter = DATASETS[name]  # an unknown name raises UnknownNameError (a KeyError) listing the known ones
    files: list[Path] = []
    if annotations is not None:
        files = annotation_files(annotations)
        if media_root is None:
            media_root = str(files[0].resolve().parent)
    problems: list[str] = []
    warnings: list[str] = []
    tasks: list[Task] = []
    first: dict[str, tuple[str, Task]] = {}
    skipped: Counter[str] = Counter()
    for where, item in adapter(files=files, media_root=media_root, **kwargs):
        if isinstance(item, SkipRow):
            skipped[item.reason] += 1
            continue
        if isinstance(item, RowError):
            problems.append(str(item))
            continue
        if item.id in first:
            seen_at, seen = first[item.id]
            if item == seen:  # the same record published twice (Daily-Omni has one): keep the first
                warnings.append(f"{where}: exact duplicate of {seen_at} (task {item.id!r}); dropped")
            else:
                problems.append(f"{where}: duplicate task id {item.id!r}, other content (first at {seen_at})")
            continue
        first[item.id] = (where, item)
        tasks.append(item)
        same_text = duplicate_option_warning(where, item)
        if same_text:
            warnings.append(same_text)
        if media_root is not None and not allow_outside_media_root:
            problems.extend(outside_media_root(where, item, media_root, follow_links_outside_media_root))
    if problems:
        raise bad_annotations(name, problems)
    for line in warnings:
        log.warning("%s", line)
    if task_types:
        tasks = [t for t in tasks if t.task_type in task_types]
    if limit is not None:  # before the media check, so every user attempts the same ids
        tasks = tasks[: int(limit)]
    missing: list[MissingMedia] = []
    if check:
        tasks, missing = check_media(tasks)
    return LoadedDataset(
        name=name,
        tasks=tasks,
        missing=missing,
        files=[str(f) for f in files],
        warnings=warnings,
        skipped=skipped,
        media_root=None if media_root is None or allow_outside_media_root else normal_path(media_root),
        follow_links_outside_media_root=follow_links_outside_media_root,
    )
