"""The CPU paths of Philox (numpy rounds; Python integers for draws of a few blocks): the same words
and draws as the torch path, bit for bit."""

from __future__ import annotations

import functools
from collections.abc import Callable
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
from tests.test_philox import KNOWN_ANSWERS, reference

WORD = st.integers(0, 2**32 - 1)
SEED = st.integers(0, 2**64 - 1)


def numpy_block(counters: list[tuple[int, ...]], key: tuple[int, int]) -> list[list[int]]:
    columns = [np.array(column, dtype=np.uint32) for column in zip(*counters)]
    out = np.empty((len(counters), 4), dtype=np.uint32)
    return philox._philox4x32_numpy(columns, key, out).tolist()


def torch_path(draw: Callable[[], torch.Tensor]) -> torch.Tensor:
    """``draw()`` on the torch path, as on a GPU, even on a CPU."""
    with mock.patch.object(philox, "_uses_numpy", lambda device: False):
        return draw()


def test_cpus_take_the_numpy_path() -> None:
    assert philox._uses_numpy(torch.device("cpu"))
    assert not philox._uses_numpy(torch.device("meta"))


@pytest.mark.parametrize(("counter", "key", "expected"), KNOWN_ANSWERS)
def test_known_answers(counter: tuple, key: tuple, expected: tuple) -> None:
    assert numpy_block([counter], key) == [list(expected)]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(WORD, WORD, WORD, WORD), min_size=1, max_size=9), st.tuples(WORD, WORD))
def test_random_counters_and_keys_give_the_torch_words(counters: list[tuple], key: tuple) -> None:
    expected = philox.philox4x32(torch.tensor(counters, dtype=torch.int64), torch.tensor(key, dtype=torch.int64))
    assert numpy_block(counters, key) == expected.tolist() == [reference(c, key) for c in counters]


@settings(max_examples=50, deadline=None)
@given(st.lists(WORD, min_size=1, max_size=5), WORD, WORD, st.tuples(WORD, WORD))
def test_counter_words_given_as_integers_give_the_words_of_arrays(
    first: list[int], second: int, third: int, key: tuple
) -> None:
    # A stream's constant words stay Python integers through the first rounds.
    out = np.empty((len(first), 4), dtype=np.uint32)
    words = philox._philox4x32_numpy((np.array(first, dtype=np.uint32), second, third, 0), key, out).tolist()
    assert (
        words
        == numpy_block([(f, second, third, 0) for f in first], key)
        == [reference((f, second, third, 0), key) for f in first]
    )


@settings(max_examples=30, deadline=None)
@given(st.lists(SEED, min_size=1, max_size=3), st.integers(1, 3_000), WORD, st.integers(0, 4))
def test_every_draw_equals_the_torch_paths(seeds: list[int], count: int, stream: int, chunk_log2: int) -> None:
    # Slices of 1 to 256 blocks, the last one short.
    with mock.patch.object(philox, "_NUMPY_CHUNK_BLOCKS", 4**chunk_log2):
        draws = [
            lambda: philox.random_bits(seeds, count, "cpu", stream),
            lambda: philox.uniform(seeds, (count,), "cpu", stream),
            lambda: philox.uniform(seeds, (count, 1), "cpu", stream, dtype=torch.float64),
            lambda: philox.integers(seeds, -5, 2**31 - 5, (count,), "cpu", stream),
            lambda: philox.integers(seeds, 0, 3, (1, count), "cpu", stream),
            lambda: philox.normal(seeds, (count,), "cpu", stream),  # float64 an ulp or two apart: the same float32
        ]
        for draw in draws:
            ours, theirs = draw(), torch_path(draw)
            assert ours.dtype == theirs.dtype and ours.shape == theirs.shape and ours.is_contiguous()
            assert torch.equal(ours, theirs)


