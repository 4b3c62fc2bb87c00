"""The frame-index barcode every synthetic video frame carries in its bottom rows."""

from __future__ import annotations

import math

import numpy as np

# Layout: the bottom ``bar_h`` rows of a frame hold BARCODE_BLOCKS equal-width blocks across the full
# width: [white guard][23 index bits, most significant first][even parity bit][black guard].
# A 1 bit is white (255), a 0 bit black (0). Decoding samples the centre of each block, so it also works
# on a frame that was resized (not cropped).
BARCODE_BITS = 23
BARCODE_BLOCKS = BARCODE_BITS + 3
MAX_FRAME_INDEX = (1 << BARCODE_BITS) - 1
MIN_VIDEO_WIDTH = 4 * BARCODE_BLOCKS


class BarcodeError(ValueError):
    """The frame carries no readable frame-index barcode."""


def barcode_height(height: int) -> int:
    """Rows used by the barcode strip at the bottom of a ``height``-row frame (even, >= 4)."""
    rows = max(4, math.ceil(height / 12))
    return rows + (rows % 2)


def _barcode_bits(indices: np.ndarray) -> np.ndarray:
    """(T, BARCODE_BLOCKS) array of 0/1 block values for the given frame indices."""
    indices = np.asarray(indices, dtype=np.int64)
    if indices.size and (indices.min() < 0 or indices.max() > MAX_FRAME_INDEX):
        raise ValueError(f"frame index out of range 0..{MAX_FRAME_INDEX}")
    shifts = np.arange(BARCODE_BITS - 1, -1, -1, dtype=np.int64)
    data = (indices[:, None] >> shifts[None, :]) & 1
    parity = data.sum(axis=1, keepdims=True) % 2
    ones = np.ones((len(indices), 1), dtype=np.int64)
    zeros = np.zeros((len(indices), 1), dtype=np.int64)
    return np.concatenate([ones, data, parity, zeros], axis=1)


def draw_frame_index(frames: np.ndarray, indices: np.ndarray | int) -> None:
    """Paint the frame-index barcode into ``frames`` ((H, W, 3) or (T, H, W, 3) uint8) in place."""
    single = frames.ndim == 3
    batch = frames[None] if single else frames
    idx = np.atleast_1d(np.asarray(indices))
    if len(idx) != batch.shape[0]:
        raise ValueError("one index per frame is needed")
    height, width = batch.shape[1:3]
    rows = barcode_height(height)
    edges = np.round(np.arange(BARCODE_BLOCKS + 1) * width / BARCODE_BLOCKS).astype(int)
    col_block = np.searchsorted(edges, np.arange(width), side="right") - 1
    values = (_barcode_bits(idx) * 255).astype(np.uint8)  # (T, blocks)
    strip = values[:, col_block]  # (T, W)
    batch[:, height - rows :, :, :] = strip[:, None, :, None]


def decode_frame_index(frame: np.ndarray) -> int:
    """Read the frame index from a frame's barcode strip.

    ``frame`` is an (H, W, 3) RGB or (H, W) grey uint8 array, at the resolution it was made at or
    resized (not cropped). Raises :class:`BarcodeError` when no clean barcode is found.
    """
    arr = np.asarray(frame)
    if arr.ndim == 3:
        luma = arr[..., :3].astype(np.float32) @ np.array([0.299, 0.587, 0.114], dtype=np.float32)
    elif arr.ndim == 2:
        luma = arr.astype(np.float32)
    else:
        raise BarcodeError(f"expected an (H, W[, 3]) frame, got shape {arr.shape}")
    height, width = luma.shape
    if width < BARCODE_BLOCKS or height < 8:
        raise BarcodeError(f"frame {width}x{height} too small for a barcode")
    unit = height / 12.0
    r0 = int(math.floor(height - 0.7 * unit))
    r1 = max(r0 + 1, int(math.ceil(height - 0.25 * unit)))
    band = luma[r0:r1].mean(axis=0)
    bw = width / BARCODE_BLOCKS
    values = np.empty(BARCODE_BLOCKS, dtype=np.float32)
    for k in range(BARCODE_BLOCKS):
        c0 = int(math.ceil((k + 0.3) * bw))
        c1 = max(c0 + 1, int(math.floor((k + 0.7) * bw)) + 1)
        values[k] = band[c0:c1].mean()
    white, black = float(values[0]), float(values[-1])
    if white - black < 100:
        raise BarcodeError(f"no barcode guards found (white {white:.0f}, black {black:.0f})")
    mid = 0.5 * (white + black)
    margin = np.abs(values[1:-1] - mid)
    if margin.min() < 0.2 * (white - black):
        raise BarcodeError("barcode block too close to the threshold")
    bits = (values[1:-1] > mid).astype(np.int64)
    if bits.sum() % 2:
        raise BarcodeError("barcode parity check failed")
    index = 0
    for bit in bits[:BARCODE_BITS]:
        index = (index << 1) | int(bit)
    return index
