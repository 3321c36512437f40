"""The filter toolkit: padding against numpy.pad, the correlations against each other and numpy."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pytest_segrobust.corruptions import functional as Fn
from pytest_segrobust.corruptions.functional.padding import SMALL_IMAGE

Border = Fn.Border

# numpy.pad's names for the same extensions (see Border's docstring).
NUMPY_MODES = {Border.NEAREST: "edge", Border.REFLECT: "symmetric", Border.MIRROR: "reflect"}


def field(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.from_numpy(np.random.default_rng(seed).random(shape))


@pytest.mark.parametrize("border", list(NUMPY_MODES))
@pytest.mark.parametrize(
    ("shape", "widths"),
    [
        ((5, 7), (2, 3, 1, 4)),
        ((4, 6), (13, 9, 11, 10)),  # wider than the image: the reflections repeat
        ((1, 3), (2, 2, 3, 3)),  # one row
        ((3, 96, 128), (8, 0, 0, 8)),  # large enough for torch's own padding
    ],
)
def test_pad_is_numpy_pad(border: Border, shape: tuple[int, ...], widths: tuple[int, int, int, int]) -> None:
    fields = field(*shape)
    left, right, top, bottom = widths
    spec = [(0, 0)] * (len(shape) - 2) + [(top, bottom), (left, right)]
    expected = np.pad(fields.numpy(), spec, mode=NUMPY_MODES[border])
    assert torch.equal(Fn.pad(fields, widths, border), torch.from_numpy(expected))


def test_pad_constant_fills_the_value() -> None:
    fields = field(3, 4)
    padded = Fn.pad(fields, (1, 2, 0, 3), Border.CONSTANT, value=7.0)
    assert torch.equal(padded, torch.from_numpy(np.pad(fields.numpy(), ((0, 3), (1, 2)), constant_values=7.0)))


def test_reflect_repeats_the_edge_pixel_and_mirror_does_not() -> None:
    row = torch.tensor([[1.0, 2.0, 3.0, 4.0]])
    assert Fn.pad(row, (2, 2, 0, 0), Border.REFLECT)[0].tolist() == [2, 1, 1, 2, 3, 4, 4, 3]
    assert Fn.pad(row, (2, 2, 0, 0), Border.MIRROR)[0].tolist() == [3, 2, 1, 2, 3, 4, 3, 2]
    assert Fn.pad(row, (2, 2, 0, 0), Border.NEAREST)[0].tolist() == [1, 1, 1, 2, 3, 4, 4, 4]


def test_a_bare_string_is_no_border() -> None:
    with pytest.raises(TypeError, match="Border"):
        Fn.pad(field(3, 3), (1, 1, 1, 1), "reflect")  # type: ignore[arg-type]


@pytest.mark.parametrize("border", [Border.NEAREST, Border.MIRROR, Border.REFLECT])
def test_shift_sum_is_a_correlation_with_the_taps(border: Border) -> None:
    image = field(2, 9, 11)
    taps = [(2, -1, 0.5), (0, 0, 0.25), (-3, 4, 0.125)]
    # Output (y, x) reads (y - dy, x - dx): 2 rows above and 3 below, 4 columns left and 1 right.
    padded = np.pad(image.numpy(), ((0, 0), (2, 3), (4, 1)), mode=NUMPY_MODES[border])
    expected = sum(w * padded[:, 2 - dy : 2 - dy + 9, 4 - dx : 4 - dx + 11] for dy, dx, w in taps)
    for fused in (False, True):
        ours = Fn.shift_sum(image, taps, border, fused=fused)
        np.testing.assert_allclose(ours.numpy(), expected, rtol=0, atol=1e-15)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_unfused_shift_sum_rounds_each_product_and_sum(dtype: torch.dtype) -> None:
    # Bit for bit ``out = out + shifted * w`` tap by tap (the baselines' arithmetic), also
    # where autograd records it.
    image = field(3, 31, 29, seed=2).to(dtype)
    taps = Fn.motion_trail_taps(7, 3, -100.0, 31, 29)
    padded = Fn.pad(image, (15,) * 4, Border.NEAREST)
    expected = torch.zeros_like(image)
    for k, (dy, dx, w) in enumerate(taps):
        product = padded[:, 15 - dy : 15 - dy + 31, 15 - dx : 15 - dx + 29] * w
        expected = product if k == 0 else expected + product
    assert torch.equal(Fn.shift_sum(image, taps, Border.NEAREST), expected)
    tracked = image.clone().requires_grad_()
    summed = Fn.shift_sum(tracked, taps, Border.NEAREST)
    assert torch.equal(summed.detach(), expected)
    summed.sum().backward()
    assert tracked.grad is not None and float(tracked.grad.sum()) == pytest.approx(
        sum(w for *_, w in taps) * image.numel()
    )


@pytest.mark.parametrize("border", [Border.NEAREST, Border.MIRROR])
def test_fft_shift_sum_is_shift_sum(border: Border) -> None:
    images = field(2, 3, 40, 52, seed=1).float()
    taps = Fn.motion_trail_taps(15, 5, 31.0, 40, 52)
    direct = torch.stack([Fn.shift_sum(image, taps, border) for image in images])
    torch.testing.assert_close(Fn.fft_shift_sum(images, taps, border), direct, rtol=0, atol=1e-5)


def test_filter2d_is_a_dense_correlation_on_both_paths() -> None:
    kernel = torch.from_numpy(np.random.default_rng(2).random((5, 5)))
    for side in (20, 90):  # a convolution below SMALL_IMAGE, an FFT above
        images = field(1, 3, side, side + 3, seed=side)
        assert (images[0].numel() > SMALL_IMAGE) == (side == 90)
        padded = np.pad(images.numpy(), ((0, 0), (0, 0), (2, 2), (2, 2)), mode="reflect")  # reflect-101
        h, w = images.shape[-2:]
        expected = sum(kernel[a, b].item() * padded[..., a : a + h, b : b + w] for a in range(5) for b in range(5))
        np.testing.assert_allclose(Fn.filter2d(images, kernel).numpy(), expected, rtol=0, atol=1e-12)


def test_separable_filter_is_the_outer_product_kernel() -> None:
    images = field(2, 3, 15, 18, seed=3)
    ky = torch.tensor([0.25, 0.5, 0.25], dtype=torch.float64)
    kx = torch.tensor([0.1, 0.2, 0.3, 0.2, 0.2], dtype=torch.float64)
    dense_kernel = torch.zeros(5, 5, dtype=torch.float64)
    dense_kernel[1:4] = ky[:, None] * kx[None]
    dense = torch.stack([Fn.shift_sum(image, Fn.kernel_taps(dense_kernel), Border.MIRROR) for image in images])
    torch.testing.assert_close(Fn.separable_filter(images, ky, kx, Border.MIRROR), dense, rtol=0, atol=1e-14)


def test_gaussian_blur_is_the_nearest_gaussian_filter() -> None:
    images = field(2, 3, 30, 41, seed=4)
    torch.testing.assert_close(
        Fn.gaussian_blur(images, 2.0), Fn.gaussian_filter(images, 2.0, Border.NEAREST), rtol=0, atol=1e-15
    )
    assert Fn.truncated_gaussian_kernel1d(0.0).tolist() == [1.0]  # radius 0: the identity, sigma 0 included
    assert torch.equal(Fn.gaussian_filter(images, (0.0, 0.1), Border.MIRROR), images)


def test_kernel_taps_skip_zeros_and_keep_the_kernel_order() -> None:
    kernel = torch.tensor([[-2.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.5, 2.0]], dtype=torch.float64)
    # Entry (a, b) of a 3x3 kernel reads the pixel (a - 1, b - 1) away: a shift by (1 - a, 1 - b).
    assert Fn.kernel_taps(kernel) == [(1, 1, -2.0), (0, 0, 1.0), (-1, 0, 0.5), (-1, -1, 2.0)]
