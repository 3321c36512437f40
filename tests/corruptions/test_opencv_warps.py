"""The warps on OpenCV >= 5 agree with the torch path (``grid_sample``, ``interpolate``) within 1e-4.

On the CPU, float32 images are warped by OpenCV's ``remap`` and ``warpAffine`` where OpenCV 5
interpolates at the exact coordinates; OpenCV 4.x snaps them to 1/32 pixel, so there the torch
path stays. Each row runs both ways, on uniform noise (the steepest an image gets) and on a
photo-like image (smooth shading, hard edges, 8-bit levels), at every severity; the labels
must come out bit for bit the same either way, since they never leave the torch path.
"""

from __future__ import annotations

import contextlib
import math
import types
from collections.abc import Iterator
from typing import Any
from unittest import mock

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_segrobust.core.types import Image, InstanceMasks, SemanticMask
from pytest_segrobust.corruptions import REGISTRY
from pytest_segrobust.corruptions import functional as Fn
from pytest_segrobust.corruptions.functional import geometry, opencv
from pytest_segrobust.corruptions.geometric import shear_legacy
from pytest_segrobust.testing.strategies import instances_of

cv2 = pytest.importorskip("cv2")

TOLERANCE = 1e-4
"""Largest |OpenCV - torch| on [0, 1] images: the bound the device-invariance test accepts."""

OPENCV_5 = opencv.exact_bilinear(cv2)
needs_opencv_5 = pytest.mark.skipif(not OPENCV_5, reason=f"OpenCV {cv2.__version__} warps through grid_sample")

ROWS = [
    ("rotate", "coco-p"),
    ("shear", "coco-p"),
    ("translate", "coco-p"),
    ("geometric_distortion", "cityscapes-c"),
    ("elastic_transform", "imagenet-c"),
    ("zoom_blur", "imagenet-c"),
    ("zoom_blur", "coco-p"),
]


def corruption_of(name: str, preset: str) -> Any:
    return REGISTRY.get(name, preset)


def uniform_noise(height: int, width: int, seed: int = 0) -> torch.Tensor:
    return torch.from_numpy(np.random.default_rng(seed).random((1, 3, height, width), dtype=np.float32))


