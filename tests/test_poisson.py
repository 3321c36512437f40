"""Poisson draws by CDF tables: the same counts as the walk from the mode, bit for bit."""

from __future__ import annotations

import functools
import math
import types
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any
from unittest import mock

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_segrobust.core.types import Image
from pytest_segrobust.corruptions import PRESETS, Corruption
from pytest_segrobust.randomness import philox

LIMIT = philox.POISSON_INVERSION_LIMIT
# Rates where tables and walks are most likely to part: zeros of both signs, the smallest
# positive numbers, integers (the mode is the rate), values next to them and to the limit.
EDGE_RATES = [0.0, -0.0, 5e-324, 1e-300, 1e-9, 0.5, 1.0, math.nextafter(1.0, 0.0), 2.0, 11.999, 12.0, 100.0]
EDGE_RATES += [math.nextafter(LIMIT, 0.0), LIMIT, 255.5]
RATE = st.one_of(st.sampled_from(EDGE_RATES), st.floats(0.0, LIMIT, allow_nan=False, allow_subnormal=True))
# Float32 uniforms as poisson draws them are multiples of 2**-24: these levels are the extremes and the middle.
EXTREME_LEVELS = [0, 1, 2**23, 2**24 - 1]


@st.composite
def rate_fields(draw: st.DrawFn) -> tuple[torch.Tensor, torch.Tensor]:
    """A rate field with a few distinct rates (or about one per value) and its uniforms; odd and tiny lengths too.

    The values come from byte strings (a byte picks a value's rate from a drawn pool, four
    a uniform's 24-bit level, eight a rate's 53-bit fraction of the limit): ten times
    cheaper to generate than a list of floats drawn one by one, with the pool's edge
    rates and subnormals, and extreme uniforms, still drawn into the field.
    """
    length = draw(st.integers(1, 400))
    pool = np.array(draw(st.lists(RATE, min_size=1, max_size=6)))
    picks = np.frombuffer(draw(st.binary(min_size=length, max_size=length)), dtype=np.uint8)
    lam = pool[picks % len(pool)]
    if draw(st.booleans()):  # about one rate per value, the pool's at a sixteenth of the values
        spread = np.frombuffer(draw(st.binary(min_size=8 * length, max_size=8 * length)), dtype=np.uint64) >> 11
        lam = np.where(picks < 16, lam, spread * (2.0**-53 * LIMIT))
    levels = np.frombuffer(draw(st.binary(min_size=4 * length, max_size=4 * length)), dtype=np.uint32) >> 8
    levels = levels.copy()
    for place, level in draw(
        st.lists(st.tuples(st.integers(0, length - 1), st.sampled_from(EXTREME_LEVELS)), max_size=4)
    ):
        levels[place] = level
    return torch.from_numpy(lam.astype(np.float64)), torch.from_numpy(levels * 2.0**-24)


def bits(values: torch.Tensor) -> torch.Tensor:
    return values.contiguous().view(torch.int64)


@contextmanager
def tables_for_every_field() -> Iterator[None]:
    """The torch path's tables even where each rate has one value: small fields exercise them too."""
    with mock.patch.object(philox, "_VALUES_PER_RATE", 1), torch_path():
        yield


def torch_path() -> Any:
    """:func:`philox._poisson_inversion` on tensors, where numba's loops would take it (a context manager)."""
    return mock.patch.object(philox, "_compiled_poisson_for", lambda lam, u: None)


def walked_values(lam: torch.Tensor, u: torch.Tensor) -> tuple[torch.Tensor, int]:
    """``_poisson_inversion`` with tables (for fields of any size), and how many values it handed to the walk."""
    walked, walk = [], philox._poisson_walk

    def counting(*state: torch.Tensor) -> torch.Tensor:
        walked.append(state[0].numel())
        return walk(*state)

    with tables_for_every_field(), mock.patch.object(philox, "_poisson_walk", counting):
        k = philox._poisson_inversion(lam, u)
    return k, sum(walked)


