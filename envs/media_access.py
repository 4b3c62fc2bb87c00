"""What FFmpeg may open for a media name: a local file, never a protocol, a playlist or a device.

Why: FFmpeg reads every name as a URL. ``concat:a.mp4|b.mp4`` plays two files joined, a relative
``file:secret.mp4`` opens ``secret.mp4``, ``clip:01.mp4`` asks for a protocol called ``clip``, and
some demuxers open further inputs named inside the file (an HLS playlist inside ``media_root`` may
list a file anywhere on the disk). So every open in ``envs`` goes through this module:

- **A name is a file.** It is made absolute and handed to FFmpeg with the explicit ``file:``
  protocol (``file:/abs/dir/clip:01.mp4``), so a colon in it is just a character. Only a name that
  starts with a protocol the user allowed (:attr:`MediaAccess.allow_protocols`, e.g. ``https``) is
  handed over as a URL.
- **FFmpeg enforces the rest**, for the file and for everything it opens on the file's behalf, with
  its own options: ``protocol_whitelist`` (``file`` plus the allowed protocols and the transports
  they need) and ``format_whitelist`` (every demuxer of the FFmpeg build in use except
  :func:`refused_demuxers`: those that open inputs of their own, i.e. image sequences, capture
  devices and network streams, which FFmpeg flags ``AVFMT_NOFILE``, and those that read a list of
  other inputs: ``hls``, ``dash``, ``concat``, ``imf``, ``sdp``). FFmpeg decides by the format it
  probed, before the demuxer reads anything; a refused file fails with ``media_format_refused``.
  :attr:`MediaAccess.allow_demuxers` puts named demuxers back.
- **The ffmpeg CLI** gets the same: :func:`ffmpeg_input_args`.
- **A file stays inside** :attr:`MediaAccess.media_root` when that is set: the name's real path is
  resolved at the moment it is opened, refused outside the root (``media_outside_root``, see
  :mod:`envs.confinement`) and handed to FFmpeg instead of the link, so a link changed after a
  dataset was checked cannot lead the open elsewhere. None (the default) confines nothing.
"""

from __future__ import annotations

import errno
import functools
import os
import re
from dataclasses import dataclass
from typing import Any

from envs.confinement import confined_path
from envs.errors import MediaError

__all__ = [
    "LIST_DEMUXERS",
    "MediaAccess",
    "ffmpeg_input_args",
    "input_url",
    "open_container",
    "open_options",
    "refused_demuxers",
]

# Demuxers that read a list of further inputs (playlists, concat lists, session descriptions).
LIST_DEMUXERS = frozenset({"hls", "applehttp", "dash", "concat", "imf", "sdp"})
# Protocols an allowed network protocol needs underneath it.
TRANSPORTS = {"http": ("tcp",), "https": ("tls", "tcp", "http"), "rtmp": ("tcp",), "rtmps": ("tls", "tcp")}
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")


@dataclass(frozen=True)
class MediaAccess:
    """Protocols and demuxers a media name may use beyond a plain local file (default: none)."""

    allow_protocols: tuple[str, ...] = ()  # URL schemes taken as URLs (``https``); ``file`` is implied
    allow_demuxers: tuple[str, ...] = ()  # refused demuxers allowed anyway (``hls`` for trusted playlists)
    media_root: str | None = None  # a local file must really be inside this folder; None: anywhere
    follow_links_outside_media_root: bool = False  # judge the path as written, not where links lead

    def scheme(self, name: str) -> str | None:
        """The allowed protocol ``name`` starts with, or None: then ``name`` is a local file."""
        m = _SCHEME.match(name)
        if m and m.group(1).lower() in {p.lower() for p in self.allow_protocols} - {"file"}:
            return m.group(1).lower()
        return None


@functools.cache
def _demuxers() -> tuple[tuple[str, bool], ...]:
    """(name, opens its own input) of every demuxer in PyAV's FFmpeg build."""
    import av

    out = []
    for name in sorted(av.formats_available):
        try:
            fmt = av.format.ContainerFormat(name, "r")
        except ValueError:
            continue  # a muxer only
        out.append((fmt.name, bool(fmt.flags & av.format.Flags.no_file.value)))
    return tuple(out)


def refused_demuxers(access: MediaAccess | None = None) -> list[str]:
    """Names of the demuxers a media file may not be read with (see the module docstring)."""
    allowed = set((access or MediaAccess()).allow_demuxers)
    out = []
    for name, nofile in _demuxers():
        parts = set(name.split(","))
        if (nofile or parts & LIST_DEMUXERS) and not parts & allowed:
            out.append(name)
    return out


@functools.cache
def _format_whitelist(allowed: tuple[str, ...]) -> str:
    refused = set(refused_demuxers(MediaAccess(allow_demuxers=allowed)))
    return ",".join(name for name, _ in _demuxers() if name not in refused)