def photo_like(height: int, width: int, seed: int = 0) -> torch.Tensor:
    """Shading, texture and hard-edged discs at 8-bit levels, as decoded photos are."""
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
def torch_warps() -> Iterator[None]:
    """The warps as OpenCV 4.x gets them (every other OpenCV kernel stays)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(opencv, "exact_bilinear", lambda module: False)
        yield


@contextlib.contextmanager
def counted_opencv_warps() -> Iterator[dict[str, int]]:
    """The installed OpenCV, counting its ``remap`` and ``warpAffine`` calls, and the whole-pixel
    shifts copied and the maps that keep rows blended row by row instead."""
    calls = {"remap": 0, "warpAffine": 0, "copies": 0, "rows": 0}
    shift_copy, shift_rows = geometry._shift_copy, geometry._shift_rows

    def counted_copy(*args: Any) -> bool:
        copied = shift_copy(*args)
        calls["copies"] += copied
        return copied

    def counted_rows(*args: Any) -> bool:
        blended = shift_rows(*args)
        calls["rows"] += blended
        return blended

    class Spy:
        __version__ = cv2.__version__

        def __getattr__(self, name: str) -> Any:
            if name not in calls:
                return getattr(cv2, name)

            def call(*args: Any, **kwargs: Any) -> Any:
                calls[name] += 1
                return getattr(cv2, name)(*args, **kwargs)

            return call

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(opencv, "opencv", Spy)
        patch.setattr(geometry, "_shift_copy", counted_copy)
        patch.setattr(geometry, "_shift_rows", counted_rows)
        yield calls


# ----------------------------------------------------------------------- the version check


@pytest.mark.parametrize(
    ("version", "exact"),
    [("4.10.0", False), ("4.14.0-pre", False), ("3.4.20", False), ("5.0.0", True), ("5.1.0-dev", True), ("6.0", True)],
)
def test_only_opencv_5_and_later_counts_as_exact_bilinear(version: str, exact: bool) -> None:
    assert opencv.exact_bilinear(types.SimpleNamespace(__version__=version)) is exact


def test_a_module_without_a_readable_version_is_not_exact() -> None:
    assert not opencv.exact_bilinear(types.SimpleNamespace())
    assert not opencv.exact_bilinear(types.SimpleNamespace(__version__="unknown"))


class _OpenCV4:
    """A stand-in for OpenCV 4.x: its warps fail the test; its other kernels (elastic's field smoothing) are the installed ones."""

    __version__ = "4.12.0"

    def __getattr__(self, name: str) -> Any:
        if name in ("remap", "warpAffine", "resize"):
            raise AssertionError(f"OpenCV 4.x was asked for {name}: its bilinear warps snap to 1/32 pixel")
        return getattr(cv2, name)


@pytest.mark.parametrize(("name", "preset"), ROWS)
def test_older_opencv_keeps_the_torch_warps_bit_for_bit(
    monkeypatch: pytest.MonkeyPatch, name: str, preset: str
) -> None:
    corruption = corruption_of(name, preset)
    images = photo_like(40, 52)
    with torch_warps():
        torch_warped = corruption(images, 4, [3])
    if name != "elastic_transform":  # the one row with another OpenCV kernel than a warp
        with monkeypatch.context() as patch:
            patch.setattr(opencv, "opencv", lambda: None)
            assert torch.equal(corruption(images, 4, [3]), torch_warped)
    monkeypatch.setattr(opencv, "opencv", lambda: _OpenCV4())
    assert torch.equal(corruption(images, 4, [3]), torch_warped)


def test_float64_images_keep_the_torch_warps() -> None:
    # OpenCV 5.0 still snaps the coordinates of float64 planes to 1/32 pixel.
    images = uniform_noise(24, 30).double()
    with counted_opencv_warps() as calls:
        REGISTRY.get("rotate", "coco-p")(images, 3, [1])
        REGISTRY.get("zoom_blur", "imagenet-c")(images, 3, [1])
        REGISTRY.get("geometric_distortion", "cityscapes-c")(images, 3, [1])
        REGISTRY.get("translate", "coco-p")(images, 3, [1])
    assert calls == {"remap": 0, "warpAffine": 0, "copies": 0, "rows": 0}


@needs_opencv_5
def test_float64_planes_are_still_snapped_by_opencv() -> None:
    # Why float64 stays on torch: 0.3 of the way between 0 and 1 reads 0.3125 (10/32).
    ramp = np.array([[0.0, 1.0]], dtype=np.float64)
    grid = np.array([[[0.3, 0.0]]], dtype=np.float32)
    assert float(cv2.remap(ramp, grid, None, cv2.INTER_LINEAR)[0, 0]) == 0.3125
    assert float(cv2.remap(ramp.astype(np.float32), grid, None, cv2.INTER_LINEAR)[0, 0]) == pytest.approx(0.3, abs=1e-7)


# ----------------------------------------------------------------------- the rows, both ways


@needs_opencv_5
@pytest.mark.parametrize(("name", "preset"), ROWS)
@pytest.mark.parametrize("image", ["noise", "photo"])
def test_opencv_warps_agree_with_the_torch_path(name: str, preset: str, image: str) -> None:
    corruption = corruption_of(name, preset)
    make = uniform_noise if image == "noise" else photo_like
    images = torch.cat([make(96, 128, seed=1), make(96, 128, seed=2)])
    worst = 0.0
    for severity in range(1, 6):
        with counted_opencv_warps() as calls:
            fast = corruption(images, severity, [5, 2**40 + 7])
        with torch_warps():
            slow = corruption(images, severity, [5, 2**40 + 7])
        assert sum(calls.values()) > 0, "the OpenCV path was not taken"
        assert calls["copies"] == (2 if name == "translate" else 0)  # both images of every translate
        assert fast.shape == slow.shape and fast.dtype == slow.dtype
        worst = max(worst, float((fast - slow).abs().max()))
    # Never the same bits, translate's whole-pixel shifts too: grid_sample rounds each
    # coordinate through its normalised form, OpenCV reads it as it is.
    assert 0.0 < worst <= TOLERANCE


@needs_opencv_5
@pytest.mark.parametrize(("height", "width"), [(1, 1), (1, 9), (7, 1), (5, 6), (37, 50)])
@pytest.mark.parametrize(("name", "preset"), ROWS)
def test_opencv_warps_agree_on_small_and_odd_sizes(height: int, width: int, name: str, preset: str) -> None:
    corruption = corruption_of(name, preset)
    images = uniform_noise(height, width, seed=height * width)
    for severity in (1, 5):
        fast = corruption(images, severity, [11])
        with torch_warps():
            slow = corruption(images, severity, [11])
        assert float((fast - slow).abs().max()) <= TOLERANCE


@needs_opencv_5
def test_legacy_shear_agrees_too() -> None:
    images = uniform_noise(64, 80)
    for severity in range(1, 6):
        fast = shear_legacy(images, severity, [9])
        with torch_warps():
            slow = shear_legacy(images, severity, [9])
        assert 0.0 < float((fast - slow).abs().max()) <= TOLERANCE


@needs_opencv_5
@pytest.mark.parametrize(("name", "preset"), [row for row in ROWS if row[0] != "zoom_blur"])
def test_labels_and_instances_move_bit_for_bit_as_before(name: str, preset: str) -> None:
    corruption = corruption_of(name, preset)
    images = photo_like(48, 64)
    masks = (images[:, 0] * 4).long().clamp_(max=3)
    batch = {
        "image": Image(images),
        "mask": SemanticMask(masks),
        "instances": InstanceMasks((instances_of(masks[0]),), 48, 64),
    }
    for severity in (1, 3, 5):
        fast = corruption(batch, severity, [4])
        with torch_warps():
            slow = corruption(batch, severity, [4])
        assert torch.equal(fast["mask"].data, slow["mask"].data)
        for moved, before in zip(fast["instances"].targets, slow["instances"].targets):
            assert torch.equal(moved.masks, before.masks) and torch.equal(moved.boxes, before.boxes)
        assert float((fast["image"].data - slow["image"].data).abs().max()) <= TOLERANCE


# ----------------------------------------------------------------------- conventions


@needs_opencv_5
@pytest.mark.parametrize("fill", [0.0, 0.3])
def test_remap_reads_the_border_as_grid_sample_does(fill: float) -> None:
    # Coordinates on, just inside and beyond every edge, and half a pixel out, where one of
    # the four neighbours reads the fill: grid_sample's zero padding, shifted by the fill.
    images = uniform_noise(9, 11)
    h, w = images.shape[-2:]
    xs = torch.tensor(
        [-2.0, -1.0, -0.999, -0.5, -0.25, 0.0, 0.3, 5.5, w - 1.0, w - 0.75, w - 0.5, w - 0.001, w, w + 1.0]
    )
    ys = torch.tensor([-1.5, -1.0, -0.5, 0.0, 0.75, 4.0, h - 1.0, h - 0.5, h - 0.01, h + 0.5])
    coords = torch.stack(torch.meshgrid(xs, ys, indexing="xy"), dim=-1)[None].float()
    fast = Fn.sample_bilinear(images, coords, fill)
    with torch_warps():
        slow = Fn.sample_bilinear(images, coords, fill)
    assert float((fast - slow).abs().max()) <= 1e-6
    # Far outside reads the fill; a pixel centre reads that pixel.
    assert torch.allclose(fast[..., 0, 0], torch.full((1, 3), fill))
    assert torch.allclose(fast[..., 3, 5], images[..., 0, 0])


@needs_opencv_5
@pytest.mark.parametrize("channels", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("fill", [0.0, 0.3])
def test_remap_gives_each_channel_what_it_gives_the_plane_alone(channels: int, fill: float) -> None:
    # Three or four channels are remapped interleaved, in one call: the same bits as plane by plane.
    rng = np.random.default_rng(channels)
    images = torch.from_numpy(rng.random((2, channels, 23, 31), dtype=np.float32))
    coords = torch.from_numpy(rng.uniform(-3.0, 34.0, (2, 19, 27, 2)).astype(np.float32))
    together = Fn.sample_bilinear(images, coords, fill)
    alone = torch.cat([Fn.sample_bilinear(images[:, c : c + 1], coords, fill) for c in range(channels)], dim=1)
    assert together.shape == (2, channels, 19, 27) and torch.equal(together, alone)


@needs_opencv_5
def test_warp_affine_puts_pixel_centres_at_integers() -> None:
    # A half-pixel shift averages neighbours, whichever path: no edge-aligned convention.
    images = uniform_noise(16, 20)
    shift = torch.tensor([[[1.0, 0.0, 0.5], [0.0, 1.0, 0.0]]], dtype=torch.float64)
    coords = Fn.affine_coordinates(shift, 16, 20, torch.float32)
    fast = Fn.sample_affine_bilinear(images, shift, lambda: coords)
    expected = (images[..., :-1] + images[..., 1:]) / 2
    assert float((fast[..., :-1] - expected).abs().max()) <= 1e-6
    assert float((fast[..., -1] - images[..., -1] / 2).abs().max()) <= 1e-6  # the right neighbour is outside


@needs_opencv_5
def test_zoom_blur_scales_with_aligned_corners() -> None:
    # One zoom, F.interpolate(align_corners=True) of the centre crop, trimmed to the frame.
    images = uniform_noise(30, 41)
    factor = 1.37
    crop_h, crop_w = math.ceil(30 / factor), math.ceil(41 / factor)
    top, left = (30 - crop_h) // 2, (41 - crop_w) // 2
    size = (round(crop_h * factor), round(crop_w * factor))
    crop = images[..., top : top + crop_h, left : left + crop_w]
    zoomed = F.interpolate(crop, size=size, mode="bilinear", align_corners=True)[..., :30, :41]
    expected = ((images + zoomed) / 2).clamp(0, 1)
    assert float((Fn.zoom_blur(images, [factor]) - expected).abs().max()) <= 1e-6


@needs_opencv_5
@settings(max_examples=60, deadline=None)
@given(
    st.integers(-25, 25),
    st.integers(-25, 25),
    st.sampled_from([0.0, 0.5, 1.0]),
    st.sampled_from([(1, 1, 1), (2, 3, 17), (1, 1, 20), (2, 1, 13)]),
)
def test_whole_pixel_shifts_are_copies_with_warp_affines_values(
    dx: int, dy: int, fill: float, shape: tuple[int, int, int]
) -> None:
    # Shifts beyond the frame included: the image is then all fill.
    channels, height, width = shape
    images = uniform_noise(height, width)[:, :1].expand(2, channels, -1, -1).contiguous()
    images[1] = images[1].flip(-1)
    matrices = torch.tensor([[[1.0, 0.0, dx], [0.0, 1.0, dy]], [[1.0, 0.0, -dy], [0.0, 1.0, dx]]], dtype=torch.float64)
    coords = Fn.affine_coordinates(matrices, height, width, torch.float32)
    copied = Fn.sample_affine_bilinear(images, matrices, lambda: coords, fill)
    with mock.patch.object(geometry, "_shift_copy", lambda *args: False):
        warped = Fn.sample_affine_bilinear(images, matrices, lambda: coords, fill)
    assert torch.equal(copied, warped)


@needs_opencv_5
def test_only_whole_pixel_shifts_are_copied() -> None:
    image, out = np.zeros((1, 4, 4), np.float32), np.zeros((1, 4, 4), np.float32)
    for matrix in (
        [[1.0, 0.0, 0.5], [0.0, 1.0, 0.0]],
        [[1.0, 1e-9, 1.0], [0.0, 1.0, 0.0]],
        [[-1.0, 0.0, 3.0], [0.0, 1.0, 0.0]],
    ):
        assert not geometry._shift_copy(image, np.array(matrix), 0.0, out)
    assert geometry._shift_copy(image, np.array([[1.0, 0.0, -2.0], [0.0, 1.0, 7.0]]), 0.0, out)
