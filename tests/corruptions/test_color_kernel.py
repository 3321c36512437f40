"""saturate's, brightness's, darkness's and the contrasts' compiled loops (numba) give the numpy and tensor paths' bits.

Images of ``COMPILED_COLOR_MIN_VALUES`` values or more take :mod:`.color_kernel` on the
CPU where numba is installed; smaller ones, and installs without numba, the numpy planes
(saturate, brightness) or torch's in-place blend and product (the contrasts, darkness).
All four are compared here bit for bit at every severity, on photo-like images with grey,
black and clipped pixels, uniform noise, float64, values outside [0, 1] and channels-last.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest
import torch

from pytest_segrobust.core.opencv import opencv
from pytest_segrobust.corruptions import functional as Fn
from pytest_segrobust.corruptions.digital import BRIGHTNESS, SATURATE
from pytest_segrobust.corruptions.functional import color

pytest.importorskip("numba")


def photo_like(height: int, width: int, seed: int = 0) -> torch.Tensor:
    """Shading and noise with clipped white, clipped black, grey and tied-maximum regions."""
    generator = torch.Generator().manual_seed(seed)
    y, x = torch.meshgrid(torch.linspace(0, 1, height), torch.linspace(0, 1, width), indexing="ij")
    image = torch.stack([0.2 + 0.6 * y, 0.3 + 0.5 * x, 0.5 + 0.3 * (x - y)])
    image = image + 0.05 * torch.randn(3, height, width, generator=generator)
    image[:, : height // 4, : width // 4] = 1.2
    image[:, -height // 4 :, -width // 4 :] = -0.1
    image[:, height // 3 : height // 2, width // 3 : width // 2] = 0.45
    image[0, height // 2 :, : width // 3] = 0.9
    image[1, height // 2 :, : width // 3] = 0.9
    return ((image.clamp(0, 1) * 255).round() / 255)[None].float()


def inputs() -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(2)
    uniform = torch.rand(2, 3, 130, 140, generator=generator)
    return [
        photo_like(128, 131),
        uniform,
        uniform.double(),
        torch.rand(1, 3, 128, 128, generator=generator) * 1.4 - 0.2,
        photo_like(140, 128, seed=1).contiguous(memory_format=torch.channels_last),
    ]


@contextlib.contextmanager
def counted_kernel() -> Iterator[dict[str, int]]:
    """The compiled loops, counting their calls."""
    kernel = color._compiled_color()
    assert kernel is not None, "numba is installed but the compiled loops are not loaded"
    calls = {"scale_saturation_into": 0, "shift_value_into": 0, "blend_into": 0, "scale_into": 0}

    class Spy:
        @staticmethod
        def scale_saturation_into(*args: object) -> None:
            calls["scale_saturation_into"] += 1
            kernel.scale_saturation_into(*args)

        @staticmethod
        def shift_value_into(*args: object) -> None:
            calls["shift_value_into"] += 1
            kernel.shift_value_into(*args)

        @staticmethod
        def blend_into(*args: object) -> None:
            calls["blend_into"] += 1
            kernel.blend_into(*args)

        @staticmethod
        def scale_into(*args: object) -> None:
            calls["scale_into"] += 1
            kernel.scale_into(*args)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(color, "_compiled_color", functools_cached(Spy))
        yield calls


def functools_cached(module: object) -> object:
    # A stand-in for the cached loader: callable, and its cache reports one entry (loaded).
    def load() -> object:
        return module

    load.cache_info = lambda: type("Info", (), {"currsize": 1})()  # type: ignore[attr-defined]
    return load


def numpy_planes() -> contextlib.AbstractContextManager[None]:
    return _patched(color, "_compiled_color_for", lambda images: None)


def tensor_path() -> contextlib.AbstractContextManager[None]:
    return _patched(color, "_numpy_planes", lambda images: None)


@contextlib.contextmanager
def _patched(owner: object, name: str, value: object) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(owner, name, value)
        yield


@pytest.mark.parametrize("severity", range(1, 6))
def test_compiled_saturation_is_the_numpy_and_tensor_paths_bit_for_bit(severity: int) -> None:
    params = SATURATE[severity]
    for images in inputs():
        with counted_kernel() as calls:
            fast = Fn.scale_saturation(images, params.scale, params.shift)
        assert calls["scale_saturation_into"] == 1
        with numpy_planes():
            planes = Fn.scale_saturation(images, params.scale, params.shift)
        with tensor_path():
            tensors = Fn.scale_saturation(images, params.scale, params.shift)
        assert fast.dtype == images.dtype and fast.is_contiguous()
        assert torch.equal(fast, planes) and torch.equal(fast, tensors)


@pytest.mark.parametrize("severity", range(1, 6))
def test_compiled_brightness_is_the_numpy_and_tensor_paths_bit_for_bit(severity: int) -> None:
    amount = BRIGHTNESS[severity].amount
    for images in inputs():
        with counted_kernel() as calls:
            fast = Fn.shift_value(images, amount)
        assert calls["shift_value_into"] == 1
        with numpy_planes():
            planes = Fn.shift_value(images, amount)
        with tensor_path():
            tensors = Fn.shift_value(images, amount)
        assert fast.dtype == images.dtype and fast.is_contiguous()
        assert torch.equal(fast, planes) and torch.equal(fast, tensors)


def test_grey_and_black_pixels_take_the_tint_and_the_grey() -> None:
    # Every pixel grey or black: the compiled loops' selected side alone decides the result.
    images = torch.cat([torch.zeros(1, 3, 128, 64), torch.full((1, 3, 128, 64), 0.4)], dim=-1)
    with counted_kernel():
        saturated = Fn.scale_saturation(images, 5.0, 0.1)
        brighter = Fn.shift_value(images, 0.3)
    assert torch.equal(saturated[0, 0], images[0, 0])
    assert torch.allclose(saturated[0, 1:], images[0, 1:] * 0.9)
    assert torch.allclose(brighter[0, :, :, :64], torch.full((3, 128, 64), 0.3))
    assert torch.allclose(brighter[0, :, :, 64:], torch.full((3, 128, 64), 0.7))


@pytest.mark.parametrize("factor", [0.4, 0.05, 1.2, 2.0])
def test_compiled_contrast_blends_are_the_tensor_path_bit_for_bit(factor: float) -> None:
    generator = torch.Generator().manual_seed(4)
    for images in [*inputs(), torch.rand(2, 1, 256, 140, generator=generator)]:
        with counted_kernel() as calls:
            reduced = Fn.reduce_contrast(images, factor)
            enhanced = Fn.enhance_contrast(images, factor) if images.shape[1] == 3 else None
        # reduce_contrast blends plane by plane where OpenCV sums the planes (float32), else the whole batch at once.
        by_plane = images.dtype == torch.float32 and opencv() is not None
        planes = images.shape[0] * images.shape[1] if by_plane else 1
        assert calls["blend_into"] == planes + (enhanced is not None)
        with numpy_planes():
            assert torch.equal(reduced, Fn.reduce_contrast(images, factor))
            if enhanced is not None:
                assert torch.equal(enhanced, Fn.enhance_contrast(images, factor))
        assert reduced.dtype == images.dtype and reduced.is_contiguous()


@pytest.mark.parametrize("factor", [0.5, 1.3])
def test_compiled_darkness_is_the_tensor_path_bit_for_bit(factor: float) -> None:
    for images in inputs():
        with counted_kernel() as calls:
            darker = Fn.enhance_brightness(images, factor)
        assert calls["scale_into"] == 1
        with numpy_planes():  # no compiled loops: the tensor product and clip
            assert torch.equal(darker, Fn.enhance_brightness(images, factor))
        assert darker.dtype == images.dtype and darker.is_contiguous()
