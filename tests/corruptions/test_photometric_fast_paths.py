"""The CPU fast paths of the photometric rows give today's values, bit for bit.

saturate and brightness run in numpy plane by plane on the CPU, contrast computes its luma
without a channel reduction, JPEG quantises with OpenCV, impulse noise compares integer
draws, and CPU batches are written image by image into one output. Each is compared here
with the computation it replaces (the tensor path, kept for other devices, or the previous
formula written out), at every severity, on random and photo-like images.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pytest_segrobust.core.opencv import opencv
from pytest_segrobust.corruptions import REGISTRY
from pytest_segrobust.corruptions import functional as Fn
from pytest_segrobust.corruptions.base import whole_batches
from pytest_segrobust.corruptions.digital import BRIGHTNESS, CONTRAST_COCO_P, SATURATE
from pytest_segrobust.corruptions.functional import codec, color
from pytest_segrobust.corruptions.functional import noise as noise_ops
from pytest_segrobust.corruptions.noise import IMPULSE_NOISE
from pytest_segrobust.randomness.seeding import SampleStreams


def photo_like(height: int = 72, width: int = 88, seed: int = 0) -> torch.Tensor:
    """Shading, texture, flat shapes, clipped highlights and shadows, and exactly grey pixels.

    Shape:
        return: ``(1, 3, height, width)`` float32 on the 8-bit grid, as decoded images are.
    """
    generator = torch.Generator().manual_seed(seed)
    y, x = torch.meshgrid(torch.linspace(0, 1, height), torch.linspace(0, 1, width), indexing="ij")
    image = torch.stack([0.2 + 0.6 * y, 0.3 + 0.5 * x, 0.5 + 0.3 * (x - y)])
    image = image + 0.05 * torch.randn(3, height, width, generator=generator)
    image[:, : height // 4, : width // 4] = 1.2  # clipped white: grey at value 1
    image[:, -height // 4 :, -width // 4 :] = -0.1  # clipped black: grey at value 0
    image[:, height // 3 : height // 2, width // 3 : width // 2] = 0.45  # a grey shape
    image[0, height // 2 :, : width // 3] = 0.9  # a red-ish shape with ties for the maximum
    image[1, height // 2 :, : width // 3] = 0.9
    return ((image.clamp(0, 1) * 255).round() / 255)[None].float()


def inputs() -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    uniform = torch.rand(2, 3, 33, 47, generator=generator)
    out_of_range = torch.rand(1, 3, 20, 24, generator=generator) * 1.4 - 0.2
    return [photo_like(), uniform, uniform.double(), out_of_range]


def tensor_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the HSV corruptions take the tensor path (what other devices run) on the CPU."""
    monkeypatch.setattr(color, "_numpy_planes", lambda images: None)


@pytest.mark.parametrize("severity", range(1, 6))
def test_saturation_matches_the_tensor_path(monkeypatch: pytest.MonkeyPatch, severity: int) -> None:
    params = SATURATE[severity]
    fast = [Fn.scale_saturation(images, params.scale, params.shift) for images in inputs()]
    tensor_path(monkeypatch)
    for images, result in zip(inputs(), fast):
        expected = Fn.scale_saturation(images, params.scale, params.shift)
        assert result.dtype == images.dtype and torch.equal(result, expected)


@pytest.mark.parametrize("severity", range(1, 6))
def test_value_shift_matches_the_tensor_path(monkeypatch: pytest.MonkeyPatch, severity: int) -> None:
    amount = BRIGHTNESS[severity].amount
    fast = [Fn.shift_value(images, amount) for images in inputs()]
    tensor_path(monkeypatch)
    for images, result in zip(inputs(), fast):
        assert torch.equal(result, Fn.shift_value(images, amount))


