"""Per-image statistics of the instance and panoptic metrics against the metrics themselves.

A bootstrap resample is a multiset of images. Its score from the per-image statistics
(``Metric.resampled_scores``) must be the score the metric gives when the resample's images
are written out, each copy an image of its own: for COCO mAP as pycocotools' ``COCOeval``
counts it, for PQ as ``PanopticQuality.compute`` does. Copies get ids right after their
original's, the order COCO concatenates them in. Scores are distinct within an image (the
scene generators draw them so), the one case where writing copies out and weighting differ.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("faster_coco_eval")
pytest.importorskip("pycocotools")

from pytest_segrobust.core.statistics import resample_weights
from pytest_segrobust.core.types import InstanceMasks, SampleIndex
from pytest_segrobust.metrics.base import MetricContext
from pytest_segrobust.metrics.coco_map import MaskAP
from pytest_segrobust.metrics.coco_matches import COLUMNS, resampled_map
from pytest_segrobust.metrics.panoptic_quality import PanopticQuality
from tests.metrics import test_coco_map as coco
from tests.metrics import test_panoptic_quality as panoptic


def crowded_scene(seed: int, image_id: int) -> coco.Scene:
    """An image with 130 detections of two categories (beyond COCO's 100 per image and
    category for one of them), some of them good, and a crowd region."""
    rng = np.random.default_rng(seed)
    height = width = 40
    gt_masks = [coco._random_mask(rng, height, width) for _ in range(6)]
    region = np.zeros((height, width), dtype=bool)
    region[20:, 20:] = True
    gt_labels, crowd = [1, 1, 1, 2, 2, 3, 1], [False] * 6 + [True]
    good = [coco._shifted(rng, mask) for mask in gt_masks]
    junk = [coco._random_mask(rng, height, width) for _ in range(124)]
    labels = gt_labels[:6] + [1] * 110 + [2] * 14
    scores = rng.permutation(130) / 130 + rng.random() / 1000  # distinct, and unlike other images' scores
    return coco.Scene(
        image_id,
        height,
        width,
        coco.InstanceTarget.from_masks(
            torch.from_numpy(np.stack([*gt_masks, region])), torch.tensor(gt_labels), torch.tensor(crowd)
        ),
        coco.InstancePredictions(torch.from_numpy(np.stack(good + junk)), torch.tensor(labels), torch.from_numpy(scores).float()),
    )


def instance_scenes(seed: int) -> list[coco.Scene]:
    """:func:`tests.metrics.test_coco_map.make_scenes` (crowd regions, an image without ground
    truth, one without detections, a category without ground truth) and a crowded image."""
    scenes = coco.make_scenes(seed)
    return [*scenes, crowded_scene(seed, scenes[-1].image_id + 5)]


def mask_ap(scenes: list[coco.Scene]) -> MaskAP:
    """The registered metric fed one scene per batch, numbered by position as the engine does."""
    metric = MaskAP(MetricContext(class_names=("background", "cat", "dog", "car", "kite"), ignore_index=255, categories=tuple(coco.CATEGORIES)))
    for position, scene in enumerate(scenes):
        batch = {
            "instances": InstanceMasks((scene.targets,), scene.height, scene.width),
            "index": SampleIndex(positions=(position,), sample_ids=(str(scene.image_id),)),
        }
        metric.update([scene.predictions], batch)
    return metric


def written_out(scenes: list[coco.Scene], copies: np.ndarray) -> list[coco.Scene]:
    """The multiset as a list of images: ``copies[i]`` of image ``i``, with ids that sort
    next to each other in the images' order."""
    return [
        coco.Scene(1000 * position + copy, scene.height, scene.width, scene.targets, scene.predictions)
        for position, scene in enumerate(scenes)
        for copy in range(int(copies[position]))
    ]


def assert_same_map(ours: float, pycocotools_ap: float) -> None:
    if pycocotools_ap < 0:  # COCO's -1: no category has ground truth to miss
        assert math.isnan(ours)
    else:
        assert ours == pytest.approx(pycocotools_ap, abs=1e-12)


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_every_image_once_gives_the_metric_and_pycocotools(seed: int) -> None:
    scenes = instance_scenes(seed)
    metric = mask_ap(scenes)
    rows = metric.image_statistics()
    assert rows.shape[1] == len(COLUMNS)
    ours = float(MaskAP.resampled_scores(rows, np.ones((1, len(scenes))))[0])
    assert ours == pytest.approx(metric.compute().score, abs=1e-12)
    assert_same_map(ours, coco.oracle(scenes, "segm").ap)


@settings(max_examples=6, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), draw=st.integers(0, 2**32 - 1))
def test_a_resample_gives_pycocotools_on_its_images_written_out(seed: int, draw: int) -> None:
    scenes = instance_scenes(seed)
    rows = mask_ap(scenes).image_statistics()
    weights = resample_weights(len(scenes), 3, draw)
    weights[0] = 0
    weights[0, -1] = 2  # the crowded image twice, nothing else
    resampled = MaskAP.resampled_scores(rows, weights)
    for copies, ours in zip(weights, resampled, strict=True):
        assert_same_map(float(ours), coco.oracle(written_out(scenes, copies), "segm").ap)


