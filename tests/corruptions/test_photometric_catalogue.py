"""The photometric catalogue against independent oracles: Pillow, colorsys, numpy re-implementations
of the reference algorithms, closed forms and statistics."""

from __future__ import annotations

import colorsys
import math

import numpy as np
import pytest
import torch
from PIL import Image, ImageEnhance

from pytest_segrobust import testing
from pytest_segrobust.corruptions import REGISTRY, Category
from pytest_segrobust.corruptions import functional as Fn
from pytest_segrobust.corruptions.blur import ZOOM_BLUR_COCO_P, ZOOM_BLUR_IMAGENET_C
from pytest_segrobust.randomness.seeding import SampleStreams
from pytest_segrobust.testing.strategies import make_batch
from tests.corruptions.reference import reference_motion_blur


def uint8_image(seed: int, height: int, width: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)


def as_batch(pixels: np.ndarray, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.from_numpy(np.array(pixels)).permute(2, 0, 1)[None].to(dtype) / 255


def smooth_images(batch: int = 2, side: int = 40, seed: int = 3) -> torch.Tensor:
    return make_batch(batch=batch, height=side, width=side, classes=3, seed=seed).images


# --------------------------------------------------------------------------- Pillow oracles


# (96, 80) is above SMALL_IMAGE, where columns are gathered another way.
@pytest.mark.parametrize("size", [(48, 48), (37, 53), (64, 29), (9, 8), (96, 80)])
@pytest.mark.parametrize("factor", [0.6, 0.5, 0.4, 0.3, 0.25])
def test_pixelate_is_pillows_box_down_nearest_up(size: tuple[int, int], factor: float) -> None:
    h, w = size
    pixels = uint8_image(h * w, h, w)
    small = Image.fromarray(pixels).resize((int(w * factor), int(h * factor)), Image.BOX)
    expected = as_batch(np.asarray(small.resize((w, h), Image.NEAREST)), torch.float64)
    ours = Fn.pixelate(as_batch(pixels, torch.float64), factor)
    # Pillow rounds to 8 bits after each of its two passes; we do not round at all.
    assert float((ours - expected).abs().max()) <= 1.0 / 255 + 1e-9


def test_pixelate_blocks_are_constant_and_aligned_like_pillow() -> None:
    # A wrong nearest index moves whole block edges, which the 1-level tolerance would not hide.
    pixels = np.repeat(np.arange(40, dtype=np.uint8)[None, :, None] * 6, 30, axis=0).repeat(3, axis=2)
    expected = np.asarray(Image.fromarray(pixels).resize((12, 9), Image.BOX).resize((40, 30), Image.NEAREST))
    ours = Fn.pixelate(as_batch(pixels, torch.float64), 0.3)[0].permute(1, 2, 0).numpy() * 255
    edges_expected = np.flatnonzero(np.diff(expected[0, :, 0].astype(int)) != 0)
    edges_ours = np.flatnonzero(np.abs(np.diff(ours[0, :, 0])) > 1e-6)
    assert edges_ours.tolist() == edges_expected.tolist()


@pytest.mark.parametrize("factor", [0.9, 0.7, 0.5])
def test_darkness_is_pil_image_enhance_brightness(factor: float) -> None:
    pixels = uint8_image(5, 31, 45)
    expected = as_batch(np.asarray(ImageEnhance.Brightness(Image.fromarray(pixels)).enhance(factor)))
    ours = Fn.enhance_brightness(as_batch(pixels), factor)
    assert float((ours - expected).abs().max()) <= 1.0 / 255 + 1e-6  # PIL truncates to 8 bits


# --------------------------------------------------------------------------- colour


def awkward_pixels() -> torch.Tensor:
    """Random colours plus greys, black, white and channel ties, as a (1, 3, 1, N) batch."""
    rng = np.random.default_rng(11)
    values = rng.integers(0, 256, (400, 3)).astype(np.float64) / 255
    values[:20] = values[:20, :1]  # greys
    values[20] = 0.0
    values[21] = 1.0
    values[22:40, 1] = values[22:40, 0]  # red = green
    values[40:60, 2] = values[40:60, 1]  # green = blue
    values[60:80, 2] = values[60:80, 0]  # red = blue
    return torch.from_numpy(values.T.copy())[None, :, None, :]


def test_rgb_to_hsv_matches_colorsys() -> None:
    rgb = awkward_pixels()
    expected = torch.tensor([colorsys.rgb_to_hsv(*p) for p in rgb[0, :, 0].T.tolist()], dtype=torch.float64)
    ours = Fn.rgb_to_hsv(rgb)[0, :, 0].T
    hue_gap = (ours[:, 0] - expected[:, 0]).abs()
    assert float(torch.minimum(hue_gap, 1 - hue_gap).max()) < 1e-12
    assert torch.allclose(ours[:, 1:], expected[:, 1:], atol=1e-12)


def test_hsv_to_rgb_matches_colorsys_and_inverts_rgb_to_hsv() -> None:
    rng = np.random.default_rng(12)
    hsv = torch.from_numpy(rng.random((3, 300)))[None, :, None, :]
    expected = torch.tensor([colorsys.hsv_to_rgb(*p) for p in hsv[0, :, 0].T.tolist()], dtype=torch.float64)
    assert torch.allclose(Fn.hsv_to_rgb(hsv)[0, :, 0].T, expected, atol=1e-12)
    rgb = awkward_pixels()
    assert torch.allclose(Fn.hsv_to_rgb(Fn.rgb_to_hsv(rgb)), rgb, atol=1e-12)


@pytest.mark.parametrize("amount", [0.1, 0.3, 0.5])
def test_brightness_closed_form_is_the_hsv_round_trip(amount: float) -> None:
    rgb = awkward_pixels()
    hsv = Fn.rgb_to_hsv(rgb)
    hsv[:, 2] = (hsv[:, 2] + amount).clamp(0, 1)
    assert torch.allclose(Fn.shift_value(rgb, amount), Fn.hsv_to_rgb(hsv).clamp(0, 1), atol=1e-12)


@pytest.mark.parametrize(("scale", "shift"), [(0.3, 0), (0.1, 0), (2, 0), (5, 0.1), (20, 0.2)])
def test_saturate_closed_form_is_the_hsv_round_trip(scale: float, shift: float) -> None:
    rgb = awkward_pixels()
    hsv = Fn.rgb_to_hsv(rgb)
    hsv[:, 1] = (hsv[:, 1] * scale + shift).clamp(0, 1)
    assert torch.allclose(Fn.scale_saturation(rgb, scale, shift), Fn.hsv_to_rgb(hsv).clamp(0, 1), atol=1e-12)


def test_hand_computed_colour_cases() -> None:
    pixel = torch.tensor([0.2, 0.4, 0.1], dtype=torch.float64).view(1, 3, 1, 1)
    # V 0.4 -> 0.6: every channel scales by 1.5.
    assert torch.allclose(Fn.shift_value(pixel, 0.2).flatten(), torch.tensor([0.3, 0.6, 0.15], dtype=torch.float64))
    black = torch.zeros(1, 3, 1, 1, dtype=torch.float64)
    assert torch.allclose(Fn.shift_value(black, 0.3).flatten(), torch.full((3,), 0.3, dtype=torch.float64))
    # Grey has hue 0 in scikit-image, so shifting saturation tints it red.
    grey = torch.full((1, 3, 1, 1), 0.5, dtype=torch.float64)
    assert torch.allclose(Fn.scale_saturation(grey, 5, 0.1).flatten(), torch.tensor([0.5, 0.45, 0.45]).double())


def test_imagenet_c_contrast_pulls_each_channel_to_its_own_mean() -> None:
    images = smooth_images().double()
    means = images.mean(dim=(2, 3), keepdim=True)
    expected = ((images - means) * 0.3 + means).clamp(0, 1)
    out = REGISTRY.get("contrast", "imagenet-c")(images, 2, [1, 2])
    assert torch.allclose(out, expected, atol=1e-12)
    assert torch.allclose(out.mean(dim=(2, 3)), images.mean(dim=(2, 3)), atol=1e-12)


def test_reductions_are_batch_invariant_on_large_images() -> None:
    # Above torch's parallel grain a batched mean may split one image's sum differently.
    images = torch.rand(3, 3, 256, 256, generator=torch.Generator().manual_seed(0))
    whole = Fn.reduce_contrast(images, 0.2)
    for i in range(3):
        assert torch.equal(Fn.reduce_contrast(images[i : i + 1], 0.2)[0], whole[i])


# --------------------------------------------------------------------------- noise


def test_impulse_noise_replaces_the_table_fraction_per_value() -> None:
    images = torch.full((4, 3, 64, 64), 0.5)
    out = REGISTRY.get("impulse_noise")(images, 5, [1, 2, 3, 4])  # amount 0.27
    changed = out != 0.5
    assert float(changed.float().mean()) == pytest.approx(0.27, abs=0.01)
    assert float((out == 1).float().mean()) == pytest.approx(0.135, abs=0.01)
    assert set(out.unique().tolist()) == {0.0, 0.5, 1.0}
    # Per value, not per pixel: many pixels have some but not all channels replaced.
    per_pixel = changed.sum(dim=1)
    assert bool(((per_pixel > 0) & (per_pixel < 3)).any())


def test_speckle_noise_is_multiplicative_with_the_table_std() -> None:
    images = torch.zeros(4, 3, 64, 64)
    images[:, :, :32] = 0.4
    out = REGISTRY.get("speckle_noise", "imagenet-c")(images, 1, [1, 2, 3, 4])  # std 0.15
    assert bool((out[:, :, 32:] == 0).all())  # x * noise vanishes on black
    relative = (out[:, :, :32] - 0.4) / 0.4
    assert float(relative.std()) == pytest.approx(0.15, rel=0.03)
    assert float(relative.mean()) == pytest.approx(0.0, abs=0.01)


def test_intensity_noise_is_stronger_in_the_dark_and_partly_grey() -> None:
    corruption = REGISTRY.get("intensity_noise", "cityscapes-c")
    weight = corruption.table[2].weight
    images = torch.full((4, 3, 64, 64), 0.7)
    images[:, :, :32] = 0.3
    noise = corruption(images, 2, [1, 2, 3, 4]) - images
    dark, bright = noise[:, :, :32], noise[:, :, 32:]
    # Linearised: d log2(2^x + n) = n / (2^x ln 2), with n of std weight * sqrt(2).
    for part, level in ((dark, 0.3), (bright, 0.7)):
        assert float(part.std()) == pytest.approx(weight * math.sqrt(2) / (2**level * math.log(2)), rel=0.05)
    assert float(dark.std()) > 1.25 * float(bright.std())
    # Shared luminance noise: half of each channel's variance is common to all three.
    flat = bright.permute(1, 0, 2, 3).reshape(3, -1)
    correlation = torch.corrcoef(flat)
    assert float(correlation[0, 1]) == pytest.approx(0.5, abs=0.05)
    assert float(correlation[1, 2]) == pytest.approx(0.5, abs=0.05)


# --------------------------------------------------------------------------- blur


def scipy_gaussian_nearest(image: np.ndarray, sigma: float) -> np.ndarray:
    """scipy.ndimage.gaussian_filter(mode="nearest", truncate=4) over the last two axes, in numpy."""
    radius = int(4.0 * sigma + 0.5)
    offsets = np.arange(-radius, radius + 1)
    kernel = np.exp(-0.5 * offsets**2 / sigma**2)
    kernel /= kernel.sum()
    out = image
    for axis in (-2, -1):
        pad = [(0, 0)] * out.ndim
        pad[axis] = (radius, radius)
        padded = np.pad(out, pad, mode="edge")
        n = out.shape[axis]
        out = sum(k * np.take(padded, np.arange(i, i + n), axis=axis) for i, k in enumerate(kernel))
    return out


@pytest.mark.parametrize("side", [23, 90])  # below and above SMALL_IMAGE: shifted sums, then convolution
@pytest.mark.parametrize("sigma", [1, 3, 6])
def test_gaussian_blur_matches_scipy_semantics(sigma: float, side: int) -> None:
    images = smooth_images(side=side).double()
    expected = scipy_gaussian_nearest(images.numpy(), sigma)
    np.testing.assert_allclose(Fn.gaussian_blur(images, sigma).numpy(), expected, atol=1e-12)
    assert Fn.truncated_gaussian_kernel1d(sigma).numel() == 2 * int(4 * sigma + 0.5) + 1


@pytest.mark.parametrize(
    ("size", "angle"), [((40, 52), 0.0), ((40, 52), 31.0), ((33, 30), -44.0), ((9, 12), 17.0), ((90, 75), -23.0)]
)
def test_motion_trail_matches_the_reference_shift_and_sum(size: tuple[int, int], angle: float) -> None:
    pixels = uint8_image(7, *size).astype(np.float64) / 255
    expected = reference_motion_blur(pixels, 15, 5, angle)
    taps = Fn.motion_trail_taps(15, 5, angle, *size)
    ours = Fn.motion_blur(torch.from_numpy(pixels).permute(2, 0, 1), taps, Fn.Border.NEAREST)
    np.testing.assert_allclose(ours.permute(1, 2, 0).numpy(), expected, atol=1e-10)


def test_motion_trail_taps_are_a_normalised_one_sided_trail() -> None:
    taps = Fn.motion_trail_taps(10, 3, 0.0, 100, 100)
    assert [(dy, dx) for dy, dx, _ in taps] == [(0, -i) for i in range(21)]
    assert math.fsum(w for _, _, w in taps) == pytest.approx(1.0, abs=1e-12)
    weights = [w for _, _, w in taps]
    assert weights == sorted(weights, reverse=True)
    # A short image cuts the trail where it leaves the frame, without renormalising.
    short = Fn.motion_trail_taps(10, 3, 0.0, 100, 5)
    assert len(short) == 5 and math.fsum(w for _, _, w in short) < 1


@pytest.mark.parametrize("size", [7, 9, 13, 17, 25])
def test_motion_line_kernels_are_normalised_lines_through_the_centre(size: int) -> None:
    rng = np.random.default_rng(size)
    for angle, direction in zip(rng.uniform(0, 360, 8), rng.uniform(-1, 1, 8)):
        kernel = Fn.motion_line_kernel(size, float(angle), float(direction))
        assert kernel.shape == (size, size)
        assert float(kernel.sum()) == pytest.approx(1.0, abs=1e-12)
        assert bool((kernel >= 0).all()) and float(kernel[size // 2, size // 2]) > 0
    uniform = Fn.motion_line_kernel(size, 0.0, 0.0)
    assert torch.allclose(uniform[:, size // 2], torch.full((size,), 1 / size, dtype=torch.float64))
    assert float(uniform.sum(dim=0)[size // 2]) == pytest.approx(1.0)
    horizontal = Fn.motion_line_kernel(size, 90.0, 0.0)
    assert torch.allclose(horizontal, uniform.T, atol=1e-12)
    assert torch.allclose(Fn.motion_line_kernel(size, 30.0, 0.0), Fn.motion_line_kernel(size, 210.0, 0.0), atol=1e-12)
    # Direction +1 ramps the weights from one end of the line to the other.
    ramp = Fn.motion_line_kernel(size, 0.0, 1.0)[:, size // 2]
    assert ramp.tolist() == sorted(ramp.tolist(), reverse=True) and float(ramp[-1]) == 0


@pytest.mark.parametrize("size", [(30, 41), (90, 75), (5, 8)])  # FFT for (90, 75); (5, 8) pads past the edge
def test_motion_line_blur_is_opencv_filter2d_with_reflect_101(size: tuple[int, int]) -> None:
    h, w = size
    pixels = uint8_image(8, h, w).astype(np.float64) / 255
    kernel = Fn.motion_line_kernel(13, 63.0, -0.4).numpy()
    padded = np.pad(pixels, ((6, 6), (6, 6), (0, 0)), mode="reflect")  # numpy's reflect is reflect-101
    expected = sum(
        kernel[a, b] * padded[a : a + h, b : b + w] for a in range(13) for b in range(13) if kernel[a, b] != 0
    )
    taps = Fn.kernel_taps(torch.from_numpy(kernel))
    ours = Fn.motion_blur(torch.from_numpy(pixels).permute(2, 0, 1), taps, Fn.Border.MIRROR)
    np.testing.assert_allclose(ours.permute(1, 2, 0).numpy(), expected, atol=1e-10)


def test_zoom_factors_are_numpy_arange_quirks_included() -> None:
    assert ZOOM_BLUR_COCO_P[1].factors == tuple(np.arange(1, 1.05, 0.01).tolist())
    assert ZOOM_BLUR_COCO_P[5].factors == tuple(np.arange(1.03, 1.18, 0.03).tolist())
    assert ZOOM_BLUR_IMAGENET_C[2].factors == tuple(np.arange(1, 1.16, 0.01).tolist())
    # numpy's float arange overshoots: arange(1, 1.10, .02) has 6 factors, arange(1, 1.11, .01) 12.
    assert len(ZOOM_BLUR_COCO_P[3].factors) == 6 and ZOOM_BLUR_COCO_P[3].factors[-1] == pytest.approx(1.1)
    assert len(ZOOM_BLUR_IMAGENET_C[1].factors) == 12


def reference_zoom_blur(image: np.ndarray, factors: tuple[float, ...]) -> np.ndarray:
    """imagecorruptions 1.1.2 zoom_blur with scipy.ndimage.zoom(order=1) written out in numpy."""

    def resample(n_in: int, n_out: int) -> np.ndarray:
        position = np.arange(n_out) * ((n_in - 1) / (n_out - 1))
        matrix = np.zeros((n_out, n_in))
        low = np.minimum(np.floor(position).astype(int), n_in - 1)
        high = np.minimum(low + 1, n_in - 1)
        frac = position - low
        np.add.at(matrix, (np.arange(n_out), low), 1 - frac)
        np.add.at(matrix, (np.arange(n_out), high), frac)
        return matrix

    h, w = image.shape[:2]
    out = np.zeros_like(image)
    for z in factors:
        ch, cw = int(np.ceil(h / z)), int(np.ceil(w / z))
        top, left = (h - ch) // 2, (w - cw) // 2
        crop = image[top : top + ch, left : left + cw]
        rows, cols = resample(ch, round(ch * z)), resample(cw, round(cw * z))
        zoomed = np.einsum("ij,jkc,lk->ilc", rows, crop, cols, optimize=True)
        out += zoomed[:h, :w]
    return np.clip((image + out) / (len(factors) + 1), 0, 1)


@pytest.mark.parametrize(("size", "severity"), [((48, 48), 5), ((37, 50), 3), ((12, 9), 1)])
def test_zoom_blur_matches_the_reference_clipped_zoom(size: tuple[int, int], severity: int) -> None:
    pixels = uint8_image(9, *size).astype(np.float64) / 255
    factors = ZOOM_BLUR_IMAGENET_C[severity].factors
    ours = Fn.zoom_blur(torch.from_numpy(pixels).permute(2, 0, 1)[None], factors)[0].permute(1, 2, 0).numpy()
    np.testing.assert_allclose(ours, reference_zoom_blur(pixels, factors), atol=1e-6)


def zoom_blur_plane_by_plane(images: torch.Tensor, factors: tuple[float, ...]) -> torch.Tensor:
    """Zoom blur as first written: each centre crop interpolated as a (B, C, H, W) view, added with ``+=``."""
    h, w = images.shape[-2:]
    out = torch.zeros_like(images)
    for factor in factors:
        crop_h, crop_w = math.ceil(h / factor), math.ceil(w / factor)
        top, left = (h - crop_h) // 2, (w - crop_w) // 2
        size = (round(crop_h * factor), round(crop_w * factor))
        crop = images[:, :, top : top + crop_h, left : left + crop_w]
        zoomed = torch.nn.functional.interpolate(crop, size=size, mode="bilinear", align_corners=True)
        rows, cols = min(h, size[0]), min(w, size[1])
        out[:, :, :rows, :cols] += zoomed[:, :, :rows, :cols]
    return ((images + out) / (len(factors) + 1)).clamp_(0.0, 1.0)


@pytest.mark.parametrize(
    ("shape", "dtype", "severity"),
    [((1, 3, 512, 512), torch.float32, 3), ((2, 3, 37, 50), torch.float64, 5), ((1, 1, 61, 44), torch.float32, 1)],
)
def test_zoom_blur_through_channels_last_is_bitwise_the_plain_layout(
    shape: tuple[int, ...], dtype: torch.dtype, severity: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The torch path zooms channels-last crops to save the kernel's own layout copies; same values.
    # (With OpenCV, float32 takes numba's row blends or OpenCV 5's warpAffine instead:
    # tests/corruptions/test_zoom_kernel.py and test_opencv_warps.py bound them.)
    from pytest_segrobust.corruptions.functional import opencv

    monkeypatch.setattr(opencv, "opencv", lambda: None)
    images = torch.rand(shape, generator=torch.Generator().manual_seed(severity), dtype=dtype)
    factors = ZOOM_BLUR_IMAGENET_C[severity].factors
    out = Fn.zoom_blur(images, factors)
    assert out.is_contiguous() and out.dtype == dtype
    assert torch.equal(out, zoom_blur_plane_by_plane(images, factors))


def test_local_shuffle_keeps_the_first_row_and_column_and_swaps_permute() -> None:
    h, w, delta = 20, 24, 3
    images = torch.arange(h * w, dtype=torch.float64).view(1, 1, h, w)
    offsets = torch.randint(-delta, delta, (1, 2, h, w), generator=torch.Generator().manual_seed(0))
    for swap in (False, True):
        out = Fn.local_shuffle(images, offsets, delta, swap=swap)[0, 0]
        # Targets lie in rows and columns 1 .. size - 1: the first row and column never change.
        assert torch.equal(out[0], images[0, 0, 0]) and torch.equal(out[:, 0], images[0, 0, :, 0])
        assert not torch.equal(out, images[0, 0])
        permutes = torch.equal(out.flatten().sort().values, images.flatten())
        assert permutes == swap  # copies duplicate some pixels and drop others


def test_glass_blur_quantises_between_its_blurs() -> None:
    images = smooth_images()
    out = Fn.glass_blur(images, 0.7, 1, 0, SampleStreams([1, 2], "cpu"))
    levels = (Fn.gaussian_blur(images, 0.7) * 255 + 1e-3).floor() / 255
    assert torch.allclose(out, Fn.gaussian_blur(levels, 0.7), atol=1e-6)
    assert not torch.allclose(out, Fn.gaussian_blur(Fn.gaussian_blur(images, 0.7), 0.7), atol=1e-3)


def test_psf_blur_is_sharper_at_the_centre_than_in_the_corners() -> None:
    blocks = torch.rand(1, 3, 10, 10, generator=torch.Generator().manual_seed(4))
    texture = torch.nn.functional.interpolate(blocks, size=(60, 60), mode="nearest")  # sharp 6-pixel blocks
    for severity in range(1, 6):
        out = REGISTRY.get("psf_blur", "cityscapes-c")(texture, severity, [0])
        change = (out - texture).abs()
        centre = float(change[..., 24:36, 24:36].mean())
        corners = [
            float(change[..., r, c].mean())
            for r in (slice(0, 12), slice(48, 60))
            for c in (slice(0, 12), slice(48, 60))
        ]
        assert all(corner > 1.5 * centre for corner in corners), (severity, centre, corners)


def test_psf_blur_with_one_sigma_everywhere_is_a_plain_gaussian_blur() -> None:
    images = smooth_images()
    assert torch.allclose(Fn.psf_blur(images, 2.0, 2.0), Fn.gaussian_blur(images, 2.0).clamp(0, 1), atol=1e-6)


# --------------------------------------------------------------------------- catalogue


def test_presets_carry_the_right_tables_and_categories() -> None:
    assert REGISTRY.get("brightness", "coco-p").category is Category.ENVIRONMENT
    assert REGISTRY.get("brightness", "imagenet-c").category is Category.DIGITAL
    assert REGISTRY.get("pixelate", "imagenet-c").category is Category.COMPRESSION
    assert REGISTRY.get("speckle_noise", "coco-p").table[5].std == 0.35
    assert REGISTRY.get("speckle_noise", "imagenet-c").table[5].std == 0.6
    assert REGISTRY.get("speckle_noise", "cityscapes-c") is REGISTRY.get("speckle_noise", "imagenet-c")
    assert REGISTRY.get("contrast", "imagenet-c").table[1].factor == 0.4
    assert REGISTRY.get("motion_blur", "coco-p").table[5].kernel_size == 25
    assert REGISTRY.get("motion_blur", "imagenet-c").table[5].radius == 20
    weights = [REGISTRY.get("intensity_noise", "cityscapes-c").table[s].weight for s in range(1, 6)]
    assert weights == sorted(weights) and len(set(weights)) == 5


# Monotone where the definition implies it and the corruption lives outside coco-p (the
# shared MONOTONE list resolves names in coco-p). Not glass_blur or saturate: their
# published tables are not ordered.
@pytest.mark.parametrize(
    ("preset", "name"),
    [
        ("imagenet-c", "speckle_noise"),
        ("imagenet-c", "gaussian_blur"),
        ("imagenet-c", "motion_blur"),
        ("imagenet-c", "zoom_blur"),
        ("imagenet-c", "contrast"),
        ("cityscapes-c", "intensity_noise"),
        ("cityscapes-c", "psf_blur"),
    ],
)
def test_distance_from_clean_grows_with_severity_outside_coco_p(preset: str, name: str) -> None:
    testing.distance_grows_with_severity(REGISTRY.get(name, preset))
