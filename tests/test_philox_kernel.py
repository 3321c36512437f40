"""The compiled Philox loop (numba, optional): the words of the numpy rounds and the torch path, bit for bit."""

from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import Callable, Iterator
from unittest import mock

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_segrobust.randomness import philox
from tests.loaders import counting_loader
from tests.test_philox import reference

WORD = st.integers(0, 2**32 - 1)
SEED = st.integers(0, 2**64 - 1)


@pytest.fixture(scope="module")
def kernel() -> Callable[..., None]:
    """The compiled loop, where numba is installed and the loop passed its check."""
    pytest.importorskip("numba")
    compiled = philox._compiled_blocks()
    assert compiled is not None, "numba is installed, but its Philox loop was refused"
    return compiled


@contextlib.contextmanager
def words_from(path: str) -> Iterator[None]:
    """Every draw's words from one CPU path, whatever its size."""
    compiled = None
    if path == "compiled":
        pytest.importorskip("numba")
        compiled = philox._compiled_blocks()
    with mock.patch.object(philox, "_compiled_for", lambda blocks: compiled):
        yield


def torch_path(draw: Callable[[], torch.Tensor]) -> torch.Tensor:
    with mock.patch.object(philox, "_uses_numpy", lambda device: False):
        return draw()


@settings(max_examples=60, deadline=None)
@given(st.tuples(WORD, WORD), WORD, st.integers(0, 2**32 - 1), st.integers(1, 40))
def test_blocks_equal_the_python_reference(
    kernel: Callable[..., None], key: tuple[int, int], stream: int, first: int, blocks: int
) -> None:
    first = min(first, 2**32 - blocks)  # block counters are 32-bit
    words = np.empty(4 * blocks, dtype=np.uint32)
    kernel(*key, stream, first, words)
    assert words.reshape(-1, 4).tolist() == [reference((first + i, stream, 0, 0), key) for i in range(blocks)]


@pytest.mark.parametrize("path", ["numpy rounds", "compiled"])
@settings(max_examples=25, deadline=None)
@given(st.lists(SEED, min_size=1, max_size=3), st.integers(1, 3_000), WORD, st.integers(0, 4))
def test_every_draw_equals_the_torch_paths(
    path: str, seeds: list[int], count: int, stream: int, chunk_log2: int
) -> None:
    # Slices of 1 to 256 blocks, the last one short.
    with words_from(path), mock.patch.object(philox, "_NUMPY_CHUNK_BLOCKS", 4**chunk_log2):
        for draw in (
            lambda: philox.random_bits(seeds, count, "cpu", stream),
            lambda: philox.uniform(seeds, (count,), "cpu", stream),
            lambda: philox.uniform(seeds, (count, 1), "cpu", stream, dtype=torch.float64),
            lambda: philox.uniform_levels(seeds, (count,), "cpu", stream),
            lambda: philox.integers(seeds, -5, 2**31 - 5, (count,), "cpu", stream),
            lambda: philox.normal(seeds, (count,), "cpu", stream),
        ):
            ours, theirs = draw(), torch_path(draw)
            assert ours.dtype == theirs.dtype and ours.shape == theirs.shape and ours.is_contiguous()
            assert torch.equal(ours, theirs)


def test_a_full_size_field_is_the_same_on_both_cpu_paths(kernel: Callable[..., None]) -> None:
    # (3, 300, 301): over the loading threshold, three slices, the last one short, an odd count.
    seeds, shape = [3, 2**63 + 1], (3, 300, 301)
    draws = {
        "words": lambda: philox.random_bits(seeds, 3 * 300 * 301, "cpu", 7),
        "normal": lambda: philox.normal(seeds, shape, "cpu", 2),
        "uniform": lambda: philox.uniform(seeds, shape, "cpu", 4),
    }
    calls = []

    def counted(*args: object) -> None:
        calls.append(args[3])
        kernel(*args)

    for name, draw in draws.items():
        calls.clear()
        with mock.patch.object(philox, "_compiled_blocks", functools.cache(lambda: counted)):
            compiled = draw()
        assert calls, f"{name}: the compiled loop did not make the words"
        with mock.patch.object(philox, "_compiled_for", lambda blocks: None):
            assert torch.equal(compiled, draw()), name


def test_the_kernel_is_loaded_by_the_first_large_draw_only(monkeypatch: pytest.MonkeyPatch) -> None:
    loads: list[int] = []
    monkeypatch.setattr(philox, "_compiled_blocks", counting_loader(loads))
    assert philox._compiled_for(philox._COMPILED_MIN_BLOCKS - 1) is None and not loads
    assert philox._compiled_for(philox._COMPILED_MIN_BLOCKS) == "kernel"
    assert philox._compiled_for(1) == "kernel" and loads == [1]  # once loaded, for every size


def test_without_numba_the_numpy_rounds_make_the_words(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pytest_segrobust.randomness.philox_kernel", None)  # import fails
    assert philox._compiled_blocks.__wrapped__() is None


def test_a_kernel_that_gives_other_words_is_refused(
    kernel: Callable[..., None], monkeypatch: pytest.MonkeyPatch
) -> None:
    from pytest_segrobust.randomness import philox_kernel

    def one_bit_off(key0: int, key1: int, stream: int, first: int, words: np.ndarray) -> None:
        kernel(key0, key1, stream, first, words)
        words[-1] ^= 1  # one bit of the last block

    monkeypatch.setattr(philox_kernel, "philox_blocks", one_bit_off)
    assert philox._compiled_blocks.__wrapped__() is None


def test_normal_fields_take_the_compiled_box_muller_steps_and_keep_their_bits(kernel: Callable[..., None]) -> None:
    steps = philox._compiled_box_muller()
    assert steps is not None, "numba is installed, but its Box-Muller steps were refused"
    calls = []

    def counted(name: str) -> Callable[..., None]:
        def call(*args: object) -> None:
            calls.append(name)
            getattr(steps, name)(*args)

        return call

    counting = mock.Mock(**{name: counted(name) for name in ("box_muller_inputs", "radius_from_log", "round_into")})
    # (3, 300, 301) over two seeds: three slices each, the last one short, an odd count.
    seeds, shape = [3, 2**63 + 1], (3, 300, 301)
    with mock.patch.object(philox, "_compiled_box_muller", lambda: counting):
        compiled = philox.normal(seeds, shape, "cpu", 2)
    assert calls.count("box_muller_inputs") == calls.count("round_into") == 6
    with mock.patch.object(philox, "_compiled_box_muller", lambda: None):
        assert torch.equal(compiled, philox.normal(seeds, shape, "cpu", 2))
    assert torch.equal(compiled, torch_path(lambda: philox.normal(seeds, shape, "cpu", 2)))


def test_without_numba_the_box_muller_steps_are_numpys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pytest_segrobust.randomness.philox_kernel", None)  # import fails
    assert philox._compiled_box_muller.__wrapped__() is None


@pytest.mark.parametrize("step", ["box_muller_inputs", "radius_from_log", "round_into"])
def test_a_box_muller_step_that_is_one_ulp_off_is_refused(
    kernel: Callable[..., None], step: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pytest_segrobust.randomness import philox_kernel

    exact = getattr(philox_kernel, step)

    def one_ulp_off(*args: np.ndarray) -> None:
        exact(*args)
        out = args[-1]
        out[-1] = np.nextafter(out[-1], out.dtype.type(np.inf))

    monkeypatch.setattr(philox_kernel, step, one_ulp_off)
    assert philox._compiled_box_muller.__wrapped__() is None