# The profile's number of examples: test_walk_and_tables_are_the_scalar_recurrences checks both
# against one oracle on fields drawn alike, and the CDF-step test below is exhaustive per rate.
@given(rate_fields())
def test_tables_give_the_walks_counts(field: tuple[torch.Tensor, torch.Tensor]) -> None:
    lam, u = field
    with tables_for_every_field():
        assert torch.equal(
            bits(philox._poisson_inversion(lam, u)), bits(philox._poisson_inversion(lam, u, tables=False))
        )


def scalar_walk(lam: float, u: float, pmf: float, cdf: float, mode: float) -> float:
    """The walk from the mode for one value, in Python floats (IEEE doubles, each operation correctly rounded)."""
    k, term, total = mode, pmf, cdf
    if u < total:
        while True:
            total = total - term  # CDF(k - 1)
            if not (k > 0 and total > u):
                return k
            term = term * k / lam  # pmf(k - 1)
            k = k - 1
    while True:
        k = k + 1
        term = term * lam / k  # pmf(k)
        total = total + term
        if not total <= u:
            return k


@settings(max_examples=40, deadline=None)
@given(rate_fields())
def test_walk_and_tables_are_the_scalar_recurrences(field: tuple[torch.Tensor, torch.Tensor]) -> None:
    # An oracle outside torch: the same recurrences one value at a time in Python floats.
    lam, u = field
    start_cdf, log_factorial = philox._start_values(lam)
    pmf = philox._mode_pmf(lam, log_factorial)
    expected = [
        scalar_walk(*values)
        for values in zip(lam.tolist(), u.tolist(), pmf.tolist(), start_cdf.tolist(), torch.floor(lam).tolist())
    ]
    expected_bits = bits(torch.tensor(expected, dtype=torch.float64))
    assert torch.equal(bits(philox._poisson_walk(lam, u, pmf, start_cdf)), expected_bits)
    with tables_for_every_field():
        assert torch.equal(bits(philox._poisson_inversion(lam, u)), expected_bits)


@settings(max_examples=40, deadline=None)
@given(rate_fields(), st.integers(1, 3))
def test_rates_sharing_a_bucket_are_grouped_apart(field: tuple[torch.Tensor, torch.Tensor], log2_buckets: int) -> None:
    lam, u = field
    with tables_for_every_field(), mock.patch.object(philox, "_RATE_BUCKETS_LOG2", log2_buckets):
        groups = philox._rate_groups(lam)
        assert groups is not None
        rates, index = groups
        assert torch.equal(bits(rates[index.long()]), bits(lam))  # every value is its group's rate, bit for bit
        assert torch.unique(bits(rates)).numel() == rates.numel()
        assert torch.equal(
            bits(philox._poisson_inversion(lam, u)), bits(philox._poisson_inversion(lam, u, tables=False))
        )


def photo_rates(photons: float, size: int = 61, seed: int = 0) -> torch.Tensor:
    """An 8-bit image (smooth shading plus grain) times a photon count, odd-sized: (2, 3, size, size)."""
    g = torch.Generator().manual_seed(seed)
    coarse = torch.rand(2, 3, 5, 5, generator=g)
    images = torch.nn.functional.interpolate(coarse, size=(size, size), mode="bilinear")
    images = ((0.8 * images + 0.2 * torch.rand(images.shape, generator=g)) * 255).round() / 255
    return images * photons


@pytest.mark.parametrize("photons", [3.0, 12.0, 250.0])
def test_an_image_is_resolved_by_its_tables_alone(photons: float) -> None:
    lam = photo_rates(photons).double()
    u = philox.uniform([5, 6], lam.shape[1:], "cpu").double()
    k, walked = walked_values(lam, u)
    assert walked == 0
    assert torch.equal(bits(k), bits(philox._poisson_inversion(lam, u, tables=False)))


def scalar_cdf_steps(lam: float, pmf: float, cdf: float, mode: float) -> list[float]:
    """Every CDF value the scalar walk from the mode passes, down to k = 0 and up past the largest uniform."""
    steps, term, total, k = [cdf], pmf, cdf, mode
    while k > 0:
        total, term, k = total - term, term * k / lam, k - 1
        steps.append(total)
    term, total, k = pmf, cdf, mode
    while total <= 1 - 2.0**-24:
        k = k + 1
        term = term * lam / k
        total = total + term
        steps.append(total)
    return steps