def test_a_resample_without_ground_truth_is_nan_and_one_without_detections_zero() -> None:
    scenes = coco.make_scenes(3)  # image 0 has no ground truth, image 1 no detections
    rows = mask_ap(scenes).image_statistics()
    only = np.zeros((2, len(scenes)))
    only[0, 0], only[1, 1] = 3, 2
    without_truth, without_detections = resampled_map(rows, only)
    assert math.isnan(without_truth) and without_detections == 0.0
    # pycocotools cannot load an empty result list; the metric's engine can.
    assert mask_ap(written_out(scenes, only[1])).compute().score == 0.0


def test_rows_that_do_not_fit_the_images_are_refused() -> None:
    rows = mask_ap(coco.make_scenes(4)).image_statistics()
    with pytest.raises(ValueError, match="name image"):
        resampled_map(rows, np.ones((1, 2)))
    with pytest.raises(ValueError, match="columns"):
        resampled_map(rows[:, :4], np.ones((1, 10)))
    broken = rows.copy()
    broken[0, 0] = 0.5
    with pytest.raises(ValueError, match="fractional"):
        resampled_map(broken, np.ones((1, 10)))


def test_many_resamples_are_scored_in_chunks_alike() -> None:
    scenes = instance_scenes(5)
    rows = mask_ap(scenes).image_statistics()
    weights = resample_weights(len(scenes), 40, seed=2)
    together = resampled_map(rows, weights)
    one_by_one = np.concatenate([resampled_map(rows, weights[r : r + 1]) for r in range(40)])
    np.testing.assert_array_equal(together, one_by_one)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), draw=st.integers(0, 2**32 - 1))
def test_pq_of_a_resample_is_compute_on_its_images_written_out(seed: int, draw: int) -> None:
    images = [scene for batch in panoptic.make_scenes(seed) for scene in batch]
    metric = panoptic.evaluate([[scene] for scene in images])
    statistics = metric.image_statistics()
    assert statistics.shape == (len(images), panoptic.K, 4)
    every = float(PanopticQuality.resampled_scores(statistics, np.ones((1, len(images))))[0])
    assert every == pytest.approx(metric.compute().score, abs=1e-12, nan_ok=True)
    weights = resample_weights(len(images), 4, draw)
    for copies, ours in zip(weights, PanopticQuality.resampled_scores(statistics, weights), strict=True):
        chosen = [[scene] for scene, count in zip(images, copies, strict=True) for _ in range(int(count))]
        assert float(ours) == pytest.approx(panoptic.evaluate(chosen).compute().score, abs=1e-12, nan_ok=True)


def test_pq_statistics_survive_the_state_and_a_merge() -> None:
    batches = panoptic.make_scenes(7)
    whole = panoptic.evaluate(batches)
    restored = PanopticQuality(panoptic.CONTEXT)
    restored.load_state_dict(whole.state_dict())
    np.testing.assert_array_equal(restored.image_statistics(), whole.image_statistics())
    first, rest = panoptic.evaluate(batches[:1]), panoptic.evaluate(batches[1:])
    first.merge(rest)
    np.testing.assert_array_equal(first.image_statistics(), whole.image_statistics())


def test_recall_points_reached_is_searchsorted_also_on_the_points_themselves() -> None:
    from pytest_segrobust.metrics.coco_matches import RECALL_THRESHOLDS, recall_points_reached

    fractions = np.array([k / n for n in range(1, 301) for k in range(n + 1)])  # recall is a ratio of counts
    recall = np.concatenate([fractions, RECALL_THRESHOLDS, np.nextafter(RECALL_THRESHOLDS, 0), np.random.default_rng(0).random(10_000)])
    recall = np.clip(recall, 0, 1)
    np.testing.assert_array_equal(recall_points_reached(recall), np.searchsorted(RECALL_THRESHOLDS, recall, side="right"))


def test_ties_in_iou_and_crowd_regions_are_matched_as_pycocotools_matches_them() -> None:
    """Two identical ground truths (equal IoU with every detection: COCO takes the last of the
    best), a crowd region of the same category under them, and detections that fit only the
    crowd region, both, or neither; written out twice as well."""
    height = width = 32
    box = np.zeros((height, width), dtype=bool)
    box[4:20, 4:20] = True
    region = np.zeros_like(box)
    region[:, :] = True
    inside = np.zeros_like(box)
    inside[24:30, 24:30] = True  # only in the crowd region
    near = np.roll(box, 1, axis=1)
    masks = [box, near, near, inside, np.roll(inside, 2, axis=0)]
    scene = coco.Scene(
        1,
        height,
        width,
        coco.InstanceTarget.from_masks(
            torch.from_numpy(np.stack([box, box, region])), torch.tensor([1, 1, 1]), torch.tensor([False, False, True])
        ),
        coco.InstancePredictions(torch.from_numpy(np.stack(masks)), torch.ones(5, dtype=torch.int64), torch.tensor([0.9, 0.8, 0.7, 0.6, 0.5])),
    )
    scenes = [scene, *coco.make_scenes(2)]
    rows = mask_ap(scenes).image_statistics()
    weights = np.ones((2, len(scenes)))
    weights[1, 0] = 2
    for copies, ours in zip(weights, MaskAP.resampled_scores(rows, weights), strict=True):
        assert_same_map(float(ours), coco.oracle(written_out(scenes, copies), "segm").ap)
    first = rows[(rows[:, 0] == 0) & (rows[:, 5] == 0)]
    assert (first[:, 4] > 0).any() and (first[:, 3] > first[:, 4]).any()  # some ignored (crowd), some true positives