def test_the_hsv_fast_paths_change_values() -> None:
    # The comparison above must be able to fail: the fast paths compute something.
    image = photo_like()
    assert not torch.equal(Fn.scale_saturation(image, 5, 0.1), image.clamp(0, 1))
    assert not torch.equal(Fn.shift_value(image, 0.3), image.clamp(0, 1))
    assert (Fn.scale_saturation(image, 20, 0.2)[0, 1:, : 72 // 4, : 88 // 4] < 1).all()  # white tinted red


@pytest.mark.parametrize("severity", range(1, 6))
def test_contrast_blends_with_the_float64_mean_luma(severity: int) -> None:
    factor = CONTRAST_COCO_P[severity].factor
    for images in inputs():
        weights = torch.tensor((0.299, 0.587, 0.114), dtype=torch.float64).view(1, 3, 1, 1)
        luma = (images.double() * weights).sum(dim=1, keepdim=True)
        mean = luma.mean(dim=(1, 2, 3), keepdim=True).to(images.dtype)
        enhanced = Fn.enhance_contrast(images, factor)
        assert torch.equal(enhanced, (mean + factor * (images - mean)).clamp_(0.0, 1.0))
        # Within float rounding of the float32 mean it blended with before.
        before = (images * weights.to(images.dtype)).sum(dim=1, keepdim=True).mean(dim=(1, 2, 3), keepdim=True)
        assert float((enhanced - (before + factor * (images - before)).clamp_(0.0, 1.0)).abs().max()) <= 1e-6


def test_channel_means_are_the_rounded_float64_means_on_every_path(monkeypatch: pytest.MonkeyPatch) -> None:
    generator = torch.Generator().manual_seed(8)
    images = [*inputs(), torch.rand(3, 2, 301, 77, generator=generator), torch.rand(0, 3, 4, 4)]
    expected = [x.double().mean(dim=(-2, -1), keepdim=True).to(x.dtype) for x in images]
    reduced = [Fn.reduce_contrast(x, 0.3) for x in images]  # plane by plane on the CPU
    for x, means in zip(images, expected):
        assert torch.equal(Fn.channel_means(x), means) and Fn.channel_means(x).dtype == x.dtype
    monkeypatch.setattr(color, "opencv", lambda: None)  # the torch path, as on other devices
    for x, means, blended in zip(images, expected, reduced):
        assert torch.equal(Fn.channel_means(x), means)
        assert torch.equal(Fn.reduce_contrast(x, 0.3), blended)


def test_quantising_with_opencv_gives_the_same_bytes() -> None:
    cv2 = opencv()
    if cv2 is None:
        pytest.skip("OpenCV is not installed")
    # Every float32 within 2000 ulps of each level and of each rounding boundary, and above 1.
    levels = np.arange(256, dtype=np.float64)
    centres = np.concatenate([levels / 255, (levels + 0.5) / 255, [1.0, 1.5, 300.0]]).astype(np.float32)
    bits = centres.view(np.int32)[:, None] + np.arange(-2000, 2000, dtype=np.int32)
    values = bits[bits >= 0].astype(np.int32).view(np.float32)  # non-negative floats only
    values = values[: len(values) // 1000 * 1000].reshape(1, -1, 1000)
    fast = codec._quantise(values, cv2)
    assert isinstance(fast, list)  # OpenCV's path was taken
    assert np.array_equal(fast[0], codec._quantise(values, None)[0])
    # A negative value sends the planes down numpy's path (OpenCV's would take its absolute value).
    negative = values.copy()
    negative[0, 0, 0] = -0.3
    assert isinstance(codec._quantise(negative, cv2), np.ndarray)


@pytest.mark.parametrize("quality", [25, 18, 15, 10, 7])
def test_jpeg_matches_the_previous_marshalling(quality: int) -> None:
    cv2 = opencv()
    for images in [photo_like(), torch.rand(2, 3, 40, 56, generator=torch.Generator().manual_seed(2))]:
        expected = []
        for image in images:
            planes = color.to_uint8(image).numpy()
            coded = codec._jpeg_opencv(cv2, planes, quality) if cv2 is not None else codec._jpeg_pillow(planes, quality)
            expected.append(torch.from_numpy(np.stack(coded)).float() / 255.0)
        assert torch.equal(Fn.jpeg(images, quality), torch.stack(expected))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_impulse_thresholds_agree_with_the_float_comparison_on_every_level(dtype: torch.dtype) -> None:
    draws = (torch.arange(2**24, dtype=torch.int32).to(torch.float32) * 2.0**-24).to(dtype)
    for amount in [*(row.amount for row in IMPULSE_NOISE.rows), 0.5, 1.0]:
        pepper_below, salt_from = noise_ops._impulse_levels(amount, dtype)
        assert int((draws < amount / 2).sum()) == pepper_below
        assert int((draws >= 1.0 - amount / 2).sum()) == 2**24 - salt_from


@pytest.mark.parametrize("severity", range(1, 6))
def test_impulse_noise_matches_the_float_draws(severity: int) -> None:
    amount = IMPULSE_NOISE[severity].amount
    for images in inputs():
        seeds = [11 + i for i in range(len(images))]
        draw = SampleStreams(seeds, "cpu").uniform(images.shape[1:]).to(images.dtype)
        floor = (draw >= 1.0 - amount / 2).to(images.dtype)
        expected = torch.clamp(images, min=floor, max=(draw >= amount / 2).to(images.dtype))
        result = Fn.salt_and_pepper(images, amount, SampleStreams(seeds, "cpu"))
        assert torch.equal(result, expected)
        assert not torch.equal(result, images.clamp(0, 1))


def test_uniform_levels_are_the_float_uniforms_times_2_to_the_24() -> None:
    levels = SampleStreams([3, 4], "cpu").uniform_levels((5, 7))
    assert levels.dtype == torch.int32
    assert torch.equal(levels.float() * 2.0**-24, SampleStreams([3, 4], "cpu").uniform((5, 7)))


@pytest.mark.parametrize(
    ("name", "preset"),
    [
        ("saturate", "imagenet-c"),
        ("brightness", "imagenet-c"),
        ("contrast", "coco-p"),
        ("contrast", "imagenet-c"),
        ("darkness", "coco-p"),
        ("jpeg_compression", "imagenet-c"),
        ("pixelate", "imagenet-c"),
        ("impulse_noise", "imagenet-c"),
    ],
)
def test_image_by_image_batches_equal_whole_batches(name: str, preset: str) -> None:
    # CPU batches are written into one output image by image; the batched kernels are the reference.
    corruption = REGISTRY.get(name, preset)
    images = torch.cat([photo_like(seed=0), photo_like(seed=1), torch.rand(1, 3, 72, 88)])
    for severity in range(1, 6):
        one_by_one = corruption(images, severity, [5, 6, 7])
        with whole_batches():
            assert torch.equal(one_by_one, corruption(images, severity, [5, 6, 7]))
