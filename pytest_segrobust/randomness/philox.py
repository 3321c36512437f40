"""Counter-based random numbers that are the same on every device: Philox-4x32-10 in plain torch (numpy on CPUs).

``torch.Generator`` streams differ between CPU and CUDA, so a baseline recorded on a CPU
runner would be compared with other corrupted pixels on a GPU machine. Philox (Salmon et
al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011; the generator of cuRAND and of
JAX) is a pure function ``(counter, key) -> 4 x 32 random bits``: written here with 64-bit
integer tensor ops only, it gives bit-identical words on CPU, CUDA and MPS, for any batch.
Each 32 x 32-bit product is one int64 multiply that wraps modulo 2**64 where a one-off
check on the device confirms it does, and is otherwise split into 16-bit halves so that
nothing overflows; both give the same bits. On a CPU the same function runs in numpy on
uint32 lanes (:func:`_numpy_rounds`: one uint64 product per multiply, its halves read as
two uint32 views without copying, every result written into arrays made once per draw and
reused slice by slice, so that a slice of blocks stays in cache), three to four times
faster than the int64 tensor ops (``benchmarks/philox.py``); the draws below take their
words from it there and are the same bits. Where numba is installed (optional), a
compiled loop makes those words instead (:mod:`pytest_segrobust.randomness.philox_kernel`, checked
against the numpy rounds once per process, :func:`_compiled_for` picks it), another five
to six times faster: a ``(3, 512, 512)`` field of words in 0.7 ms; draws of a few blocks per seed
(a sign, a corruption's parameters) take Python integers (:func:`_python_words`), the same
bits without the fixed cost of fifty array calls. There :func:`normal` also makes its float64
Box-Muller transform slice by slice, on the words just made, with the torch path's exact
conversions and products, numpy's ``log`` and ``sqrt`` (the exact steps around ``log`` as
compiled loops where the words are compiled: :func:`_compiled_box_muller`), and OpenCV's
``polarToCart`` for ``r cos`` and ``r sin`` in one pass where it is float64-accurate
(:func:`_polar_to_cartesian`; torch's ``cos`` and ``sin`` elsewhere): float64 values
within an ulp or two of the torch path's, rounded to the same float32 bits (no value of
1.9e8 compared differed). :func:`_uses_numpy` is the one place that picks the path.

A sample's 63-bit seed (:func:`pytest_segrobust.randomness.seeding.sample_seed`) is the key; the
counter is ``(block, stream, 0, 0)``, so every ``stream`` (one per kind of draw inside a
corruption) is an independent sequence and no draw depends on another's length.

Derived draws, and how exact they are across devices:

* :func:`uniform`: the top 24 bits times 2^-24 (float32) or all 32 times 2^-32 (float64),
  exact everywhere;
* :func:`integers`: Lemire's multiply-shift of 32 random bits (spans up to 2^31), exact
  everywhere (bias below ``(high - low) / 2**32``, far below anything a corruption can show);
* :func:`normal`: Box-Muller from two uniforms; ``log``, ``sqrt``, ``cos`` and ``sin`` are
  computed in float64, where vendors' libraries differ by at most an ulp or two (~1e-15 relative),
  then rounded to float32: the results agree to the last float32 bit except where that
  rounding falls on a tie of float64 noise, a difference of 1 float32 ulp at most;
* :func:`exact_normal`: :func:`normal`'s pairs from the same words in float32 steps that are
  exact or correctly rounded (no library transcendental function): the same bits on every
  device, within 3 float32 ulps of :func:`normal`;
* :func:`poisson`: inversion of the CDF for rates up to :data:`POISSON_INVERSION_LIMIT`
  (exact given the uniforms, up to the float64 rounding of the CDF's terms: a count can
  differ across devices only where a uniform lies within a few float64 ulps of a CDF step;
  the search starts at the mode and walks a few ``sqrt(rate)`` steps at most; where rates
  repeat, as in an 8-bit image times a photon count, each rate's CDF values are tabulated
  once and looked up instead, with the walk's counts bit for bit), and a rounded normal
  approximation with continuity correction above it, where the two distributions differ
  by less than 1% in total variation. On a CPU with numba, the grouping, the tables, their
  lookup and the walks are compiled loops (:func:`_compiled_inversion`) around torch's
  ``gammaincc``, ``lgamma``, ``log`` and ``exp``: the same counts, 2-4x faster
  (``benchmarks/poisson.py``).
"""

from __future__ import annotations

import functools
import importlib
import math
from collections.abc import Callable, Iterator, Sequence
from types import ModuleType

import numpy as np
import torch

from pytest_segrobust.core.opencv import opencv
from pytest_segrobust.randomness.normal_constants import EXACT_ANGLE_CONSTANTS, EXACT_FOLDS, EXACT_LOG_CONSTANTS

_MULTIPLIERS = (0xD2511F53, 0xCD9E8D57)
_WEYL = (0x9E3779B9, 0xBB67AE85)  # the key schedule's increments (golden ratio, sqrt(3) - 1)
_MASK32 = 0xFFFFFFFF
_MASK16 = 0xFFFF
ROUNDS = 10
# Blocks per CPU slice times samples: 256 KiB per int64 temporary (the torch path on a CPU,
# used only where a test forces it).
_CPU_CHUNK_WORDS = 2**15
# Blocks per slice of the numpy path: 256 KiB per uint64 product (for 3 x 512 x 512 words,
# 2**15 and 2**16 blocks per slice take about the same time, 2**13 a quarter longer; the
# normal transform, 2 MiB of float64 per slice, is fastest at 2**15).
_NUMPY_CHUNK_BLOCKS = 2**15
# The first draw of at least this many blocks (a (3, 209, 209) field) loads the compiled
# kernel; smaller ones before it take the numpy rounds (see _compiled_for).
_COMPILED_MIN_BLOCKS = 2**15
# Draws of at most this many blocks per seed (a sign, an angle, a few parameters) are made
# with Python integers (:func:`_python_words`): 5-7x less CPU than the numpy rounds at one
# block, 2x with cold caches, 1.4-2x at 8 blocks, even at 16 (benchmarks/philox.py).
_PYTHON_MAX_BLOCKS = 8
# Rates up to this draw Poisson variates by inverting the CDF; above it, a normal approximation.
POISSON_INVERSION_LIMIT = 256.0
# Poisson rates are grouped by hashing their bits into this many buckets (2**16: 512 KiB).
_RATE_BUCKETS_LOG2 = 16
# Odd 64-bit multiplier of the hash (2**64 over the golden ratio), as an int64.
_RATE_HASH = 0x9E3779B97F4A7C15 - 2**64
# A bucket no rate fell into holds the bits of a NaN, which no valid rate has.
_NO_RATE = 0x7FF8000000000001
# Tables of the CDF pay for themselves where each distinct rate has this many values or more
# (3 x 512 x 512 values with 24576 rates: 2.2x faster than the walk at 12 photons, 1.2x at
# 250), and are made for this many distinct rates at most (about 200 float64 values and
# labels each at rates near POISSON_INVERSION_LIMIT: 25 MiB).
_VALUES_PER_RATE = 32
_MOST_TABLES = 2**13
# A table runs down from the mode until its CDF is at most this (a uniform below it walks
# instead: one value in 2**24 or fewer) and up until its CDF exceeds the next.
_TABLE_LOW = 2.0**-30
_TABLE_HIGH = 1.0 - 2.0**-30
# At most this many steps each way (rates up to POISSON_INVERSION_LIMIT need about 100),
# asking whether to stop after every few (a step past the end is only a longer table).
_TABLE_MAX_STEPS = 1024
_TABLE_STEPS_PER_CHECK = 8
# Bins of U[0, 1) per rate in the guide of a table lookup, at most (and at most one per value).
_GUIDE_BINS = 2**10
# Fields of at least this many values (a (3, 128, 128) image) load numba's Poisson loops
# (see _compiled_poisson_for); smaller ones before it take the torch path.
_POISSON_COMPILED_MIN_VALUES = 3 * 128 * 128
# Bins of U[0, 1) per rate in the guide of the compiled table lookup, at most.
_COMPILED_GUIDE_BINS = 2**8
# The dtypes that draws convert words to, and numpy's names for them.
_NUMPY_DTYPES = {torch.int64: np.int64, torch.int32: np.int32, torch.float32: np.float32, torch.float64: np.float64}
# A word's angle in the Box-Muller transform is the word times this (2 pi 2^-32, a float64).
_ANGLE_PER_WORD = 2.0 * math.pi * 2.0**-32


