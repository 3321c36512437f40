"""Poisson counts by CDF inversion as compiled loops (numba), for the CPU path of :func:`pytest_segrobust.randomness.philox.poisson`.

Imported only by :func:`pytest_segrobust.randomness.philox._compiled_poisson` (which checks it
against the torch path once per process), and only where numba is installed. The loops
take over the steps of :func:`~pytest_segrobust.randomness.philox._poisson_inversion` that
are comparisons, integer work and correctly rounded float64 ``+``, ``-``, ``*`` and ``/``:
grouping the rates by their bits, the exponent of ``pmf(m)`` around torch's vectorised
``log`` and ``exp`` (which stay in torch, over the whole field, so that every value gets
the bits it gets there), the CDF tables and their lookup, and the walk from the mode for
the values that no table answers. Each step is the torch path's operation in its order
(no fused multiply-add: numba asks LLVM for none without ``fastmath``), so the counts are
the same bits; one pass over the field each, where the torch path makes a dozen.
"""

from __future__ import annotations

import numba
import numpy as np

# Odd 64-bit multiplier of the rates' hash (2**64 over the golden ratio).
_HASH = np.uint64(0x9E3779B97F4A7C15)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def group_rates(
    lam: np.ndarray,
    limit: float,
    index: np.ndarray,
    rates: np.ndarray,
    first: np.ndarray,
    positive: np.ndarray,
) -> int:  # pragma: no cover - compiled
    """The distinct rates of ``lam`` by their bits, each value's group, and ``where(lam > 0, lam, 1)``.

    Open addressing over a table of at least twice ``len(rates)`` slots, keyed by a
    multiplicative hash of the bits; a value equal in bits to the one before it (runs of
    one level in an image) skips the probe. Group ``g`` is ``rates[g]``, first seen at
    ``first[g]``; ``index[i]`` is value ``i``'s group.

    Returns:
        The number of groups; -1 where there are more than ``len(rates)``, -2 where a rate
        is not in ``[0, limit]`` (NaN included): the caller then takes another path.
    """
    most = rates.shape[0]
    log2_slots = 4
    while (1 << log2_slots) < 2 * most:
        log2_slots += 1
    mask = (1 << log2_slots) - 1
    shift = np.uint64(64 - log2_slots)
    slots = np.full(1 << log2_slots, -1, dtype=np.int32)
    rate_bits = np.empty(most, dtype=np.int64)
    bits = lam.view(np.int64)
    count = 0
    previous_bits = np.int64(0)
    previous = -1
    for i in range(lam.shape[0]):
        value = lam[i]
        if not (value >= 0.0 and value <= limit):
            return -2
        positive[i] = value if value > 0.0 else 1.0
        b = bits[i]
        if previous >= 0 and b == previous_bits:
            index[i] = previous
            continue
        slot = np.int64((np.uint64(b) * _HASH) >> shift)
        while True:
            g = slots[slot]
            if g < 0:
                if count == most:
                    return -1
                g = count
                slots[slot] = g
                rate_bits[g] = b
                rates[g] = value
                first[g] = i
                count += 1
                break
            if rate_bits[g] == b:
                break
            slot = (slot + 1) & mask
        index[i] = g
        previous, previous_bits = g, b
    return count


@numba.njit(cache=True, nogil=True, error_model="numpy")
def pmf_exponent(
    lam: np.ndarray, log_positive: np.ndarray, log_factorial: np.ndarray, index: np.ndarray
) -> None:  # pragma: no cover - compiled
    """``floor(lam) * log(where(lam > 0, lam, 1)) - lam - log(m!)``, in place of the logs.

    The torch path's expression between its ``log`` and its ``exp``, rounded step by step
    in its order; ``log_factorial[index[i]]`` is value ``i``'s ``log(m!)``.
    """
    for i in range(lam.shape[0]):
        value = lam[i]
        product = np.floor(value) * log_positive[i]
        difference = product - value
        log_positive[i] = difference - log_factorial[index[i]]


@numba.njit(inline="always")
def _walk(lam: float, u: float, pmf: float, cdf: float) -> float:  # pragma: no cover - compiled
    # The walk from the mode (philox._poisson_walk) for one value: down while k > 0 and
    # CDF(k - 1) > u, else up while CDF(k) <= u.
    k = np.floor(lam)
    term = pmf
    total = cdf
    if u < total:
        while True:
            total = total - term
            if not (k > 0.0 and total > u):
                return k
            term = term * k / lam
            k = k - 1.0
    while True:
        k = k + 1.0
        term = term * lam / k
        total = total + term
        if not total <= u:
            return k


