"""Property checks for corruptions: the same ones this project runs over its own registry.

A user who registers a custom corruption tests it in one line::

    from pytest_segrobust.testing import check_corruption

    def test_my_corruption():
        check_corruption(MyCorruption("my_corruption", Category.NOISE, MY_TABLE))

Each property is a plain function ``(corruption, batch, severity) -> None`` that raises
``AssertionError``; :func:`check_corruption` runs every property that applies under
hypothesis. Requires ``hypothesis`` (the ``test`` extra).

Layer 5 (beside the engine): imports the domain and the layers below.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import torch
from hypothesis import HealthCheck, Phase, given, settings

from pytest_segrobust.core.types import Field, InstanceTarget
from pytest_segrobust.corruptions.base import Corruption, GeometricCorruption, whole_batches
from pytest_segrobust.corruptions.functional import sample_nearest
from pytest_segrobust.randomness.seeding import SampleStreams
from pytest_segrobust.testing.strategies import Batch, batches, make_batch, severities

IGNORE = 255

Property = Callable[[Corruption[Any], Batch, int], None]


class Corrupted(NamedTuple):
    """A corrupted test batch, field by field, and the typed fields it came from."""

    images: torch.Tensor
    masks: torch.Tensor
    instances: list[InstanceTarget]
    fields: dict[str, Field]


def corrupt_batch(corruption: Corruption[Any], batch: Batch, severity: int, **changes: Any) -> Corrupted:
    """Corrupt the batch's typed fields (``changes`` replace its images, masks, seeds, instances)."""
    given = Batch(**{"images": batch.images, "masks": batch.masks, "seeds": batch.seeds, "instances": batch.instances} | changes)
    out = corruption(given.fields(IGNORE), severity, given.seeds)
    return Corrupted(out["image"].data, out["mask"].data, list(out["instances"].targets), out)


def shape_dtype_and_range_are_kept(corruption: Corruption[Any], batch: Batch, severity: int) -> None:
    out = corrupt_batch(corruption, batch, severity)
    assert out.images.shape == batch.images.shape, f"shape {tuple(out.images.shape)} != {tuple(batch.images.shape)}"
    assert out.images.dtype == batch.images.dtype, f"dtype {out.images.dtype} != {batch.images.dtype}"
    assert bool(torch.isfinite(out.images).all()), "non-finite output"
    assert out.images.min() >= 0 and out.images.max() <= 1, "output outside [0, 1]"
    assert out.masks.shape == batch.masks.shape and out.masks.dtype == batch.masks.dtype
    assert set(out.fields) == {"image", "mask", "instances"}, "a field was lost or added"


def severity_zero_is_identity(corruption: Corruption[Any], batch: Batch, severity: int) -> None:
    out = corrupt_batch(corruption, batch, 0)
    assert torch.equal(out.images, batch.images) and torch.equal(out.masks, batch.masks)


def same_seed_gives_bitwise_equal_output(corruption: Corruption[Any], batch: Batch, severity: int) -> None:
    first = corrupt_batch(corruption, batch, severity)
    second = corrupt_batch(corruption, batch, severity, images=batch.images.clone(), masks=batch.masks.clone())
    assert torch.equal(first.images, second.images), "two calls with the same seeds differ"
    assert torch.equal(first.masks, second.masks)


def output_does_not_depend_on_batch_composition(corruption: Corruption[Any], batch: Batch, severity: int) -> None:
    # The batched kernels (what GPUs run; CPUs go image by image) against images corrupted alone.
    with whole_batches():
        whole = corrupt_batch(corruption, batch, severity)
        order = torch.randperm(len(batch.seeds), generator=torch.Generator().manual_seed(batch.seeds[0] % 2**31)).tolist()
        shuffled = corrupt_batch(corruption, _subset(batch, order), severity)
    for position, i in enumerate(order):
        alone = corrupt_batch(corruption, _subset(batch, [i]), severity)
        assert torch.equal(alone.images[0], whole.images[i]), f"sample {i} differs when corrupted alone"
        assert torch.equal(shuffled.images[position], whole.images[i]), f"sample {i} differs at position {position}"
        assert torch.equal(alone.masks[0], whole.masks[i])


def seeds_are_per_sample(corruption: Corruption[Any], batch: Batch, severity: int) -> None:
    out = corrupt_batch(corruption, _subset(batch, [0, 0]), severity, seeds=[1, 2])
    alone = corrupt_batch(corruption, _subset(batch, [0]), severity, seeds=[2])
    assert torch.equal(out.images[1], alone.images[0]), "a sample's output depends on its neighbour's seed"


def photometric_leaves_targets_untouched(corruption: Corruption[Any], batch: Batch, severity: int) -> None:
    fields = batch.fields(IGNORE)
    out = corruption(fields, severity, batch.seeds)
    assert out["mask"] is fields["mask"], "a photometric corruption changed the label maps"
    assert out["instances"] is fields["instances"], "a photometric corruption changed the instances"


def geometric_labels_stay_a_subset_plus_ignore(corruption: Corruption[Any], batch: Batch, severity: int) -> None:
    out = corrupt_batch(corruption, batch, severity)
    for before, after in zip(batch.masks, out.masks):
        new = set(after.unique().tolist()) - set(before.unique().tolist()) - {IGNORE}
        assert not new, f"warped labels contain values {sorted(new)} absent before"