def philox4x32(counter: torch.Tensor, key: torch.Tensor, rounds: int = ROUNDS) -> torch.Tensor:
    """The Philox-4x32 block function.

    Args:
        counter: ``(..., 4)`` int64 tensor of 32-bit words.
        key: ``(..., 2)`` int64 tensor of 32-bit words, broadcastable with ``counter``'s batch.
        rounds: 10 for Philox-4x32-10.

    Returns:
        ``(..., 4)`` int64 tensor of 32 random bits each.
    """
    if counter.dtype != torch.int64 or key.dtype != torch.int64:
        raise TypeError("counter and key are int64 tensors of 32-bit words")
    c0, c1, c2, c3 = counter.unbind(-1)
    k0, k1 = key.unbind(-1)
    mul_hi_lo = _mul_hi_lo_wrapping if _wraps_exactly(counter.device) else _mul_hi_lo
    for _ in range(rounds):
        hi0, lo0 = mul_hi_lo(c0, _MULTIPLIERS[0])
        hi1, lo1 = mul_hi_lo(c2, _MULTIPLIERS[1])
        # Keys broadcast over the counters' batch: xor them in first, into a tensor of the full shape.
        c0, c1, c2, c3 = (hi1 ^ k0).bitwise_xor_(c1), lo1, (hi0 ^ k1).bitwise_xor_(c3), lo0
        k0, k1 = (k0 + _WEYL[0]) & _MASK32, (k1 + _WEYL[1]) & _MASK32
    return torch.stack(torch.broadcast_tensors(c0, c1, c2, c3), dim=-1)


