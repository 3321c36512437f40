"""Philox-4x32-10 blocks as one compiled loop (numba), for the CPU path of :mod:`pytest_segrobust.randomness.philox`.

Imported only by :func:`pytest_segrobust.randomness.philox._compiled_blocks` and
:func:`~pytest_segrobust.randomness.philox._compiled_box_muller`, and only where numba is installed:
importing this module imports numba and compiles (or loads from numba's cache) its kernels.
The Philox kernel computes the same 32-bit words as the numpy and torch paths
(integer arithmetic only: each 32 x 32-bit product is one exact uint64 multiply), about
fifteen times faster than the numpy rounds, because LLVM keeps a block's four words in
registers through the ten rounds and vectorises the loop over blocks. Three more loops make
the steps of :func:`~pytest_segrobust.randomness.philox.normal`'s Box-Muller transform around its
vectorised ``log`` and ``polarToCart`` (:func:`pytest_segrobust.randomness.philox._compiled_box_muller`
loads and checks them).
"""

from __future__ import annotations

import math

import numba
import numpy as np

from pytest_segrobust.randomness.normal_constants import EXACT_ANGLE_CONSTANTS, EXACT_LOG_CONSTANTS

_M0 = np.uint64(0xD2511F53)
_M1 = np.uint64(0xCD9E8D57)
_W0 = np.uint32(0x9E3779B9)
_W1 = np.uint32(0xBB67AE85)
_HIGH = np.uint64(32)


