"""A resumable batch of tasks written to JSON-lines logs in one folder (evaluation and SFT synthesis).

Why: a batch over thousands of tasks is killed, rerun, or started twice by mistake; none of that may
lose or duplicate a task. The rules, shared by ``omniagent.eval.runner`` and ``rl/synthesize.py``:

- **Commit marker.** Each finished task appends its detail records to the *log* files first and
  one row to the *marker* file last (:meth:`ResumableBatch.commit`); the marker row is what makes
  the task done. Appends are one write + fsync each (:func:`envs.jsonl.append_jsonl`).
- **Resume.** :meth:`ResumableBatch.resume` repairs a torn last line in every file, compacts
  duplicate marker rows, drops the rows a caller wants redone, then drops log records of tasks
  without a marker row (a kill between the two writes), and returns the committed rows.
- **One writer.** :class:`RunLock` holds an exclusive lock on ``<folder>/.lock`` (``fcntl.flock``,
  released by the kernel when the process dies) that records the holder's PID; a second process on
  the same folder is refused with :class:`FolderLockedError` naming that PID, and a lock file left by
  a dead process is taken over.
- **Error streak.** :class:`ErrorStreak` stops a batch after N failures in a row (a dead server),
  instead of failing every remaining task.
"""

from __future__ import annotations

import fcntl
import logging
import os
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from envs.jsonl import append_jsonl, read_jsonl, repair_tail, write_jsonl

__all__ = ["ErrorStreak", "FolderLockedError", "ResumableBatch", "RunLock"]

log = logging.getLogger(__name__)
LOCK_NAME = ".lock"

Record = BaseModel | Mapping[str, Any]


class FolderLockedError(RuntimeError):
    """Another live process is writing into the same run folder."""


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class RunLock:
    """An exclusive, process-wide lock on a folder, recording the holder's PID in ``<folder>/.lock``.

    ``flock`` makes the lock die with its holder, so a lock file left by a killed run is stale by
    construction; :attr:`stale_pid` then names the dead process whose lock was taken over.
    """

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.path = Path(folder) / LOCK_NAME
        self.stale_pid: int | None = None
        self._fd: int | None = None

    def _holder(self) -> int | None:
        try:
            return int(self.path.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def acquire(self) -> RunLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            pid = self._holder()
            who = f"process {pid}" if pid is not None else "another process"
            raise FolderLockedError(
                f"{self.path.parent} is in use by {who} (lock file {self.path}); wait for it to finish, "
                "stop it, or use another output folder"
            ) from None
        old = self._holder()
        if old is not None and old != os.getpid():
            self.stale_pid = old
            state = "no longer running" if not _pid_alive(old) else "running, but not holding it"
            log.warning("took over the lock of %s from process %d (%s)", self.path.parent, old, state)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        os.fsync(fd)
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is None:
            return
        try:
            os.ftruncate(self._fd, 0)  # an empty lock file: nobody holds it
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


class ErrorStreak:
    """Counts failures in a row; :meth:`update` raises ``error(count, last_detail)`` at ``limit``.

    ``limit=0`` never stops.
    """

    def __init__(self, limit: int, error: Callable[[int, str | None], BaseException]) -> None:
        self.limit = limit
        self.error = error
        self.count = 0

    def update(self, failed: bool, detail: str | None = None) -> None:
        self.count = self.count + 1 if failed else 0
        if self.limit and self.count >= self.limit:
            raise self.error(self.count, detail)


class ResumableBatch:
    """A run folder with one marker log (one row per finished task) and detail logs.

    ``key(row)`` is a marker row's task id; ``log_key(record)`` the task id of a detail record
    (default: ``key``). Use as a context manager: entering takes the folder's :class:`RunLock`.
    :meth:`commit` is thread-safe.
    """

    def __init__(
        self,
        folder: str | os.PathLike[str],
        marker: str,
        logs: Sequence[str] = (),
        key: Callable[[Mapping[str, Any]], str] = lambda row: row["id"],
        log_key: Callable[[Mapping[str, Any]], str] | None = None,
    ) -> None:
        self.folder = Path(folder)
        self.marker = self.folder / marker
        self.logs = {name: self.folder / name for name in logs}
        self.key = key
        self.log_key = log_key or key
        self.lock = RunLock(self.folder)
        self._write_lock = threading.Lock()

    def __enter__(self) -> ResumableBatch:
        self.folder.mkdir(parents=True, exist_ok=True)
        self.lock.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.lock.release()

    def resume(self, redo: Callable[[Mapping[str, Any]], bool] | None = None) -> dict[str, dict[str, Any]]:
        """Repair the folder after a kill and return the committed rows by task id (see module doc)."""
        for path in (self.marker, *self.logs.values()):
            repair_tail(path)
        rows: dict[str, dict[str, Any]] = {}
        lines = 0
        for row in read_jsonl(self.marker, torn_tail=True, missing_ok=True):
            rows[self.key(row)] = row  # a duplicate should never happen; the last one wins
            lines += 1
        changed = lines != len(rows)
        if redo is not None:
            kept = {k: r for k, r in rows.items() if not redo(r)}
            changed, rows = changed or len(kept) != len(rows), kept
        if changed:
            write_jsonl(self.marker, rows.values())
        for name, path in self.logs.items():
            dropped = self._drop_uncommitted(path, set(rows))
            if dropped:
                log.warning("dropped %d record(s) of unfinished tasks from %s", dropped, name)
        return rows

    def _drop_uncommitted(self, path: Path, committed: set[str]) -> int:
        records = read_jsonl(path, torn_tail=True, missing_ok=True)
        keep = [r for r in records if self.log_key(r) in committed]
        if len(keep) != len(records):
            write_jsonl(path, keep)
        return len(records) - len(keep)

    def commit(self, row: Mapping[str, Any], logs: Mapping[str, Iterable[Record]] | None = None) -> None:
        """Append a task's detail records, then its marker row (the commit), under one lock."""
        with self._write_lock:
            for name, records in (logs or {}).items():
                for record in records:
                    append_jsonl(self.logs[name], record)
            append_jsonl(self.marker, row)
