"""Pixel shapes: the built-in 5x7 bitmap font and the masks of the coloured shapes."""

from __future__ import annotations

import numpy as np

# A 5x7 bitmap font (rows top to bottom, '#' = ink) for digits and capital letters.
_FONT_SRC = {
    "0": ".###./#...#/#..##/#.#.#/##..#/#...#/.###.",
    "1": "..#../.##../..#../..#../..#../..#../.###.",
    "2": ".###./#...#/....#/...#./..#../.#.../#####",
    "3": "#####/...#./..#../...#./....#/#...#/.###.",
    "4": "...#./..##./.#.#./#..#./#####/...#./...#.",
    "5": "#####/#..../####./....#/....#/#...#/.###.",
    "6": "..##./.#.../#..../####./#...#/#...#/.###.",
    "7": "#####/....#/...#./..#../.#.../.#.../.#...",
    "8": ".###./#...#/#...#/.###./#...#/#...#/.###.",
    "9": ".###./#...#/#...#/.####/....#/...#./.##..",
    "A": ".###./#...#/#...#/#####/#...#/#...#/#...#",
    "B": "####./#...#/#...#/####./#...#/#...#/####.",
    "C": ".###./#...#/#..../#..../#..../#...#/.###.",
    "D": "###../#..#./#...#/#...#/#...#/#..#./###..",
    "E": "#####/#..../#..../####./#..../#..../#####",
    "F": "#####/#..../#..../####./#..../#..../#....",
    "G": ".###./#...#/#..../#.###/#...#/#...#/.####",
    "H": "#...#/#...#/#...#/#####/#...#/#...#/#...#",
    "I": ".###./..#../..#../..#../..#../..#../.###.",
    "J": "..###/...#./...#./...#./...#./#..#./.##..",
    "K": "#...#/#..#./#.#../##.../#.#../#..#./#...#",
    "L": "#..../#..../#..../#..../#..../#..../#####",
    "M": "#...#/##.##/#.#.#/#.#.#/#...#/#...#/#...#",
    "N": "#...#/#...#/##..#/#.#.#/#..##/#...#/#...#",
    "O": ".###./#...#/#...#/#...#/#...#/#...#/.###.",
    "P": "####./#...#/#...#/####./#..../#..../#....",
    "Q": ".###./#...#/#...#/#...#/#.#.#/#..#./.##.#",
    "R": "####./#...#/#...#/####./#.#../#..#./#...#",
    "S": ".####/#..../#..../.###./....#/....#/####.",
    "T": "#####/..#../..#../..#../..#../..#../..#..",
    "U": "#...#/#...#/#...#/#...#/#...#/#...#/.###.",
    "V": "#...#/#...#/#...#/#...#/#...#/.#.#./..#..",
    "W": "#...#/#...#/#...#/#.#.#/#.#.#/#.#.#/.#.#.",
    "X": "#...#/#...#/.#.#./..#../.#.#./#...#/#...#",
    "Y": "#...#/#...#/.#.#./..#../..#../..#../..#..",
    "Z": "#####/....#/...#./..#../.#.../#..../#####",
}
FONT: dict[str, np.ndarray] = {
    ch: np.array([[c == "#" for c in row] for row in src.split("/")], dtype=bool)
    for ch, src in _FONT_SRC.items()
}


def shape_mask(shape: str, size: int) -> np.ndarray:
    """Boolean (size, size) mask of a square, circle or upward triangle."""
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float64) + 0.5
    half = size / 2.0
    if shape == "square":
        return np.ones((size, size), dtype=bool)
    if shape == "circle":
        return (xx - half) ** 2 + (yy - half) ** 2 <= half**2
    if shape == "triangle":
        return np.abs(xx - half) <= yy / 2.0
    raise ValueError(f"unknown shape {shape!r}")


def text_box(text: str, width: int, content_h: int, big: bool) -> tuple[int, tuple[int, int]]:
    """Pixel scale and ``(width, height)`` of the box holding ``text`` in the 5x7 font with a one-cell
    margin: ``big`` (a digit) scales with ``content_h`` alone, otherwise the text fits within ``width``."""
    cols = 6 * len(text) - 1
    if big:
        scale = max(1, int(0.55 * content_h / 7))
    else:
        scale = max(1, min(int(0.85 * width / (cols + 2)), int(0.35 * content_h / 9)))
    return scale, ((cols + 2) * scale, 9 * scale)


def text_bitmap(text: str) -> np.ndarray:
    """Boolean (7, 6*len-1) bitmap of ``text`` in the built-in 5x7 font."""
    parts = []
    for i, ch in enumerate(text.upper()):
        if i:
            parts.append(np.zeros((7, 1), dtype=bool))
        parts.append(FONT[ch])
    return np.concatenate(parts, axis=1)
