"""Zoom blur's aligned-corner zooms as compiled row blends (numba), for the CPU path of :func:`~.blur.zoom_blur`.

Imported only by :func:`pytest_segrobust.corruptions.functional.blur._compiled_zoom`, and
only where numba is installed. A zoom by an axis-aligned scale is separable: every output
row blends two rows of the crop resampled along x, and every such row blends two source
pixels per output pixel. Done directly, the second blend gathers pixels along x, which LLVM
does not vectorise (and OpenCV's ``warpAffine`` computes a full 2-D map); done on
transposed planes, both passes blend whole contiguous rows (vectorised), with OpenCV's
``transpose`` between them. Each output pixel is
``(1 - b) ((1 - a) x00 + a x01) + b ((1 - a) x10 + a x11)``, the order of torch's bilinear
kernel, with float32 positions ``scale * i`` as torch computes them.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def _blend_rows(
    source: np.ndarray,
    first_row: int,
    rows: int,
    first_column: int,
    length: int,
    scale: float,
    out: np.ndarray,
    accumulate: bool,
) -> None:  # pragma: no cover - compiled
    # The one loop of both kernels. ``accumulate`` is tested once per row, outside the inner
    # loops, so each of them stays a plain vectorisable blend (CPU time measured as before).
    one = np.float32(1.0)
    for i in range(out.shape[0]):
        position = scale * np.float32(i)
        below = min(int(position), rows - 1)
        above = min(below + 1, rows - 1)
        weight = position - np.float32(below)
        row0 = source[first_row + below, first_column : first_column + length]
        row1 = source[first_row + above, first_column : first_column + length]
        target = out[i]
        if accumulate:
            for j in range(length):
                target[j] += (one - weight) * row0[j] + weight * row1[j]
        else:
            for j in range(length):
                target[j] = (one - weight) * row0[j] + weight * row1[j]


@numba.njit("void(float32[:, ::1], int64, int64, int64, int64, float32, float32[:, ::1])", cache=True, nogil=True)
def blend_rows(
    source: np.ndarray, first_row: int, rows: int, first_column: int, length: int, scale: float, out: np.ndarray
) -> None:  # pragma: no cover - compiled
    """Row ``i`` of ``out`` is the blend of ``source``'s rows at ``first_row + scale * i`` (aligned corners).

    Only columns ``first_column : first_column + length`` are read, into ``out[i, :length]``.
    Positions past the last of the ``rows`` rows read that row (with weight 0 on the next,
    never read), as torch does.
    """
    _blend_rows(source, first_row, rows, first_column, length, scale, out, False)


@numba.njit("void(float32[:, ::1], int64, int64, float32, float32[:, ::1])", cache=True, nogil=True)
def add_blended_rows(
    source: np.ndarray, rows: int, length: int, scale: float, out: np.ndarray
) -> None:  # pragma: no cover - compiled
    """Add to row ``i`` of ``out`` the blend of ``source``'s rows at ``scale * i``, first ``length`` columns.

    ``source``'s first ``rows`` rows are the ones read, as in :func:`blend_rows`.
    """
    _blend_rows(source, 0, rows, 0, length, scale, out, True)
