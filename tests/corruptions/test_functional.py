"""The functional core against independent oracles (PIL, torch.rot90, closed forms)."""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch
from PIL import Image, ImageEnhance

from pytest_segrobust.corruptions import REGISTRY
from pytest_segrobust.corruptions import functional as Fn
from pytest_segrobust.corruptions.functional.geometry import _normalise
from pytest_segrobust.testing.strategies import make_batch


def pil_image(seed: int = 0, size: tuple[int, int] = (40, 56)) -> Image.Image:
    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 256, (*size, 3), dtype=np.uint8))


def as_batch(image: Image.Image) -> torch.Tensor:
    return torch.from_numpy(np.array(image)).permute(2, 0, 1)[None].float() / 255


@pytest.mark.parametrize("factor", [0.5, 1.2, 2.0])
def test_contrast_matches_pil_image_enhance(factor: float) -> None:
    image = pil_image()
    expected = as_batch(ImageEnhance.Contrast(image).enhance(factor))
    ours = Fn.enhance_contrast(as_batch(image), factor)
    # PIL rounds the mean grey to an integer and each output pixel to uint8.
    assert (ours - expected).abs().max() <= 2.5 / 255


@pytest.mark.parametrize("quality", [7, 25, 90])
def test_jpeg_is_pillows_codec(quality: int) -> None:
    image = pil_image(1)
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=quality)
    expected = as_batch(Image.open(io.BytesIO(buffer.getvalue())).convert("RGB"))
    assert torch.equal(Fn.jpeg(as_batch(image), quality), expected)


