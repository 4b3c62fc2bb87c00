"""Exceptions with stable codes, so callers branch on a code rather than on message text."""

from __future__ import annotations


class MediaError(Exception):
    """A media file that cannot be used at all: missing, empty, not media, truncated, no streams.

    Raised by :func:`envs.media.open_media` and by ``reset``; a batch runner records it and moves on.
    """

    def __init__(self, path: str, reason: str, code: str = "unusable_media") -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason
        self.code = code


class MediaReadError(Exception):
    """One request a usable file could not serve (a span past a damaged end, no audio track...).

    The environment turns it into an error percept the model can read and recover from.
    """

    def __init__(self, message: str, code: str = "media_read_failed") -> None:
        super().__init__(message)
        self.code = code
