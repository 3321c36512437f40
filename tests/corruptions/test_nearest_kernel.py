"""Nearest-neighbour resampling's compiled loops (numba) give the tensor path's labels bit for bit.

Label maps, panoptic segment maps and instance masks are moved by
:func:`~pytest_segrobust.corruptions.functional.sample_nearest`; on the CPU, where numba is
installed, by :mod:`.nearest_kernel`. Compared here on coordinates that round on a tie, lie
just inside or outside the frame, are huge, infinite or not a number, in float32 and
float64, for every label type and layout the kernels hand it.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_segrobust.core.types import Image, InstanceMasks, InstanceTarget, SemanticMask
from pytest_segrobust.corruptions import REGISTRY
from pytest_segrobust.corruptions import functional as Fn
from pytest_segrobust.corruptions.functional import geometry
from tests.loaders import KernelSpy, counting_loader

pytest.importorskip("numba")


@contextlib.contextmanager
def tensor_path() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(geometry, "_compiled_nearest_for", lambda labels, coords: None)
        yield


@contextlib.contextmanager
def counted_kernel() -> Iterator[list[str]]:
    kernel = geometry._compiled_nearest()
    assert kernel is not None, "numba is installed but the nearest-neighbour loops are not loaded"
    calls: list[str] = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(geometry, "_compiled_nearest_for", lambda labels, coords: KernelSpy(kernel, calls))
        yield calls


# Coordinates around every rounding boundary of a 7 x 9 frame, and values no rounding survives.
EDGES = [-1.5, -0.5000001, -0.5, -0.4999999, 0.0, 0.5, 1.5, 2.4999998, 6.4999995, 6.5, 8.4999995, 8.5, 9.0]
# One float32 ulp below k + 0.5: c + 0.5 rounds (a tie, to even) up to k + 1 in float32, not in float64.
EDGES += [float(np.nextafter(np.float32(k + 0.5), np.float32(-100))) for k in (-1, 0, 2, 5, 6, 8)]
SPECIAL = [float("nan"), float("inf"), -float("inf"), 1e30, -1e30, 2.0**63, -(2.0**63)]
COORDINATE = st.one_of(st.sampled_from(EDGES + SPECIAL), st.floats(-3.0, 12.0, width=32))
LABEL_TYPES = [torch.int64, torch.int32, torch.uint8, torch.bool]


@settings(max_examples=80, deadline=None)
@given(
    st.lists(COORDINATE, min_size=2 * 3 * 4, max_size=2 * 3 * 4),
    st.sampled_from([torch.float32, torch.float64]),
    st.sampled_from(LABEL_TYPES),
    st.sampled_from(["map", "layers", "expanded", "transposed"]),
)
def test_compiled_resampling_is_the_tensor_path_bit_for_bit(
    values: list[float], coords_dtype: torch.dtype, label_type: torch.dtype, layout: str
) -> None:
    coords = torch.tensor(values, dtype=torch.float64).to(coords_dtype).view(2, 3, 4, 1).expand(-1, -1, -1, 2).clone()
    coords[..., 1] = coords[..., 1].flip(-1) * 0.7  # y: other values than x, inside the 7 rows more often
    generator = torch.Generator().manual_seed(len(values))
    labels = torch.randint(0, 200, (2, 3, 7, 9), generator=generator).to(label_type)
    labels = {
        "map": labels[:, 0],
        "layers": labels,
        "expanded": labels[:, :1].expand(-1, 4, -1, -1),
        "transposed": labels.transpose(-1, -2).contiguous().transpose(-1, -2),
    }[layout]
    fill = 1 if label_type == torch.bool else 255
    with counted_kernel() as calls:
        compiled = Fn.sample_nearest(labels, coords, fill)
    assert calls == ["source_pixels", "gather_into"]
    with tensor_path():
        expected = Fn.sample_nearest(labels, coords, fill)
    assert compiled.dtype == expected.dtype and compiled.shape == expected.shape
    assert torch.equal(compiled, expected)


def test_a_fill_the_labels_cannot_hold_is_refused_as_on_the_tensor_path() -> None:
    labels, coords = torch.zeros(1, 4, 4, dtype=torch.uint8), torch.full((1, 4, 4, 2), -5.0)
    with tensor_path(), pytest.raises(RuntimeError, match="overflow"):
        Fn.sample_nearest(labels, coords, 300)
    with counted_kernel(), pytest.raises(RuntimeError, match="overflow"):
        Fn.sample_nearest(labels, coords, 300)


def test_the_loops_are_loaded_by_the_first_large_resampling_only(monkeypatch: pytest.MonkeyPatch) -> None:
    loads: list[int] = []
    monkeypatch.setattr(geometry, "_compiled_nearest", counting_loader(loads))
    side = int(geometry.COMPILED_NEAREST_MIN_PIXELS**0.5)
    labels = torch.zeros(1, 4, 4, dtype=torch.int64)
    assert geometry._compiled_nearest_for(labels, torch.zeros(1, side - 1, side, 2)) is None and not loads
    assert geometry._compiled_nearest_for(labels, torch.zeros(1, side, side, 2)) == "kernel"
    assert geometry._compiled_nearest_for(labels, torch.zeros(1, 2, 2, 2)) == "kernel" and loads == [1]
    assert geometry._compiled_nearest_for(labels.float(), torch.zeros(1, 2, 2, 2)) is None  # not labels
    assert geometry._compiled_nearest_for(labels, torch.zeros(1, 2, 2, 2, dtype=torch.float16)) is None


def test_without_numba_the_tensor_path_moves_the_labels(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pytest_segrobust.corruptions.functional.nearest_kernel", None)
    assert geometry._compiled_nearest.__wrapped__() is None


@pytest.mark.parametrize(("name", "preset"), [("rotate", "coco-p"), ("elastic_transform", "imagenet-c")])
def test_geometric_corruptions_move_labels_and_instances_alike_on_both_paths(name: str, preset: str) -> None:
    corruption = REGISTRY.get(name, preset)
    generator = torch.Generator().manual_seed(3)
    side = int(geometry.COMPILED_NEAREST_MIN_PIXELS**0.5)
    masks = torch.zeros(3, side, side, dtype=torch.bool)
    masks[0, 10:60, 20:90], masks[1, 70:, :40], masks[2, 5:9, 5:9] = True, True, True
    target = InstanceTarget.from_masks(masks, torch.tensor([1, 2, 3]))

    def batch() -> dict[str, object]:
        return {
            "image": Image(torch.rand(1, 3, side, side, generator=torch.Generator().manual_seed(1))),
            "labels": SemanticMask(torch.randint(0, 19, (1, side, side), generator=generator), 255),
            "instances": InstanceMasks((target,), side, side),
        }

    fields = batch()
    with counted_kernel() as calls:
        compiled = corruption(fields, 3, [7])
    assert calls.count("gather_into") == 2  # the label map, then the instance masks
    with tensor_path():
        expected = corruption(fields, 3, [7])
    assert torch.equal(compiled["labels"].data, expected["labels"].data)
    assert (compiled["labels"].data == 255).any() if name == "rotate" else True  # corners left the frame
    ours, theirs = compiled["instances"].targets[0], expected["instances"].targets[0]
    assert torch.equal(ours.masks, theirs.masks) and torch.equal(ours.labels, theirs.labels)
    assert np.array_equal(ours.boxes.numpy(), theirs.boxes.numpy())