@pytest.mark.parametrize("rate", [1e-6, 0.01, 0.37, 1.0, 7.5, 12.0, 99.9, 255.99])
def test_walk_and_tables_stop_where_the_scalar_walk_does_on_every_cdf_step(rate: float) -> None:
    # Uniforms on every CDF value of the scalar walk and one float64 ulp below it: a CDF
    # value one ulp off in the walk or in a table gives another count at one of the two.
    lam = torch.tensor([rate], dtype=torch.float64)
    start_cdf, log_factorial = philox._start_values(lam)
    pmf = philox._mode_pmf(lam, log_factorial)
    start = (rate, pmf.item(), start_cdf.item(), math.floor(rate) * 1.0)
    steps = torch.tensor(scalar_cdf_steps(*start), dtype=torch.float64)
    u = torch.cat([steps, torch.nextafter(steps, torch.tensor(-1.0, dtype=torch.float64))]).clamp_(0.0, 1 - 2.0**-24)
    expected = torch.tensor([scalar_walk(rate, value, *start[1:]) for value in u.tolist()], dtype=torch.float64)
    lam = lam.expand(u.numel()).contiguous()
    assert torch.equal(bits(philox._poisson_walk(lam, u, pmf.expand_as(u), start_cdf.expand_as(u))), bits(expected))
    k, walked = walked_values(lam, u)
    assert torch.equal(bits(k), bits(expected))
    assert walked <= int((u < philox._TABLE_LOW).sum())  # only uniforms below a table's low end walk


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_tables_give_the_walks_counts_on_cuda() -> None:
    lam = photo_rates(12.0).double().cuda()
    u = philox.uniform([5, 6], lam.shape[1:], "cuda").double()
    assert torch.equal(bits(philox._poisson_inversion(lam, u)), bits(philox._poisson_inversion(lam, u, tables=False)))


def test_uniforms_beyond_a_table_walk() -> None:
    # u = 0 lies below a table that stops short of k = 0 (a rate of 200); u = 1 - 2**-24 is
    # inside every table (they end above 1 - 2**-30).
    lam = torch.tensor([200.0, 3.0, 200.0, 0.0] * 16, dtype=torch.float64)
    u = torch.tensor([0.0, 0.0, 1 - 2.0**-24, 0.5] * 16, dtype=torch.float64)
    k, walked = walked_values(lam, u)
    assert walked == 16
    assert torch.equal(bits(k), bits(philox._poisson_inversion(lam, u, tables=False)))
    assert k[0] == k[1] == k[3] == 0 and k[2] > 250


def test_values_whose_start_pmf_has_other_bits_walk() -> None:
    # Where a vectorised exp gives a value other last bits than its rate's table starts from,
    # the value must walk; simulated here by nudging the pmf of a few values of the field.
    lam = photo_rates(12.0).double()
    u = philox.uniform([5, 6], lam.shape[1:], "cpu").double()
    nudged = torch.tensor([0, 7, 1000, lam.numel() - 1])
    field_pmf = philox._mode_pmf

    def nudging(rates: torch.Tensor, log_factorial: torch.Tensor) -> torch.Tensor:
        pmf = field_pmf(rates, log_factorial)
        if rates.shape == lam.shape:  # the field, not the table's start values
            flat = pmf.view(-1)
            flat[nudged] = torch.nextafter(flat[nudged], torch.tensor(2.0, dtype=torch.float64))
        return pmf

    with mock.patch.object(philox, "_mode_pmf", nudging):
        k, walked = walked_values(lam, u)
        assert walked == nudged.numel()
        assert torch.equal(bits(k), bits(philox._poisson_inversion(lam, u, tables=False)))


