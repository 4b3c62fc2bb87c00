"""Whether a media path stays inside the folder it must be read from (``media_root``).

Why one module: the rule is checked twice, and both checks must agree. A dataset checks it when it
loads (:func:`omniagent.datasets.registry.outside_media_root`), and the environment checks it again
at the moment it opens the file (:func:`envs.media_access.open_container` with
:attr:`envs.media_access.MediaAccess.media_root`), because a link can change between the two, and a
task built by hand or resumed from a file never passed the first check.

The rule: the path, made absolute and normalised (``..`` folded), must lie inside the root; then its
real path (every link resolved) must lie inside the root's real path, unless links are followed
(``follow_links``), when the path as written is what counts.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from envs.errors import ErrorCode, MediaError

__all__ = ["Escape", "confined_path", "escape", "inside", "normal_path"]


@dataclass(frozen=True)
class Escape:
    """How a media path leaves its root."""

    path: str  # the path as written, absolute and normalised
    root: str  # the root it leaves (its real path when ``target`` is set)
    target: str | None = None  # where a link inside the root really leads; None: written outside

    def reason(self) -> str:
        """One line for a :class:`~envs.errors.MediaError` (the path itself is named by the error)."""
        if self.target is None:
            return f"outside media_root {self.root}; nothing outside it is read"
        return (
            f"a link to {self.target}, outside media_root {self.root}; nothing outside it is read "
            "(follow such links with follow_links_outside_media_root=True)"
        )


def normal_path(path: str | os.PathLike[str]) -> str:
    """``path`` with ``~`` expanded, made absolute and normalised (links left as they are)."""
    return os.path.normpath(os.path.abspath(os.path.expanduser(os.fspath(path))))


def inside(root: str, path: str) -> bool:
    """True when ``path`` is ``root`` or below it (both absolute and normalised)."""
    try:
        return os.path.commonpath([root, path]) == root
    except ValueError:  # different drives
        return False


def escape(
    media: str | os.PathLike[str], media_root: str | os.PathLike[str], follow_links: bool = False
) -> Escape | None:
    """How ``media`` leaves ``media_root`` (see the module docstring), or None when it stays inside."""
    root, path = normal_path(media_root), normal_path(media)
    if not inside(root, path):
        return Escape(path, root)
    if follow_links:
        return None
    real_root, real = os.path.realpath(root), os.path.realpath(path)
    return None if inside(real_root, real) else Escape(path, real_root, real)


def confined_path(
    media: str | os.PathLike[str], media_root: str | os.PathLike[str], follow_links: bool = False
) -> str:
    """The path to open for ``media``: its real path, checked inside ``media_root`` now (with
    ``follow_links``: the path as written, checked as written).

    Raises :class:`~envs.errors.MediaError` with code ``media_outside_root`` (permanent) when it
    leaves the root. Opening the returned real path, not the link, means a link changed after this
    check cannot send the open elsewhere.
    """
    out = escape(media, media_root, follow_links)
    if out is not None:
        raise MediaError(os.fspath(media), out.reason(), code=ErrorCode.MEDIA_OUTSIDE_ROOT.value)
    path = normal_path(media)
    return path if follow_links else os.path.realpath(path)
