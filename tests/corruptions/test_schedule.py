"""CPU batches are corrupted image by image: bit for bit what the whole-batch kernels give."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
import torch

from pytest_segrobust.core.types import (
    Expressions,
    Field,
    PanopticMap,
    PanopticTarget,
    ReferringMask,
    SampleIndex,
)
from pytest_segrobust.corruptions import REGISTRY, Corruption, kernels
from pytest_segrobust.corruptions.base import whole_batches
from pytest_segrobust.testing.strategies import make_batch
from pytest_segrobust.text.cells import resolve_cell
from pytest_segrobust.text.registry import TEXT_PERTURBATIONS

PRESETS = ("coco-p", "imagenet-c", "cityscapes-c")


def every_field(batch_size: int = 3, seed: int = 7) -> tuple[dict[str, Field], list[int]]:
    """A batch with a field of every built-in type (40x48 images) and its seeds."""
    made = make_batch(batch_size, 40, 48, classes=4, seed=seed)
    fields = made.fields()
    panoptic = []
    for mask in made.masks:
        ids = mask.unique()
        panoptic.append(PanopticTarget(mask + 1, ids + 1, ids, ids == 1))
    fields |= {
        "panoptic": PanopticMap(tuple(panoptic)),
        "referring_mask": ReferringMask(made.masks == 2),
        "expression": Expressions(tuple(f"the region number {i} left of the square" for i in range(batch_size))),
        "index": SampleIndex(tuple(range(batch_size)), tuple(f"scene/{i}" for i in range(batch_size))),
    }
    return fields, made.seeds


def same(a: Any, b: Any) -> bool:
    """Equal bit for bit, through fields, targets, tuples and tensors (dtype and shape included)."""
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    if dataclasses.is_dataclass(a):
        return type(a) is type(b) and all(same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return bool(a == b)


def cells() -> list[tuple[str, Corruption[Any]]]:
    found: dict[str, Corruption[Any]] = {}
    for preset in PRESETS:
        for corruption in REGISTRY.available(preset):
            found.setdefault(f"{preset}:{corruption.name}", corruption)
    found["coco-p:gaussian_noise+rotate"] = REGISTRY.get("gaussian_noise+rotate")
    for name in ("misspelling", "zoom_blur+misspelling", "shear+character_missing"):
        found[f"text:{name}"] = resolve_cell(name, registry=REGISTRY, preset="coco-p", text=TEXT_PERTURBATIONS, seed=3)
    return sorted(found.items())


@pytest.mark.parametrize(("label", "corruption"), cells(), ids=[label for label, _ in cells()])
def test_image_by_image_equals_the_whole_batch(label: str, corruption: Corruption[Any]) -> None:
    fields, seeds = every_field()
    for severity in (1, 5):
        by_image = corruption(fields, severity, seeds)
        with whole_batches():
            whole = corruption(fields, severity, seeds)
        assert by_image.keys() == whole.keys()
        for name in whole:
            assert same(by_image[name], whole[name]), f"{label}[{severity}]: field {name} differs"


def test_whole_batches_is_undone_on_the_way_out() -> None:
    assert Corruption.image_by_image_on_cpu
    with pytest.raises(RuntimeError), whole_batches():
        assert not Corruption.image_by_image_on_cpu
        raise RuntimeError
    assert Corruption.image_by_image_on_cpu


def test_take_and_join_invert_each_other() -> None:
    fields, _ = every_field(batch_size=4)
    for name, field in fields.items():
        parts = [field.take(range(1)), field.take([2, 1]), field.take(range(3, 4))]
        assert parts[1].batch_size() == 2
        joined = type(field).join(parts)
        reordered = field.take([0, 2, 1, 3])
        assert same(joined, reordered), name


def test_a_field_that_cannot_be_cut_is_moved_with_its_whole_batch() -> None:
    class Opaque(Field):  # not a dataclass: no per-sample structure to cut
        def batch_size(self) -> int:
            return 2

        def size(self) -> None:
            return None

    kernels.warp.register(Opaque)(lambda field, coords: field)
    fields, seeds = every_field(batch_size=2)
    rotate = REGISTRY.get("rotate")
    out = rotate({**fields, "opaque": Opaque()}, 3, seeds)
    assert isinstance(out["opaque"], Opaque)
    with whole_batches():
        assert same(out["image"], rotate(fields, 3, seeds)["image"])