def test_an_off_by_one_table_is_caught() -> None:
    # The comparisons above are not vacuous: tables whose counts are one too high differ from the walk.
    lam = photo_rates(12.0).double()
    u = philox.uniform([5, 6], lam.shape[1:], "cpu").double()
    tables = philox._cdf_tables

    def off_by_one(*start: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        values, labels = tables(*start)
        return values, torch.where(labels >= 0, labels + 1, labels)

    with mock.patch.object(philox, "_cdf_tables", off_by_one), torch_path():
        k = philox._poisson_inversion(lam, u)
    assert torch.equal(k, philox._poisson_inversion(lam, u, tables=False) + 1)


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "float64"])
def test_poisson_draws_the_walks_counts_below_the_limit_and_normals_above(layout: str) -> None:
    rates = photo_rates(300.0)  # 8-bit levels times 300: those above 256 take the normal approximation
    rates = {"contiguous": rates, "transposed": rates.transpose(-1, -2), "float64": rates.double()}[layout]
    walk = partial(philox._poisson_inversion, tables=False)
    with mock.patch.object(philox, "_poisson_inversion", walk):
        walked = philox.poisson([3, 4], rates, 9)
    drawn = philox.poisson([3, 4], rates, 9)
    assert torch.equal(drawn, walked) and drawn.dtype == rates.dtype
    above = rates > LIMIT
    assert bool(above.any()) and bool((drawn[above] > LIMIT / 2).all())


def test_fields_whose_rates_barely_repeat_walk() -> None:
    lam = torch.rand(4096, dtype=torch.float64, generator=torch.Generator().manual_seed(2)) * 20
    lam[::7] = 3.0  # some repeat
    assert philox._rate_groups(lam) is None
    # Start values evaluated at every value (no torch.unique): the same counts.
    u = philox.uniform([8], (4096,), "cpu").double()[0]
    with mock.patch.object(philox, "_rate_groups", lambda lam: None):
        k, walked = walked_values(lam, u)
    assert walked == lam.numel() and torch.equal(bits(k), bits(philox._poisson_inversion(lam, u, tables=False)))
    assert philox._rate_groups(lam[:128].repeat(32)) is not None  # 32 values per rate
    assert philox._rate_groups(torch.zeros(31, dtype=torch.float64)) is None  # too few values for one table


def test_gammaincc_and_lgamma_do_not_depend_on_where_a_value_sits() -> None:
    # _poisson_inversion evaluates them once per distinct rate and gathers the results,
    # which equals evaluating them over the field only if a value's result is its own.
    rates = torch.rand(257, dtype=torch.float64, generator=torch.Generator().manual_seed(3)) * LIMIT
    field = torch.cat([rates.repeat(33), rates[:13]])
    for op in (lambda r: torch.special.gammaincc(torch.floor(r) + 1, r), lambda r: torch.lgamma(torch.floor(r) + 1)):
        alone = torch.stack([op(r.view(1))[0] for r in rates])
        together = op(field)
        assert torch.equal(bits(together[:-13].view(33, 257)), bits(alone.expand(33, -1)))
        assert torch.equal(bits(together[-13:]), bits(alone[:13]))


def poisson_corruptions(images: torch.Tensor) -> list[Corruption[Any]]:
    """Every built-in image corruption that draws Poisson counts (seen drawing them at severity 3)."""
    found: dict[int, Corruption[Any]] = {}
    for preset in PRESETS.values():
        for corruption in (c for c in preset.corruptions if c.accepts(Image)):
            with mock.patch.object(philox, "poisson", wraps=philox.poisson) as spy:
                corruption(images, 3, [1] * images.shape[0])
            if spy.called:
                found[id(corruption)] = corruption
    return list(found.values())


