"""CocoMAP against pycocotools' COCOeval, the reference implementation of COCO mAP.

Scenes are generated: random boxes and ellipses on a few images, with crowd regions,
an image without ground truth, an image without detections, a category without ground
truth, duplicate and mislabelled detections. The oracle gets COCO dicts built here,
independently of CocoMAP's own conversion.
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
import torch

pytest.importorskip("faster_coco_eval")
mask_utils = pytest.importorskip("pycocotools.mask")
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval

from pytest_segrobust.core.errors import DatasetError, ModelOutputError
from pytest_segrobust.data.base import InstanceTarget
from pytest_segrobust.metrics.coco_map import CocoMAP, InstancePredictions, MAPResult

# Ids are not contiguous and not in order, as in COCO; label k is the k-th id in order.
CATEGORIES: list[dict[str, Any]] = [
    {"id": 7, "name": "car", "supercategory": "vehicle"},
    {"id": 1, "name": "cat", "supercategory": "animal"},
    {"id": 3, "name": "dog", "supercategory": "animal"},
    {"id": 12, "name": "kite", "supercategory": "sports"},  # never in the ground truth
]
CATEGORY_ID_OF_LABEL = [0, 1, 3, 7, 12]
NAME_OF_CATEGORY_ID = {category["id"]: category["name"] for category in CATEGORIES}
LABELS_WITH_GROUND_TRUTH = (1, 2, 3)
KITE = 4


@dataclass
class Scene:
    image_id: int
    height: int
    width: int
    targets: InstanceTarget
    predictions: InstancePredictions


def _random_mask(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    y0, x0 = int(rng.integers(0, height - 8)), int(rng.integers(0, width - 8))
    y1, x1 = int(rng.integers(y0 + 6, height + 1)), int(rng.integers(x0 + 6, width + 1))
    mask = np.zeros((height, width), dtype=bool)
    if rng.random() < 0.5:
        mask[y0:y1, x0:x1] = True
    else:
        yy, xx = np.mgrid[:height, :width]
        cy, cx, ry, rx = (y0 + y1) / 2, (x0 + x1) / 2, max((y1 - y0) / 2, 1), max((x1 - x0) / 2, 1)
        mask = ((yy - cy) / ry) ** 2 + ((xx - cx) / rx) ** 2 <= 1
    return mask


def _shifted(rng: np.random.Generator, mask: np.ndarray) -> np.ndarray:
    dy, dx = (int(v) for v in rng.integers(-1, 2, size=2))
    return np.roll(mask, (dy, dx), axis=(0, 1))


def make_scenes(seed: int) -> list[Scene]:
    """3-6 images; image 0 has no ground truth, image 1 no detections, image 2 a crowd region."""
    rng = np.random.default_rng(seed)
    count = int(rng.integers(3, 7))
    scenes_raw: list[tuple[int, int, int, list[np.ndarray], list[int], list[bool], list[np.ndarray], list[int]]] = []
    for index in range(count):
        height, width = int(rng.integers(24, 49)), int(rng.integers(24, 49))
        gt_masks: list[np.ndarray] = []
        gt_labels: list[int] = []
        crowd: list[bool] = []
        if index != 0:
            for _ in range(int(rng.integers(1, 6))):
                gt_masks.append(_random_mask(rng, height, width))
                gt_labels.append(int(rng.choice(LABELS_WITH_GROUND_TRUTH)))
                crowd.append(False)
        if index == 2 or (index > 2 and rng.random() < 0.4):
            region = np.zeros((height, width), dtype=bool)
            region[: height // 2, : width // 2] = True
            gt_masks.append(region)
            gt_labels.append(int(rng.choice(LABELS_WITH_GROUND_TRUTH)))
            crowd.append(True)
        dt_masks: list[np.ndarray] = []
        dt_labels: list[int] = []
        if index != 1:
            for mask, label, is_crowd in zip(gt_masks, gt_labels, crowd):
                if is_crowd:
                    # Detections inside a crowd region match it and are neither TP nor FP.
                    inner = np.zeros_like(mask)
                    inner[2 : height // 3, 2 : width // 3] = True
                    dt_masks.append(inner)
                    dt_labels.append(label)
                    continue
                if rng.random() < 0.85:
                    dt_masks.append(_shifted(rng, mask))
                    dt_labels.append(label if rng.random() < 0.85 else int(rng.integers(1, 5)))
                    if rng.random() < 0.3:  # a duplicate: the second one is a false positive
                        dt_masks.append(_shifted(rng, mask))
                        dt_labels.append(label)
            for _ in range(int(rng.integers(0, 4))):  # false positives, some of the category without GT
                dt_masks.append(_random_mask(rng, height, width))
                dt_labels.append(int(rng.integers(1, 5)))
            if index == 0:
                dt_masks.append(np.zeros((height, width), dtype=bool))  # an empty predicted mask
                dt_labels.append(KITE)
        scenes_raw.append((index, height, width, gt_masks, gt_labels, crowd, dt_masks, dt_labels))
    # Distinct scores: COCO breaks ties by input order, which is no part of the contract.
    total = sum(len(raw[6]) for raw in scenes_raw)
    scores = (rng.permutation(total) + 1) / (total + 1)
    scenes: list[Scene] = []
    offset = 0
    for index, height, width, gt_masks, gt_labels, crowd, dt_masks, dt_labels in scenes_raw:
        targets = InstanceTarget.from_masks(
            torch.from_numpy(np.stack(gt_masks)) if gt_masks else torch.zeros(0, height, width, dtype=torch.bool),
            torch.tensor(gt_labels, dtype=torch.int64),
            torch.tensor(crowd, dtype=torch.bool),
        )
        predictions = InstancePredictions(
            masks=torch.from_numpy(np.stack(dt_masks)) if dt_masks else torch.zeros(0, height, width, dtype=torch.bool),
            labels=torch.tensor(dt_labels, dtype=torch.int64),
            scores=torch.tensor(scores[offset : offset + len(dt_labels)], dtype=torch.float32),
        )
        offset += len(dt_labels)
        scenes.append(Scene(100 + 3 * index, height, width, targets, predictions))
    return scenes


def _rle(mask: torch.Tensor) -> dict[str, Any]:
    return mask_utils.encode(np.asfortranarray(mask.numpy().astype(np.uint8)))


def oracle(scenes: list[Scene], iou_type: str) -> MAPResult:
    """pycocotools' COCOeval on COCO dicts built from the scenes."""
    images, annotations, detections = [], [], []
    for scene in scenes:
        images.append({"id": scene.image_id, "height": scene.height, "width": scene.width})
        for mask, label, crowd in zip(scene.targets.masks, scene.targets.labels, scene.targets.iscrowd):
            rle = _rle(mask)
            annotations.append(
                {
                    "id": len(annotations) + 1,
                    "image_id": scene.image_id,
                    "category_id": CATEGORY_ID_OF_LABEL[int(label)],
                    "segmentation": rle,
                    "area": float(mask_utils.area(rle)),
                    "bbox": mask_utils.toBbox(rle).tolist(),
                    "iscrowd": int(crowd),
                }
            )
        for mask, label, score in zip(scene.predictions.masks, scene.predictions.labels, scene.predictions.scores):
            rle = _rle(mask)
            geometry = {"segmentation": rle} if iou_type == "segm" else {"bbox": mask_utils.toBbox(rle).tolist()}
            detections.append(
                {"image_id": scene.image_id, "category_id": CATEGORY_ID_OF_LABEL[int(label)], "score": float(score)}
                | geometry
            )
    ground_truth = COCO()
    ground_truth.dataset = {"images": images, "annotations": annotations, "categories": CATEGORIES}
    ground_truth.createIndex()
    evaluation = COCOeval(ground_truth, ground_truth.loadRes(detections), iou_type)
    evaluation.evaluate()
    evaluation.accumulate()
    evaluation.summarize()
    area = evaluation.params.areaRngLbl.index("all")
    max_dets = evaluation.params.maxDets.index(100)
    per_class: dict[str, float | None] = {}
    for index, category_id in enumerate(evaluation.params.catIds):
        precision = evaluation.eval["precision"][:, :, index, area, max_dets]
        valid = precision[precision > -1]
        per_class[NAME_OF_CATEGORY_ID[category_id]] = float(valid.mean()) * 100 if valid.size else None
    stats = evaluation.stats * 100
    return MAPResult(float(stats[0]), float(stats[1]), float(stats[2]), per_class)


