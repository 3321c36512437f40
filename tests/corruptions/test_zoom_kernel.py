"""Zoom blur's compiled row blends (numba) agree with the torch path (``interpolate``) within 1e-4.

On the CPU, float32 planes of at least ``COMPILED_ZOOM_MIN_PIXELS`` pixels are zoomed by
:mod:`pytest_segrobust.corruptions.functional.zoom_kernel` where numba and OpenCV are
installed; smaller ones, and installs without numba, keep OpenCV 5's ``warpAffine`` or torch.
Each preset runs both ways at every severity on uniform noise (the steepest an image gets)
and on a photo-like image, at sizes where the crops' and zooms' sides are odd and even.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import numpy as np
import pytest
import torch

from pytest_segrobust.corruptions import REGISTRY
from pytest_segrobust.corruptions.functional import blur, opencv

pytest.importorskip("cv2")
pytest.importorskip("numba")

TOLERANCE = 1e-4
"""Largest |compiled - torch| on [0, 1] images: the bound the device-invariance test accepts."""


def uniform_noise(batch: int, height: int, width: int, seed: int = 0) -> torch.Tensor:
    return torch.from_numpy(np.random.default_rng(seed).random((batch, 3, height, width), dtype=np.float32))


def photo_like(height: int, width: int, seed: int = 0) -> torch.Tensor:
    """Shading and hard-edged discs at 8-bit levels, as decoded photos are."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width] / max(height, width)
    image = (
        0.3 + 0.4 * y[None] * np.array([0.6, 0.8, 1.0])[:, None, None] + 0.05 * rng.standard_normal((3, height, width))
    )
    for _ in range(8):
        cy, cx, radius = rng.uniform(0.1, 0.9), rng.uniform(0.1, 0.9), rng.uniform(0.05, 0.25)
        image[:, (y - cy) ** 2 + (x - cx) ** 2 < radius**2] = rng.uniform(0.0, 1.0, (3, 1))
    return torch.from_numpy((np.clip(image, 0, 1) * 255).round() / 255).float()[None]


@contextlib.contextmanager
def counted_blends() -> Iterator[dict[str, int]]:
    """The compiled kernel, counting its calls of ``blend_rows``."""
    kernel = blur._compiled_zoom()
    assert kernel is not None, "numba is installed but the compiled zoom is not loaded"
    calls = {"blend_rows": 0}

    def blend_rows(*args: object) -> None:
        calls["blend_rows"] += 1
        kernel.blend_rows(*args)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(
            blur,
            "_compiled_zoom",
            lambda: type(
                "Spy", (), {"blend_rows": staticmethod(blend_rows), "add_blended_rows": kernel.add_blended_rows}
            ),
        )
        yield calls


@contextlib.contextmanager
def torch_path() -> Iterator[None]:
    """No OpenCV: ``interpolate`` zooms, as on an accelerator."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(opencv, "opencv", lambda: None)
        yield


@pytest.mark.parametrize("preset", ["imagenet-c", "coco-p"])
@pytest.mark.parametrize(("image", "height", "width"), [("noise", 128, 128), ("noise", 131, 200), ("photo", 160, 171)])
def test_compiled_zoom_agrees_with_the_torch_path(preset: str, image: str, height: int, width: int) -> None:
    corruption = REGISTRY.get("zoom_blur", preset)
    images = uniform_noise(2, height, width, seed=height) if image == "noise" else photo_like(height, width)
    worst = 0.0
    for severity in range(1, 6):
        with counted_blends() as calls:
            fast = corruption(images, severity, [5, 2**40 + 7][: len(images)])
        with torch_path():
            slow = corruption(images, severity, [5, 2**40 + 7][: len(images)])
        assert calls["blend_rows"] > 0, "the compiled path was not taken"
        assert fast.shape == slow.shape and fast.dtype == slow.dtype
        worst = max(worst, float((fast - slow).abs().max()))
    assert worst <= TOLERANCE


@pytest.mark.parametrize(
    "factors",
    [
        [1.0, 1.3],
        [1.001],  # crop the whole side (ceil(H / z) = H) but zoom it to H + 1 rows: not a zoom by 1
        [1.02, 1.05, 1.5, 2.0, 3.7],
    ],
)
def test_compiled_zoom_agrees_on_factors_that_reach_the_crops_edges(factors: list[float]) -> None:
    images = uniform_noise(1, 130, 517, seed=3)
    with counted_blends() as calls:
        fast = blur.zoom_blur(images, factors)
    with torch_path():
        slow = blur.zoom_blur(images, factors)
    assert calls["blend_rows"] > 0
    assert float((fast - slow).abs().max()) <= TOLERANCE


def test_an_image_zooms_the_same_alone_and_in_a_batch() -> None:
    images = uniform_noise(3, 140, 150, seed=8)
    factors = [1.0, 1.06, 1.12]
    batched = blur.zoom_blur(images, factors)
    for index in range(len(images)):
        assert torch.equal(blur.zoom_blur(images[index : index + 1], factors), batched[index : index + 1])


def test_small_images_and_installs_without_numba_keep_the_other_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    factors = [1.0, 1.1]
    small = uniform_noise(1, 100, 120)  # below COMPILED_ZOOM_MIN_PIXELS
    with counted_blends() as calls:
        blur.zoom_blur(small, factors)
        assert calls["blend_rows"] == 0
        blur.zoom_blur(uniform_noise(1, 128, 128), factors)
        assert calls["blend_rows"] > 0
    large = uniform_noise(1, 128, 128)
    compiled = blur.zoom_blur(large, factors)
    monkeypatch.setattr(blur, "_compiled_zoom", lambda: None)
    other = blur.zoom_blur(large, factors)
    assert float((compiled - other).abs().max()) <= TOLERANCE


def test_float64_images_never_take_the_compiled_path() -> None:
    images = uniform_noise(1, 128, 128).double()
    with counted_blends() as calls:
        out = blur.zoom_blur(images, [1.0, 1.2])
    assert calls["blend_rows"] == 0 and out.dtype == torch.float64
