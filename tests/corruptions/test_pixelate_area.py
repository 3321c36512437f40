"""pixelate's OpenCV ``INTER_AREA`` shrink at whole ratios agrees with Pillow's box sums within 1e-4.

Where a side shrinks by a whole ratio, Pillow's box windows are the aligned blocks and CPU
images shrink through OpenCV; elsewhere the box sums stay (``INTER_AREA`` would weigh the
pixels a window cuts by their covered fraction). Both ways are compared on uniform noise
and on 8-bit levels, float32 and float64.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
import torch

from pytest_segrobust.corruptions import REGISTRY
from pytest_segrobust.corruptions import functional as Fn
from pytest_segrobust.corruptions.functional import codec

cv2 = pytest.importorskip("cv2")

TOLERANCE = 1e-4
"""Largest |OpenCV - box sums| on [0, 1] images: the bound the device-invariance test accepts."""


@contextlib.contextmanager
def counted_resizes() -> Iterator[dict[str, int]]:
    """The installed OpenCV, counting its ``resize`` calls."""
    calls = {"resize": 0}

    class Spy:
        def __getattr__(self, name: str) -> Any:
            if name != "resize":
                return getattr(cv2, name)

            def resize(*args: Any, **kwargs: Any) -> Any:
                calls["resize"] += 1
                return cv2.resize(*args, **kwargs)

            return resize

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(codec, "opencv", Spy)
        yield calls


@contextlib.contextmanager
def box_sums() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(codec, "opencv", lambda: None)
        yield


def images_of(kind: str, dtype: torch.dtype, height: int, width: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(height * width)
    images = torch.rand(2, 3, height, width, generator=generator, dtype=torch.float64)
    if kind == "levels":
        images = (images * 255).round() / 255
    return images.to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("kind", ["noise", "levels"])
@pytest.mark.parametrize(("height", "width", "factor"), [(64, 88, 0.5), (64, 88, 0.25), (60, 30, 1 / 3), (7, 9, 1.0)])
def test_whole_ratios_shrink_through_opencv_within_the_bound(
    dtype: torch.dtype, kind: str, height: int, width: int, factor: float
) -> None:
    images = images_of(kind, dtype, height, width)
    with counted_resizes() as calls:
        fast = Fn.pixelate(images, factor)
    with box_sums():
        slow = Fn.pixelate(images, factor)
    assert calls["resize"] == images.shape[0] * images.shape[1]
    assert fast.shape == slow.shape and fast.dtype == slow.dtype
    assert float((fast - slow).abs().max()) <= TOLERANCE


@pytest.mark.parametrize(("height", "width", "factor"), [(64, 88, 0.4), (64, 88, 0.6), (65, 88, 0.5), (512, 512, 0.3)])
def test_other_ratios_keep_the_box_sums_bit_for_bit(height: int, width: int, factor: float) -> None:
    images = images_of("noise", torch.float32, height, width)
    with counted_resizes() as calls:
        fast = Fn.pixelate(images, factor)
    with box_sums():
        slow = Fn.pixelate(images, factor)
    assert calls["resize"] == 0
    assert torch.equal(fast, slow)


@pytest.mark.parametrize(
    ("in_size", "out_size", "aligned"),
    [(512, 256, True), (512, 128, True), (6, 3, True), (5, 5, True), (512, 204, False), (7, 3, False), (9, 2, False)],
)
def test_aligned_blocks_are_whole_ratios_with_pillows_windows(in_size: int, out_size: int, aligned: bool) -> None:
    assert codec._aligned_blocks(in_size, out_size) is aligned


def test_imagenet_c_pixelate_at_half_and_quarter_size_takes_opencv() -> None:
    corruption = REGISTRY.get("pixelate", "imagenet-c")
    images = images_of("levels", torch.float32, 64, 64)
    for severity, expected in ((1, 0), (2, 6), (3, 0), (4, 0), (5, 6)):  # factors .6 .5 .4 .3 .25
        with counted_resizes() as calls:
            fast = corruption(images, severity, [1, 2])
        with box_sums():
            slow = corruption(images, severity, [1, 2])
        assert calls["resize"] == expected
        assert float((fast - slow).abs().max()) <= TOLERANCE
