"""Motion blur's compiled shifted sums give :func:`shift_sum`'s bits, and the corruption takes them.

On large float32 CPU images, where numba is installed, motion kernels are summed tap by tap
in one compiled loop (:mod:`~pytest_segrobust.corruptions.functional.shifts_kernel`) instead of
an FFT product: the tensor operations' IEEE steps in their order, so the same values exactly,
whichever border, batch or kernel.
"""

from __future__ import annotations

import pytest
import torch

from pytest_segrobust.corruptions import REGISTRY
from pytest_segrobust.corruptions import functional as Fn
from pytest_segrobust.corruptions.functional import blur, filters
from pytest_segrobust.corruptions.functional.padding import SMALL_IMAGE, Border

pytest.importorskip("numba", reason="the compiled shifted sums need numba (the 'numba' extra)")

# 3 x 96 x 100 values: above SMALL_IMAGE, so motion_blur leaves the small-image paths.
SHAPE = (3, 96, 100)


def image(seed: int = 4) -> torch.Tensor:
    return torch.rand(SHAPE, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("border", [Border.MIRROR, Border.NEAREST, Border.REFLECT, Border.CONSTANT])
@pytest.mark.parametrize(("size", "angle"), [(7, 10.0), (13, 200.0), (25, 95.0)])
def test_compiled_sums_are_shift_sums_bit_for_bit(border: Border, size: int, angle: float) -> None:
    pixels = image()
    taps = Fn.kernel_taps(Fn.motion_line_kernel(size, angle, -0.4))
    compiled = filters.compiled_shift_sum(pixels, taps, border)
    assert compiled is not None
    assert torch.equal(compiled, Fn.shift_sum(pixels, taps, border))


def test_a_trail_wider_than_its_reach_sums_alike() -> None:
    pixels = image(5)
    taps = Fn.motion_trail_taps(20, 15.0, -30.0, *SHAPE[1:])
    assert torch.equal(
        filters.compiled_shift_sum(pixels, taps, Border.NEAREST), Fn.shift_sum(pixels, taps, Border.NEAREST)
    )


def test_only_float32_cpu_images_without_a_graph_are_compiled() -> None:
    taps = [(1, 0, 0.5), (0, 0, 0.5)]
    assert filters.compiled_shift_sum(image().double(), taps, Border.MIRROR) is None
    assert filters.compiled_shift_sum(image().requires_grad_(), taps, Border.MIRROR) is None


@pytest.mark.parametrize(("preset", "severity"), [("coco-p", 3), ("coco-p", 5), ("imagenet-c", 3)])
def test_motion_blur_of_large_images_is_the_shifted_sums(
    monkeypatch: pytest.MonkeyPatch, preset: str, severity: int
) -> None:
    assert SHAPE[0] * SHAPE[1] * SHAPE[2] > SMALL_IMAGE
    corruption = REGISTRY.get("motion_blur", preset)
    batch = torch.stack([image(6), image(7), image(8)])
    seeds = [3, 2**40 + 1, 17]
    compiled = corruption(batch, severity, seeds)
    # Each image alone, and the batch again with the tensor operations' shifted sums.
    alone = torch.cat([corruption(batch[i : i + 1], severity, [seed]) for i, seed in enumerate(seeds)])
    with monkeypatch.context() as patch:
        patch.setattr(blur, "compiled_shift_sum", lambda image, taps, border: Fn.shift_sum(image, taps, border))
        by_tensors = corruption(batch, severity, seeds)
    assert torch.equal(compiled, alone)
    assert torch.equal(compiled, by_tensors)
