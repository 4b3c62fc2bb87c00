"""JSON Lines: the one reader policy and the one writer every file in the project goes through.

Why one module: the project keeps tasks, annotations, results and trajectories as JSON lines, and a
resumable run may be killed half-way through a write. Each reader used to decide on its own what a
broken line means; here it is decided once.

Reading (:class:`JsonlReader`, :func:`read_jsonl`):

- every record is a JSON **object** (a dict); anything else is a bad line;
- blank lines are skipped; ``#`` comment lines only where the reader opts in (``comments=True``,
  for hand-written inputs such as tasks files), otherwise a ``#`` line is a bad line;
- a **torn last line** (the final line of the file, without its ``\\n``, that is not valid JSON: a
  crash mid-append) is skipped only where the reader opts in (``torn_tail=True``, for append logs),
  is logged as a warning and kept in :attr:`JsonlReader.torn`; a bad line anywhere else, or a torn
  tail where not allowed, is an error;
- errors: ``collect=False`` raises :class:`JsonlError` at the first bad line; ``collect=True``
  reads on and raises one :class:`JsonlError` listing every bad line (``file:line: reason``) once the
  file is read. ``parse`` (e.g. ``Task.model_validate``) turns a dict into a record; its
  ``ValueError`` (pydantic's ``ValidationError`` included) is a bad line like a JSON error.

Writing: :func:`write_atomic` (temp file in the same folder, fsync, rename; the temp file is removed
on failure) for whole files, :func:`write_jsonl` for whole JSONL files, :func:`write_parquet` for whole parquet
tables (written to memory, then as a whole file), :func:`append_jsonl` (one
write + fsync per record; a failed append is cut back, so the log still ends with its last whole
record) for resumable logs, and :func:`repair_tail` to make a log appendable again after a kill. A
full disk or quota raises :class:`NoSpaceError`, whose message is one line naming the file.
"""

from __future__ import annotations

import contextlib
import errno
import io
import json
import logging
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

__all__ = [
    "JsonlError",
    "JsonlReader",
    "LineProblem",
    "NoSpaceError",
    "append_jsonl",
    "dumps_record",
    "read_jsonl",
    "repair_tail",
    "write_atomic",
    "write_jsonl",
]

log = logging.getLogger(__name__)
T = TypeVar("T")
MAX_SHOWN = 20  # bad lines listed in a JsonlError's message (all are in .problems)
_SKIP = object()  # what JsonlReader._decode returns for a blank, comment, torn or bad line


@dataclass(frozen=True)
class LineProblem:
    """One bad line: where it is and why it was refused."""

    path: str
    lineno: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.lineno}: {self.message}"


class NoSpaceError(OSError):
    """A write failed because the disk (or the user's quota) is full; the message is one line,
    ``no space left on device writing <path>``, and the file was left as it was before the write."""

    def __init__(self, path: str | os.PathLike[str], errno_: int = errno.ENOSPC) -> None:
        super().__init__(errno_, f"no space left on device writing {path}")
        self.path = str(path)

    def __str__(self) -> str:
        return str(self.strerror)


@contextlib.contextmanager
def _no_space_is_typed(path: Path) -> Iterator[None]:
    """Raise :class:`NoSpaceError` (one clear line) for a full disk or quota inside the block."""
    try:
        yield
    except NoSpaceError:
        raise
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise NoSpaceError(path, exc.errno) from None
        raise


class JsonlError(ValueError):
    """Bad lines in a JSONL file; ``problems`` holds every one found (one when not collecting)."""

    def __init__(self, path: str | os.PathLike[str], problems: list[LineProblem]) -> None:
        self.path = str(path)
        self.problems = list(problems)
        shown = "\n".join(str(p) for p in self.problems[:MAX_SHOWN])
        more = f"\n... and {len(self.problems) - MAX_SHOWN} more" if len(self.problems) > MAX_SHOWN else ""
        if len(self.problems) == 1:
            super().__init__(shown)
        else:
            super().__init__(f"{len(self.problems)} bad line(s) in {self.path}:\n{shown}{more}")


def _describe(exc: Exception) -> str:
    """A one-line reason for a refused record (pydantic errors shortened to ``field: msg``)."""
    if isinstance(exc, ValidationError):
        parts = []
        for err in exc.errors():
            loc = ".".join(str(p) for p in err.get("loc", ())) or "record"
            parts.append(f"{loc}: {err.get('msg', 'invalid')}")
        return "; ".join(parts)
    return str(exc)


