"""How a stored video frame is turned and mirrored for display: the stream's display matrix.

Phones store a portrait video as landscape pixels plus a display matrix saying "turn by 90 degrees";
a selfie camera or an editor may add a mirror. FFmpeg attaches the matrix to each decoded frame
(``AV_FRAME_DATA_DISPLAYMATRIX``); players and the ffmpeg CLI apply it, so the served frame must
too. The matrix maps a stored pixel (p, q) to the displayed (p', q') = (a p + c q + x, b p + d q + y)
(FFmpeg's ``libavutil/display.h``); for the eight axis-aligned cases that is a transpose or not,
then a mirror of either axis. An angle that is not a multiple of 90 degrees is taken to the nearest
quarter turn.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Orientation", "orientation_of"]


@dataclass(frozen=True)
class Orientation:
    """Stored -> displayed: transpose (swap axes) first, then mirror columns and/or rows."""

    transpose: bool = False
    flip_x: bool = False  # mirror left-right (after the transpose)
    flip_y: bool = False  # mirror top-bottom (after the transpose)

    @classmethod
    def from_matrix(cls, m: tuple[int, ...] | list[int]) -> Orientation:
        """From FFmpeg's 3x3 display matrix (9 int32 values, a = m[0], b = m[1], c = m[3], d = m[4])."""
        a, b, c, d = m[0], m[1], m[3], m[4]
        if abs(b) + abs(c) > abs(a) + abs(d):  # a quarter turn: the axes swap
            return cls(transpose=True, flip_x=c < 0, flip_y=b < 0)
        return cls(transpose=False, flip_x=a < 0, flip_y=d < 0)

    @property
    def identity(self) -> bool:
        return not (self.transpose or self.flip_x or self.flip_y)

    @property
    def mirrored(self) -> bool:
        """True when the display is a mirror image of the stored picture (not a rotation of it)."""
        return self.transpose != (self.flip_x != self.flip_y)

    @property
    def rotation(self) -> int:
        """Degrees counterclockwise of the rotation part, after a left-right mirror if :attr:`mirrored`."""
        probe = np.arange(6).reshape(2, 3)
        target = self.apply(probe)
        start = np.fliplr(probe) if self.mirrored else probe
        for k in range(4):
            if np.array_equal(np.rot90(start, k), target):
                return 90 * k
        raise AssertionError("unreachable: the eight cases are the dihedral group")

    def displayed(self, width: int, height: int) -> tuple[int, int]:
        """(width, height) as displayed, for a stored ``width`` x ``height``."""
        return (height, width) if self.transpose else (width, height)

    def apply(self, image: np.ndarray) -> np.ndarray:
        """The stored (H, W, ...) array as displayed."""
        out = np.swapaxes(image, 0, 1) if self.transpose else image
        if self.flip_x:
            out = out[:, ::-1]
        if self.flip_y:
            out = out[::-1]
        return out if self.identity else np.ascontiguousarray(out)


def orientation_of(frame: Any) -> Orientation:
    """The display orientation a decoded PyAV frame carries (identity without a display matrix)."""
    import av

    for item in frame.side_data:
        if item.type == av.sidedata.sidedata.Type.DISPLAYMATRIX:
            raw = bytes(item)
            if len(raw) >= 36:
                return Orientation.from_matrix(struct.unpack("=9i", raw[:36]))
    return Orientation()
