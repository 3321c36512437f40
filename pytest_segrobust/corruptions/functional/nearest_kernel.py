"""Nearest-neighbour resampling of label maps and masks as compiled loops (numba), for the CPU path of
:func:`~.geometry.sample_nearest`.

Imported only by :func:`pytest_segrobust.corruptions.functional.geometry._compiled_nearest`,
and only where numba is installed. The tensor path rounds each coordinate with
``floor(c + 0.5)`` in the coordinates' float type, converts it to an integer, keeps the
positions inside the frame and gathers; here each output pixel's source index is found once,
with the same float operations, and every layer (a label map, or each of a sample's instance
masks) is copied through it. A coordinate whose rounded value lies outside the frame, or is
not a number, reads ``fill``, as there: the comparisons are made on the rounded float, so no
huge or NaN value is ever converted to an integer.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True, error_model="numpy")
def source_pixels(
    coords: np.ndarray, half: float, height: int, width: int, rows: np.ndarray, columns: np.ndarray
) -> None:  # pragma: no cover - compiled
    """Each output pixel's source row and column from ``(B, H', W', 2)`` coordinates ``(x, y)``; row -1 outside.

    ``half`` is 0.5 in the coordinates' float type; ``rows`` and ``columns`` are ``(B, H', W')`` int32.
    """
    for b in range(coords.shape[0]):
        for y in range(coords.shape[1]):
            for x in range(coords.shape[2]):
                fx = np.floor(coords[b, y, x, 0] + half)
                fy = np.floor(coords[b, y, x, 1] + half)
                if fx >= 0 and fx < width and fy >= 0 and fy < height:
                    rows[b, y, x] = int(fy)
                    columns[b, y, x] = int(fx)
                else:
                    rows[b, y, x] = -1
                    columns[b, y, x] = 0


@numba.njit(cache=True, nogil=True, error_model="numpy")
def gather_into(
    labels: np.ndarray, rows: np.ndarray, columns: np.ndarray, fill: int, out: np.ndarray
) -> None:  # pragma: no cover - compiled
    """``out[b, n, y, x] = labels[b, n, rows[b, y, x], columns[b, y, x]]``, ``fill`` where the row is -1.

    labels: ``(B, N, H, W)``; rows, columns: ``(B, H', W')``; out: ``(B, N, H', W')``.
    """
    for b in range(labels.shape[0]):
        for n in range(labels.shape[1]):
            source, target = labels[b, n], out[b, n]
            for y in range(out.shape[2]):
                for x in range(out.shape[3]):
                    row = rows[b, y, x]
                    target[y, x] = fill if row < 0 else source[row, columns[b, y, x]]
