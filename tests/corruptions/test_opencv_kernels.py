"""OpenCV's kernels on CPU tensors agree with the torch paths within float rounding.

Each test runs the same call twice, once as installed (OpenCV on the CPU) and once with
OpenCV hidden (the torch fallback every other device takes), on odd and even sizes, one and
three channels, and every border the filters are used with.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import torch

from pytest_segrobust.corruptions import REGISTRY
from pytest_segrobust.corruptions import functional as Fn
from pytest_segrobust.corruptions.functional import opencv

pytest.importorskip("cv2")

Border = Fn.Border
TOLERANCE = 1e-5
"""Largest difference allowed on [0, 1] floats: float32 sums in another order."""

SHAPES = [(2, 3, 64, 64), (1, 1, 37, 50), (2, 3, 129, 96), (1, 3, 7, 9)]
"""Even and odd sizes, one and three channels, images smaller than the kernels, and
images on both sides of SMALL_IMAGE (where the torch paths change)."""


def images(shape: tuple[int, ...], dtype: torch.dtype = torch.float32, seed: int = 0) -> torch.Tensor:
    return torch.from_numpy(np.random.default_rng(seed).random(shape)).to(dtype)


def both_ways(monkeypatch: pytest.MonkeyPatch, call: Callable[[], torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """``call()`` with OpenCV, then with it hidden (the torch fallback)."""
    with_opencv = call()
    with monkeypatch.context() as patch:
        patch.setattr(opencv, "opencv", lambda: None)
        with_torch = call()
    return with_opencv, with_torch


def assert_close(with_opencv: torch.Tensor, with_torch: torch.Tensor) -> None:
    assert with_opencv.shape == with_torch.shape and with_opencv.dtype == with_torch.dtype
    assert float((with_opencv - with_torch).abs().max()) <= TOLERANCE


def test_opencv_is_taken_for_float_cpu_tensors_only() -> None:
    assert opencv.opencv_for(torch.zeros(1, 3, 4, 4)) is not None
    assert opencv.opencv_for(torch.zeros(1, 3, 4, 4, dtype=torch.float64)) is not None
    assert opencv.opencv_for(torch.zeros(1, 3, 4, 4, dtype=torch.uint8)) is None
    assert opencv.opencv_for(torch.zeros(1, 3, 4, 4, requires_grad=True)) is None
    assert opencv.opencv_for(torch.zeros(1, 3, 4, 4, device="meta")) is None


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("sigma", [0.7, 3.0, 6.0])
def test_gaussian_blur_agrees(monkeypatch: pytest.MonkeyPatch, shape: tuple[int, ...], sigma: float) -> None:
    batch = images(shape)
    assert_close(*both_ways(monkeypatch, lambda: Fn.gaussian_blur(batch, sigma)))


@pytest.mark.parametrize("border", list(Border))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_separable_filter_agrees_on_every_border(
    monkeypatch: pytest.MonkeyPatch, border: Border, dtype: torch.dtype
) -> None:
    batch = images((2, 3, 23, 40), dtype)
    kernel_y = Fn.truncated_gaussian_kernel1d(2.5)
    kernel_x = torch.tensor([0.1, -0.3, 0.5, 0.4, 0.3], dtype=torch.float64)  # asymmetric: a flip would show
    assert_close(*both_ways(monkeypatch, lambda: Fn.separable_filter(batch, kernel_y, kernel_x, border)))


def test_fused_sums_stay_on_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    # The weather layers' baselines were computed with the fused shifted sums, bit for bit.
    field = images((2, 40, 40))
    with_opencv, with_torch = both_ways(monkeypatch, lambda: Fn.gaussian_filter(field, 2.0, Border.REFLECT))
    assert torch.equal(with_opencv, with_torch)


def test_gaussian_filter_takes_opencv_only_where_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    field = images((2, 40, 52))
    fused = Fn.gaussian_filter(field, (1.5, 2.5), Border.REFLECT, truncate=3.0)
    asked, hidden = both_ways(
        monkeypatch, lambda: Fn.gaussian_filter(field, (1.5, 2.5), Border.REFLECT, truncate=3.0, opencv_on_cpu=True)
    )
    assert torch.equal(hidden, fused)  # without OpenCV: the fused sums, bit for bit
    assert not torch.equal(asked, fused)  # sepFilter2D sums in another order...
    assert_close(asked, fused)  # ... within float rounding


@pytest.mark.parametrize(("height", "width"), [(1, 1), (5, 3), (7, 40), (37, 50), (96, 128)])
def test_elastic_fields_smoothed_by_opencv_agree(monkeypatch: pytest.MonkeyPatch, height: int, width: int) -> None:
    # The fields move by a few float32 ulps, the coordinates by a millionth of a pixel: the
    # images stay within the 1e-4 the device-invariance test accepts (warps by grid_sample
    # both ways here, so only the smoothing differs).
    monkeypatch.setattr(opencv, "exact_bilinear", lambda cv2: False)
    corruption = REGISTRY.get("elastic_transform", "imagenet-c")
    batch = (images((2, 3, height, width), seed=height) * 255).round() / 255
    for severity in (1, 3, 5):
        with_opencv, with_torch = both_ways(monkeypatch, lambda s=severity: corruption(batch, s, [3, 2**50 + 1]))
        assert float((with_opencv - with_torch).abs().max()) <= 1e-4


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize(("radius", "alias_blur"), [(3, 0.1), (6, 0.5), (10, 0.5)])
def test_filter2d_agrees(
    monkeypatch: pytest.MonkeyPatch, shape: tuple[int, ...], radius: float, alias_blur: float
) -> None:
    batch = images(shape)
    kernel = Fn.disk_kernel(radius, alias_blur)
    assert_close(*both_ways(monkeypatch, lambda: Fn.filter2d(batch, kernel)))


def test_filter2d_correlates_without_flipping(monkeypatch: pytest.MonkeyPatch) -> None:
    batch = images((1, 1, 30, 31))
    kernel = torch.zeros(5, 5, dtype=torch.float64)
    kernel[0, 4] = 1.0  # output (y, x) reads input (y - 2, x + 2)
    with_opencv, with_torch = both_ways(monkeypatch, lambda: Fn.filter2d(batch, kernel))
    assert torch.equal(with_opencv[..., 2:, :-2], batch[..., :-2, 2:])
    assert_close(with_opencv, with_torch)


@pytest.mark.parametrize(
    ("name", "preset"),
    [
        ("gaussian_blur", "imagenet-c"),
        ("defocus_blur", "imagenet-c"),
        ("glass_blur", "imagenet-c"),
        ("psf_blur", "cityscapes-c"),
        ("motion_blur", "imagenet-c"),
        ("motion_blur", "coco-p"),
    ],
)
@pytest.mark.parametrize("severity", [1, 5])
def test_corruptions_agree(monkeypatch: pytest.MonkeyPatch, name: str, preset: str, severity: int) -> None:
    corruption = REGISTRY.get(name, preset)
    batch = (images((2, 3, 48, 61)) * 255).round() / 255  # 8-bit levels, as decoded photos are
    with_opencv, with_torch = both_ways(monkeypatch, lambda: corruption(batch, severity, [3, 4]))
    if name == "glass_blur":
        # Its 8-bit quantisation between the blurs turns rounding into a step of 1/255 where
        # a value sits on a level boundary: the bound test_device_invariance sets for it.
        difference = (with_opencv - with_torch).abs()
        assert float(difference.max()) <= 1 / 255
        assert float(difference.gt(1e-4).double().mean()) <= 1e-3
    else:
        assert_close(with_opencv, with_torch)


def test_taps_kernel_inverts_kernel_taps() -> None:
    kernel = Fn.motion_line_kernel(9, 30.0, 0.5)
    assert torch.equal(Fn.taps_kernel(Fn.kernel_taps(kernel)), kernel)


@pytest.mark.parametrize("shape", [(3, 64, 64), (1, 37, 50), (3, 129, 96), (3, 7, 9)])
@pytest.mark.parametrize("angle", [-40.0, 0.0, 25.0])
def test_motion_trail_agrees(monkeypatch: pytest.MonkeyPatch, shape: tuple[int, ...], angle: float) -> None:
    image = images(shape)
    taps = Fn.motion_trail_taps(15, 8.0, angle, *shape[-2:])
    assert_close(*both_ways(monkeypatch, lambda: Fn.motion_blur(image, taps, Border.NEAREST)))


@pytest.mark.parametrize("shape", [(3, 64, 64), (1, 37, 50), (3, 129, 96), (3, 7, 9)])
@pytest.mark.parametrize(("size", "angle"), [(7, 10.0), (13, 200.0), (25, 95.0)])
def test_motion_line_agrees(monkeypatch: pytest.MonkeyPatch, shape: tuple[int, ...], size: int, angle: float) -> None:
    image = images(shape)
    taps = Fn.kernel_taps(Fn.motion_line_kernel(size, angle, -0.4))
    assert_close(*both_ways(monkeypatch, lambda: Fn.motion_blur(image, taps, Border.MIRROR)))


@pytest.mark.parametrize("size", [(64, 64), (17, 23), (33, 48), (1, 9)])
@pytest.mark.parametrize("quality", [1, 15, 30, 80, 100])
def test_jpeg_is_identical(monkeypatch: pytest.MonkeyPatch, size: tuple[int, int], quality: int) -> None:
    # OpenCV's and Pillow's libjpeg-turbo, same defaults: the same pixels, bit for bit.
    batch = images((2, 3, *size))
    with_opencv, with_torch = both_ways(monkeypatch, lambda: Fn.jpeg(batch, quality))
    assert torch.equal(with_opencv, with_torch)
    assert not torch.equal(with_opencv, batch)


def test_jpeg_of_a_photo_is_identical(monkeypatch: pytest.MonkeyPatch) -> None:
    # Smooth areas and edges exercise the chroma subsampling and the quantiser differently
    # from noise; float64 takes the same planes.
    y, x = torch.meshgrid(torch.linspace(0, 1, 96), torch.linspace(0, 1, 80), indexing="ij")
    photo = torch.stack([y, x, (x > 0.4).double() * 0.8 + 0.1 * y])[None]
    with_opencv, with_torch = both_ways(monkeypatch, lambda: Fn.jpeg(photo, 20))
    assert with_opencv.dtype == torch.float64 and torch.equal(with_opencv, with_torch)
