from __future__ import annotations

import pytest
import torch

from pytest_segrobust.core.errors import UnknownCorruptionError
from pytest_segrobust.corruptions import REGISTRY
from pytest_segrobust.corruptions.composition import Stage, part_seed, stage_of
from pytest_segrobust.testing.strategies import make_batch


def test_parts_run_in_stage_order_whatever_the_written_order() -> None:
    chain = REGISTRY.get("jpeg_compression+rotate")
    assert chain.name == "rotate+jpeg_compression"
    assert [stage_of(p) for p in chain.parts] == [Stage.SOURCE, Stage.TRANSMISSION]
    assert chain.geometric


def test_stages_follow_r2bench() -> None:
    assert stage_of(REGISTRY.get("gaussian_noise")) is Stage.SENSOR
    assert stage_of(REGISTRY.get("defocus_blur")) is Stage.SENSOR
    assert stage_of(REGISTRY.get("jpeg_compression")) is Stage.TRANSMISSION
    assert stage_of(REGISTRY.get("rotate")) is Stage.SOURCE


def test_composition_equals_its_parts_applied_in_order() -> None:
    batch = make_batch(3, 24, 20, 3, seed=4)
    chain = REGISTRY.get("gaussian_noise+rotate")
    out = chain(batch.fields(), 4, batch.seeds)
    rotate, noise = REGISTRY.get("rotate"), REGISTRY.get("gaussian_noise")
    step = rotate(batch.fields(), 4, [part_seed(s, "rotate") for s in batch.seeds])
    step = noise(step, 4, [part_seed(s, "gaussian_noise") for s in batch.seeds])
    assert out.keys() == step.keys()
    assert torch.equal(out["image"].data, step["image"].data) and torch.equal(out["mask"].data, step["mask"].data)
    for warped, expected in zip(out["instances"].targets, step["instances"].targets):
        assert torch.equal(warped.masks, expected.masks) and torch.equal(warped.boxes, expected.boxes)


def test_parts_draw_independent_randomness() -> None:
    assert part_seed(5, "rotate") != part_seed(5, "gaussian_noise")


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("rotate+rotate", "cannot repeat a corruption"),
        ("rotate+contrast+jpeg_compression", "chains exactly 2 corruptions, got 3"),
        ("rotate+fogg", "unknown corruption 'fogg'"),
    ],
)
def test_invalid_compositions_are_named(name: str, message: str) -> None:
    with pytest.raises(UnknownCorruptionError, match=message):
        REGISTRY.get(name)