def geometric_instances_move_with_labels_and_boxes_stay_tight(
    corruption: Corruption[Any], batch: Batch, severity: int
) -> None:
    out = corrupt_batch(corruption, batch, severity)
    for warped_labels, before, after in zip(out.masks, batch.instances, out.instances):
        # Instances were the class regions, so each surviving one is its class in the warped map.
        present = warped_labels[(warped_labels != 0) & (warped_labels != IGNORE)].unique()
        assert len(after) == len(present), "an instance vanished from the masks but not from the labels, or back"
        for mask, label, crowd in zip(after.masks, after.labels, after.iscrowd):
            assert torch.equal(mask, warped_labels == label), "instance mask and label map moved differently"
            assert bool(crowd) == (int(label) == 1), "crowd flag lost"
        for mask, (x0, y0, x1, y1) in zip(after.masks, after.boxes.long().tolist()):
            assert mask[y0].any() and mask[y1 - 1].any() and mask[:, x0].any() and mask[:, x1 - 1].any(), "loose box"
            assert not (mask[:y0].any() or mask[y1:].any() or mask[:, :x0].any() or mask[:, x1:].any()), "box too small"
        assert set(after.labels.tolist()) <= set(before.labels.tolist())


def geometric_image_and_labels_move_together(corruption: Corruption[Any], batch: Batch, severity: int) -> None:
    # An image whose pixels are the labels, resampled like the labels, must equal the warped labels.
    assert isinstance(corruption, GeometricCorruption)
    cpu = torch.device("cpu")
    h, w = batch.masks.shape[-2:]
    coords = corruption.sampling_coordinates(corruption.table[severity], SampleStreams(batch.seeds, cpu), h, w, cpu)
    warped = sample_nearest(batch.masks[:, None].expand(-1, 3, -1, -1), coords, fill=0)
    out = corrupt_batch(corruption, batch, severity)
    inside = out.masks != IGNORE
    for channel in range(3):
        assert torch.equal(warped[:, channel][inside], out.masks[inside]), "image and labels moved differently"
    assert bool((warped[:, 0][~inside] == 0).all()), "pixels from outside the frame are not black"


def _subset(batch: Batch, indices: list[int]) -> Batch:
    return Batch(
        batch.images[indices], batch.masks[indices], [batch.seeds[i] for i in indices], [batch.instances[i] for i in indices]
    )


UNIVERSAL: tuple[Property, ...] = (
    shape_dtype_and_range_are_kept,
    severity_zero_is_identity,
    same_seed_gives_bitwise_equal_output,
    output_does_not_depend_on_batch_composition,
    seeds_are_per_sample,
)
PHOTOMETRIC: tuple[Property, ...] = (photometric_leaves_targets_untouched,)
MOVING: tuple[Property, ...] = (
    geometric_labels_stay_a_subset_plus_ignore,
    geometric_instances_move_with_labels_and_boxes_stay_tight,
)
WARPING: tuple[Property, ...] = (geometric_image_and_labels_move_together,)


def properties_for(corruption: Corruption[Any]) -> list[Property]:
    """Every property that applies to ``corruption``."""
    props = list(UNIVERSAL)
    props += MOVING if corruption.geometric else PHOTOMETRIC
    if isinstance(corruption, GeometricCorruption):
        props += WARPING
    return props


def check_property(
    prop: Property, corruption: Corruption[Any], max_examples: int | None = None, *, shrink: bool = True
) -> None:
    """Run one property under hypothesis (the active settings profile, or ``max_examples``).

    ``shrink=False`` reports the first failing example as found instead of searching for the
    smallest one (hypothesis' shrink phase), when only whether it fails matters.
    """
    overrides: dict[str, Any] = {} if max_examples is None else {"max_examples": max_examples}
    if not shrink:
        overrides["phases"] = [phase for phase in Phase if phase not in (Phase.shrink, Phase.explain)]

    @settings(deadline=None, suppress_health_check=[HealthCheck.too_slow], **overrides)
    @given(batch=batches(), severity=severities)
    def run(batch: Batch, severity: int) -> None:
        prop(corruption, batch, severity)

    run()


def check_corruption(corruption: Corruption[Any], max_examples: int | None = None, monotone: bool = False) -> None:
    """Property-check a corruption; raises ``AssertionError`` with hypothesis' falsifying example.

    Args:
        corruption: Any corruption instance (registered or not).
        max_examples: Examples per property (default: the active hypothesis profile).
        monotone: Also check that the distance from clean grows with severity.
    """
    for prop in properties_for(corruption):
        check_property(prop, corruption, max_examples)
    if monotone:
        distance_grows_with_severity(corruption)


def distance_grows_with_severity(corruption: Corruption[Any], images: int = 8, side: int = 64) -> None:
    """Mean absolute distance from the clean images is non-decreasing in severity."""
    batch = make_batch(batch=images, height=side, width=side, classes=4, seed=7)
    distances = [
        float((corruption(batch.images, s, batch.seeds) - batch.images).abs().mean()) for s in range(1, 6)
    ]
    assert distances == sorted(distances), f"{corruption.name}: distance from clean per severity {distances}"
    assert distances[0] > 0, f"{corruption.name}: severity 1 changes nothing"