@dataclass
class JsonlReader(Generic[T]):
    """Iterate ``(lineno, record)`` over a JSONL file under the module's policy (see module doc).

    After iteration, :attr:`torn` holds the skipped torn last line (or None) and :attr:`problems`
    the bad lines found. A caller that checks more than one line at a time (duplicate ids) reports
    through :meth:`problem`, so its findings join the same error.
    """

    path: str | os.PathLike[str]
    parse: Callable[[dict[str, Any]], T] | None = None
    comments: bool = False
    torn_tail: bool = False
    collect: bool = False
    missing_ok: bool = False
    encoding: str = "utf-8"  # another codec (utf-16 of a file with a byte-order mark) is read as text
    torn: LineProblem | None = field(default=None, init=False)
    problems: list[LineProblem] = field(default_factory=list, init=False)

    def problem(self, lineno: int, message: str) -> None:
        """Record a bad line: raise now, or (``collect``) when the file has been read."""
        found = LineProblem(str(self.path), lineno, message)
        self.problems.append(found)
        if not self.collect:
            raise JsonlError(self.path, [found])

    def __iter__(self) -> Iterator[tuple[int, T]]:
        self.torn, self.problems = None, []
        path = Path(self.path)
        if self.missing_ok and not path.exists():
            return
        with path.open("rb") as fh:
            lines: Iterator[bytes] = fh
            if self.encoding.replace("_", "-").lower() not in ("utf-8", "utf8", "utf-8-sig"):
                text = io.TextIOWrapper(fh, encoding=self.encoding, newline="")
                lines = (line.encode("utf-8") for line in text)
            for lineno, raw in enumerate(lines, start=1):
                record = self._decode(lineno, raw)
                if record is not _SKIP:
                    yield lineno, record
        if self.problems:
            raise JsonlError(self.path, self.problems)

    def _decode(self, lineno: int, raw: bytes) -> Any:
        """The record on one line, or ``_SKIP`` when the line is skipped or bad (bad ones are recorded)."""
        terminated = raw.endswith(b"\n")
        try:
            text = raw.decode("utf-8").strip()
            if lineno == 1:
                text = text.removeprefix("\ufeff")  # a byte-order mark some editors write
            if not text or (self.comments and text.startswith("#")):
                return _SKIP
            value = json.loads(text)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            reason = exc.reason if isinstance(exc, UnicodeDecodeError) else f"{exc.msg} at column {exc.colno}"
            if not terminated and self.torn_tail:
                self.torn = LineProblem(str(self.path), lineno, f"torn last line skipped ({reason})")
                log.warning("%s", self.torn)
                return _SKIP
            self.problem(lineno, f"not valid JSON ({reason})" + ("" if terminated else "; torn last line?"))
            return _SKIP
        if not isinstance(value, dict):
            self.problem(lineno, f"expected a JSON object, got {type(value).__name__}")
            return _SKIP
        if self.parse is None:
            return value
        try:
            return self.parse(value)
        except ValueError as exc:
            self.problem(lineno, _describe(exc))
            return _SKIP


def read_jsonl(
    path: str | os.PathLike[str],
    parse: Callable[[dict[str, Any]], T] | None = None,
    *,
    comments: bool = False,
    torn_tail: bool = False,
    collect: bool = False,
    missing_ok: bool = False,
) -> list[Any]:
    """All records of a JSONL file (see :class:`JsonlReader` for the arguments)."""
    reader = JsonlReader(
        path, parse, comments=comments, torn_tail=torn_tail, collect=collect, missing_ok=missing_ok
    )
    return [record for _, record in reader]


def dumps_record(record: BaseModel | Mapping[str, Any]) -> str:
    """One record as one line of JSON, without the newline (non-JSON values via ``str``)."""
    if isinstance(record, BaseModel):
        return record.model_dump_json()
    return json.dumps(dict(record), ensure_ascii=False, default=str)


def _fsync_dir(folder: Path) -> None:
    """Make a rename durable; some filesystems refuse to open a folder, which is harmless."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _new_file_mode(path: Path) -> int:
    """The existing file's mode, or what ``open(path, "w")`` would create under the current umask."""
    if path.exists():
        return path.stat().st_mode & 0o7777
    return 0o666 & ~_umask()


