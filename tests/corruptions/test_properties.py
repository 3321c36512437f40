"""Properties every registered corruption must have, checked over the whole registry."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from pytest_segrobust.corruptions import REGISTRY, Corruption, GeometricCorruption
from tests.strategies import Batch, _make, batches, severities

# Every registered corruption, plus compositions (one geometric, one photometric).
LABELLED = REGISTRY.labelled() + [
    (name, REGISTRY.get(name)) for name in ("gaussian_noise+rotate", "contrast+jpeg_compression")
]
ALL = [c for _, c in LABELLED]
MOVING = [c for c in ALL if c.geometric]
GEOMETRIC = [c for c in ALL if isinstance(c, GeometricCorruption)]
PHOTOMETRIC = [c for c in ALL if not c.geometric]
IGNORE = 255
_LABELS = {id(c): label for label, c in LABELLED}


def by_name(corruptions: list[Corruption]) -> dict:
    return {"argvalues": corruptions, "ids": [_LABELS[id(c)] for c in corruptions]}


@pytest.mark.parametrize("corruption", **by_name(ALL))
@given(batch=batches(), severity=severities)
def test_shape_dtype_and_range_are_kept(corruption: Corruption, batch: Batch, severity: int) -> None:
    out = corruption(batch.images, severity, batch.seeds, batch.masks, ignore_index=IGNORE)
    assert out.images.shape == batch.images.shape
    assert out.images.dtype == batch.images.dtype
    assert bool(torch.isfinite(out.images).all())
    assert out.images.min() >= 0 and out.images.max() <= 1
    assert out.masks is not None and out.masks.shape == batch.masks.shape and out.masks.dtype == batch.masks.dtype


@pytest.mark.parametrize("corruption", **by_name(ALL))
@given(batch=batches())
def test_severity_zero_is_identity(corruption: Corruption, batch: Batch) -> None:
    out = corruption(batch.images, 0, batch.seeds, batch.masks)
    assert torch.equal(out.images, batch.images)
    assert torch.equal(out.masks, batch.masks)


@pytest.mark.parametrize("corruption", **by_name(ALL))
@given(batch=batches(), severity=severities)
def test_same_seed_gives_bitwise_equal_output(corruption: Corruption, batch: Batch, severity: int) -> None:
    first = corruption(batch.images, severity, batch.seeds, batch.masks)
    second = corruption(batch.images.clone(), severity, list(batch.seeds), batch.masks.clone())
    assert torch.equal(first.images, second.images)
    assert torch.equal(first.masks, second.masks)


@pytest.mark.parametrize("corruption", **by_name(ALL))
@given(batch=batches(max_batch=5), severity=severities, data=st.data())
def test_output_does_not_depend_on_batch_composition(
    corruption: Corruption, batch: Batch, severity: int, data: st.DataObject
) -> None:
    whole = corruption(batch.images, severity, batch.seeds, batch.masks)
    order = data.draw(st.permutations(range(len(batch.seeds))))
    shuffled = corruption(batch.images[order], severity, [batch.seeds[i] for i in order], batch.masks[order])
    for position, i in enumerate(order):
        alone = corruption(batch.images[i : i + 1], severity, [batch.seeds[i]], batch.masks[i : i + 1])
        assert torch.equal(alone.images[0], whole.images[i])
        assert torch.equal(shuffled.images[position], whole.images[i])
        assert torch.equal(alone.masks[0], whole.masks[i])


@pytest.mark.parametrize("corruption", **by_name(ALL))
@given(batch=batches(), severity=severities)
def test_different_seeds_for_different_samples_are_respected(corruption: Corruption, batch: Batch, severity: int) -> None:
    # Feeding the same image twice with different seeds must not crash or mix samples up.
    doubled = torch.cat([batch.images[:1], batch.images[:1]])
    out = corruption(doubled, severity, [1, 2], torch.cat([batch.masks[:1], batch.masks[:1]]))
    alone = corruption(batch.images[:1], severity, [2], batch.masks[:1])
    assert torch.equal(out.images[1], alone.images[0])


@pytest.mark.parametrize("corruption", **by_name(PHOTOMETRIC))
@given(batch=batches(), severity=severities)
def test_photometric_corruptions_leave_targets_untouched(corruption: Corruption, batch: Batch, severity: int) -> None:
    out = corruption(batch.images, severity, batch.seeds, batch.masks, instances=batch.instances)
    assert out.masks is batch.masks
    assert all(after is before for after, before in zip(out.instances, batch.instances))


@pytest.mark.parametrize("corruption", **by_name(MOVING))
@given(batch=batches(), severity=severities)
def test_geometric_instances_move_with_labels_and_boxes_stay_tight(
    corruption: Corruption, batch: Batch, severity: int
) -> None:
    out = corruption(batch.images, severity, batch.seeds, batch.masks, ignore_index=IGNORE, instances=batch.instances)
    for warped_labels, before, after in zip(out.masks, batch.instances, out.instances):
        # Instances were the class regions, so each surviving one is its class in the warped map.
        assert len(after) == len(warped_labels[(warped_labels != 0) & (warped_labels != IGNORE)].unique())
        for mask, label, crowd in zip(after.masks, after.labels, after.iscrowd):
            assert torch.equal(mask, warped_labels == label)
            assert bool(crowd) == (int(label) == 1)
        # Boxes are tight: every edge row/column of the box touches the mask.
        for mask, (x0, y0, x1, y1) in zip(after.masks, after.boxes.long().tolist()):
            assert mask.any()
            assert mask[y0].any() and mask[y1 - 1].any() and mask[:, x0].any() and mask[:, x1 - 1].any()
            assert not mask[:y0].any() and not mask[y1:].any() and not mask[:, :x0].any() and not mask[:, x1:].any()
        assert set(after.labels.tolist()) <= set(before.labels.tolist())


@pytest.mark.parametrize("corruption", **by_name(MOVING))
@given(batch=batches(), severity=severities)
def test_geometric_labels_stay_a_subset_plus_ignore(corruption: Corruption, batch: Batch, severity: int) -> None:
    out = corruption(batch.images, severity, batch.seeds, batch.masks, ignore_index=IGNORE)
    for before, after in zip(batch.masks, out.masks):
        assert set(after.unique().tolist()) <= set(before.unique().tolist()) | {IGNORE}


@pytest.mark.parametrize("corruption", **by_name(GEOMETRIC))
@given(batch=batches(), severity=severities)
def test_geometric_image_and_labels_move_together(corruption: GeometricCorruption, batch: Batch, severity: int) -> None:
    # An image whose pixels are the labels, resampled like the labels, must equal the warped labels.
    from pytest_segrobust.seeding import generators

    params = corruption.table[severity]
    h, w = batch.masks.shape[-2:]
    coords = corruption.sampling_coordinates(params, generators(batch.seeds, torch.device("cpu")), h, w, torch.device("cpu"))
    label_image = batch.masks[:, None].expand(-1, 3, -1, -1)
    warped_image = corruption.warp_images(label_image, coords, mode="nearest")
    out = corruption(batch.images, severity, batch.seeds, batch.masks, ignore_index=IGNORE)
    inside = out.masks != IGNORE
    for channel in range(3):
        assert torch.equal(warped_image[:, channel][inside], out.masks[inside])
    # ...and what entered from outside the frame is black in the image and ignored in the labels.
    assert bool((warped_image[:, 0][~inside] == 0).all())


# Where the definition implies it. Not rotate: the pixel distance of a rotated image need not
# grow with the angle (50 degrees can land closer to the original than 40 on real content).
MONOTONE = ["gaussian_noise", "shot_noise", "defocus_blur", "jpeg_compression", "contrast"]


@pytest.mark.parametrize("name", MONOTONE)
def test_distance_from_clean_grows_with_severity(name: str) -> None:
    corruption = REGISTRY.get(name)
    batch = _make(batch=8, height=64, width=64, classes=4, seed=7)
    distances = []
    for severity in range(1, 6):
        out = corruption(batch.images, severity, batch.seeds)
        distances.append(float((out.images - batch.images).abs().mean()))
    assert distances == sorted(distances), distances
    assert distances[0] > 0
