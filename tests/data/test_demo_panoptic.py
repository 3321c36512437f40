"""The demo scenes as a panoptic dataset, and the demo model as a panoptic model."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import Any

import pytest
import torch

from pytest_segrobust.core.types import VOID, PanopticTarget
from pytest_segrobust.data.base import Sample
from pytest_segrobust.data.demo import BACKGROUND, STUFF_CLASSES, DemoScenes, demo_dataset
from pytest_segrobust.metrics.base import MetricContext, MetricResult
from pytest_segrobust.metrics.panoptic_quality import PanopticQuality, thing_classes
from pytest_segrobust.models import adapt_model
from pytest_segrobust.models.base import PanopticPredictions
from pytest_segrobust.models.demo import tiny_unet_panoptic
from pytest_segrobust.tasks import get_task

CPU = torch.device("cpu")
SPLITS = ["val", "ood-easy", "ood-hard", "train"]


def panoptic_of(sample: Sample) -> PanopticTarget:
    assert sample.panoptic is not None
    return sample.panoptic


def label_map(target: PanopticTarget) -> torch.Tensor:
    """Each pixel's segment label (-1 on void), through the segment list."""
    order = torch.argsort(target.ids)
    sorted_ids = target.ids[order]
    position = torch.searchsorted(sorted_ids, target.segments).clamp(max=len(sorted_ids) - 1)
    assert bool(((sorted_ids[position] == target.segments) | (target.segments == VOID)).all()), "unlisted id"
    return torch.where(target.segments == VOID, -1, target.labels[order][position])


@pytest.mark.parametrize("split", SPLITS)
def test_segments_paint_the_semantic_mask(split: str) -> None:
    for sample in DemoScenes(split, size=6):
        target = panoptic_of(sample)
        assert target.segments.dtype == torch.int64 and target.segments.shape == sample.image.shape[1:]
        assert target.ids.dtype == target.labels.dtype == torch.int64 and target.iscrowd.dtype == torch.bool
        assert len(target.ids) == len(target.labels) == len(target.iscrowd) == len(target.ids.unique())
        assert int(target.ids.min()) > VOID and not target.iscrowd.any()
        assert not bool((target.segments == VOID).any())  # the demo annotates every pixel
        assert set(target.segments.unique().tolist()) == set(target.ids.tolist())  # every listed segment shows
        assert torch.equal(label_map(target), sample.target.mask)


@pytest.mark.parametrize("split", ["val", "ood-hard"])
def test_things_are_the_instances_and_the_background_is_one_stuff_segment(split: str) -> None:
    for sample in DemoScenes(split, size=6):
        target, instances = panoptic_of(sample), sample.instances
        assert instances is not None
        things = target.labels != BACKGROUND
        thing_masks = target.segments[None] == target.ids[things][:, None, None]
        assert torch.equal(thing_masks, instances.masks)  # same objects, same (drawing) order
        assert torch.equal(target.labels[things], instances.labels)
        assert target.labels[~things].tolist() == [BACKGROUND]  # the demo scenes always show some background
        background_id = int(target.ids[~things][0])
        assert torch.equal(target.segments == background_id, sample.target.mask == BACKGROUND)


def test_panoptic_targets_are_deterministic() -> None:
    def digest(dataset: DemoScenes) -> str:
        hashed = hashlib.sha256()
        for sample in dataset:
            target = panoptic_of(sample)
            for tensor in (target.segments, target.ids, target.labels, target.iscrowd):
                hashed.update(tensor.numpy().tobytes())
        return hashed.hexdigest()

    assert digest(DemoScenes("val", size=4)) == digest(DemoScenes("val", size=4))
    assert digest(DemoScenes("val", size=4)) != digest(DemoScenes("ood-easy", size=4))
    # Samples do not share buffers: editing one leaves the next draw intact.
    first = panoptic_of(DemoScenes("val")[0])
    first.segments.zero_()
    assert bool((panoptic_of(DemoScenes("val")[0]).segments > 0).all())


def test_categories_make_the_background_the_only_stuff_class() -> None:
    val = demo_dataset("val")
    assert all(category["isthing"] == 1 for category in val.categories)
    is_thing = thing_classes(MetricContext.of(val, CPU))
    assert tuple(not thing for thing in is_thing) == tuple(c in STUFF_CLASSES for c in range(len(val.class_names)))
    assert is_thing == (False, True, True, True, True)


Predict = Callable[[torch.Tensor, Sequence[Sample]], Any]


def panoptic_quality(dataset: DemoScenes, predict: Predict, batch_size: int = 4) -> MetricResult:
    """PQ of ``predict`` (images, their samples -> predictions) over ``dataset``, batched as the task batches."""
    task = get_task("panoptic")
    metric = PanopticQuality(MetricContext.of(dataset, CPU))
    for start in range(0, len(dataset), batch_size):
        positions = list(range(start, min(start + batch_size, len(dataset))))
        samples = [dataset[position] for position in positions]
        batch = task.collate(samples, positions, dataset, CPU)
        predictions = task.check_predictions(predict(batch["image"].data, samples), batch)
        metric.update(predictions, batch)
    return metric.compute()


def test_ground_truth_as_prediction_scores_pq_100() -> None:
    def truth(images: torch.Tensor, samples: Sequence[Sample]) -> list[PanopticPredictions]:
        # Other ids than the ground truth's: matching goes by pixels, never by id.
        return [
            PanopticPredictions(panoptic_of(s).segments * 7 + 3, panoptic_of(s).ids * 7 + 3, panoptic_of(s).labels)
            for s in samples
        ]

    result = panoptic_quality(DemoScenes("val", size=6), truth)
    assert result.score == pytest.approx(100.0)
    assert result.per_class == pytest.approx((100.0,) * 5)  # six scenes show every class
    assert {k: result.details[k] for k in ("sq", "rq", "pq_things", "pq_stuff")} == pytest.approx(
        {"sq": 100.0, "rq": 100.0, "pq_things": 100.0, "pq_stuff": 100.0}
    )


def test_the_demo_panoptic_model_passes_the_task_and_finds_the_objects() -> None:
    task = get_task("panoptic")
    assert not task.accepts_model(tiny_unet_panoptic())  # a bare module: the task's adapter wraps it
    model = adapt_model(tiny_unet_panoptic(), task)
    assert task.accepts_model(model)
    assert model.fingerprint() != adapt_model(tiny_unet_panoptic(min_area=8), task).fingerprint()

    result = panoptic_quality(DemoScenes("val", size=8), lambda images, samples: model.predict(images))
    # The whole val split scores PQ 76.7 (things 71.3, stuff 98.1); eight scenes land near it.
    assert 50 < result.score < 100
    assert result.details["pq_stuff"] > 90 and 40 < result.details["pq_things"] < 100
