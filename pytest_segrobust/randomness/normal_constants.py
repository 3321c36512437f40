"""The numbers of :func:`pytest_segrobust.randomness.philox.exact_normal`, shared by its tensor path and its compiled loop.

A module of its own so that :mod:`pytest_segrobust.randomness.philox_kernel` (numba) reads the
very values the tensor path uses without importing :mod:`pytest_segrobust.randomness.philox`.
"""

from __future__ import annotations

import math

import numpy as np

# :func:`exact_normal`'s numbers, all float32 values. The log's: 2, the series' 2 / (2 k + 1)
# for k = 1..4 (the next term is below 2e-9 of the sum for |s| <= 0.172), ln 2 in a head of
# 11 bits (k ln 2 exact up to |k| = 33) and its tail, and -2. The angle's: pi/4 2^-29, the
# sine's Taylor coefficients to x^9 and the cosine's to x^10 (below 2e-9 past them on [0, pi/4]).
LN2_HEAD = 1419 * 2.0**-11
EXACT_LOG_CONSTANTS = tuple(
    float(np.float32(c)) for c in (2.0, 2 / 3, 2 / 5, 2 / 7, 2 / 9, LN2_HEAD, math.log(2) - LN2_HEAD, -2.0)
)
EXACT_ANGLE_CONSTANTS = tuple(
    float(np.float32(c))
    for c in (
        math.pi / 4 * 2.0**-29,
        *((-1) ** k / math.factorial(2 * k + 1) for k in range(1, 5)),
        *((-1) ** k / math.factorial(2 * k) for k in range(1, 6)),
    )
)
# floor(sqrt(2) 2^e): v / 2^e > sqrt 2 exactly when v > EXACT_FOLDS[e].
EXACT_FOLDS = tuple(math.isqrt(2 ** (2 * e + 1)) for e in range(34))
