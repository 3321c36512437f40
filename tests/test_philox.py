"""Philox-4x32-10 in torch: the published known answers, a plain-Python reference, and the draws built on it."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_segrobust.randomness.philox import integers, normal, philox4x32, poisson, random_bits, uniform

WORD = st.integers(0, 2**32 - 1)

# Random123's known-answer vectors for philox4x32_10 (counter, key -> output).
KNOWN_ANSWERS = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((2**32 - 1,) * 4, (2**32 - 1,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0), (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]


def reference(counter: tuple[int, ...], key: tuple[int, ...]) -> list[int]:
    """Philox-4x32-10 on Python integers, written from the paper's round function."""
    c, k = list(counter), list(key)
    for _ in range(10):
        p0, p1 = 0xD2511F53 * c[0], 0xCD9E8D57 * c[2]
        c = [(p1 >> 32) ^ c[1] ^ k[0], p1 & 0xFFFFFFFF, (p0 >> 32) ^ c[3] ^ k[1], p0 & 0xFFFFFFFF]
        k = [(k[0] + 0x9E3779B9) & 0xFFFFFFFF, (k[1] + 0xBB67AE85) & 0xFFFFFFFF]
    return c


@pytest.mark.parametrize(("counter", "key", "expected"), KNOWN_ANSWERS)
def test_known_answers(counter: tuple, key: tuple, expected: tuple) -> None:
    out = philox4x32(torch.tensor(counter, dtype=torch.int64), torch.tensor(key, dtype=torch.int64))
    assert out.tolist() == list(expected) == reference(counter, key)


@settings(max_examples=200, deadline=None)
@given(st.tuples(WORD, WORD, WORD, WORD), st.tuples(WORD, WORD))
def test_equal_to_the_python_reference(counter: tuple, key: tuple) -> None:
    out = philox4x32(torch.tensor(counter, dtype=torch.int64), torch.tensor(key, dtype=torch.int64))
    assert out.tolist() == reference(counter, key)


def test_a_seeds_words_are_its_key_and_block_counters() -> None:
    seed, stream = 0x0123456789ABCDEF & (2**63 - 1), 7
    words = random_bits([seed], 10, "cpu", stream)[0].tolist()
    key = (seed & 0xFFFFFFFF, seed >> 32)
    expected = [w for block in range(3) for w in reference((block, stream, 0, 0), key)][:10]
    assert words == expected


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(0, 2**63 - 1), min_size=1, max_size=5, unique=True), st.data())
def test_a_samples_draws_do_not_depend_on_its_batch(seeds: list[int], data: st.DataObject) -> None:
    order = data.draw(st.permutations(range(len(seeds))))
    shuffled = [seeds[i] for i in order]
    for draw in (lambda s: uniform(s, (3, 5), "cpu"), lambda s: normal(s, (7,), "cpu"), lambda s: integers(s, -3, 9, (4,), "cpu")):
        together, alone = draw(shuffled), torch.cat([draw([s]) for s in shuffled])
        assert torch.equal(together, alone)
        assert torch.equal(together, draw(seeds)[list(order)])


def test_streams_are_independent_sequences() -> None:
    a, b = uniform([5], (1000,), "cpu", stream=0), uniform([5], (1000,), "cpu", stream=1)
    assert not torch.equal(a, b) and abs(float(torch.corrcoef(torch.cat([a, b]))[0, 1])) < 0.1
    assert torch.equal(uniform([5], (10,), "cpu")[0], a[0, :10])  # a longer draw extends a shorter one


def test_uniform_is_uniform_and_on_the_2_to_the_24_grid() -> None:
    u = uniform(list(range(4)), (50_000,), "cpu")
    assert u.dtype == torch.float32 and float(u.min()) >= 0 and float(u.max()) < 1
    assert torch.equal(u * 2**24, (u * 2**24).round())
    counts = np.histogram(u.numpy().ravel(), bins=20, range=(0, 1))[0]
    expected = u.numel() / 20
    assert float(((counts - expected) ** 2 / expected).sum()) < 43.8  # chi-square, 19 dof, p = 0.001


def test_normal_moments() -> None:
    z = normal(list(range(4)), (50_001,), "cpu").double()
    assert z.shape == (4, 50_001)
    assert abs(float(z.mean())) < 0.01 and abs(float(z.std()) - 1) < 0.01
    assert abs(float((z**3).mean())) < 0.03 and abs(float((z**4).mean()) - 3) < 0.06
    assert 0.3170 - 0.005 < float((z.abs() > 1).double().mean()) < 0.3173 + 0.005