def test_poisson_corruptions_are_unchanged() -> None:
    # At every severity, on photo-like and smooth float images: the same bits with tables as
    # with the walk alone (what every release before the tables drew).
    g = torch.Generator().manual_seed(4)
    images = torch.cat([photo_rates(1.0, size=37).float(), torch.rand(1, 3, 37, 37, generator=g)])
    corruptions = poisson_corruptions(images[:1])  # whether a corruption draws them does not depend on the batch
    assert {c.name for c in corruptions} >= {"shot_noise"} and len(corruptions) >= 2  # ImageNet-C's and COCO-P's
    walk = partial(philox._poisson_inversion, tables=False)
    for corruption in corruptions:
        for severity in range(1, 6):
            with_tables = corruption(images, severity, [11, 12, 13])
            with mock.patch.object(philox, "_poisson_inversion", walk):
                walked = corruption(images, severity, [11, 12, 13])
            assert torch.equal(with_tables.view(torch.int32), walked.view(torch.int32)), (corruption.name, severity)


# numba's loops (pytest_segrobust.randomness.poisson_kernel): the torch path's counts, bit for bit.


@pytest.fixture(scope="module")
def kernel() -> Any:
    pytest.importorskip("numba")
    compiled = philox._compiled_poisson()
    assert compiled is not None, "numba is installed but its Poisson loops were refused"
    return compiled


