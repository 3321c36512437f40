"""Affine warps that keep rows rows, by numba's row blends: within float rounding of ``grid_sample``.

:func:`~pytest_segrobust.corruptions.functional.sample_affine_bilinear` hands a map
``(x, y) -> (x + b y + e, y + f)`` with a whole ``f`` (shear, a shift along x by any amount)
to :mod:`.rows_kernel` on the CPU, where numba and OpenCV 5 are installed. Compared here
with the torch path (what an accelerator runs) on offsets that are whole, negative, beyond
the frame and of every fraction, with rows moved in and out of the frame and two fills.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

import cv2
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_segrobust.corruptions import REGISTRY
from pytest_segrobust.corruptions import functional as Fn
from pytest_segrobust.corruptions.functional import geometry, opencv
from tests.loaders import KernelSpy, counting_loader

pytest.importorskip("numba")
pytestmark = pytest.mark.skipif(
    not opencv.exact_bilinear(cv2), reason=f"OpenCV {cv2.__version__} warps through grid_sample, not row blends"
)

TOLERANCE = 1e-4
"""Largest |rows - torch| on [0, 1] images: the bound the device-invariance test accepts."""


@contextlib.contextmanager
def counted_row_blends() -> Iterator[list[str]]:
    """The row blends for every image, large or small, counting their calls."""
    kernel = geometry._compiled_rows()
    assert kernel is not None, "numba is installed but the row blends are not loaded"
    calls: list[str] = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(geometry, "_compiled_rows_for", lambda images: KernelSpy(kernel, calls))
        yield calls


def warp(images: torch.Tensor, matrices: torch.Tensor, fill: float, path: str) -> torch.Tensor:
    """``sample_affine_bilinear`` by the row blends (``"rows"``), by ``warpAffine`` or by ``grid_sample`` (``"torch"``)."""
    h, w = images.shape[-2:]
    coords = lambda: Fn.affine_coordinates(matrices, h, w, torch.float32)
    if path == "rows":
        with counted_row_blends() as calls:
            out = Fn.sample_affine_bilinear(images, matrices, coords, fill)
        # Every map keeps rows rows: none goes to warpAffine; whole shifts are copies.
        copies = sum(b == 0.0 and float(e).is_integer() for (_, b, e), _ in matrices.tolist())
        assert len(calls) == len(images) - copies
        return out
    with pytest.MonkeyPatch.context() as patch:
        if path == "torch":
            patch.setattr(opencv, "exact_bilinear", lambda module: False)
        else:
            patch.setattr(geometry, "_compiled_rows_for", lambda images: None)
        return Fn.sample_affine_bilinear(images, matrices, coords, fill)


def row_maps(slopes: list[float], intercepts: list[float], row_shifts: list[int]) -> torch.Tensor:
    return torch.tensor(
        [[[1.0, b, e], [0.0, 1.0, float(f)]] for b, e, f in zip(slopes, intercepts, row_shifts, strict=True)],
        dtype=torch.float64,
    )


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 40),
    st.integers(1, 40),
    st.lists(st.tuples(st.floats(-2.5, 2.5), st.floats(-60.0, 60.0), st.integers(-45, 45)), min_size=1, max_size=3),
    st.sampled_from([0.0, 0.3]),
    st.integers(0, 2**32 - 1),
)
def test_row_blends_are_grid_sample_within_float_rounding(
    height: int, width: int, maps: list[tuple[float, float, int]], fill: float, seed: int
) -> None:
    images = torch.from_numpy(np.random.default_rng(seed).random((len(maps), 3, height, width), dtype=np.float32))
    matrices = row_maps(*(list(column) for column in zip(*maps, strict=True)))  # type: ignore[arg-type]
    rows, expected = warp(images, matrices, fill, "rows"), warp(images, matrices, fill, "torch")
    assert rows.shape == expected.shape
    assert float((rows - expected).abs().max()) <= TOLERANCE


def test_whole_offsets_copy_pixels_and_the_frame_s_outside_reads_the_fill() -> None:
    kernel = geometry._compiled_rows()
    assert kernel is not None
    image = np.random.default_rng(3).random((2, 6, 9), dtype=np.float32)
    out = np.empty_like(image)
    # Row y reads row y - 2, shifted by 3 pixels: a copy where both lie inside, the fill elsewhere.
    kernel.shift_rows_into(image, 0.0, 3.0, -2, np.float32(0.25), out)
    expected = np.full_like(image, 0.25)
    expected[:, 2:, :6] = image[:, :4, 3:]
    assert np.array_equal(out, expected)
    # Offsets beyond the width on either side leave nothing of the image.
    for intercept in (9.0, 9.5, -9.5, -10.0):
        kernel.shift_rows_into(image, 0.0, intercept, 0, np.float32(0.25), out)
        assert np.array_equal(out, np.full_like(image, 0.25))


def test_shear_takes_the_row_blends_and_rotation_and_the_legacy_shear_do_not() -> None:
    images = torch.rand(1, 3, 130, 140, generator=torch.Generator().manual_seed(1))
    with counted_row_blends() as calls:
        sheared = REGISTRY.get("shear", "coco-p")(images, 4, [7])
        assert calls == ["shift_rows_into"]
        REGISTRY.get("shear", "coco-p-legacy-shear")(images, 4, [7])
        REGISTRY.get("rotate", "coco-p")(images, 4, [7])
        assert calls == ["shift_rows_into"]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(opencv, "exact_bilinear", lambda module: False)
        assert float((sheared - REGISTRY.get("shear", "coco-p")(images, 4, [7])).abs().max()) <= TOLERANCE


def test_the_blends_are_loaded_by_the_first_large_image_only(monkeypatch: pytest.MonkeyPatch) -> None:
    loads: list[int] = []
    monkeypatch.setattr(geometry, "_compiled_rows", counting_loader(loads))
    side = int(geometry.COMPILED_ROWS_MIN_PIXELS**0.5)
    assert geometry._compiled_rows_for(torch.zeros(1, 3, side - 1, side)) is None and not loads
    assert geometry._compiled_rows_for(torch.zeros(1, 3, side, side)) == "kernel"
    assert geometry._compiled_rows_for(torch.zeros(1, 3, 2, 2)) == "kernel" and loads == [1]


def test_without_numba_warp_affine_shears(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pytest_segrobust.corruptions.functional.rows_kernel", None)
    assert geometry._compiled_rows.__wrapped__() is None
    images = torch.rand(1, 3, 20, 24, generator=torch.Generator().manual_seed(2))
    matrices = row_maps([0.27], [-2.6], [0])
    assert (
        float((warp(images, matrices, 0.0, "warpAffine") - warp(images, matrices, 0.0, "torch")).abs().max())
        <= TOLERANCE
    )