@numba.njit(cache=True, nogil=True, error_model="numpy")
def walk_counts(
    lam: np.ndarray, u: np.ndarray, pmf: np.ndarray, cdf: np.ndarray, out: np.ndarray
) -> None:  # pragma: no cover - compiled
    """Every value's count by the walk from the mode, given its own ``pmf(m)`` and ``CDF(m)``."""
    for i in range(lam.shape[0]):
        out[i] = _walk(lam[i], u[i], pmf[i], cdf[i])


@numba.njit(cache=True, nogil=True, error_model="numpy")
def table_counts(
    rates: np.ndarray,
    start_cdf: np.ndarray,
    first: np.ndarray,
    index: np.ndarray,
    pmf: np.ndarray,
    u: np.ndarray,
    bins: int,
    table_high: float,
    max_steps: int,
    out: np.ndarray,
) -> int:  # pragma: no cover - compiled
    """Each value's count from its group's CDF table, or by the walk where no table answers it.

    Group ``g``'s table starts from ``pmf[first[g]]`` and ``start_cdf[g]`` and holds, at
    place ``j``, ``CDF(j)`` for ``j`` from 0 up to the mode by the walk's steps down, then
    up by its steps up until a value exceeds ``table_high`` (at most ``max_steps``), then
    ``+inf``. These values never decrease, so the walk stops at the first place whose
    value exceeds ``u``: the count is that place (the mode itself, ``floor(rate)``, at the
    mode's place: -0.0 stays -0.0). A guide of ``bins`` bins per table holds, for each
    bin's lower edge ``b / bins``, the first place above it, where the search starts. A
    value walks instead where its ``pmf(m)`` has other bits than its table's start (torch's
    vectorised ``exp`` may give a field's values other last bits), or its search reaches
    the closing ``+inf``.

    Returns:
        How many values walked.
    """
    groups = rates.shape[0]
    widths = np.empty(groups, dtype=np.int64)
    for g in range(groups):
        rate = rates[g]
        mode = np.floor(rate)
        term = pmf[first[g]]
        total = start_cdf[g]
        steps = 0
        k = mode
        while not total > table_high and steps < max_steps:
            k = k + 1.0
            term = term * rate / k
            total = total + term
            steps += 1
        widths[g] = np.int64(mode) + 1 + steps + 1
    offsets = np.zeros(groups + 1, dtype=np.int64)
    for g in range(groups):
        offsets[g + 1] = offsets[g] + widths[g]
    values = np.empty(offsets[groups], dtype=np.float64)
    labels = np.empty(offsets[groups], dtype=np.float64)
    guide = np.empty(groups * bins, dtype=np.int32)
    start_bits = np.empty(groups, dtype=np.int64)
    pmf_bits = pmf.view(np.int64)
    for g in range(groups):
        rate = rates[g]
        mode = np.floor(rate)
        top = np.int64(mode)
        start, stop = offsets[g], offsets[g + 1]
        start_bits[g] = pmf_bits[first[g]]
        values[start + top] = start_cdf[g]
        term = pmf[first[g]]
        total = start_cdf[g]
        k = mode
        for place in range(top, 0, -1):
            total = total - term  # CDF(k - 1)
            values[start + place - 1] = total
            term = term * k / rate  # pmf(k - 1)
            k = k - 1.0
        term = pmf[first[g]]
        total = start_cdf[g]
        k = mode
        for place in range(top + 1, stop - start - 1):
            k = k + 1.0
            term = term * rate / k  # pmf(k)
            total = total + term  # CDF(k)
            values[start + place] = total
        values[stop - 1] = np.inf
        for place in range(stop - start):
            labels[start + place] = np.float64(place)
        labels[start + top] = mode
        labels[stop - 1] = -1.0
        place = start
        for b in range(bins):
            edge = b / bins
            while values[place] <= edge:
                place += 1
            guide[g * bins + b] = place
    walked = 0
    for i in range(u.shape[0]):
        g = index[i]
        value = u[i]
        if pmf_bits[i] == start_bits[g] and 0.0 <= value < 1.0:
            place = guide[g * bins + np.int64(value * bins)]
            while values[place] <= value:
                place += 1
            count = labels[place]
            if count >= 0.0:  # -0.0 too: the mode of a rate of -0.0
                out[i] = count
                continue
        out[i] = _walk(rates[g], value, pmf[i], start_cdf[g])
        walked += 1
    return walked
