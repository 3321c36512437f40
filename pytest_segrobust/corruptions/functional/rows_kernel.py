"""Affine warps that keep every row a row, as compiled row blends (numba), for the CPU path of
:func:`~.geometry.sample_affine_bilinear`.

Imported only by :func:`pytest_segrobust.corruptions.functional.geometry._compiled_rows`, and
only where numba is installed. An inverse map ``(x, y) -> (x + slope y + intercept, y + k)``
with a whole ``k`` (an x-shear, a shift along x by any amount and along y by whole rows) reads
every output row from one source row, shifted along it by a constant: bilinear sampling there
blends two neighbouring pixels of that row with one weight for the whole row, what
``warpAffine`` computes through a 2-D map and four neighbours. Each output pixel is
``left + weight (right - left)``, OpenCV's blend; a neighbour outside the frame reads
``fill``. The rows' inner part, where both neighbours are inside, has no branch, so LLVM
vectorises it.
"""

from __future__ import annotations

import math

import numba
import numpy as np


@numba.njit(inline="always")
def _edge_blend(row: np.ndarray, column: int, weight: float, fill: float) -> float:  # pragma: no cover - compiled
    # Columns ``column`` and ``column + 1`` of ``row``, each ``fill`` outside it.
    width = row.shape[0]
    left = row[column] if 0 <= column < width else fill
    right = row[column + 1] if 0 <= column + 1 < width else fill
    return left + weight * (right - left)


@numba.njit("void(float32[:, :, ::1], float64, float64, int64, float32, float32[:, :, ::1])", cache=True, nogil=True)
def shift_rows_into(
    image: np.ndarray, slope: float, intercept: float, row_shift: int, fill: float, out: np.ndarray
) -> None:  # pragma: no cover - compiled
    """Output ``(x, y)`` of every plane of ``image`` reads ``(x + slope y + intercept, y + row_shift)``, into ``out``.

    ``image`` and ``out``: ``(C, H, W)`` float32. The row's offset and its split into whole
    pixels and a weight are computed in float64, the weight then rounded to float32.
    """
    channels, height, width = image.shape
    for y in range(height):
        source_row = y + row_shift
        offset = slope * y + intercept
        whole = math.floor(offset)
        weight = np.float32(offset - whole)
        shift = int(whole)
        # Output x blends source columns x + shift and x + shift + 1: both inside for x in [first, last).
        first = min(max(-shift, 0), width)
        last = max(min(width - 1 - shift, width), first)
        for c in range(channels):
            target = out[c, y]
            if source_row < 0 or source_row >= height:
                target[:] = fill
                continue
            row = image[c, source_row]
            lefts = row[first + shift : last + shift]
            rights = row[first + shift + 1 : last + shift + 1]
            inner = target[first:last]
            for j in range(last - first):
                inner[j] = lefts[j] + weight * (rights[j] - lefts[j])
            for x in range(first):
                target[x] = _edge_blend(row, x + shift, weight, fill)
            for x in range(last, width):
                target[x] = _edge_blend(row, x + shift, weight, fill)