def _mul_hi_lo(value: torch.Tensor, multiplier: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The high and low 32 bits of ``value * multiplier`` for 32-bit operands, in int64 without overflow.

    With ``multiplier = m_hi * 2**16 + m_lo``: ``b = value * m_hi`` and ``a = value * m_lo`` are
    below 2**48, and ``value * multiplier = (b >> 16) * 2**32 + t`` with
    ``t = a + (b & 0xFFFF) * 2**16`` below 2**49.
    """
    b = value * (multiplier >> 16)
    t = (b & _MASK16).bitwise_left_shift_(16).add_(value * (multiplier & _MASK16))
    high = b.bitwise_right_shift_(16).add_(t >> 32)
    return high, t.bitwise_and_(_MASK32)


def _mul_hi_lo_wrapping(value: torch.Tensor, multiplier: int) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`_mul_hi_lo` with one int64 product that wraps modulo 2**64 (half the tensor ops).

    The true product ``P`` is below 2**64; stored as int64 it reads ``P - 2**64`` when
    ``P >= 2**63``, which changes neither its low 32 bits nor, after an arithmetic shift
    by 32, the low 32 bits of the shifted value. Used only where :func:`_wraps_exactly`
    has seen the device wrap.
    """
    product = value * multiplier
    return (product >> 32).bitwise_and_(_MASK32), product.bitwise_and_(_MASK32)


@functools.cache
def _wraps_exactly(device: torch.device) -> bool:
    # Every device we know of wraps int64 products modulo 2**64 (two's complement), but a
    # signed overflow is not promised by C++: check once per device against the split
    # multiply, on operands that overflow and that do not, before trusting it.
    values = torch.tensor(
        [0, 1, 0xFFFF, 0x10000, 0x7FFFFFFF, 0x80000000, 0xDEADBEEF, _MASK32, 0x9E3779B9, 0x12345678],
        dtype=torch.int64,
        device=device,
    )
    # ... and 4096 spread over all 32 bits (a Weyl sequence: no random state needed).
    values = torch.cat([values, (torch.arange(1, 4097, dtype=torch.int64, device=device) * _WEYL[0]) & _MASK32])
    for multiplier in _MULTIPLIERS:
        wrapped, split = _mul_hi_lo_wrapping(values, multiplier), _mul_hi_lo(values, multiplier)
        if not (torch.equal(wrapped[0], split[0]) and torch.equal(wrapped[1], split[1])):
            return False
    return True


def _philox4x32_numpy(
    counter: Sequence[np.ndarray | int], key: tuple[int, int], out: np.ndarray, rounds: int = ROUNDS
) -> np.ndarray:
    """:func:`philox4x32` in numpy on uint32 lanes, into ``out``.

    Args:
        counter: four words, each a uint32 array of shape ``(n,)`` or a Python integer.
        key: the two 32-bit key words.
        out: ``(n, 4)`` uint32 array that receives the words.
        rounds: 10 for Philox-4x32-10.

    Returns:
        ``out``.
    """
    out[:, 0], out[:, 1], out[:, 2], out[:, 3] = _numpy_rounds(counter, key, _RoundBuffers(len(out)), rounds)
    return out


class _RoundBuffers:
    """The arrays that :func:`_numpy_rounds` writes, made once for up to ``size`` blocks at a time.

    Two sets of two uint64 products, used by turns (a round reads the low halves of the
    previous round's products while it writes its own), with their uint32 halves as views,
    and the two words that each round's XORs make. Writing into these instead of new arrays
    keeps a slice of blocks in cache and spares numpy's allocator every operation.
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self.products = np.empty((2, 2, size), dtype=np.uint64)
        # A product's low and high words: [..., 0] and [..., 1] on a little-endian machine.
        self.halves = self.products.view(np.uint32).reshape(2, 2, size, 2)
        self.words = np.empty((2, size), dtype=np.uint32)
        # A slice's blocks where the compiled kernel makes them (:func:`_compiled_blocks`).
        self.blocks = np.empty(4 * size, dtype=np.uint32)

    @classmethod
    def for_slices(cls, blocks: int) -> _RoundBuffers:
        """Buffers for ``blocks`` blocks made :data:`_NUMPY_CHUNK_BLOCKS` at a time."""
        return cls(max(1, min(blocks, _NUMPY_CHUNK_BLOCKS)))


def _numpy_rounds(
    counter: Sequence[np.ndarray | int], key: tuple[int, int], buffers: _RoundBuffers, rounds: int = ROUNDS
) -> tuple[np.ndarray | int, ...]:
    """:func:`philox4x32` in numpy on uint32 lanes: the four output words of ``n`` blocks.

    Each 32 x 32-bit product is one uint64 multiply (exact: it is below 2**64); its high and
    low halves are the odd and even uint32 words of the product's memory on a little-endian
    machine, read as strided views rather than shifted and cast into new arrays. Counter
    words given as Python integers (a stream's constant words) stay integers while they
    can: a random block's first two rounds then cost about one round of array work.

    Args:
        counter: four words, each a uint32 array of shape ``(n,)`` or a Python integer, ``n``
            at most ``buffers.size``.
        key: the two 32-bit key words.
        buffers: where the rounds write; the words returned are views of it (or integers),
            valid until ``buffers`` is used again.
        rounds: 10 for Philox-4x32-10.
    """
    c0, c1, c2, c3 = counter
    n = next((len(word) for word in counter if not isinstance(word, int)), 1)
    k0, k1 = key
    for round_ in range(rounds):
        turn = round_ % 2
        hi0, lo0 = _mul_hi_lo_numpy(c0, _MULTIPLIERS[0], buffers.products[turn, 0, :n], buffers.halves[turn, 0, :n])
        hi1, lo1 = _mul_hi_lo_numpy(c2, _MULTIPLIERS[1], buffers.products[turn, 1, :n], buffers.halves[turn, 1, :n])
        # c0 and c2 were read by the multiplies: their buffers take the new words.
        c0, c1, c2, c3 = (
            _xor_numpy(hi1, c1, k0, buffers.words[0, :n]),
            lo1,
            _xor_numpy(hi0, c3, k1, buffers.words[1, :n]),
            lo0,
        )
        k0, k1 = (k0 + _WEYL[0]) & _MASK32, (k1 + _WEYL[1]) & _MASK32
    return c0, c1, c2, c3


def _mul_hi_lo_numpy(
    value: np.ndarray | int, multiplier: int, product: np.ndarray, halves: np.ndarray
) -> tuple[np.ndarray | int, np.ndarray | int]:
    """The high and low 32 bits of ``value * multiplier``: uint32 views of one uint64 product (written into ``product``, seen as ``halves``), or integers."""
    if isinstance(value, int):
        result = value * multiplier
        return result >> 32, result & _MASK32
    np.multiply(value, np.uint64(multiplier), out=product)
    return halves[:, 1], halves[:, 0]


def _xor_numpy(a: np.ndarray | int, b: np.ndarray | int, key: int, out: np.ndarray) -> np.ndarray | int:
    """``a ^ b ^ key`` into ``out`` (or an integer), the integers folded together first."""
    if isinstance(a, int):
        a, b = b, a
    if isinstance(a, int):
        return a ^ b ^ key
    if isinstance(b, int):
        return np.bitwise_xor(a, np.uint32(b ^ key), out=out)
    np.bitwise_xor(a, b, out=out)
    out ^= np.uint32(key)
    return out


def _uses_numpy(device: torch.device) -> bool:
    """Whether draws on ``device`` take their words from :func:`_numpy_rounds` (CPUs) or torch.

    The one place where the path is chosen: tests force the torch path on a CPU through it.
    The numpy path reads a product's high word at the odd uint32 index, so it needs a
    little-endian machine (every CPU torch ships for).
    """
    return device.type == "cpu" and np.little_endian


def _check_draw(seeds: Sequence[int], count: int, stream: int) -> None:
    if not 0 <= stream <= _MASK32:
        raise ValueError(f"stream must be a 32-bit number, got {stream}")
    if any(not 0 <= s < 2**64 for s in seeds):
        raise ValueError("seeds are unsigned 64-bit numbers")
    if not 0 <= count <= 4 * 2**32:
        raise ValueError(f"a stream holds 4 * 2**32 words, not {count}")


def _numpy_slices(
    seed: int, stream: int, blocks: int, buffers: _RoundBuffers
) -> Iterator[tuple[int, int, tuple[np.ndarray | int, ...]]]:
    """Blocks ``0 .. blocks - 1`` of ``seed``'s ``stream``, ``buffers.size`` at a time: ``(start, stop, words)``.

    ``words`` are the four output words of blocks ``start .. stop - 1`` (views of
    ``buffers``, valid until the next slice is made).
    """
    key = (seed & _MASK32, seed >> 32)
    compiled = _compiled_for(blocks)
    for start in range(0, blocks, buffers.size):
        stop = min(blocks, start + buffers.size)
        if compiled is not None:
            blocks_made = buffers.blocks[: 4 * (stop - start)]
            compiled(*key, stream, start, blocks_made)
            yield start, stop, tuple(blocks_made.reshape(-1, 4).T)
            continue
        counter = (np.arange(start, stop, dtype=np.uint32), stream, 0, 0)
        yield start, stop, _numpy_rounds(counter, key, buffers)


def _compiled_for(blocks: int) -> Callable[..., None] | None:
    """The compiled kernel (:func:`_compiled_blocks`) for a draw of ``blocks`` blocks, or None for the numpy rounds.

    Loading numba and its kernel costs about 0.7 s of CPU once per process: it is done at
    the first draw of :data:`_COMPILED_MIN_BLOCKS` blocks or more (where it starts to pay
    for itself), and then serves draws of every size. The one place the words' path on a
    CPU is chosen; tests force either through it. Both give the same bits.
    """
    if blocks < _COMPILED_MIN_BLOCKS and not _compiled_blocks.cache_info().currsize:
        return None
    return _compiled_blocks()


@functools.cache
def _compiled_blocks() -> Callable[..., None] | None:
    """numba's compiled Philox loop (:mod:`pytest_segrobust.randomness.philox_kernel`), or None where it cannot be used.

    numba is optional: where it is not installed, or its kernel does not give the numpy
    rounds' words for a few thousand counters, keys and streams spread over all 32 bits
    (checked once per process, a millisecond), the numpy rounds make every word. Both give the same
    bits; the kernel is about fifteen times faster.
    """
    try:
        from pytest_segrobust.randomness.philox_kernel import philox_blocks
    except Exception:  # noqa: BLE001 - an optional accelerator: numba missing, too old for this numpy, or failing to compile
        return None
    blocks = 1024
    for key, stream, first in (
        ((0, 0), 0, 0),
        ((_MASK32, 0x12345678), _MASK32, 2**32 - blocks),
        ((0x9E3779B9, 2**31), 5, 123_456_789),
        ((0xDEADBEEF, 0x7FFFFFFF), 0x80000000, 2**31 - blocks // 2),
    ):
        buffers = _RoundBuffers(blocks)
        counter = (np.arange(first, first + blocks, dtype=np.uint64).astype(np.uint32), stream, 0, 0)
        expected = [np.array(word, dtype=np.uint32) for word in _numpy_rounds(counter, key, buffers)]
        words = np.empty(4 * blocks, dtype=np.uint32)
        philox_blocks(*key, stream, first, words)
        if not all(np.array_equal(ours, theirs) for ours, theirs in zip(words.reshape(-1, 4).T, expected)):
            return None
    return philox_blocks


def _numpy_words(seeds: Sequence[int], count: int, stream: int, shift: int = 0, dtype: type = np.uint32) -> np.ndarray:
    """:func:`random_bits` on the numpy path: ``(len(seeds), count)`` words shifted right by ``shift``, as ``dtype``.

    The shift and the conversion (both exact) are made slice by slice, while the words are in cache.
    """
    blocks = -(-count // 4)
    compiled = _compiled_for(blocks)
    if compiled is not None:
        # Whole rows at once, in place: the kernel writes the blocks where they belong.
        raw = np.empty((len(seeds), 4 * blocks), dtype=np.uint32)
        for row, seed in enumerate(seeds):
            compiled(seed & _MASK32, seed >> 32, stream, 0, raw[row])
        if shift:
            np.right_shift(raw, shift, out=raw)
        return (raw if dtype is np.uint32 else raw.astype(dtype)).reshape(len(seeds), blocks * 4)[:, :count]
    words = np.empty((len(seeds), blocks, 4), dtype=dtype)
    buffers = _RoundBuffers.for_slices(blocks)
    shifted = np.empty(buffers.size, dtype=np.uint32)
    for row, seed in enumerate(seeds):
        for start, stop, block_words in _numpy_slices(seed, stream, blocks, buffers):
            target = words[row, start:stop]
            for column, word in enumerate(block_words):
                if shift:
                    word = (
                        word >> shift
                        if isinstance(word, int)
                        else np.right_shift(word, shift, out=shifted[: stop - start])
                    )
                target[:, column] = word
    return words.reshape(len(seeds), blocks * 4)[:, :count]


def _numpy_normal(seeds: Sequence[int], count: int, stream: int) -> np.ndarray:
    """:func:`normal` on the numpy path: ``(len(seeds), count)`` float32, the torch path's values.

    The Box-Muller transform runs slice by slice on the words just made, in float64 with
    the torch path's operations (the same exact conversions, ``log``, ``sqrt`` and products;
    ``cos`` and ``sin`` through :func:`_polar_to_cartesian`), then rounds to float32. Block
    ``j`` holds pairs ``2j`` (words 0 and 1) and ``2j + 1`` (words 2 and 3); as on the torch
    path, the cosine values of all pairs come first, then the sine values, ``count`` in all.
    """
    pairs = -(-count // 2)
    blocks = -(-pairs // 2)
    made = 2 * blocks  # pairs made: one more than needed where ``pairs`` is odd
    values = np.empty((len(seeds), 2, made), dtype=np.float32)  # [cosine, sine] halves
    buffers = _RoundBuffers.for_slices(blocks)
    radius, angle, cosines, sines = np.empty((4, 2 * buffers.size))
    polar = _polar_to_cartesian()
    steps = _compiled_box_muller() if _compiled_for(blocks) is not None else None
    for row, seed in enumerate(seeds):
        for start, stop, (w0, w1, w2, w3) in _numpy_slices(seed, stream, blocks, buffers):
            size = stop - start
            # r[j, i], a[j, i] are pair 2 (start + j) + i: the slice's pairs in order, as their values lie in each half.
            r, a = radius[: 2 * size], angle[: 2 * size]
            if steps is not None:
                steps.box_muller_inputs(w0, w1, w2, w3, _ANGLE_PER_WORD, r, a)
                np.log(r, out=r)
                steps.radius_from_log(r)
            else:
                _box_muller_inputs(w0, w1, w2, w3, r.reshape(size, 2), a.reshape(size, 2))
                np.log(r, out=r)
                r *= -2.0
                np.sqrt(r, out=r)
            x, y = polar(r, a, cosines[: 2 * size], sines[: 2 * size])
            x_half, y_half = values[row, 0, 2 * start : 2 * stop], values[row, 1, 2 * start : 2 * stop]
            if steps is not None:
                steps.round_into(x.reshape(-1), y.reshape(-1), x_half, y_half)
            else:
                np.copyto(x_half, x.reshape(-1), casting="same_kind")
                np.copyto(y_half, y.reshape(-1), casting="same_kind")
    if made == pairs:
        return values.reshape(len(seeds), 2 * made)[:, :count]
    return np.concatenate([values[:, 0, :pairs], values[:, 1, : count - pairs]], axis=1)


def _box_muller_inputs(
    w0: np.ndarray, w1: np.ndarray, w2: np.ndarray, w3: np.ndarray, r: np.ndarray, a: np.ndarray
) -> None:
    """The uniforms on ``(0, 1]`` and the angles of a slice's pairs, into ``(size, 2)`` arrays (numpy's ufuncs).

    ``r[j, 0]`` and ``a[j, 0]`` come from block ``j``'s words 0 and 1, ``r[j, 1]`` and
    ``a[j, 1]`` from its words 2 and 3: exact conversions and products, as on the torch path.
    """
    np.add(w0, 1.0, out=r[:, 0])
    np.add(w2, 1.0, out=r[:, 1])
    r *= 2.0**-32
    np.multiply(w1, _ANGLE_PER_WORD, out=a[:, 0])
    np.multiply(w3, _ANGLE_PER_WORD, out=a[:, 1])


@functools.cache
def _compiled_box_muller() -> ModuleType | None:
    """numba's Box-Muller steps (:mod:`pytest_segrobust.randomness.philox_kernel`), or None where they cannot be used.

    :func:`_numpy_normal` takes them where the compiled Philox loop makes the words (so
    numba is loaded already): the uniforms and angles, ``sqrt(-2 log u)`` from ``log u``
    and the rounding to float32, each one pass instead of two to four numpy ufuncs and a
    strided copy: about 1.5x faster for a ``(3, 512, 512)`` field (``benchmarks/philox.py``). Each
    step is exact or correctly rounded, so they give the ufuncs' bits; checked once per
    process on the extreme words and 4096 spread over all 32 bits, else refused.
    """
    try:
        philox_kernel = importlib.import_module("pytest_segrobust.randomness.philox_kernel")
    except Exception:  # noqa: BLE001 - an optional accelerator, as in _compiled_blocks
        return None
    words = np.concatenate(
        [
            np.array([0, 1, 2**31 - 1, 2**31, _MASK32 - 1, _MASK32, 0, _MASK32], dtype=np.uint64),
            (np.arange(1, 4097, dtype=np.uint64) * _WEYL[0]) & _MASK32,
        ]
    ).astype(np.uint32)
    w0, w1, w2, w3 = words.reshape(-1, 4).T
    expected = np.empty((2, len(w0), 2))  # uniforms, angles
    _box_muller_inputs(w0, w1, w2, w3, *expected)
    ours = np.empty((2, 2 * len(w0)))
    philox_kernel.box_muller_inputs(w0, w1, w2, w3, _ANGLE_PER_WORD, *ours)
    same = np.array_equal(ours, expected.reshape(2, -1))
    logs = np.log(ours[0])
    radii = logs.copy()
    philox_kernel.radius_from_log(radii)
    same &= np.array_equal(radii, np.sqrt(logs * -2.0))
    wide = np.concatenate([radii * math.cos(1.0), -radii, np.array([2.0**-149, 1 + 2.0**-24, 3.4e38, 0.5 + 2.0**-25])])
    rounded = np.empty((2, len(wide)), dtype=np.float32)
    philox_kernel.round_into(wide, -wide, rounded[0], rounded[1])
    same &= np.array_equal(rounded, np.stack([wide, -wide]).astype(np.float32))
    return philox_kernel if same else None


def _polar_to_cartesian() -> Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """``(r cos a, r sin a)`` in float64, written into ``x`` and ``y``: OpenCV's where it is accurate, else torch's.

    The function returned takes four 1-D float64 arrays of one length, ``r``, ``a``, ``x``
    and ``y``, and returns the two results (``x`` and ``y``, filled). ``cv2.polarToCart``
    makes both in one pass, three times faster than torch's ``cos`` and ``sin`` and the
    products, and, where OpenCV calls Intel's IPP (its x86 wheels), to within a float64
    ulp or two of them. Other builds compute it in float32: it is used only where
    :func:`_opencv_polar_is_accurate` found it accurate.
    """
    cv2 = opencv()
    if cv2 is not None and _opencv_polar_is_accurate():

        def by_opencv(r: np.ndarray, a: np.ndarray, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            # Into arrays apart from the inputs: IPP does not work in place (OpenCV would then take its own path).
            return cv2.polarToCart(r, a, x, y)

        return by_opencv

    def by_torch(r: np.ndarray, a: np.ndarray, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        radius, angle = torch.from_numpy(r), torch.from_numpy(a)
        torch.cos(angle, out=torch.from_numpy(x)).mul_(radius)
        torch.sin(angle, out=torch.from_numpy(y)).mul_(radius)
        return x, y

    return by_torch


@functools.cache
def _opencv_polar_is_accurate() -> bool:
    """Whether ``cv2.polarToCart`` matches torch's float64 ``r * cos(a)`` and ``r * sin(a)`` to a few float64 ulps.

    Checked once, on the angles of 4096 words spread over all 32 bits (a Weyl sequence)
    and the extremes, with radii from the largest a word gives (6.66) down to 2**-16; an
    implementation that computes in float32 is off by about 1e-7, eight orders of magnitude more.
    """
    cv2 = opencv()
    if cv2 is None:
        return False
    words = np.concatenate(
        [
            np.array([0, 1, 2**30, 2**31 - 1, 2**31, 3 * 2**30, _MASK32], dtype=np.uint64),
            (np.arange(1, 4097, dtype=np.uint64) * _WEYL[0]) & _MASK32,
        ]
    )
    a = words.astype(np.float64) * _ANGLE_PER_WORD
    r = np.sqrt(-2 * np.log((words[::-1].astype(np.float64) + 1) * 2.0**-32)) + 2.0**-16
    x, y = cv2.polarToCart(r, a)
    radius, angle = torch.from_numpy(r), torch.from_numpy(a)
    for ours, theirs in ((x, radius * torch.cos(angle)), (y, radius * torch.sin(angle))):
        if not np.all(np.abs(ours.reshape(-1) - theirs.numpy()) <= 2.0**-50 * r):
            return False
    return True


def _words(
    seeds: Sequence[int], count: int, device: torch.device, stream: int, shift: int, dtype: torch.dtype
) -> torch.Tensor:
    """``(len(seeds), count)`` words of ``stream`` shifted right by ``shift`` bits, as ``dtype`` on ``device``.

    Every draw starts here: the shift and the conversion are exact, so both paths give the
    same values; on the numpy path they run on uint32 lanes before the tensor is made.
    """
    _check_draw(seeds, count, stream)
    if _uses_numpy(device):
        if count <= 4 * _PYTHON_MAX_BLOCKS:
            return torch.tensor(_python_words(seeds, count, stream, shift), dtype=dtype).reshape(len(seeds), count)
        words = _numpy_words(seeds, count, stream, shift, _NUMPY_DTYPES[dtype])
        return torch.from_numpy(np.ascontiguousarray(words))
    bits = _torch_words(seeds, count, device, stream)
    return (bits >> shift if shift else bits).to(dtype).contiguous()


def _python_words(seeds: Sequence[int], count: int, stream: int, shift: int) -> list[list[int]]:
    """:func:`random_bits` with Python integers, for draws of a few blocks: ``len(seeds)`` rows of ``count`` words shifted right by ``shift``.

    The rounds of :func:`philox4x32` word for word (exact: Python integers do not wrap), with
    no array made: a draw of one block costs a few dozen integer operations where the numpy
    rounds call about fifty ufuncs.
    """
    (m0, m1), (weyl0, weyl1) = _MULTIPLIERS, _WEYL
    rows = []
    for seed in seeds:
        row: list[int] = []
        for block in range(-(-count // 4)):
            c0, c1, c2, c3 = block, stream, 0, 0
            k0, k1 = seed & _MASK32, seed >> 32
            for _ in range(ROUNDS):
                p0, p1 = c0 * m0, c2 * m1
                c0, c1, c2, c3 = (p1 >> 32) ^ c1 ^ k0, p1 & _MASK32, (p0 >> 32) ^ c3 ^ k1, p0 & _MASK32
                k0, k1 = (k0 + weyl0) & _MASK32, (k1 + weyl1) & _MASK32
            row += (c0, c1, c2, c3)
        rows.append([word >> shift for word in row[:count]])
    return rows


def _torch_words(seeds: Sequence[int], count: int, device: torch.device, stream: int) -> torch.Tensor:
    """:func:`random_bits` on the torch path: ``(len(seeds), count)`` int64 words."""
    blocks = -(-count // 4)
    keys = torch.tensor([[s & _MASK32, s >> 32] for s in seeds], dtype=torch.int64, device=device).view(-1, 1, 2)
    counters = torch.zeros(blocks, 4, dtype=torch.int64, device=device)
    counters[:, 0] = torch.arange(blocks, device=device)
    counters[:, 1] = stream
    # On a CPU, rounds over slices of the blocks whose temporaries stay in cache are about
    # twice as fast as rounds over the whole field; a GPU wants the whole field at once.
    chunk = max(1, _CPU_CHUNK_WORDS // max(1, len(seeds))) if device.type == "cpu" else blocks
    if chunk >= blocks:
        words = philox4x32(counters.unsqueeze(0), keys)  # (B, blocks, 4)
    else:
        words = torch.empty(len(seeds), blocks, 4, dtype=torch.int64, device=device)
        for start in range(0, blocks, chunk):
            words[:, start : start + chunk] = philox4x32(counters[None, start : start + chunk], keys)
    return words.view(len(seeds), blocks * 4)[:, :count]


def random_bits(seeds: Sequence[int], count: int, device: torch.device | str, stream: int = 0) -> torch.Tensor:
    """``count`` random 32-bit words per seed, from blocks ``0, 1, ...`` of the seed's ``stream``.

    Returns:
        ``(len(seeds), count)`` int64 tensor of values in ``[0, 2**32)``.
    """
    return _words(seeds, count, torch.device(device), stream, 0, torch.int64)


def uniform(
    seeds: Sequence[int],
    shape: Sequence[int],
    device: torch.device | str,
    stream: int = 0,
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """``U[0, 1)`` draws of ``shape`` per seed, identical on every device.

    float32: the top 24 bits times 2^-24; float64: all 32 bits times 2^-32. Both are exact.

    Returns:
        ``(len(seeds), *shape)`` of ``dtype``.
    """
    if dtype not in (torch.float32, torch.float64):
        raise TypeError(f"uniforms are float32 or float64, not {dtype}")
    shift, scale = (8, 2.0**-24) if dtype == torch.float32 else (0, 2.0**-32)
    bits = _words(seeds, math.prod(shape), torch.device(device), stream, shift, dtype)
    return bits.mul_(scale).view(len(seeds), *shape)


def uniform_levels(
    seeds: Sequence[int], shape: Sequence[int], device: torch.device | str, stream: int = 0
) -> torch.Tensor:
    """The float32 :func:`uniform` draws times 2^24: the top 24 bits of each word, as int32.

    For draws that only compare uniforms with thresholds: the comparisons can be made on
    these integers exactly, without a float conversion.

    Returns:
        ``(len(seeds), *shape)`` int32 in ``[0, 2**24)``.
    """
    return _words(seeds, math.prod(shape), torch.device(device), stream, 8, torch.int32).view(len(seeds), *shape)


def integers(
    seeds: Sequence[int], low: int, high: int, shape: Sequence[int], device: torch.device | str, stream: int = 0
) -> torch.Tensor:
    """Integers in ``[low, high)`` of ``shape`` per seed (int64)."""
    span = high - low
    if not 0 < span <= 2**31:  # so that 32 random bits times the span stay below 2**63
        raise ValueError(f"expected low < high within 2**31 of each other, got [{low}, {high})")
    bits = _words(seeds, math.prod(shape), torch.device(device), stream, 0, torch.int64)
    return bits.mul_(span).bitwise_right_shift_(32).add_(low).view(len(seeds), *shape)


def signs(
    seeds: Sequence[int],
    device: torch.device | str,
    stream: int = 0,
    dtype: torch.dtype = torch.float32,
    magnitude: float = 1.0,
) -> torch.Tensor:
    """One sign per seed times ``magnitude``: ``+magnitude`` where the top bit of the stream's first word is set, else ``-magnitude``.

    The top bit is ``integers(0, 2)`` of the same word (Lemire's ``w * 2 >> 32``), so the
    signs are ``2 * integers(0, 2) - 1``. On the CPU one tensor is made from Python
    numbers: a sign draw precedes every affine warp, and each tiny tensor op costs tens of
    microseconds with cold caches.

    Returns:
        ``(len(seeds),)`` of ``dtype``.
    """
    device = torch.device(device)
    _check_draw(seeds, 1, stream)
    if _uses_numpy(device):
        words = _python_words(seeds, 1, stream, 31)
        return torch.tensor([magnitude if row[0] else -magnitude for row in words], dtype=dtype)
    return torch.where(_torch_words(seeds, 1, device, stream)[:, 0] >= 2**31, magnitude, -magnitude).to(dtype)


def normal(seeds: Sequence[int], shape: Sequence[int], device: torch.device | str, stream: int = 0) -> torch.Tensor:
    """Standard normal float32 draws of ``shape`` per seed (Box-Muller, both outputs used)."""
    count = math.prod(shape)
    device = torch.device(device)
    if _uses_numpy(device):
        _check_draw(seeds, 2 * -(-count // 2), stream)
        return torch.from_numpy(np.ascontiguousarray(_numpy_normal(seeds, count, stream))).view(len(seeds), *shape)
    pairs = -(-count // 2)
    bits = _words(seeds, 2 * pairs, device, stream, 0, torch.float64).view(len(seeds), pairs, 2)
    # 32-bit uniforms on (0, 1] for the radius (log(0) never happens) and [0, 1) for the angle.
    # In place on contiguous copies: the same elementwise kernels, so the same bits, as
    # sqrt(-2 log((b + 1) 2^-32)) and (2 pi 2^-32) b with temporaries.
    radius = (bits[..., 0] + 1.0).mul_(2.0**-32).log_().mul_(-2.0).sqrt_()
    angle = bits[..., 1].mul(_ANGLE_PER_WORD)
    values = torch.empty(len(seeds), 2 * pairs, dtype=torch.float64, device=bits.device)
    torch.mul(radius, torch.cos(angle), out=values[:, :pairs])
    torch.mul(radius, angle.sin_(), out=values[:, pairs:])
    return values[:, :count].to(torch.float32).view(len(seeds), *shape)


def poisson(seeds: Sequence[int], rates: torch.Tensor, stream: int = 0) -> torch.Tensor:
    """One Poisson variate per rate; ``rates`` is ``(B, ...)``, a batch of rate fields (float).

    Returns:
        Float tensor of ``rates``' shape and dtype holding non-negative integers.
    """
    if rates.shape[0] != len(seeds):
        raise ValueError(f"{len(seeds)} seeds for a batch of {rates.shape[0]} rate fields")
    # One pass for both checks: a NaN makes the minimum NaN, which fails ``>= 0``.
    lowest, highest = torch.aminmax(rates) if rates.numel() else (rates.new_zeros(()), rates.new_zeros(()))
    if not (float(lowest) >= 0 and math.isfinite(float(highest))):
        raise ValueError("Poisson rates must be finite and non-negative")
    shape = tuple(rates.shape[1:])
    lam = rates.to(torch.float64)
    if _uses_numpy(rates.device) and rates.numel() >= _POISSON_COMPILED_MIN_VALUES:
        _compiled_poisson()  # before the uniforms: loading it makes their words compiled too
    u = uniform(seeds, shape, rates.device, stream).to(torch.float64)
    if float(highest) <= POISSON_INVERSION_LIMIT and lam.is_contiguous():
        # What torch.where below would make of it: the same values in the same layout.
        return _poisson_inversion(lam, u).to(rates.dtype)
    small = lam <= POISSON_INVERSION_LIMIT
    k = _poisson_inversion(torch.where(small, lam, torch.zeros_like(lam)), u)
    # Above the limit: N(lam, lam) rounded, from its own stream of normals.
    if float(highest) > POISSON_INVERSION_LIMIT:
        z = normal(seeds, shape, rates.device, stream + 1).to(torch.float64)
        k = torch.where(small, k, torch.clamp(torch.floor(lam + torch.sqrt(lam) * z + 0.5), min=0))
    return k.to(rates.dtype)


def _poisson_inversion(lam: torch.Tensor, u: torch.Tensor, tables: bool = True) -> torch.Tensor:
    """The smallest ``k`` with ``CDF(k) > u`` for Poisson rates ``lam`` (float64, any shape, ``u`` in ``[0, 1)``).

    The CDF is the one a walk from the mode computes (:func:`_poisson_walk`): it starts at
    ``m = floor(lam)`` with ``CDF(m)`` from the regularised upper incomplete gamma function
    and ``pmf(m)`` from ``lgamma``, and moves down (``CDF(k - 1) = CDF(k) - pmf(k)``) or up
    (``CDF(k + 1) = CDF(k) + pmf(k + 1)``) with correctly rounded arithmetic only. Given a
    rate and its start values, those CDF values are fixed and ``u`` only decides where the
    walk stops, so where rates repeat (an 8-bit image times a photon count has at most 256)
    each rate's values are tabulated once (:func:`_cdf_tables`) and every value looks its
    ``k`` up: the same result as the walk, bit for bit, by construction. A value walks
    instead where its start values are not its rate's (:func:`_resolve_by_table`) or its
    ``u`` falls outside its rate's table, and every value walks when the rates barely
    repeat (:func:`_rate_groups`) or ``tables`` is false (what tests compare with). On a
    CPU with numba, :func:`_compiled_inversion` does the same in compiled loops.

    Shape:
        lam, u: any, the same; return: same, float64 integers.
    """
    # gammaincc and lgamma are costly and, on a CPU, scalar loops (a value's result does not
    # depend on where it sits): evaluated once per distinct rate where rates repeat. exp and
    # log are vectorised (a SIMD body and a scalar tail that may part in the last bit):
    # evaluated over the whole field, exactly so, since every result below depends on these bits.
    compiled = _compiled_poisson_for(lam, u) if tables else None
    if compiled is not None and (counts := _compiled_inversion(compiled, lam, u)) is not None:
        return counts
    flat_lam, flat_u = lam.reshape(-1), u.reshape(-1)
    groups = _rate_groups(lam) if tables else None
    if groups is None:
        if tables:  # the rates barely repeat: evaluating at every value costs less than sorting them out
            start_cdf, log_factorial = _start_values(flat_lam)
        else:
            rates, inverse = torch.unique(flat_lam, return_inverse=True)
            start_cdf, log_factorial = (values.index_select(0, inverse) for values in _start_values(rates))
        pmf = _mode_pmf(lam, log_factorial.view_as(lam)).reshape(-1)
        return _poisson_walk(flat_lam, flat_u, pmf, start_cdf).view_as(lam)
    rates, inverse = groups
    flat_inverse = inverse.reshape(-1)
    start_cdf, log_factorial = _start_values(rates)
    pmf = _mode_pmf(lam, log_factorial.index_select(0, flat_inverse).view_as(lam)).reshape(-1)
    k, unresolved = _resolve_by_table(rates, log_factorial, start_cdf, flat_inverse, pmf, flat_u)
    if unresolved.numel():
        k[unresolved] = _poisson_walk(
            flat_lam[unresolved],
            flat_u[unresolved],
            pmf[unresolved],
            start_cdf.index_select(0, flat_inverse[unresolved]),
        )
    return k.view_as(lam)


def _compiled_inversion(kernel: ModuleType, lam: torch.Tensor, u: torch.Tensor) -> torch.Tensor | None:
    """:func:`_poisson_inversion` with numba's loops (:mod:`pytest_segrobust.randomness.poisson_kernel`); None where they stand aside.

    torch evaluates what it evaluates on its own path, on tensors of ``lam``'s shape and
    layout: ``gammaincc`` and ``lgamma`` once per distinct rate, ``log`` and ``exp`` over the
    whole field (so every value gets the bits it gets there); the loops make the rest in
    one pass over the field each: the groups of equal rates and ``where(lam > 0, lam, 1)``,
    the exponent between ``log`` and ``exp``, then every count from its rate's CDF table
    (or its walk, where the table does not answer). Where the rates barely repeat, the
    start values are evaluated at every value, as there, and every value walks in the
    loop. None (the torch path answers) for a rate outside ``[0, POISSON_INVERSION_LIMIT]``
    or an empty field.

    Shape:
        lam, u: any, the same, contiguous float64 on the CPU; return: same, float64 integers.
    """
    flat_lam, flat_u = lam.reshape(-1).numpy(), u.reshape(-1).numpy()
    size = flat_lam.size
    most_rates = min(_MOST_TABLES, size // _VALUES_PER_RATE)
    index = np.empty(size, dtype=np.int32)
    rates, first = np.empty(most_rates), np.empty(most_rates, dtype=np.int64)
    field = torch.empty_like(lam, memory_format=torch.contiguous_format)
    flat_field = field.view(-1).numpy()
    groups = kernel.group_rates(flat_lam, POISSON_INVERSION_LIMIT, index, rates, first, flat_field) if size else -2
    if groups == -2:
        return None
    counts = np.empty(size)
    if groups < 0:  # more distinct rates than tables pay for: start values at every value, every value walks
        start_cdf, log_factorial = _start_values(lam.reshape(-1))
        pmf = _mode_pmf(lam, log_factorial.view_as(lam)).reshape(-1)
        kernel.walk_counts(flat_lam, flat_u, pmf.numpy(), start_cdf.numpy(), counts)
        return torch.from_numpy(counts).view_as(lam)
    start_cdf, log_factorial = _start_values(torch.from_numpy(rates[:groups]))
    # pmf(m) over the field: _mode_pmf's steps, its log and exp by torch on a tensor of lam's shape.
    field.log_()
    kernel.pmf_exponent(flat_lam, flat_field, log_factorial.numpy(), index)
    field.exp_()
    bins = min(_COMPILED_GUIDE_BINS, 1 << ((size // groups).bit_length() - 1))
    kernel.table_counts(
        rates[:groups],
        start_cdf.numpy(),
        first[:groups],
        index,
        flat_field,
        flat_u,
        bins,
        _TABLE_HIGH,
        _TABLE_MAX_STEPS,
        counts,
    )
    return torch.from_numpy(counts).view_as(lam)


def _compiled_poisson_for(lam: torch.Tensor, u: torch.Tensor) -> ModuleType | None:
    """numba's Poisson loops (:func:`_compiled_poisson`) for ``lam`` and ``u``, or None for the torch path.

    Contiguous float64 fields on the CPU only; loading numba costs about 0.7 s of CPU once
    per process, so fields smaller than :data:`_POISSON_COMPILED_MIN_VALUES` take the torch
    path until something has loaded it. The one place the Poisson path is chosen: tests
    and benchmarks force the torch path through it.
    """
    if not (
        lam.device.type == "cpu"
        and lam.dtype == u.dtype == torch.float64
        and lam.shape == u.shape
        and lam.is_contiguous()
        and u.is_contiguous()
        and not (lam.requires_grad or u.requires_grad)
    ):
        return None
    if lam.numel() < _POISSON_COMPILED_MIN_VALUES and not _compiled_poisson.cache_info().currsize:
        return None
    return _compiled_poisson()


@functools.cache
def _compiled_poisson() -> ModuleType | None:
    """:mod:`pytest_segrobust.randomness.poisson_kernel`, or None where numba is missing or its loops give other counts.

    Checked once per process (about 0.1 s) against the torch path's walk on fields that
    take each of the loops' ways: levels times photon counts and edge rates with uniforms
    on every step of their CDF tables and an ulp below (tables), and rates that do not
    repeat (every value walks).
    """
    try:
        kernel = importlib.import_module("pytest_segrobust.randomness.poisson_kernel")
    except Exception:  # noqa: BLE001 - an optional accelerator, as in _compiled_blocks
        return None
    # numba is loaded now: the uniforms' words come from its Philox loop too (_compiled_for).
    _compiled_blocks()
    levels = torch.arange(16, dtype=torch.float64) / 15
    edges = torch.tensor([0.0, -0.0, 5e-324, 1e-9, 1.0, 12.0, math.nextafter(POISSON_INVERSION_LIMIT, 0.0)])
    rates = torch.cat([levels * 60.0, levels * 3.0, levels * POISSON_INVERSION_LIMIT, edges.to(torch.float64)])
    # Uniforms on every value of each rate's CDF table and one float64 ulp below it: where a
    # count changes, so that a CDF value with other bits in a loop gives another count.
    start_cdf, log_factorial = _start_values(rates)
    values = _cdf_tables(rates, _mode_pmf(rates, log_factorial), start_cdf)[0]
    values = torch.cat([values, torch.nextafter(values, torch.zeros_like(values))], dim=1)
    # Within poisson's uniforms (multiples of 2**-24 below 1): a walk up to u nearer 1 may never end.
    steps = values.isfinite() & (values >= 0) & (values <= 1 - 2.0**-24)
    on_steps = (rates.unsqueeze(1).expand_as(values)[steps].contiguous(), values[steps].contiguous())
    # ... and 8192 rates that do not repeat (every value walks), with a Weyl sequence of uniforms.
    weyl = (torch.arange(8192, dtype=torch.int64) * _WEYL[0]) & _MASK32
    spread = (weyl.to(torch.float64) * (POISSON_INVERSION_LIMIT * 2.0**-32), weyl.flip(0).to(torch.float64) * 2.0**-32)
    for lam, u in (on_steps, spread):
        counts = _compiled_inversion(kernel, lam, u)
        walked = _poisson_inversion(lam, u, tables=False)
        if counts is None or not torch.equal(counts.view(torch.int64), walked.view(torch.int64)):
            return None
    return kernel


def _start_values(rates: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``CDF(m)`` (the regularised upper incomplete gamma function) and ``log(m!)`` at ``m = floor(rates)``.

    Shape:
        rates: ``(G,)``; return: two ``(G,)``.
    """
    mode_plus_one = torch.floor(rates) + 1
    return torch.special.gammaincc(mode_plus_one, rates), torch.lgamma(mode_plus_one)


def _mode_pmf(lam: torch.Tensor, log_factorial: torch.Tensor) -> torch.Tensor:
    """``pmf(m)`` at ``m = floor(lam)``: ``exp(m log(lam) - lam - log(m!))``, given ``log(m!)``.

    Shape:
        lam, log_factorial: any, the same; return: same.
    """
    return torch.exp(torch.floor(lam) * torch.log(torch.where(lam > 0, lam, 1.0)) - lam - log_factorial)


def _poisson_walk(lam: torch.Tensor, u: torch.Tensor, pmf: torch.Tensor, cdf: torch.Tensor) -> torch.Tensor:
    """:func:`_poisson_inversion` by walking from the mode, given ``pmf(m)`` and ``CDF(m)`` at ``m = floor(lam)``.

    A value walks about ``|k - m|`` steps, a few times ``sqrt(lam)`` at most, instead of ``k``
    steps from 0; each step carries just the values still walking. Every operation is
    elementwise and correctly rounded, so a value's result does not depend on the others.

    Shape:
        lam, u, pmf, cdf: ``(n,)`` float64; return: ``(n,)`` float64 integers.
    """
    k = torch.floor(lam)

    # Down: while k > 0 and CDF(k - 1) > u, step to k - 1.
    walk = _walk_state((u < cdf).nonzero().squeeze(1), lam, u, pmf, cdf, k)
    while walk.shape[1]:
        walk[4] -= walk[3]  # CDF(k - 1)
        walk = walk.index_select(1, ((walk[5] > 0) & (walk[4] > walk[2])).nonzero().squeeze(1))
        walk[3] = walk[3] * walk[5] / walk[1]  # pmf(k - 1)
        walk[5] -= 1
        k[walk[0].long()] = walk[5]

    # Up: while CDF(k) <= u, step to k + 1.
    walk = _walk_state((cdf <= u).nonzero().squeeze(1), lam, u, pmf, cdf, k)
    while walk.shape[1]:
        walk[5] += 1
        walk[3] = walk[3] * walk[1] / walk[5]  # pmf(k)
        walk[4] += walk[3]
        k[walk[0].long()] = walk[5]
        walk = walk.index_select(1, (walk[4] <= walk[2]).nonzero().squeeze(1))
    return k


def _walk_state(places: torch.Tensor, *rows: torch.Tensor) -> torch.Tensor:
    """The ``(1 + len(rows), len(places))`` float64 state of the values at ``places`` that set off on a walk.

    One tensor, so that dropping the values that stopped is one ``index_select``: row 0 is
    a value's place, then its rate, uniform, pmf(k), CDF(k) and k (as :func:`_poisson_walk`
    passes them).
    """
    return torch.stack([places.to(torch.float64), *(row.index_select(0, places) for row in rows)])


def _rate_groups(lam: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
    """The distinct rates of ``lam`` by their bits, and each value's index among them; None if they barely repeat.

    :func:`torch.unique` sorts the whole field: a third of a shot-noise draw's time. Here
    each value's bits are hashed into 2 ** :data:`_RATE_BUCKETS_LOG2` buckets, each bucket
    keeps one of its values (whichever the scatter writes), and the values with the same
    bits as their bucket's form its group; the few others (another rate that hashed to the
    same bucket) are grouped by :func:`torch.unique` over them alone. Grouping by bits puts
    together only identical values: the hash and the value a bucket keeps change how fast
    this is, never a result.

    Shape:
        lam: any float64; return: ``(G,)`` float64 rates and an int32 index of ``lam``'s shape.
    """
    bits = lam.reshape(-1).view(torch.int64)
    most_rates = min(_MOST_TABLES, bits.numel() // _VALUES_PER_RATE)
    # Multiplicative hashing: the top bits of the product (wrapping modulo 2**64) mix all of a value's bits.
    buckets = (bits * _RATE_HASH).bitwise_right_shift_(64 - _RATE_BUCKETS_LOG2).bitwise_and_(2**_RATE_BUCKETS_LOG2 - 1)
    kept = torch.full((2**_RATE_BUCKETS_LOG2,), _NO_RATE, dtype=torch.int64, device=lam.device)
    kept.scatter_(0, buckets, bits)
    used = kept != _NO_RATE
    if not 0 < int(used.sum()) <= most_rates:
        return None
    buckets = buckets.to(torch.int32)
    index = (torch.cumsum(used, 0, dtype=torch.int32) - 1).index_select(0, buckets)
    rates = kept[used]
    bucket_bits = kept.index_select(0, buckets)
    if not torch.equal(bucket_bits, bits):  # one fast pass where no two rates share a bucket
        others = (bucket_bits != bits).nonzero().squeeze(1)
        other_rates, other_index = torch.unique(bits[others], return_inverse=True)
        index[others] = other_index.to(torch.int32) + rates.numel()
        rates = torch.cat([rates, other_rates])
        if rates.numel() > most_rates:
            return None
    return rates.view(torch.float64), index.view(lam.shape)


def _resolve_by_table(
    rates: torch.Tensor,
    log_factorial: torch.Tensor,
    start_cdf: torch.Tensor,
    index: torch.Tensor,
    pmf: torch.Tensor,
    u: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Each value's ``k`` from its rate's CDF table (:func:`_cdf_tables`), and the values that must walk instead.

    Each rate's table starts from one ``pmf(m)``, computed here by the field's expression;
    a value whose own ``pmf(m)`` (computed over the field, where a vectorised ``exp`` may
    give other last bits at other places) has other bits must walk, and so must one whose
    ``u`` lies beyond its table. The search: a guide of up to :data:`_GUIDE_BINS` bins per
    rate holds, for each bin's lower edge, the first place whose value exceeds it (a
    histogram of the values' bins, summed); no place before it can exceed ``u``, and the
    few values still behind a value at most ``u`` move on one place at a time.

    Shape:
        rates, log_factorial, start_cdf: ``(G,)``; index (int32), pmf, u: ``(n,)``;
        return: ``(n,)`` float64 counts and the int64 places (1-D) that must walk.
    """
    start_pmf = _mode_pmf(rates, log_factorial)
    values, labels = _cdf_tables(rates, start_pmf, start_cdf)
    width = values.shape[1]
    bins = min(_GUIDE_BINS, 1 << ((u.numel() // rates.numel()).bit_length() - 1))  # at most one per value
    # The number of a table's values at most the edge b / bins is the number whose first
    # bin at or above them, ceil(value * bins) (exact: a power of two), is at most b.
    first_bins = (values * bins).ceil_().clamp_(0, bins).long()
    guide = torch.zeros(rates.numel(), bins + 1, dtype=torch.int32, device=u.device)
    guide.scatter_add_(1, first_bins, torch.ones_like(first_bins, dtype=torch.int32))
    guide = guide[:, :bins].cumsum(1, dtype=torch.int32)
    guide += torch.arange(0, rates.numel() * width, width, dtype=torch.int32, device=u.device).unsqueeze(1)
    # u * bins is exact (a power of two) and non-negative: truncation is the floor.
    place = guide.view(-1).index_select(0, torch.add((u * bins).to(torch.int32), index, alpha=bins))
    flat_values = values.view(-1)
    behind = (flat_values.index_select(0, place) <= u).nonzero().squeeze(1)
    while behind.numel():  # the +inf closing every table stops this
        place[behind] += 1
        behind = behind[flat_values.index_select(0, place[behind]) <= u[behind]]
    k = labels.view(-1).index_select(0, place)
    pmf_bits, start_bits = pmf.view(torch.int64), start_pmf.view(torch.int64).index_select(0, index)
    if float(k.min()) >= 0 and torch.equal(pmf_bits, start_bits):  # two fast passes for the usual case
        return k, place[:0].long()
    return k, (pmf_bits != start_bits).logical_or_(k < 0).nonzero().squeeze(1)


def _cdf_tables(rates: torch.Tensor, pmf: torch.Tensor, cdf: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Every CDF value the walk from the mode can reach for each rate, and the ``k`` each stands for.

    Row ``g`` holds, in increasing order, ``CDF(k)`` for ``k`` from where the walk down
    passes :data:`_TABLE_LOW` (or from 0) up to where the walk up passes
    :data:`_TABLE_HIGH`, each computed by the walk's own recurrences from the same start
    values (the same correctly rounded operations in the same order, so the same bits),
    then ``+inf``. The answer for ``u`` is the label at the first place whose value exceeds
    ``u``: ``k``, or -1 (walk instead) at the closing ``+inf`` or where ``u`` lies below a
    table that does not reach down to 0. Places left of ``k = 0`` hold ``-inf``. The label
    at the mode is ``floor(rate)`` itself, as the walk leaves it (-0.0 for a rate of -0.0).

    Shape:
        rates, pmf, cdf: ``(G,)`` float64 (``pmf(m)`` and ``CDF(m)`` at ``m = floor(rate)``);
        return: two ``(G, W)`` float64 tensors, values and labels.
    """
    mode = torch.floor(rates)
    down, term, k = [cdf], pmf, mode
    for step in range(_TABLE_MAX_STEPS):
        if step % _TABLE_STEPS_PER_CHECK == 0 and not bool(((k > 0) & (down[-1] > _TABLE_LOW)).any()):
            break
        down.append(down[-1] - term)  # CDF(k - 1)
        term = term * k / rates  # pmf(k - 1); past k = 0 (-inf there) it may be NaN
        k = k - 1
    up, term, k = [cdf], pmf, mode
    for step in range(_TABLE_MAX_STEPS):
        if step % _TABLE_STEPS_PER_CHECK == 0 and not bool((up[-1] <= _TABLE_HIGH).any()):
            break
        k = k + 1
        term = term * rates / k  # pmf(k)
        up.append(up[-1] + term)
    up = up[1:]
    below = len(down) - 1
    steps = torch.arange(-below, len(up) + 1, dtype=torch.float64, device=rates.device)
    ks = mode.unsqueeze(1) + steps
    values = torch.stack(down[::-1] + up, dim=1).masked_fill_(ks < 0, -math.inf)
    labels = ks.clone()
    labels[:, below] = mode
    labels[:, 0].masked_fill_(ks[:, 0] > 0, -1.0)
    closing = torch.full((rates.numel(), 1), math.inf, dtype=torch.float64, device=rates.device)
    return torch.cat([values, closing], dim=1), torch.cat([labels, torch.full_like(closing, -1.0)], dim=1)


def exact_normal(
    seeds: Sequence[int], shape: Sequence[int], device: torch.device | str, stream: int = 0
) -> torch.Tensor:
    """:func:`normal`'s Box-Muller pairs from the same words, in float32 steps only: the same bits everywhere.

    Pair ``p`` (words ``2 p`` and ``2 p + 1`` of the stream, cosine values first, then sine
    values, as in :func:`normal`) gives ``r cos a`` and ``r sin a`` with
    ``r = sqrt(-2 log((w0 + 1) 2^-32))`` and ``a = 2 pi w1 2^-32``, computed without any
    library ``log``, ``cos`` or ``sin``: ``log`` splits ``w0 + 1`` into a power of two and
    ``1 + f`` (``f`` within 0.42 of 0) exactly with integers and sums the series of
    ``2 atanh(f / (2 + f))``; the angle's top three bits pick an octant, exactly, and its
    other 29 a point in it, where Taylor polynomials give the sine and cosine. Every step
    is an exact integer operation or a correctly rounded float32 ``+``, ``-``, ``*``, ``/``
    or ``sqrt``, in one fixed order, so every device and both CPU paths (a compiled loop
    where numba is installed, :func:`_exact_transform` on tensors elsewhere) give the same
    bits; the values lie within 3 float32 ulps of :func:`normal`'s (measured: 5e-7 at most
    over 786432 draws), at a third of its CPU time.

    Returns:
        ``(len(seeds), *shape)`` float32.
    """
    count = math.prod(shape)
    device = torch.device(device)
    pairs = -(-count // 2)
    _check_draw(seeds, 2 * pairs, stream)
    kernel = _compiled_exact() if _uses_numpy(device) and _compiled_for(-(-pairs // 2)) is not None else None
    if kernel is not None:
        words = _numpy_words(seeds, 2 * pairs, stream)
        values = np.empty((len(seeds), 2, pairs), dtype=np.float32)
        for row, target in zip(words, values):
            kernel.exact_box_muller(np.ascontiguousarray(row), target[0], target[1])
        flat = torch.from_numpy(values.reshape(len(seeds), 2 * pairs))
    else:
        bits = _words(seeds, 2 * pairs, device, stream, 0, torch.int64).view(len(seeds), pairs, 2)
        flat = torch.cat(_exact_transform(bits[..., 0], bits[..., 1]), dim=1)
    return flat[:, :count].reshape(len(seeds), *shape)


def _exact_transform(w0: torch.Tensor, w1: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`exact_normal`'s transform on int64 word tensors: ``(r cos a, r sin a)``, float32.

    The compiled loop's steps (:func:`~pytest_segrobust.randomness.philox_kernel.exact_box_muller`), one
    tensor operation each, in its order; the constants are float32 numbers, so a Python
    float holding one multiplies or adds as the float32 itself.
    """
    two, a3, a5, a7, a9, ln2_head, ln2_tail, minus_two = (float(c) for c in EXACT_LOG_CONSTANTS)
    step, s3, s5, s7, s9, c2, c4, c6, c8, c10 = (float(c) for c in EXACT_ANGLE_CONSTANTS)
    v = w0 + 1
    e = torch.frexp(v.to(torch.float64))[1].to(torch.int64) - 1
    e = e + (v > torch.tensor(EXACT_FOLDS, device=v.device)[e]).to(torch.int64)
    scale = ((127 - e) << 23).to(torch.int32).view(torch.float32)
    f = (v - (torch.ones_like(e) << e)).to(torch.float32) * scale
    s = f / (f + two)
    z = s * s
    log1p = s * two + s * z * (z * (z * (z * a9 + a7) + a5) + a3)
    k = (e - 32).to(torch.float32)
    radius = _sqrt_rounded((k * ln2_head + (k * ln2_tail + log1p)) * minus_two)
    octant = w1 >> 29
    rho = w1 & 0x1FFFFFFF
    t = torch.where((octant & 1) != 0, (1 << 29) - rho, rho).to(torch.float32) * step
    z = t * t
    sine = t + t * z * (z * (z * (z * s9 + s7) + s5) + s3)
    cosine = z * (z * (z * (z * (z * c10 + c8) + c6) + c4) + c2) + 1.0
    swap = ((octant + 1) & 2) != 0
    c, s = torch.where(swap, sine, cosine), torch.where(swap, cosine, sine)
    c = torch.where(((octant + 2) & 4) != 0, -c, c)
    s = torch.where((octant & 4) != 0, -s, s)
    return radius * c, radius * s


def _sqrt_rounded(values: torch.Tensor) -> torch.Tensor:
    """The correctly rounded float32 square root of non-negative float32 ``values``.

    torch's CPU kernel is within an ulp but not always the nearest float32 (its vector
    library's): each root is moved to its neighbour where the midpoint towards that
    neighbour, squared exactly in float64 (25 bits squared fit in 53), is on the root's side
    of the value. Roots that are correctly rounded already, as on CUDA, stay as they are.
    """
    roots = torch.sqrt(values)
    wide = values.to(torch.float64)
    up = torch.nextafter(roots, torch.full_like(roots, math.inf))
    down = torch.nextafter(roots, torch.zeros_like(roots))
    above = ((roots.to(torch.float64) + up.to(torch.float64)) * 0.5) ** 2 < wide
    below = ((roots.to(torch.float64) + down.to(torch.float64)) * 0.5) ** 2 > wide
    return torch.where(above, up, torch.where(below & (roots > 0), down, roots))


@functools.cache
def _compiled_exact() -> ModuleType | None:
    """numba's :func:`~pytest_segrobust.randomness.philox_kernel.exact_box_muller`, or None where numba is missing.

    Loaded only where the compiled Philox loop makes the words (numba is loaded already).
    """
    try:
        return importlib.import_module("pytest_segrobust.randomness.philox_kernel")
    except Exception:  # noqa: BLE001 - an optional accelerator, as in _compiled_blocks
        return None