@numba.njit("void(uint32, uint32, uint32, int64, uint32[::1])", cache=True, nogil=True, error_model="numpy")
def philox_blocks(
    key0: int, key1: int, stream: int, first: int, out: np.ndarray
) -> None:  # pragma: no cover - compiled
    """The words of blocks ``first, first + 1, ...`` of a stream, block ``first + i`` into ``out[4 i : 4 i + 4]``.

    ``out`` is flat (``4 n`` words for ``n`` blocks): indexed as a 2-D array, LLVM no longer
    vectorises the loop (six times slower). Block ``j``'s counter is ``(j, stream, 0, 0)``
    and its key ``(key0, key1)``, as on the other paths. Every value stays below 2**32
    (products are split into their halves and the key schedule is truncated to 32 bits),
    so the integer types numba infers change no bit.
    """
    for i in range(out.shape[0] // 4):
        c0 = np.uint32(first + i)
        c1 = np.uint32(stream)
        c2 = np.uint32(0)
        c3 = np.uint32(0)
        k0 = np.uint32(key0)
        k1 = np.uint32(key1)
        for _ in range(10):
            p0 = np.uint64(c0) * _M0
            p1 = np.uint64(c2) * _M1
            c0 = np.uint32(p1 >> _HIGH) ^ c1 ^ k0
            c1 = np.uint32(p1)
            c2 = np.uint32(p0 >> _HIGH) ^ c3 ^ k1
            c3 = np.uint32(p0)
            k0 = np.uint32(k0 + _W0)
            k1 = np.uint32(k1 + _W1)
        out[4 * i] = c0
        out[4 * i + 1] = c1
        out[4 * i + 2] = c2
        out[4 * i + 3] = c3


# The Box-Muller steps of :func:`pytest_segrobust.randomness.philox.normal` around its ``log`` and its
# ``r cos a``, ``r sin a`` (which numpy and OpenCV vectorise): each is one pass of exact
# conversions and correctly rounded IEEE operations, in the numpy path's order, so the same bits.


@numba.njit(
    "void(uint32[:], uint32[:], uint32[:], uint32[:], float64, float64[::1], float64[::1])",
    cache=True,
    nogil=True,
    error_model="numpy",
)
def box_muller_inputs(
    w0: np.ndarray,
    w1: np.ndarray,
    w2: np.ndarray,
    w3: np.ndarray,
    angle_per_word: float,
    radius: np.ndarray,
    angle: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """A slice's uniforms on ``(0, 1]`` and angles, its pairs in order, from its blocks' four words.

    Block ``j`` holds pairs ``2 j`` (words 0 and 1) and ``2 j + 1`` (words 2 and 3); pair
    ``p`` gets ``radius[p] = (w + 1) 2^-32`` of its first word and ``angle[p] = w angle_per_word``
    of its second.
    """
    for j in range(w0.shape[0]):
        radius[2 * j] = (np.float64(w0[j]) + 1.0) * 2.0**-32
        radius[2 * j + 1] = (np.float64(w2[j]) + 1.0) * 2.0**-32
        angle[2 * j] = np.float64(w1[j]) * angle_per_word
        angle[2 * j + 1] = np.float64(w3[j]) * angle_per_word


@numba.njit("void(float64[::1])", cache=True, nogil=True, error_model="numpy")
def radius_from_log(values: np.ndarray) -> None:  # pragma: no cover - compiled
    """``sqrt(-2 log u)`` from ``log u``, in place."""
    for i in range(values.shape[0]):
        values[i] = math.sqrt(values[i] * -2.0)


@numba.njit("void(float64[::1], float64[::1], float32[::1], float32[::1])", cache=True, nogil=True, error_model="numpy")
def round_into(
    x: np.ndarray, y: np.ndarray, x_out: np.ndarray, y_out: np.ndarray
) -> None:  # pragma: no cover - compiled
    """``x`` and ``y`` rounded to float32 (to nearest, ties to even), into ``x_out`` and ``y_out``."""
    for i in range(x.shape[0]):
        x_out[i] = np.float32(x[i])
        y_out[i] = np.float32(y[i])


# :func:`pytest_segrobust.randomness.philox.exact_normal`'s transform, compiled: float32 IEEE
# steps only (integer bit arithmetic, +, -, *, / and sqrt, no library log, cos or sin), each
# written in the order of the tensor path's operations, so the same bits. Its constants are
# the tensor path's, frozen into the loop by numba.

_F = np.float32
_TWO, _A3, _A5, _A7, _A9, _LN2_HEAD, _LN2_TAIL, _MINUS_TWO = (_F(c) for c in EXACT_LOG_CONSTANTS)
_STEP, _S3, _S5, _S7, _S9, _C2, _C4, _C6, _C8, _C10 = (_F(c) for c in EXACT_ANGLE_CONSTANTS)
# v / 2^e > sqrt 2 exactly when v > floor(sqrt(2) 2^e): for e <= 33 no integer lies between
# sqrt(2) 2^e and its float64, so the float64 comparison gives the integer one
# (tests/randomness check it against EXACT_FOLDS).
_SQRT2 = math.sqrt(2.0)


@numba.njit(inline="always")
def _radius(word: int) -> float:  # pragma: no cover - compiled
    # sqrt(-2 log u), u = (word + 1) 2^-32 = (1 + f) 2^(e - 32) with 1 + f in (1/sqrt 2, sqrt 2].
    v = np.int64(word) + 1
    wide = np.float64(v)
    e = np.int64(wide.view(np.uint64) >> np.uint64(52)) - 1023
    e += np.int64(wide > _SQRT2 * np.float64(np.int64(1) << e))
    f = _F(v - (np.int64(1) << e)) * np.uint32((127 - e) << 23).view(np.float32)
    s = f / (f + _TWO)
    z = s * s
    log1p = s * _TWO + s * z * (z * (z * (z * _A9 + _A7) + _A5) + _A3)
    k = _F(e - 32)
    return np.sqrt((k * _LN2_HEAD + (k * _LN2_TAIL + log1p)) * _MINUS_TWO)


@numba.njit("void(uint32[::1], float32[::1], float32[::1])", cache=True, nogil=True, error_model="numpy")
def exact_box_muller(words: np.ndarray, cosines: np.ndarray, sines: np.ndarray) -> None:  # pragma: no cover - compiled
    """Pair ``p`` of ``words`` (words ``2 p`` and ``2 p + 1``) into ``cosines[p]`` and ``sines[p]``."""
    for p in range(cosines.shape[0]):
        r = _radius(words[2 * p])
        w = np.int64(words[2 * p + 1])
        octant = w >> 29
        rho = w & 0x1FFFFFFF
        t = _F((1 << 29) - rho if (octant & 1) != 0 else rho) * _STEP
        z = t * t
        sine = t + t * z * (z * (z * (z * _S9 + _S7) + _S5) + _S3)
        cosine = z * (z * (z * (z * (z * _C10 + _C8) + _C6) + _C4) + _C2) + _F(1.0)
        swap = ((octant + 1) & 2) != 0
        c = sine if swap else cosine
        s = cosine if swap else sine
        cosines[p] = r * (-c if ((octant + 2) & 4) != 0 else c)
        sines[p] = r * (-s if (octant & 4) != 0 else s)