def evaluate(scenes: list[Scene], iou_types: tuple[str, ...] = ("segm", "bbox")) -> CocoMAP:
    metric = CocoMAP(CATEGORIES, iou_types)
    for scene in scenes:
        metric.update(scene.image_id, scene.height, scene.width, scene.targets, scene.predictions)
    return metric


def assert_same(ours: MAPResult, reference: MAPResult) -> None:
    assert ours.ap == pytest.approx(reference.ap, abs=1e-6)
    assert ours.ap50 == pytest.approx(reference.ap50, abs=1e-6)
    assert ours.ap75 == pytest.approx(reference.ap75, abs=1e-6)
    assert ours.per_class.keys() == reference.per_class.keys()
    for name, value in reference.per_class.items():
        assert (ours.per_class[name] is None) == (value is None), name
        if value is not None:
            assert ours.per_class[name] == pytest.approx(value, abs=1e-6), name


@pytest.mark.parametrize("seed", range(6))
def test_segm_and_bbox_ap_equal_pycocotools(seed: int) -> None:
    scenes = make_scenes(seed)
    result = evaluate(scenes).compute()
    assert_same(result, oracle(scenes, "segm"))
    assert result.bbox is not None
    assert_same(result.bbox, oracle(scenes, "bbox"))
    assert result.per_class["kite"] is None  # no ground truth: no AP, as COCO
    assert 0 < result.ap < 100  # the scenes are neither trivial nor hopeless