@pytest.mark.parametrize("seeds", [[0], [2**64 - 1, 5, 2**32]])
@pytest.mark.parametrize("stream", [0, 2**32 - 1])
def test_draws_of_a_few_blocks_take_python_integers_and_give_the_torch_words(seeds: list[int], stream: int) -> None:
    # Up to _PYTHON_MAX_BLOCKS blocks per seed without the numpy rounds, and one word more with them.
    limit = 4 * philox._PYTHON_MAX_BLOCKS
    rounds = mock.Mock(wraps=philox._numpy_rounds)
    with mock.patch.object(philox, "_numpy_rounds", rounds), mock.patch.object(philox, "_compiled_for", lambda b: None):
        for count in (0, 1, 3, 4, 5, limit - 1, limit, limit + 1):
            draws = [
                functools.partial(philox.random_bits, seeds, count, "cpu", stream),
                functools.partial(philox.uniform, seeds, (count,), "cpu", stream),
                functools.partial(philox.uniform, seeds, (1, count), "cpu", stream, dtype=torch.float64),
                functools.partial(philox.uniform_levels, seeds, (count,), "cpu", stream),
                functools.partial(philox.integers, seeds, -3, 2**31 - 3, (count,), "cpu", stream),
            ]
            for draw in draws:
                rounds.reset_mock()
                ours, theirs = draw(), torch_path(draw)
                assert ours.dtype == theirs.dtype and ours.shape == theirs.shape and ours.is_contiguous()
                assert torch.equal(ours, theirs)
                assert rounds.called == (count > limit)
    assert philox.random_bits([], 3, "cpu").shape == (0, 3)
    for dtype in (torch.float32, torch.float64):
        draw = functools.partial(philox.signs, seeds, "cpu", stream, dtype)
        ours, theirs = draw(), torch_path(draw)
        assert ours.dtype == theirs.dtype == dtype and torch.equal(ours, theirs)
        assert torch.equal(ours, philox.integers(seeds, 0, 2, (1,), "cpu", stream)[:, 0].to(dtype) * 2 - 1)
        scaled = functools.partial(philox.signs, seeds, "cpu", stream, dtype, magnitude=12.5)
        assert torch.equal(scaled(), ours * 12.5) and torch.equal(torch_path(scaled), ours * 12.5)


def test_large_fields_and_poisson_equal_the_torch_paths() -> None:
    seeds, shape = [3, 2**63 + 1], (3, 257, 345)  # two default slices, the last short; an odd count
    for draw in (
        lambda: philox.random_bits(seeds, 3 * 257 * 345, "cpu", 7),
        lambda: philox.normal(seeds, shape, "cpu", 2),
    ):
        assert torch.equal(draw(), torch_path(draw))
    rates = torch.rand(2, 20_000, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 400
    assert torch.equal(philox.poisson(seeds, rates, 5), torch_path(lambda: philox.poisson(seeds, rates, 5)))


def test_normals_equal_the_torch_paths_with_or_without_opencv() -> None:
    # Without an accurate cv2.polarToCart, torch's cos and sin make the same values.
    seeds, shape = [3, 2**63 + 1, 77], (3, 41, 37)  # an odd count: one pair more than needed is made
    expected = torch_path(lambda: philox.normal(seeds, shape, "cpu", 9))
    with mock.patch.object(philox, "_opencv_polar_is_accurate", lambda: False):
        assert torch.equal(philox.normal(seeds, shape, "cpu", 9), expected)
    assert torch.equal(philox.normal(seeds, shape, "cpu", 9), expected)


class _Float32PolarToCart:
    """A ``cv2`` whose ``polarToCart`` computes in float32, as OpenCV builds without IPP do."""

    @staticmethod
    def polarToCart(r: np.ndarray, a: np.ndarray, *outputs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        r32, a32 = r.astype(np.float32), a.astype(np.float32)
        return (r32 * np.cos(a32)).astype(np.float64), (r32 * np.sin(a32)).astype(np.float64)


def test_opencv_polar_to_cart_is_used_only_where_it_is_float64_accurate() -> None:
    check = philox._opencv_polar_is_accurate.__wrapped__
    with mock.patch.object(philox, "opencv", lambda: _Float32PolarToCart()):
        assert not check()
    with mock.patch.object(philox, "opencv", lambda: None):
        assert not check()
        assert philox._polar_to_cartesian().__name__ == "by_torch"
    cv2 = pytest.importorskip("cv2")
    r, a = np.array([1.0, 6.5, 2.0**-16]), np.array([0.0, 1.0, 6.28])
    x, y = cv2.polarToCart(r, a)
    # Where this OpenCV is float64-accurate (IPP, x86 wheels) the check takes it, elsewhere not.
    accurate = bool(
        np.all(np.abs(x.ravel() - r * np.cos(a)) < 1e-14) and np.all(np.abs(y.ravel() - r * np.sin(a)) < 1e-14)
    )
    assert check() == accurate


def test_words_beyond_a_streams_counter_are_refused() -> None:
    with pytest.raises(ValueError, match="4 \\* 2\\*\\*32 words"):
        philox.random_bits([1], 4 * 2**32 + 1, "cpu")


BUILTIN = {
    (type(c).__name__, c.name, repr(c.table)): c
    for preset in PRESETS.values()
    for c in preset.corruptions
    if c.accepts(Image)
}


@pytest.mark.parametrize("corruption", BUILTIN.values(), ids=[f"{name}-{i}" for i, (_, name, _) in enumerate(BUILTIN)])
def test_every_builtin_corruption_is_unchanged_by_the_numpy_path(corruption: Corruption[Any]) -> None:
    images = torch.rand(2, 3, 40, 48, generator=torch.Generator().manual_seed(5))
    ours = corruption(images, 3, [11, 2**62 + 3])
    assert torch.equal(ours, torch_path(lambda: corruption(images, 3, [11, 2**62 + 3])))