def open_options(access: MediaAccess | None = None) -> dict[str, str]:
    """FFmpeg options that confine an open (and every input it opens) to what ``access`` allows."""
    access = access or MediaAccess()
    protocols = ["file"]
    for p in access.allow_protocols:
        for q in (p.lower(), *TRANSPORTS.get(p.lower(), ())):
            if q not in protocols:
                protocols.append(q)
    return {
        "protocol_whitelist": ",".join(protocols),
        "format_whitelist": _format_whitelist(tuple(sorted(access.allow_demuxers))),
    }


def input_url(name: str | os.PathLike[str], access: MediaAccess | None = None) -> str:
    """What FFmpeg is given for ``name``: ``file:`` + its absolute path, or an allowed URL as is.

    With ``access.media_root`` set, the path is its real path, checked inside the root now; raises
    :class:`~envs.errors.MediaError` (``media_outside_root``) when it is outside."""
    access = access or MediaAccess()
    text = os.fspath(name)
    if access.scheme(text) is not None:
        return text
    if access.media_root is not None:
        return "file:" + confined_path(text, access.media_root, access.follow_links_outside_media_root)
    return "file:" + os.path.abspath(text)


def ffmpeg_input_args(name: str | os.PathLike[str], access: MediaAccess | None = None) -> list[str]:
    """``-protocol_whitelist ... -format_whitelist ... -i URL`` for an ffmpeg/ffprobe command line."""
    opts = open_options(access)
    return [
        "-protocol_whitelist",
        opts["protocol_whitelist"],
        "-format_whitelist",
        opts["format_whitelist"],
        "-i",
        input_url(name, access),
    ]


def check_local(name: str) -> None:
    """Refuse a local name that is no non-empty regular file (a FIFO would block, a folder is no media).

    A missing name that starts like a URL (``https:``, ``concat:``) is reported as a refused protocol."""
    if not os.path.exists(name):
        if m := _SCHEME.match(name):
            raise MediaError(
                name,
                f"no such file, and its prefix {m.group(1)!r} is not an allowed protocol (media names are "
                "local files unless allow_protocols lists the protocol)",
                code="media_protocol_refused",
            )
        raise MediaError(name, "file not found", code="media_not_found")
    if not os.path.isfile(name):
        raise MediaError(name, "not a regular file", code="media_not_found")
    if os.path.getsize(name) == 0:
        raise MediaError(name, "file is empty (0 bytes)", code="media_empty")


def open_container(name: str | os.PathLike[str], access: MediaAccess | None = None) -> Any:
    """``av.open`` of a media name under ``access``; raises :class:`MediaError` with a precise code.

    A file outside ``access.media_root`` is ``media_outside_root`` (checked before anything is
    read). A refused format or protocol is ``media_format_refused`` / ``media_protocol_refused``; an
    operating-system failure (out of file handles, I/O error) is ``media_io_error``, which a batch
    may retry; anything else FFmpeg cannot read is ``media_unreadable``.
    """
    import av

    access = access or MediaAccess()
    text = os.fspath(name)
    url = input_url(text, access)
    if access.scheme(text) is None:
        check_local(text)
    try:
        return av.open(url, options=open_options(access))
    except av.error.ArgumentError as exc:  # EINVAL: FFmpeg's answer to a name off its whitelists
        raise MediaError(text, _refusal(text, access), code=_refusal_code(text, access)) from exc
    except (av.error.ProtocolNotFoundError, av.error.PermissionError) as exc:
        raise MediaError(text, f"protocol refused ({exc.strerror})", code="media_protocol_refused") from exc
    except av.error.FFmpegError as exc:
        code = "media_io_error" if _os_failure(exc) else "media_unreadable"
        raise MediaError(text, f"not readable as media ({exc.strerror or exc})", code=code) from exc
    except OSError as exc:
        raise MediaError(text, f"cannot be read ({exc.strerror or exc})", code="media_io_error") from exc


def _refusal_code(name: str, access: MediaAccess) -> str:
    return "media_format_refused" if access.scheme(name) is None else "media_protocol_refused"


def _refusal(name: str, access: MediaAccess) -> str:
    if access.scheme(name) is not None:
        return "FFmpeg refused the URL (a protocol it needs is not in allow_protocols)"
    refused = sorted({p for n in refused_demuxers(access) for p in n.split(",")} & LIST_DEMUXERS)
    return (
        "refused: FFmpeg reads it as a format that opens other inputs (a playlist or list of files such "
        f"as {', '.join(refused)}, an image sequence or a device); allow one with allow_demuxers if the "
        "file is trusted"
    )


# errno values of failures in the machine rather than the file: worth another try later
_TRANSIENT_ERRNOS = frozenset(
    getattr(errno, n)
    for n in ("EIO", "EMFILE", "ENFILE", "ENOMEM", "EAGAIN", "EINTR", "ETIMEDOUT", "ESTALE", "EBUSY")
)


def _os_failure(exc: Any) -> bool:
    return getattr(exc, "errno", None) in _TRANSIENT_ERRNOS