def test_integers_cover_their_range_evenly() -> None:
    k = integers([1, 2], -2, 5, (70_000,), "cpu")
    assert k.dtype == torch.int64 and int(k.min()) == -2 and int(k.max()) == 4
    counts = torch.bincount((k + 2).ravel(), minlength=7).double()
    assert float(((counts - counts.mean()) ** 2 / counts.mean()).sum()) < 22.5  # 6 dof, p = 0.001
    with pytest.raises(ValueError, match="within 2\\*\\*31"):
        integers([1], 0, 2**31 + 1, (1,), "cpu")


@pytest.mark.parametrize("rate", [0.0, 0.3, 4.0, 60.0, 250.0, 900.0])
def test_poisson_mean_and_variance(rate: float) -> None:
    rates = torch.full((2, 40_000), rate)
    k = poisson([11, 12], rates).double()
    assert torch.equal(k, k.round()) and float(k.min()) >= 0
    tolerance = 5 * math.sqrt(max(rate, 1e-9) / k.numel())  # five standard errors of the mean
    assert abs(float(k.mean()) - rate) <= max(tolerance, 1e-12)
    assert abs(float(k.var()) - rate) <= 0.05 * rate + 1e-12


def test_poisson_small_rates_follow_the_pmf() -> None:
    k = poisson([3], torch.full((1, 100_000), 2.5))
    counts = torch.bincount(k.long().ravel(), minlength=12)[:8].double() / k.numel()
    pmf = torch.tensor([math.exp(-2.5) * 2.5**j / math.factorial(j) for j in range(8)], dtype=torch.float64)
    assert float((counts - pmf).abs().max()) < 0.005


def test_poisson_refuses_bad_rates() -> None:
    with pytest.raises(ValueError, match="finite and non-negative"):
        poisson([1], torch.tensor([[-1.0]]))
    with pytest.raises(ValueError, match="2 seeds for a batch of 1"):
        poisson([1, 2], torch.tensor([[1.0]]))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device: the CPU-vs-CUDA comparison needs one")
def test_cpu_and_cuda_agree() -> None:
    seeds = [3, 2**62 + 5]
    assert torch.equal(random_bits(seeds, 1001, "cpu", 4), random_bits(seeds, 1001, "cuda", 4).cpu())
    assert torch.equal(uniform(seeds, (33, 17), "cpu"), uniform(seeds, (33, 17), "cuda").cpu())
    ulp = torch.finfo(torch.float32).eps * 8  # |z| < 8
    assert float((normal(seeds, (999,), "cpu") - normal(seeds, (999,), "cuda").cpu()).abs().max()) <= ulp


def test_the_wrapping_multiply_equals_the_split_one() -> None:
    # The fast path is taken only where the device wraps; on this CPU it must, and give the same bits.
    from pytest_segrobust.randomness import philox

    assert philox._wraps_exactly(torch.device("cpu"))
    values = torch.cat([torch.tensor([0, 1, 2**31 - 1, 2**31, 2**32 - 1]), torch.randint(0, 2**32, (10_000,))])
    for multiplier in philox._MULTIPLIERS:
        wrapped, split = philox._mul_hi_lo_wrapping(values, multiplier), philox._mul_hi_lo(values, multiplier)
        assert torch.equal(wrapped[0], split[0]) and torch.equal(wrapped[1], split[1])
        assert wrapped[0].tolist()[:5] == [(v * multiplier) >> 32 for v in (0, 1, 2**31 - 1, 2**31, 2**32 - 1)]


def test_cpu_slices_give_the_words_of_one_whole_call(monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_segrobust.randomness import philox

    whole = random_bits([7, 8, 9], 4_001, "cpu", 2)
    monkeypatch.setattr(philox, "_CPU_CHUNK_WORDS", 7)  # 2 blocks per slice for 3 seeds, last slice short
    assert torch.equal(random_bits([7, 8, 9], 4_001, "cpu", 2), whole)


@pytest.mark.parametrize("scale", [0.0, 0.4, 3.0, 37.0, 255.0])
def test_poisson_starting_at_the_mode_equals_inversion_from_zero(scale: float) -> None:
    rates = torch.rand(2, 5_000, generator=torch.Generator().manual_seed(1), dtype=torch.float64) * scale
    u = uniform([4, 5], (5_000,), "cpu").double()
    k = poisson([4, 5], rates)
    # Plain inversion: the smallest k with CDF(k) > u, summing the pmf from 0.
    expected = torch.zeros_like(rates)
    term = torch.exp(-rates)
    cdf = term.clone()
    for step in range(1, 400):
        below = cdf <= u
        if not bool(below.any()):
            break
        term = torch.where(below, term * rates / step, term)
        cdf = cdf + torch.where(below, term, 0.0)
        expected += below.double()
    # Both are float64 sums of the same terms; they may part only where u lies on a CDF step.
    assert int((k != expected).sum()) <= 1
