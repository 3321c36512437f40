"""Sparse correlations as compiled shifted sums (numba), for the CPU path of :func:`~.filters.compiled_shift_sum`.

Imported only through :func:`pytest_segrobust.corruptions.functional.filters._compiled_shifts`,
and only where numba is installed. Every output row is the first tap's product, then each
further tap's product added, in the taps' order: per pixel the very IEEE steps of
:func:`~.filters.shift_sum` (product rounded, then sum rounded; LLVM contracts nothing
without fast-math), so the same bits. The loop over a row's pixels has no branch and reads
contiguous memory, so LLVM vectorises it; the row being summed stays in the L1 cache.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(
    "void(float32[:, :, ::1], int64[::1], int64[::1], float32[::1], float32[:, :, ::1])",
    cache=True,
    nogil=True,
    error_model="numpy",
)
def shift_sum_into(
    padded: np.ndarray, rows: np.ndarray, columns: np.ndarray, weights: np.ndarray, out: np.ndarray
) -> None:  # pragma: no cover - compiled
    """``out[c, y, x] = sum_t weights[t] * padded[c, y + rows[t], x + columns[t]]``, summed in tap order.

    ``padded``: ``(C, H + top + bottom, W + left + right)``, the planes already padded;
    ``out``: ``(C, H, W)``; ``rows`` and ``columns``: every tap's offset into the padding.
    """
    channels, height, width = out.shape
    for c in range(channels):
        for y in range(height):
            target = out[c, y]
            source = padded[c, y + rows[0], columns[0] : columns[0] + width]
            weight = weights[0]
            for x in range(width):
                target[x] = source[x] * weight
            for t in range(1, rows.shape[0]):
                source = padded[c, y + rows[t], columns[t] : columns[t] + width]
                weight = weights[t]
                for x in range(width):
                    target[x] = target[x] + source[x] * weight
