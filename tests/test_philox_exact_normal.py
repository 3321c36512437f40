"""exact_normal: float32 steps alone, the same bits on every path, within 3 ulps of normal().

Gaussian noise draws its normals here: the compiled loop (numba) and the tensor operations
(the path of an accelerator, forced on the CPU) must give the same bits, for any batch, and
stay within float32 rounding of :func:`~pytest_segrobust.randomness.philox.normal`'s float64
transform of the same words, so that switching changed no result beyond rounding.
"""

from __future__ import annotations

import math
from unittest import mock

import numpy as np
import pytest
import torch

from pytest_segrobust.corruptions import REGISTRY
from pytest_segrobust.corruptions.functional import noise
from pytest_segrobust.randomness import philox
from pytest_segrobust.randomness.seeding import SampleStreams

SEEDS = [1, 2**62 + 5, 987_654_321]
SHAPE = (3, 97, 101)  # an odd count: the last pair's sine is dropped


@pytest.fixture(scope="module")
def drawn() -> torch.Tensor:
    # Small draws take the tensor path until numba is loaded: load it, so that the compiled loop draws.
    pytest.importorskip("numba", reason="the compiled loop needs numba")
    assert philox._compiled_blocks() is not None and philox._compiled_exact() is not None
    return philox.exact_normal(SEEDS, SHAPE, "cpu")


def by_tensors(seeds: list[int], shape: tuple[int, ...]) -> torch.Tensor:
    with mock.patch.object(philox, "_uses_numpy", lambda device: False):
        return philox.exact_normal(seeds, shape, "cpu")


def test_the_tensor_path_gives_the_same_bits(drawn: torch.Tensor) -> None:
    assert drawn.shape == (3, *SHAPE) and drawn.dtype == torch.float32
    assert torch.equal(drawn, by_tensors(SEEDS, SHAPE))


def test_extreme_words_give_the_same_bits_on_both_paths() -> None:
    kernel = pytest.importorskip("pytest_segrobust.randomness.philox_kernel")
    edges = [0, 1, 2, 3, 2**24 - 1, 2**24, 2**29 - 1, 2**29, 2**29 + 1, 2**31 - 1, 2**31, 2**32 - 2, 2**32 - 1]
    edges += [math.isqrt(2 ** (2 * e + 1)) + d - 1 for e in range(32) for d in (0, 1)]
    words = np.array([(a, b) for a in edges for b in edges if a < 2**32 and b < 2**32], dtype=np.uint32)
    cosines, sines = np.empty((2, len(words)), dtype=np.float32)
    kernel.exact_box_muller(words.reshape(-1), cosines, sines)
    as_tensor = torch.from_numpy(words.astype(np.int64))
    x, y = philox._exact_transform(as_tensor[:, 0], as_tensor[:, 1])
    assert np.array_equal(cosines, x.numpy()) and np.array_equal(sines, y.numpy())
    wide = words.astype(np.float64)
    radius = np.sqrt(-2 * np.log((wide[:, 0] + 1) * 2.0**-32))
    angle = wide[:, 1] * 2 * math.pi * 2.0**-32
    assert np.abs(cosines - radius * np.cos(angle)).max() <= 1e-6
    assert np.abs(sines - radius * np.sin(angle)).max() <= 1e-6


def test_the_float64_folds_are_the_integer_ones() -> None:
    # The compiled loop compares v with sqrt(2) 2^e in float64, the tensor path with EXACT_FOLDS.
    for e, fold in enumerate(philox.EXACT_FOLDS):
        for v in (fold - 1, fold, fold + 1):
            assert (v > math.sqrt(2.0) * 2.0**e) == (v > fold)


def test_each_sample_draws_alike_in_any_batch(drawn: torch.Tensor) -> None:
    for row, seed in enumerate(SEEDS):
        assert torch.equal(philox.exact_normal([seed], SHAPE, "cpu")[0], drawn[row])
    assert torch.equal(by_tensors(SEEDS[::-1], SHAPE), drawn.flip(0))


def test_within_three_ulps_of_the_float64_transform(drawn: torch.Tensor) -> None:
    reference = philox.normal(SEEDS, SHAPE, "cpu")
    assert float((drawn - reference).abs().max()) <= 3 * 2.0**-23 * max(1.0, float(reference.abs().max()))
    assert float(drawn.mean()) == pytest.approx(0.0, abs=0.01) and float(drawn.std()) == pytest.approx(1.0, abs=0.01)


def test_gaussian_noise_adds_the_exact_normals() -> None:
    images = torch.rand(2, 3, 40, 50, generator=torch.Generator().manual_seed(2))
    corruption = REGISTRY.get("gaussian_noise")
    seeds = [5, 6]
    streams = SampleStreams(seeds, "cpu")
    expected = noise.additive_gaussian_noise(images, streams.exact_normal((3, 40, 50)), 0.18)
    assert torch.equal(corruption.corrupt_images(images, corruption.table[3], SampleStreams(seeds, "cpu")), expected)
