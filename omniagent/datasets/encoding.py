"""Which text encoding an annotation file is in: UTF-8, or one its byte-order mark names.

Annotation files come from other people's tools; Windows editors and PowerShell's ``>`` write UTF-16.
The rule, decided once here for every text format (jsonl, json, csv):

- UTF-8, with or without a byte-order mark, is read as is;
- a UTF-16 or UTF-32 byte-order mark makes the encoding unambiguous, so such a file is decoded;
- anything else is refused with a :class:`~omniagent.datasets.core.DatasetError` naming the
  encoding ``charset-normalizer`` detects (UTF-16 without a mark, cp1252, GB18030, ...) and what to do.
"""

from __future__ import annotations

import codecs
from pathlib import Path

from omniagent.datasets.core import DatasetError

__all__ = ["detect_encoding", "text_encoding"]

# Longest first: the UTF-32-LE mark starts with the UTF-16-LE one.
BOMS = [
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
]


def detect_encoding(raw: bytes) -> str:
    """The encoding ``charset-normalizer`` finds most likely for ``raw`` ("unknown" if none fits)."""
    from charset_normalizer import from_bytes

    best = from_bytes(raw[: 1 << 20]).best()
    return best.encoding.replace("_", "-") if best is not None else "unknown"


def text_encoding(path: Path) -> str:
    """The codec to read ``path`` with (see the module docstring); raises DatasetError otherwise."""
    raw = path.read_bytes()
    codec = next((c for bom, c in BOMS if raw.startswith(bom)), None)
    if codec is not None:
        try:
            raw.decode(codec)
        except UnicodeDecodeError as exc:
            raise DatasetError(
                f"{path}: starts with a {codec.upper()} byte-order mark but is not valid {codec.upper()} "
                f"at byte {exc.start}; re-save it as UTF-8"
            ) from None
        return codec
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        where = f"line {line}, byte {exc.start}"
        raise DatasetError(
            f"{path}: not UTF-8 (invalid byte 0x{raw[exc.start]:02x} at {where}); its encoding looks like "
            f"{detect_encoding(raw)}: re-save it as UTF-8"
        ) from None
    if b"\0" in raw:  # valid UTF-8, but no annotation text holds NULs: UTF-16/32 without its mark
        raise DatasetError(
            f"{path}: holds NUL bytes, as UTF-16 or UTF-32 text without a byte-order mark does (encoding "
            f"detected: {detect_encoding(raw)}); re-save it as UTF-8, or with a byte-order mark"
        )
    return "utf-8"