def compiled_counts(kernel: Any, lam: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    counts = philox._compiled_inversion(kernel, lam, u)
    assert counts is not None
    return counts


@settings(max_examples=30, deadline=None)
@given(rate_fields(), st.booleans())
def test_compiled_loops_give_the_walks_counts(
    kernel: Any, field: tuple[torch.Tensor, torch.Tensor], tables: bool
) -> None:
    # With tables for any field, or only where they pay (tiny fields then walk in the loop).
    lam, u = field
    with mock.patch.object(philox, "_VALUES_PER_RATE", 1 if tables else philox._VALUES_PER_RATE):
        counts = compiled_counts(kernel, lam, u)
    assert torch.equal(bits(counts), bits(philox._poisson_inversion(lam, u, tables=False)))


@pytest.mark.parametrize("photons", [60.0, 3.0, LIMIT])
def test_compiled_loops_give_the_torch_paths_counts_on_images(kernel: Any, photons: float) -> None:
    # The demo's kind of field (8-bit levels times photons, a batch), with uniforms on every
    # CDF step of its first rate and one float64 ulp below each (where the count changes).
    lam = photo_rates(photons).double()
    u = philox.uniform([5, 6], lam.shape[1:], "cpu").double()
    rate = lam.view(-1)[:1]
    start_cdf, log_factorial = philox._start_values(rate)
    start = (rate.item(), philox._mode_pmf(rate, log_factorial).item(), start_cdf.item(), math.floor(rate.item()) * 1.0)
    steps = torch.tensor(scalar_cdf_steps(*start), dtype=torch.float64)
    edges = torch.cat([steps, torch.nextafter(steps, torch.tensor(-1.0, dtype=torch.float64))]).clamp_(
        0.0, 1 - 2.0**-24
    )
    u.view(-1)[: edges.numel()] = edges
    lam.view(-1)[: edges.numel()] = rate
    with torch_path():
        expected = philox._poisson_inversion(lam, u)
    assert torch.equal(bits(compiled_counts(kernel, lam, u)), bits(expected))


def test_values_whose_start_pmf_has_other_bits_walk_in_the_loop(kernel: Any) -> None:
    lam = photo_rates(12.0).double().view(-1)
    u = philox.uniform([5], lam.shape, "cpu").double()[0]
    most = lam.numel() // philox._VALUES_PER_RATE
    index, rates, first = np.empty(lam.numel(), np.int32), np.empty(most), np.empty(most, np.int64)
    groups = kernel.group_rates(lam.numpy(), LIMIT, index, rates, first, np.empty(lam.numel()))
    start_cdf, log_factorial = philox._start_values(torch.from_numpy(rates[:groups]))
    pmf = philox._mode_pmf(lam, log_factorial[torch.from_numpy(index).long()])
    # Values that start no table (a value that does starts its table with its own bits).
    nudged = torch.tensor([place for place in (7, 1000, lam.numel() - 1) if place not in first[:groups]])
    pmf[nudged] = torch.nextafter(pmf[nudged], torch.tensor(2.0, dtype=torch.float64))
    counts = np.empty(lam.numel())
    args = (start_cdf.numpy(), first[:groups], index, pmf.numpy(), u.numpy(), 64, philox._TABLE_HIGH, 1024, counts)
    assert kernel.table_counts(rates[:groups], *args) == nudged.numel() > 0
    cdf = start_cdf[torch.from_numpy(index).long()]
    assert torch.equal(bits(torch.from_numpy(counts)), bits(philox._poisson_walk(lam, u, pmf, cdf)))


def test_rates_outside_the_inversion_are_left_to_torch(kernel: Any) -> None:
    u = torch.full((64,), 0.5, dtype=torch.float64)
    for rate in (math.nextafter(LIMIT, math.inf), math.nan, -1.0):
        lam = torch.full((64,), 3.0, dtype=torch.float64)
        lam[-1] = rate
        assert philox._compiled_inversion(kernel, lam, u) is None
    rates = photo_rates(300.0, size=128)  # some above the limit: the inversion sees them as 0
    drawn = philox.poisson([3, 4], rates, 9)
    with torch_path():
        assert torch.equal(drawn, philox.poisson([3, 4], rates, 9))


def test_the_loops_load_for_an_image_and_then_serve_every_field(monkeypatch: pytest.MonkeyPatch) -> None:
    loads: list[int] = []

    @functools.cache
    def counting() -> str:
        loads.append(1)
        return "kernel"

    monkeypatch.setattr(philox, "_compiled_poisson", counting)
    small = torch.zeros(philox._POISSON_COMPILED_MIN_VALUES - 1, dtype=torch.float64)
    large = torch.zeros(philox._POISSON_COMPILED_MIN_VALUES, dtype=torch.float64)
    assert philox._compiled_poisson_for(small, small) is None and not loads
    assert philox._compiled_poisson_for(large, large) == "kernel"
    assert philox._compiled_poisson_for(small, small) == "kernel" and loads == [1]
    assert philox._compiled_poisson_for(large.float(), large.float()) is None  # float64 fields only
    assert philox._compiled_poisson_for(large.view(2, -1).t(), large.view(2, -1).t()) is None  # contiguous only


def test_loops_that_give_other_counts_are_refused(kernel: Any) -> None:
    def off_by_one(*args: Any) -> int:
        walked = kernel.table_counts(*args)
        args[-1][:] += 1
        return walked

    names = ("group_rates", "pmf_exponent", "walk_counts")
    broken = types.SimpleNamespace(table_counts=off_by_one, **{name: getattr(kernel, name) for name in names})
    with mock.patch.object(philox.importlib, "import_module", lambda name: broken):
        assert philox._compiled_poisson.__wrapped__() is None

    def missing(name: str) -> None:
        raise ImportError("No module named 'numba'")

    with mock.patch.object(philox.importlib, "import_module", missing):
        assert philox._compiled_poisson.__wrapped__() is None
    with mock.patch.object(philox.importlib, "import_module", lambda name: kernel):
        assert philox._compiled_poisson.__wrapped__() is kernel


def test_the_loops_pmf_field_has_the_torch_paths_bits(kernel: Any) -> None:
    # A pmf(m) one ulp off changes a count only where a uniform lies within an ulp of a CDF
    # step: compared here directly, on a field that torch splits between threads (odd sizes).
    lam = photo_rates(60.0, size=131).double()
    flat = lam.view(-1).numpy()
    index, rates, first = np.empty(flat.size, np.int32), np.empty(flat.size // 32), np.empty(flat.size // 32, np.int64)
    field = torch.empty_like(lam)
    groups = kernel.group_rates(flat, LIMIT, index, rates, first, field.view(-1).numpy())
    assert torch.equal(bits(torch.from_numpy(rates[:groups])[torch.from_numpy(index).long()]), bits(lam.view(-1)))
    log_factorial = philox._start_values(torch.from_numpy(rates[:groups]))[1]
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        field.log_()
        kernel.pmf_exponent(flat, field.view(-1).numpy(), log_factorial.numpy(), index)
        field.exp_()
        expected = philox._mode_pmf(lam, log_factorial[torch.from_numpy(index).long()].view_as(lam))
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(bits(field), bits(expected))