def test_crowd_regions_absorb_detections_inside_them() -> None:
    height = width = 32
    person = torch.zeros(height, width, dtype=torch.bool)
    person[20:30, 20:30] = True
    crowd = torch.zeros(height, width, dtype=torch.bool)
    crowd[:16, :16] = True
    targets = InstanceTarget.from_masks(torch.stack([person, crowd]), torch.tensor([1, 1]), torch.tensor([False, True]))
    inside_crowd = torch.zeros(height, width, dtype=torch.bool)
    inside_crowd[2:8, 2:8] = True
    # The crowd detection scores highest: were it a false positive, precision would drop.
    predictions = InstancePredictions(
        torch.stack([inside_crowd, person]), torch.tensor([1, 1]), torch.tensor([0.9, 0.8])
    )
    metric = CocoMAP(CATEGORIES)
    metric.update(1, height, width, targets, predictions)
    result = metric.compute()
    assert result.ap == pytest.approx(100.0)
    assert result.per_class == {"cat": 100.0, "dog": None, "car": None, "kite": None}


def test_merge_of_two_halves_equals_the_whole() -> None:
    scenes = make_scenes(3)
    whole = evaluate(scenes).compute()
    first, second = evaluate(scenes[: len(scenes) // 2]), evaluate(scenes[len(scenes) // 2 :])
    second.merge(first)  # the order of the parts must not matter
    assert second.compute() == whole


def test_state_survives_json() -> None:
    scenes = make_scenes(4)
    metric = evaluate(scenes)
    restored = CocoMAP.from_state(json.loads(json.dumps(metric.state_dict())))
    assert restored.compute() == metric.compute()
    assert metric.compute() == metric.compute()  # compute leaves the state as it was


def test_no_detections_anywhere_gives_zero_ap() -> None:
    scenes = make_scenes(5)
    metric = CocoMAP(CATEGORIES)
    for scene in scenes:
        nothing = InstancePredictions(
            torch.zeros(0, scene.height, scene.width, dtype=torch.bool),
            torch.zeros(0, dtype=torch.int64),
            torch.zeros(0),
        )
        metric.update(scene.image_id, scene.height, scene.width, scene.targets, nothing)
    result = metric.compute()
    assert (result.ap, result.ap50, result.ap75) == (0.0, 0.0, 0.0)
    assert result.per_class["kite"] is None


def test_nothing_added_gives_nan() -> None:
    result = CocoMAP(CATEGORIES).compute()
    assert math.isnan(result.ap) and set(result.per_class.values()) == {None}


def test_bad_predictions_are_model_output_errors() -> None:
    with pytest.raises(ModelOutputError, match="bool"):
        InstancePredictions(torch.rand(1, 4, 4), torch.tensor([1]), torch.tensor([0.5]))
    with pytest.raises(ModelOutputError, match="labels and scores"):
        InstancePredictions(torch.ones(2, 4, 4, dtype=torch.bool), torch.tensor([1]), torch.tensor([0.5, 0.4]))
    metric = CocoMAP(CATEGORIES)
    empty_targets = InstanceTarget.from_masks(torch.zeros(0, 4, 4, dtype=torch.bool), torch.zeros(0))
    unknown = InstancePredictions(torch.ones(1, 4, 4, dtype=torch.bool), torch.tensor([5]), torch.tensor([0.5]))
    with pytest.raises(ModelOutputError, match="label 5 outside 1..4"):
        metric.update(1, 4, 4, empty_targets, unknown)
    nan_score = InstancePredictions(torch.ones(1, 4, 4, dtype=torch.bool), torch.tensor([1]), torch.tensor([math.nan]))
    with pytest.raises(ModelOutputError, match="NaN"):
        metric.update(1, 4, 4, empty_targets, nan_score)
    wrong_size = InstancePredictions(torch.ones(1, 5, 4, dtype=torch.bool), torch.tensor([1]), torch.tensor([0.5]))
    with pytest.raises(ModelOutputError, match="image 1"):
        metric.update(1, 4, 4, empty_targets, wrong_size)
    bad_target = InstanceTarget.from_masks(torch.ones(1, 4, 4, dtype=torch.bool), torch.tensor([0]))
    with pytest.raises(DatasetError, match="ground truth instance label 0"):
        metric.update(1, 4, 4, bad_target, InstancePredictions(unknown.masks, torch.tensor([1]), unknown.scores))


def test_missing_engine_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "faster_coco_eval", None)  # None makes the import fail
    with pytest.raises(ImportError, match=r"install pytest-segrobust\[coco\]"):
        CocoMAP(CATEGORIES)


def test_only_the_top_100_detections_of_an_image_count() -> None:
    rng = np.random.default_rng(11)
    height, width = 40, 40
    gt_masks = np.stack([_random_mask(rng, height, width) for _ in range(8)])
    # 120 detections: the good ones score lowest, so the cut at 100 decides what AP is.
    good = np.stack([_shifted(rng, mask) for mask in gt_masks])
    junk = np.stack([_random_mask(rng, height, width) for _ in range(112)])
    scores = np.concatenate([np.linspace(0.01, 0.05, 8), np.linspace(0.1, 0.99, 112)])
    scene = Scene(
        image_id=1,
        height=height,
        width=width,
        targets=InstanceTarget.from_masks(torch.from_numpy(gt_masks), torch.ones(8, dtype=torch.int64)),
        predictions=InstancePredictions(
            torch.from_numpy(np.concatenate([good, junk])),
            torch.ones(120, dtype=torch.int64),
            torch.from_numpy(scores).float(),
        ),
    )
    result = evaluate([scene]).compute()
    assert_same(result, oracle([scene], "segm"))
    assert result.bbox is not None
    assert_same(result.bbox, oracle([scene], "bbox"))
