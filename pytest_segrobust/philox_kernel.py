"""Philox-4x32-10 blocks as one compiled loop (numba), for the CPU path of :mod:`pytest_segrobust.philox`.

Imported only by :func:`pytest_segrobust.philox._compiled_blocks`, and only where numba is
installed: importing this module imports numba and compiles (or loads from numba's cache)
the one kernel. The kernel computes the same 32-bit words as the numpy and torch paths
(integer arithmetic only: each 32 x 32-bit product is one exact uint64 multiply), about
fifteen times faster than the numpy rounds, because LLVM keeps a block's four words in
registers through the ten rounds and vectorises the loop over blocks.
"""

from __future__ import annotations

import numba
import numpy as np

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