def _umask() -> int:
    """The process umask, read without changing it where Linux allows (``os.umask`` is a global set)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except OSError:
        pass
    umask = os.umask(0o022)
    os.umask(umask)
    return umask


def write_atomic(path: str | os.PathLike[str], data: str | bytes) -> Path:
    """Replace a whole file so that a crash leaves the old content or the new, never half.

    The temp file lives in the target's folder (a rename is atomic only within one filesystem), is
    fsynced before the rename and removed if anything fails.
    """
    path = Path(path)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    with _no_space_is_typed(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(payload)
                fh.flush()
                os.fsync(fh.fileno())
            os.chmod(tmp, _new_file_mode(path))  # mkstemp makes 0600; keep what open() would have made
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
    _fsync_dir(path.parent)
    return path


def write_jsonl(path: str | os.PathLike[str], records: Iterable[BaseModel | Mapping[str, Any]]) -> Path:
    """Write a whole JSONL file atomically (see :func:`write_atomic`)."""
    return write_atomic(path, "".join(dumps_record(r) + "\n" for r in records))


def write_parquet(path: str | os.PathLike[str], table: Any) -> Path:
    """Write a whole ``pyarrow.Table`` (or a ``pandas.DataFrame``, its index left out) as a parquet file atomically
    (see :func:`write_atomic`): the table is encoded in memory first, so a failed encoding leaves the file as it was."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if not isinstance(table, pa.Table):
        table = pa.Table.from_pandas(table, preserve_index=False)
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return write_atomic(path, sink.getvalue().to_pybytes())


def append_jsonl(path: str | os.PathLike[str], record: BaseModel | Mapping[str, Any]) -> None:
    """Append one record with one write and an fsync, so a kill leaves at most a torn last line.

    Refuses (``JsonlError``) to append after an unterminated last line, which would glue two
    records together; call :func:`repair_tail` when resuming a log. A write that fails (a full
    disk) is cut back, so the file ends with its last whole record. Unbuffered: no data is left in
    a buffer that closing the file could still write.
    """
    path = Path(path)
    line = (dumps_record(record) + "\n").encode("utf-8")
    with _no_space_is_typed(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a+b", buffering=0) as fh:
            size = fh.seek(0, os.SEEK_END)
            if size:
                fh.seek(size - 1)
                if fh.read(1) != b"\n":
                    message = "the last line is unterminated; call repair_tail before appending"
                    raise JsonlError(path, [LineProblem(str(path), _count_lines(path, size) + 1, message)])
            try:
                _write_all(fh.fileno(), line)
                os.fsync(fh.fileno())
            except OSError:
                _cut_back(fh.fileno(), size, path)
                raise


def _write_all(fd: int, data: bytes) -> None:
    """``os.write`` until every byte is written (a write may take only part of them)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _cut_back(fd: int, size: int, path: Path) -> None:
    """Truncate a log back to ``size`` bytes after a failed append, so it ends with its last whole
    record (freeing space works even on a full disk; should it fail, resuming repairs the tail)."""
    try:
        os.ftruncate(fd, size)
        os.fsync(fd)
    except OSError as exc:
        log.warning("could not cut %s back to its last whole record (%s); resuming will", path, exc)


def _unterminated_tail(fh: Any, block: int = 1 << 16) -> tuple[int, bytes]:
    """The offset and bytes of the text after a file's last newline, read backwards from the end."""
    pos, chunk = fh.seek(0, os.SEEK_END), b""
    while pos > 0:
        step = min(block, pos)
        pos -= step
        fh.seek(pos)
        chunk = fh.read(step) + chunk
        cut = chunk.rfind(b"\n")
        if cut >= 0:
            return pos + cut + 1, chunk[cut + 1 :]
    return 0, chunk


def _count_lines(path: Path, upto: int) -> int:
    """Newlines before byte ``upto`` (for a line number in a report)."""
    count = 0
    with open(path, "rb") as fh:
        while fh.tell() < upto:
            count += fh.read(min(1 << 20, upto - fh.tell())).count(b"\n")
    return count


def repair_tail(path: str | os.PathLike[str]) -> LineProblem | None:
    """Make an append log end with a newline again after a kill; what was done, or None.

    An unterminated last line that is a whole JSON object is kept (its newline is added), as the
    reader counts it; otherwise it is torn and cut off. A missing or empty file needs nothing.
    """
    path = Path(path)
    if not path.exists() or path.stat().st_size == 0:
        return None
    with open(path, "rb+") as fh:
        start, tail = _unterminated_tail(fh)
        if not tail:
            return None
        try:
            whole = isinstance(json.loads(tail.decode("utf-8")), dict)
        except (UnicodeDecodeError, json.JSONDecodeError):
            whole = False
        if whole:
            fh.seek(0, os.SEEK_END)
            fh.write(b"\n")
            done = "unterminated last line kept (newline added)"
        else:
            fh.truncate(start)
            done = "torn last line removed"
        fh.flush()
        os.fsync(fh.fileno())
    found = LineProblem(str(path), _count_lines(path, start) + 1, done)
    log.warning("%s", found)
    return found
