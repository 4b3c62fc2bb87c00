"""Exceptions and the stable error codes, so callers branch on a code rather than on message text.

Codes are part of the public interface (trajectories, SFT filters, RL penalties and summaries key on
them), so they only ever get added, never renamed. README's "Clamp or reject" paragraph lists them;
a test keeps the two in step.
"""

from __future__ import annotations

import sys
from enum import Enum

from gymnasium.error import ResetNeeded

if sys.version_info >= (3, 11):
    from enum import StrEnum
else:  # pragma: no cover - Python 3.10

    class StrEnum(str, Enum):
        """``enum.StrEnum`` for Python 3.10: members are their string values."""

        def __str__(self) -> str:
            return str(self.value)


class ErrorCode(StrEnum):
    """Every stable code the environment emits in ``info["error"]`` or raises with MediaError."""

    # the model's output is not one well-formed JSON turn
    FORMAT_EMPTY = "format_empty"
    FORMAT_CODE_FENCE = "format_code_fence"
    FORMAT_NOT_JSON = "format_not_json"
    FORMAT_TRAILING_TEXT = "format_trailing_text"
    FORMAT_NOT_OBJECT = "format_not_object"
    FORMAT_MISSING_KEY = "format_missing_key"
    FORMAT_EXTRA_KEY = "format_extra_key"
    FORMAT_DUPLICATE_KEY = "format_duplicate_key"
    FORMAT_BAD_TYPE = "format_bad_type"
    FORMAT_TOO_DEEP = "format_too_deep"
    FORMAT_NUMBER_TOO_LONG = "format_number_too_long"
    # the action is well-formed JSON but not a valid action
    ACTION_MISSING_TYPE = "action_missing_type"
    ACTION_UNKNOWN = "action_unknown"
    ACTION_INVALID_FIELD = "action_invalid_field"
    TIME_NOT_FINITE = "time_not_finite"
    TIME_REVERSED = "time_reversed"
    TIME_OUT_OF_RANGE = "time_out_of_range"
    NUM_INVALID = "num_invalid"
    SPAN_EMPTY = "span_empty"
    SPAN_TOO_LONG = "span_too_long"
    SPAN_TOO_SHORT = "span_too_short"
    ANSWER_INVALID = "answer_invalid"
    # a valid request the media cannot serve (MediaReadError, shown to the model)
    NO_VIDEO = "no_video"
    NO_AUDIO = "no_audio"
    BAD_AUDIO = "bad_audio"
    AUDIO_OUT_OF_RANGE = "audio_out_of_range"
    VIDEO_OUT_OF_RANGE = "video_out_of_range"
    DECODE_FAILED = "decode_failed"
    MEDIA_TRUNCATED = "media_truncated"
    MEDIA_READ_FAILED = "media_read_failed"
    # a file that cannot be used at all (MediaError, raised by reset)
    UNUSABLE_MEDIA = "unusable_media"
    MEDIA_NOT_FOUND = "media_not_found"
    MEDIA_EMPTY = "media_empty"
    MEDIA_NO_STREAMS = "media_no_streams"
    MEDIA_NO_DURATION = "media_no_duration"
    MEDIA_UNREADABLE = "media_unreadable"
    MEDIA_FORMAT_REFUSED = "media_format_refused"  # a playlist, file list, image sequence or device
    MEDIA_PROTOCOL_REFUSED = "media_protocol_refused"  # a URL whose protocol is not allowed
    MEDIA_IO_ERROR = "media_io_error"  # the machine failed (I/O error, out of file handles): transient
    MEDIA_OUTSIDE_ROOT = "media_outside_root"  # its real path is outside media_root (envs/confinement.py)


# Codes of MediaReadError: a request a usable file cannot serve, shown to the model as a percept.
MEDIA_READ_CODES = frozenset(
    c.value
    for c in (
        ErrorCode.NO_VIDEO,
        ErrorCode.NO_AUDIO,
        ErrorCode.BAD_AUDIO,
        ErrorCode.AUDIO_OUT_OF_RANGE,
        ErrorCode.VIDEO_OUT_OF_RANGE,
        ErrorCode.DECODE_FAILED,
        ErrorCode.MEDIA_TRUNCATED,
        ErrorCode.MEDIA_READ_FAILED,
    )
)

# MediaError codes worth another try on a later run: the machine failed (an I/O error, out of file
# handles or memory). Every other MediaError is permanent: the file itself is missing or unusable,
# and a rerun would fail the same way (an eval run redoes those only with retry_failed).
TRANSIENT_MEDIA_CODES = frozenset({ErrorCode.MEDIA_IO_ERROR.value})


class ActionRejected(Exception):
    """A turn the environment refuses; raised by parsing and serving helpers, caught in ``step``,
    which turns it into an error percept so the model learns what was wrong."""

    def __init__(self, code: ErrorCode | str, message: str) -> None:
        super().__init__(message)
        self.code = str(code)
        self.message = message


class EpisodeOver(ResetNeeded, RuntimeError):
    """``step`` called before ``reset`` or after the episode ended (Gymnasium's ``ResetNeeded``;
    also a RuntimeError, which older callers catch)."""


class MediaError(Exception):
    """A media file that cannot be used at all: missing, empty, not media, truncated, no streams.

    Raised by :func:`envs.media.open_media` and by ``reset``; a batch runner records it and moves on.
    """

    def __init__(self, path: str, reason: str, code: str = "unusable_media") -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason
        self.code = code

    @property
    def transient(self) -> bool:
        """True when a later try may succeed (:data:`TRANSIENT_MEDIA_CODES`); False for a file
        that is unusable as it is."""
        return self.code in TRANSIENT_MEDIA_CODES


class MediaReadError(Exception):
    """One request a usable file could not serve (a span past a damaged end, no audio track...).

    The environment turns it into an error percept the model can read and recover from.
    """

    def __init__(self, message: str, code: str = "media_read_failed") -> None:
        super().__init__(message)
        self.code = code