def reference_disk(radius: float, alias_blur: float) -> np.ndarray:
    """ImageNet-C's disk built independently in numpy: normalised, then blurred, not renormalised."""
    half, soften = (8, 3) if radius <= 8 else (int(radius), 5)
    axis = np.arange(-half, half + 1)
    x, y = np.meshgrid(axis, axis)
    disk = (x**2 + y**2 <= radius**2).astype(np.float64)
    disk /= disk.sum()
    offsets = np.arange(soften) - (soften - 1) / 2
    g = np.exp(-(offsets**2) / (2 * alias_blur**2))
    g /= g.sum()
    padded = np.pad(disk, soften // 2, mode="reflect")  # numpy's reflect is OpenCV's reflect-101
    rows = np.stack([np.convolve(r, g, mode="valid") for r in padded])
    return np.stack([np.convolve(c, g, mode="valid") for c in rows.T]).T


@pytest.mark.parametrize(("radius", "alias_blur"), [(3, 0.1), (4, 0.5), (8, 0.5), (10, 0.5)])
def test_disk_kernel_matches_the_reference_construction(radius: float, alias_blur: float) -> None:
    kernel = Fn.disk_kernel(radius, alias_blur)
    size = 17 if radius <= 8 else 2 * radius + 1
    assert kernel.shape == (size, size)
    np.testing.assert_allclose(kernel.numpy(), reference_disk(radius, alias_blur), atol=1e-12)
    assert torch.allclose(kernel, kernel.T) and torch.allclose(kernel, kernel.flip(0))


def test_filter2d_with_a_delta_kernel_is_identity() -> None:
    images = make_batch(2, 20, 30, 3, seed=1).images
    delta = torch.zeros(5, 5, dtype=torch.float64)
    delta[2, 2] = 1
    assert torch.allclose(Fn.filter2d(images, delta), images, atol=1e-6)


def test_rotation_by_90_degrees_is_rot90() -> None:
    labels = torch.arange(36).view(1, 6, 6)
    matrix = Fn.rotation_about_centre(torch.tensor([90.0], dtype=torch.float64), 6, 6)
    coords = Fn.affine_coordinates(matrix, 6, 6)
    rotated = Fn.sample_nearest(labels, coords, fill=255)
    assert torch.equal(rotated, torch.rot90(labels, 1, dims=(-2, -1)))  # counter-clockwise on screen


def _torch_maps(angles: torch.Tensor, height: int, width: int) -> torch.Tensor:
    # The rotation and legacy shear maps written with float64 tensor ops, as they were made before the host made them.
    theta = torch.deg2rad(angles)
    cos, sin, slope, stretch = torch.cos(theta), torch.sin(theta), torch.tan(theta), 1 / torch.cos(theta)
    cx, cy = (width - 1) / 2, (height - 1) / 2
    one, zero = torch.ones_like(theta), torch.zeros_like(theta)
    rows = [
        [[cos, -sin, cx - cos * cx + sin * cy], [sin, cos, cy - sin * cx - cos * cy]],
        [[one, slope, -slope * cy], [zero, stretch, cy - stretch * cy]],
    ]
    return torch.cat([torch.stack([torch.stack(row, dim=-1) for row in rows_], dim=-2) for rows_ in rows])


def test_rotation_and_shear_maps_are_made_on_the_host_with_the_tensor_ops_values() -> None:
    # Every angle the tables draw (+/- each severity's degrees) gives the tensor ops' bits;
    # any other angle agrees to float64 rounding.
    from pytest_segrobust.corruptions.geometric import ROTATE, SHEAR

    table_angles = [sign * table[s].degrees for table in (ROTATE, SHEAR) for s in range(1, 6) for sign in (1, -1)]
    for angles, exact in ((table_angles, True), (torch.linspace(-89, 89, 301).tolist(), False)):
        angles64 = torch.tensor(angles, dtype=torch.float64)
        for height, width in ((512, 512), (37, 50)):
            host = torch.cat(
                [
                    Fn.rotation_about_centre(angles64, height, width),
                    Fn.shear_x_about_centre(angles64, height, width, True),
                ]
            )
            expected = _torch_maps(angles64, height, width)
            assert torch.equal(host, expected) if exact else torch.allclose(host, expected, rtol=1e-14, atol=1e-12)
    float32 = Fn.rotation_about_centre(torch.tensor([30.0]), 8, 8)
    assert float32.dtype == torch.float32 and float32.shape == (1, 2, 3)
    assert Fn.shear_x_about_centre(torch.zeros(0, dtype=torch.float64), 8, 8).shape == (0, 2, 3)


@pytest.mark.parametrize(("height", "width"), [(6, 6), (37, 50), (129, 96)])
def test_affine_coordinates_round_the_float64_map_once(height: int, width: int) -> None:
    # The grid is m . (x, y, 1) in float64 rounded once to float32, whatever the batch. The
    # float64 sums may differ from a contracted product in the last bit; the float32 grid
    # the corruptions sample with (and nearest-neighbour labels rely on) does not.
    angles = torch.tensor([40.0, -23.7, 0.5], dtype=torch.float64)
    matrices = torch.cat(
        [Fn.rotation_about_centre(angles, height, width), Fn.shear_x_about_centre(angles, height, width, True)]
    )
    ys, xs = torch.meshgrid(
        torch.arange(height, dtype=torch.float64), torch.arange(width, dtype=torch.float64), indexing="ij"
    )
    homogeneous = torch.stack([xs, ys, torch.ones_like(xs)], dim=-1)
    expected = torch.einsum("bij,hwj->bhwi", matrices, homogeneous)
    torch.testing.assert_close(Fn.affine_coordinates(matrices, height, width), expected, rtol=1e-15, atol=1e-12)
    coords = Fn.affine_coordinates(matrices, height, width, torch.float32)
    assert coords.dtype == torch.float32 and torch.equal(coords, expected.to(torch.float32))
    assert torch.equal(Fn.affine_coordinates(matrices[2:3], height, width, torch.float32), coords[2:3])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_sample_bilinear_normalises_each_coordinate_with_the_plain_formula(dtype: torch.dtype) -> None:
    # grid_sample's [-1, 1] grid is (2 c + 1) / n - 1, rounded after every operation as the
    # unfused expression rounds it: worked on plane by plane, the grid is bit for bit the same.
    angles = torch.tensor([40.0, -23.7], dtype=torch.float64)
    coords = Fn.affine_coordinates(Fn.rotation_about_centre(angles, 37, 50), 37, 50, dtype)
    expected = torch.stack([(coords[..., 0] * 2 + 1) / 50 - 1, (coords[..., 1] * 2 + 1) / 37 - 1], dim=-1)
    grid = _normalise(coords, height=37, width=50)
    assert grid.is_contiguous() and torch.equal(grid, expected)


def test_sample_nearest_fills_outside_and_keeps_dtype() -> None:
    labels = torch.ones(1, 4, 4, dtype=torch.int64)
    coords = torch.full((1, 4, 4, 2), -3.0)
    out = Fn.sample_nearest(labels, coords, fill=255)
    assert out.dtype == torch.int64 and bool((out == 255).all())


def test_sample_bilinear_at_integer_coordinates_is_exact() -> None:
    images = make_batch(1, 9, 11, 3, seed=2).images
    coords = Fn.affine_coordinates(torch.tensor([[[1.0, 0, 0], [0, 1.0, 0]]]), 9, 11)
    assert torch.allclose(Fn.sample_bilinear(images, coords), images, atol=1e-6)


def test_gaussian_noise_has_the_table_standard_deviation() -> None:
    images = torch.full((4, 3, 64, 64), 0.5)
    out = REGISTRY.get("gaussian_noise")(images, 1, [1, 2, 3, 4])  # std 0.08, little clipping
    assert float((out - images).std()) == pytest.approx(0.08, rel=0.03)


def test_shot_noise_is_unbiased_with_poisson_variance() -> None:
    images = torch.full((4, 3, 64, 64), 0.5)
    out = REGISTRY.get("shot_noise")(images, 5, [1, 2, 3, 4])  # 15 photons
    assert float(out.mean()) == pytest.approx(0.5, abs=0.01)
    assert float(out.var()) == pytest.approx(0.5 / 15, rel=0.05)


def test_rotate_sign_is_drawn_per_sample() -> None:
    images = make_batch(1, 32, 32, 3, seed=3).images.expand(16, -1, -1, -1)
    out = REGISTRY.get("rotate")(images, 3, list(range(16)))
    distinct = {tuple(o.flatten()[:200].tolist()) for o in out}
    assert len(distinct) == 2  # +40 and -40 degrees, and nothing else
