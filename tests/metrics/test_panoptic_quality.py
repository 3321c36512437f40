"""PanopticQuality against panopticapi's rules (a numpy reference written here) and torchmetrics.

Scenes are generated: stuff bands, thing instances (some crowd), void pixels, segments listed
without a pixel, ids that are large, sparse and listed in random order. Predictions perturb the
ground truth segment by segment (keep, shift, split, merge, relabel, drop) and add spurious
segments and void patches. Several images in several batches are accumulated.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_segrobust.core.errors import DatasetError, ModelOutputError
from pytest_segrobust.core.types import PanopticMap, PanopticTarget, SampleIndex
from pytest_segrobust.metrics.base import MetricContext
from pytest_segrobust.metrics.panoptic_quality import PanopticQuality, thing_classes
from pytest_segrobust.metrics.registry import METRICS
from pytest_segrobust.models.base import PanopticPredictions

CLASS_NAMES = ("background", "sky", "person", "car", "dog", "kite", "boat")
# COCO panoptic style: ids are neither labels nor in label order; names tie them to labels.
CATEGORIES = (
    {"id": 1, "name": "person", "supercategory": "person", "isthing": 1},
    {"id": 3, "name": "car", "supercategory": "vehicle", "isthing": 1},
    {"id": 18, "name": "dog", "supercategory": "animal", "isthing": 1},
    {"id": 38, "name": "kite", "supercategory": "sports", "isthing": 1},
    {"id": 9, "name": "boat", "supercategory": "vehicle", "isthing": 1},
    {"id": 184, "name": "background", "supercategory": "other", "isthing": 0},
    {"id": 187, "name": "sky", "supercategory": "sky", "isthing": 0},
)
K = len(CLASS_NAMES)
STUFF = (0, 1)
THINGS_IN_GT = (2, 3, 4)
KITE = 5  # only ever predicted (spurious): a class with FP and nothing else
BOAT = 6  # never seen: no TP, FP or FN
IS_THING = tuple(label not in STUFF for label in range(K))
MAX_ID = 2**24 - 1  # COCO panoptic ids are RGB colours
CONTEXT = MetricContext(class_names=CLASS_NAMES, ignore_index=255, categories=CATEGORIES)


@dataclass
class Scene:
    """One image: ground truth and prediction as numpy arrays (segment ids per pixel, VOID = 0)."""

    gt: np.ndarray
    gt_ids: list[int]
    gt_labels: list[int]
    gt_crowd: list[bool]
    pred: np.ndarray
    pred_ids: list[int]
    pred_labels: list[int]

    def target(self) -> PanopticTarget:
        return PanopticTarget(
            torch.from_numpy(self.gt.copy()),
            torch.tensor(self.gt_ids, dtype=torch.int64),
            torch.tensor(self.gt_labels, dtype=torch.int64),
            torch.tensor(self.gt_crowd, dtype=torch.bool),
        )

    def prediction(self) -> PanopticPredictions:
        return PanopticPredictions(
            torch.from_numpy(self.pred.copy()),
            torch.tensor(self.pred_ids, dtype=torch.int64),
            torch.tensor(self.pred_labels, dtype=torch.int64),
        )


# --- Generated scenes ---------------------------------------------------------------------


class Ids:
    """Distinct random segment ids in 1..MAX_ID."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng, self.used = rng, set()

    def new(self) -> int:
        while True:
            value = int(self.rng.integers(1, MAX_ID + 1))
            if value not in self.used:
                self.used.add(value)
                return value


def random_shape(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    y0, x0 = int(rng.integers(0, height - 2)), int(rng.integers(0, width - 2))
    y1, x1 = (
        int(rng.integers(y0 + 2, min(height, y0 + height // 2 + 3) + 1)),
        int(rng.integers(x0 + 2, min(width, x0 + width // 2 + 3) + 1)),
    )
    if rng.random() < 0.5:
        mask = np.zeros((height, width), dtype=bool)
        mask[y0:y1, x0:x1] = True
        return mask
    yy, xx = np.mgrid[:height, :width]
    cy, cx, ry, rx = (y0 + y1 - 1) / 2, (x0 + x1 - 1) / 2, max((y1 - y0) / 2, 1), max((x1 - x0) / 2, 1)
    return ((yy - cy) / ry) ** 2 + ((xx - cx) / rx) ** 2 <= 1


def make_ground_truth(
    rng: np.random.Generator, ids: Ids, height: int, width: int, crowd: bool
) -> tuple[np.ndarray, list[int], list[int], list[bool]]:
    """Stuff bands, then thing instances painted over them (some crowd, some hidden), then void."""
    seg = np.zeros((height, width), dtype=np.int64)
    listed: list[tuple[int, int, bool]] = []
    cuts = sorted(int(c) for c in rng.choice(np.arange(1, height), size=int(rng.integers(0, 3)), replace=False))
    for top, bottom in zip([0, *cuts], [*cuts, height]):
        segment = ids.new()
        seg[top:bottom] = segment
        listed.append((segment, int(rng.choice(STUFF)), False))
    for _ in range(int(rng.integers(0, 7))):
        segment = ids.new()
        seg[random_shape(rng, height, width)] = segment
        listed.append((segment, int(rng.choice(THINGS_IN_GT)), crowd and bool(rng.random() < 0.2)))
    if rng.random() < 0.3:  # listed but without a pixel (e.g. pushed out of the frame)
        listed.append((ids.new(), int(rng.choice(THINGS_IN_GT)), False))
    if rng.random() < 0.6:
        seg[random_shape(rng, height, width)] = 0
    seg[rng.random((height, width)) < rng.uniform(0, 0.08)] = 0
    order = rng.permutation(len(listed))
    return (
        seg,
        [listed[i][0] for i in order],
        [listed[i][1] for i in order],
        [listed[i][2] for i in order],
    )


def make_prediction(
    rng: np.random.Generator, ids: Ids, gt: np.ndarray, gt_ids: list[int], gt_labels: list[int], void: bool
) -> tuple[np.ndarray, list[int], list[int]]:
    """The ground truth, perturbed segment by segment, with spurious segments and void patches."""
    height, width = gt.shape
    pred = np.zeros_like(gt)
    labels: dict[int, int] = {}
    merged_into: dict[int, int] = {}  # thing label -> a predicted id that absorbs the next instance
    for segment, label in zip(gt_ids, gt_labels):
        mask = gt == segment
        if not mask.any():
            continue
        op = rng.choice(["keep", "shift", "split", "merge", "relabel", "drop"], p=[0.3, 0.25, 0.12, 0.1, 0.13, 0.1])
        if op == "drop":
            continue
        new = ids.new()
        if op == "merge" and label in merged_into:
            new = merged_into[label]
        elif op == "merge":
            merged_into[label] = new
        if op == "relabel":
            label = int(rng.integers(0, K - 1))
        if op == "shift":
            dy, dx = (int(v) for v in rng.integers(-3, 4, size=2))
            mask = np.roll(mask, (dy, dx), axis=(0, 1))
        if op == "split":
            columns = np.flatnonzero(mask.any(axis=0))
            cut = int(rng.integers(columns[0], columns[-1] + 1))
            other = ids.new()
            right = mask.copy()
            right[:, :cut] = False
            pred[right] = other
            labels[other] = label
            mask = mask & ~right
        pred[mask] = new
        labels[new] = label
    holes = pred == 0
    if holes.any() and (not void or rng.random() < 0.5):
        filler = ids.new()
        pred[holes] = filler
        labels[filler] = int(rng.choice(STUFF))
    for _ in range(int(rng.integers(0, 4))):
        spurious = ids.new()
        pred[random_shape(rng, height, width)] = spurious
        labels[spurious] = int(rng.choice([KITE, *THINGS_IN_GT, *STUFF]))
    if void and rng.random() < 0.5:
        pred[random_shape(rng, height, width)] = 0
    if rng.random() < 0.3:
        labels[ids.new()] = int(rng.integers(0, K))  # listed without a pixel
    listed = list(labels)
    order = rng.permutation(len(listed))
    return pred, [listed[i] for i in order], [labels[listed[i]] for i in order]


def one_stuff_segment_per_class(
    seg: np.ndarray, ids: list[int], labels: list[int]
) -> tuple[np.ndarray, list[int], list[int]]:
    """Each stuff class as one segment (torchmetrics' view of stuff)."""
    keep: dict[int, int] = {}
    out = seg.copy()
    kept_ids, kept_labels = [], []
    for segment, label in zip(ids, labels):
        if label in STUFF and label in keep:
            out[seg == segment] = keep[label]
            continue
        if label in STUFF:
            keep[label] = segment
        kept_ids.append(segment)
        kept_labels.append(label)
    return out, kept_ids, kept_labels


def make_scenes(
    seed: int, crowd: bool = True, pred_void: bool = True, torchmetrics_view: bool = False
) -> list[list[Scene]]:
    """1-3 batches of 1-3 images; the images of a batch share a size."""
    rng = np.random.default_rng(seed)
    batches = []
    for _ in range(int(rng.integers(1, 4))):
        height, width = int(rng.integers(6, 33)), int(rng.integers(6, 33))
        batch = []
        for _ in range(int(rng.integers(1, 4))):
            ids = Ids(rng)
            gt, gt_ids, gt_labels, gt_crowd = make_ground_truth(rng, ids, height, width, crowd)
            pred, pred_ids, pred_labels = make_prediction(rng, ids, gt, gt_ids, gt_labels, pred_void)
            if torchmetrics_view:
                gt, gt_ids, gt_labels = one_stuff_segment_per_class(gt, gt_ids, gt_labels)
                gt_crowd = [False] * len(gt_ids)
                pred, pred_ids, pred_labels = one_stuff_segment_per_class(pred, pred_ids, pred_labels)
            batch.append(Scene(gt, gt_ids, gt_labels, gt_crowd, pred, pred_ids, pred_labels))
        batches.append(batch)
    return batches


def batch_of(scenes: Sequence[Scene]) -> dict[str, Any]:
    return {"panoptic": PanopticMap(tuple(scene.target() for scene in scenes))}


def evaluate(batches: Sequence[Sequence[Scene]], context: MetricContext = CONTEXT) -> PanopticQuality:
    metric = PanopticQuality(context)
    for scenes in batches:
        metric.update([scene.prediction() for scene in scenes], batch_of(scenes))
    return metric


# --- Reference: panopticapi's pq_compute_single_core and PQStat.pq_average, in numpy ------
# github.com/cocodataset/panopticapi, panopticapi/evaluation.py. Two adaptations, as the
# metric documents them: areas are pixel counts and listed segments without a pixel do not
# exist; every crowd segment of a class counts where panopticapi keeps the last one listed.

OFFSET = 2**24


def reference_counts(scenes: Sequence[Scene]) -> dict[str, np.ndarray]:
    stats = {"iou": np.zeros(K), "tp": np.zeros(K, np.int64), "fp": np.zeros(K, np.int64), "fn": np.zeros(K, np.int64)}
    for scene in scenes:
        gt_area = dict(zip(*np.unique(scene.gt, return_counts=True)))
        pred_area = dict(zip(*np.unique(scene.pred, return_counts=True)))
        gt_segms = {
            s: {"category_id": c, "iscrowd": k, "area": gt_area[s]}
            for s, c, k in zip(scene.gt_ids, scene.gt_labels, scene.gt_crowd)
            if s in gt_area
        }
        pred_segms = {
            s: {"category_id": c, "area": pred_area[s]}
            for s, c in zip(scene.pred_ids, scene.pred_labels)
            if s in pred_area
        }
        pan_gt_pred = scene.gt.astype(np.uint64) * OFFSET + scene.pred.astype(np.uint64)
        gt_pred_map = {}
        for label, intersection in zip(*np.unique(pan_gt_pred, return_counts=True)):
            gt_pred_map[(int(label // OFFSET), int(label % OFFSET))] = int(intersection)
        gt_matched, pred_matched = set(), set()
        for (gt_label, pred_label), intersection in gt_pred_map.items():
            if gt_label not in gt_segms or pred_label not in pred_segms:
                continue
            if gt_segms[gt_label]["iscrowd"] == 1:
                continue
            if gt_segms[gt_label]["category_id"] != pred_segms[pred_label]["category_id"]:
                continue
            union = (
                pred_segms[pred_label]["area"]
                + gt_segms[gt_label]["area"]
                - intersection
                - gt_pred_map.get((0, pred_label), 0)
            )
            iou = intersection / union
            if iou > 0.5:
                category = gt_segms[gt_label]["category_id"]
                stats["tp"][category] += 1
                stats["iou"][category] += iou
                gt_matched.add(gt_label)
                pred_matched.add(pred_label)
        crowd_labels = defaultdict(list)
        for gt_label, gt_info in gt_segms.items():
            if gt_label in gt_matched:
                continue
            if gt_info["iscrowd"] == 1:
                crowd_labels[gt_info["category_id"]].append(gt_label)
                continue
            stats["fn"][gt_info["category_id"]] += 1
        for pred_label, pred_info in pred_segms.items():
            if pred_label in pred_matched:
                continue
            intersection = gt_pred_map.get((0, pred_label), 0)
            for crowd_label in crowd_labels[pred_info["category_id"]]:
                intersection += gt_pred_map.get((crowd_label, pred_label), 0)
            if intersection / pred_info["area"] > 0.5:
                continue
            stats["fp"][pred_info["category_id"]] += 1
    return stats


def reference_average(stats: dict[str, np.ndarray], isthing: bool | None) -> dict[str, float] | None:
    pq = sq = rq = 0.0
    n = 0
    for label in range(K):
        if isthing is not None and IS_THING[label] != isthing:
            continue
        iou, tp, fp, fn = stats["iou"][label], stats["tp"][label], stats["fp"][label], stats["fn"][label]
        if tp + fp + fn == 0:
            continue
        n += 1
        pq += iou / (tp + 0.5 * fp + 0.5 * fn)
        sq += iou / tp if tp != 0 else 0
        rq += tp / (tp + 0.5 * fp + 0.5 * fn)
    return None if n == 0 else {"pq": 100 * pq / n, "sq": 100 * sq / n, "rq": 100 * rq / n}


def reference_per_class(stats: dict[str, np.ndarray]) -> list[float | None]:
    out: list[float | None] = []
    for label in range(K):
        iou, tp, fp, fn = stats["iou"][label], stats["tp"][label], stats["fp"][label], stats["fn"][label]
        out.append(None if tp + fp + fn == 0 else 100 * iou / (tp + 0.5 * fp + 0.5 * fn))
    return out


def largest_difference(metric: PanopticQuality, batches: Sequence[Sequence[Scene]]) -> float:
    """Compare every number with the reference; return the largest absolute difference."""
    stats = reference_counts([scene for scenes in batches for scene in scenes])
    assert metric.tp.tolist() == stats["tp"].tolist()
    assert metric.fp.tolist() == stats["fp"].tolist()
    assert metric.fn.tolist() == stats["fn"].tolist()
    result = metric.compute()
    differences = [float(np.max(np.abs(metric.iou_sum.numpy() - stats["iou"])))]
    expected_per_class = reference_per_class(stats)
    assert [v is None for v in result.per_class] == [v is None for v in expected_per_class]
    differences += [abs(a - b) for a, b in zip(result.per_class, expected_per_class) if a is not None]
    expected_details: dict[str, float] = {}
    for suffix, isthing in (("", None), ("_things", True), ("_stuff", False)):
        average = reference_average(stats, isthing)
        if average is not None:
            expected_details |= {f"{key}{suffix}": value for key, value in average.items()}
    expected_score = expected_details.pop("pq", math.nan)
    assert sorted(result.details) == sorted(expected_details)
    differences += [abs(result.details[key] - expected_details[key]) for key in expected_details]
    if math.isnan(expected_score):
        assert math.isnan(result.score)
    else:
        differences.append(abs(result.score - expected_score))
    return max(differences)


# --- Oracle tests --------------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_matches_the_panopticapi_reference(seed: int) -> None:
    batches = make_scenes(seed)
    metric = evaluate(batches)
    assert largest_difference(metric, batches) < 1e-6


def test_generated_scenes_exercise_every_rule() -> None:
    """The oracle test is only as good as its scenes: each rule must decide some cases."""
    seen = defaultdict(int)
    for seed in range(60):
        for scene in (s for scenes in make_scenes(seed) for s in scenes):
            stats = reference_counts([scene])
            seen["tp"] += int(stats["tp"].sum())
            seen["fp"] += int(stats["fp"].sum())
            seen["fn"] += int(stats["fn"].sum())
            crowd = [s for s, c in zip(scene.gt_ids, scene.gt_crowd) if c and (scene.gt == s).any()]
            seen["crowd"] += len(crowd)
            seen["pred_on_void"] += int(((scene.gt == 0) & (scene.pred != 0)).sum() > 0)
            seen["pred_void"] += int((scene.pred == 0).any())
            seen["gt_hidden"] += sum(not (scene.gt == s).any() for s in scene.gt_ids)
            seen["pred_hidden"] += sum(not (scene.pred == s).any() for s in scene.pred_ids)
    assert all(
        seen[key] >= 10 for key in ("tp", "fp", "fn", "crowd", "pred_on_void", "pred_void", "gt_hidden", "pred_hidden")
    ), dict(seen)


def test_a_hand_counted_image() -> None:
    """One row of 20 pixels; every rule decides one segment.

    GT:   0-7 person id 5 | 8-10 void | 11-15 car crowd id 9 | 16-19 background id 4; dog id 11 has no pixel.
    Pred: 0-2 car id 2 | 3-10 person id 1 | 11-15 car id 6 | 16-17 background id 8 | 18-19 void.
    """
    gt = np.array([[5] * 8 + [0] * 3 + [9] * 5 + [4] * 4])
    pred = np.array([[2] * 3 + [1] * 8 + [6] * 5 + [8] * 2 + [0] * 2])
    scene = Scene(gt, [4, 5, 9, 11], [0, 2, 3, 4], [False, False, True, False], pred, [1, 2, 6, 8], [2, 3, 3, 0])
    metric = evaluate([[scene]])
    # person: 5 px shared, union 8 + 8 - 5 - 3 (pred on void) = 8 -> IoU 0.625, a TP (5 / 11 without the void rule).
    # car id 2: FP. car id 6 lies on the car crowd: ignored; the crowd is no FN.
    # background: IoU 2 / 4 is not above one half: FP and FN (the 2 px the model left void change nothing).
    # dog: listed without a pixel, no FN.
    assert metric.tp.tolist() == [0, 0, 1, 0, 0, 0, 0]
    assert metric.fp.tolist() == [1, 0, 0, 1, 0, 0, 0]
    assert metric.fn.tolist() == [1, 0, 0, 0, 0, 0, 0]
    result = metric.compute()
    assert result.per_class == pytest.approx([0.0, None, 62.5, 0.0, None, None, None])
    assert result.score == pytest.approx(62.5 / 3)
    assert result.details == pytest.approx(
        {
            "sq": 62.5 / 3,
            "rq": 100 / 3,
            "pq_things": 31.25,
            "sq_things": 31.25,
            "rq_things": 50.0,
            "pq_stuff": 0.0,
            "sq_stuff": 0.0,
            "rq_stuff": 0.0,
        }
    )


def test_matches_torchmetrics_where_the_conventions_agree() -> None:
    """torchmetrics.detection.PanopticQuality as a second, independent implementation.

    Its conventions differ from panopticapi in three ways, so its scenes avoid them: it knows
    no crowd; pixels the model leaves void shrink the ground-truth area in the IoU and excuse
    a missed segment mostly on them (panopticapi counts that FN); and each stuff class is one
    segment per image (instance ids of stuff are dropped). Pixels (category, instance) with an
    unknown category in the target are void. Its IoU is float32, hence the tolerance.
    """
    detection = pytest.importorskip("torchmetrics.detection")
    things = [label for label in range(K) if IS_THING[label]]
    stuffs = [label for label in range(K) if not IS_THING[label]]
    order = things + stuffs  # torchmetrics' class order: things, then stuff, each sorted
    unknown = 100
    largest = 0.0
    for seed in range(40):
        batches = make_scenes(seed, crowd=False, pred_void=False, torchmetrics_view=True)
        reference = detection.PanopticQuality(
            things=set(things), stuffs=set(stuffs), return_sq_and_rq=True, return_per_class=True
        )
        averaged = detection.PanopticQuality(things=set(things), stuffs=set(stuffs), return_sq_and_rq=True)
        for scene in (s for scenes in batches for s in scenes):
            pairs = []
            for seg, ids, labels in (
                (scene.pred, scene.pred_ids, scene.pred_labels),
                (scene.gt, scene.gt_ids, scene.gt_labels),
            ):
                category = np.full(seg.shape, unknown, dtype=np.int64)
                for segment, label in zip(ids, labels):
                    category[seg == segment] = label
                pairs.append(torch.from_numpy(np.stack([category, seg], axis=-1))[None])
            reference.update(*pairs)
            averaged.update(*pairs)
        metric = evaluate(batches)
        to_label = {index: label for index, label in enumerate(order)}
        for name, theirs in (
            ("tp", reference.true_positives),
            ("fp", reference.false_positives),
            ("fn", reference.false_negatives),
        ):
            mine = getattr(metric, name)
            assert [int(theirs[i]) for i in range(K)] == [int(mine[to_label[i]]) for i in range(K)], (seed, name)
        per_class = reference.compute()  # (K, 3): PQ, SQ, RQ in torchmetrics' order, fractions
        result = metric.compute()
        for index, label in enumerate(order):
            if result.per_class[label] is not None:
                largest = max(largest, abs(result.per_class[label] / 100 - float(per_class[index, 0])))
        pq, sq, rq = averaged.compute().tolist()
        for mine, theirs in ((result.score, pq), (result.details["sq"], sq), (result.details["rq"], rq)):
            largest = max(largest, abs(mine / 100 - theirs))
    assert largest < 1e-6


# --- Properties ----------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(10))
def test_the_ground_truth_as_prediction_scores_100(seed: int) -> None:
    """Crowd regions predicted as segments of their class are ignored; GT void predicted void."""
    batches = make_scenes(seed)
    perfect = []
    for scenes in batches:
        perfect.append(
            [Scene(s.gt, s.gt_ids, s.gt_labels, s.gt_crowd, s.gt, list(s.gt_ids), list(s.gt_labels)) for s in scenes]
        )
    metric = evaluate(perfect)
    assert metric.fp.sum() == 0 and metric.fn.sum() == 0 and metric.tp.sum() > 0
    result = metric.compute()
    assert result.score == pytest.approx(100.0)
    assert all(value == pytest.approx(100.0) for value in result.details.values())
    assert all(value is None or value == pytest.approx(100.0) for value in result.per_class)


@pytest.mark.parametrize("seed", range(6))
def test_batches_and_merged_shards_give_the_numbers_of_the_whole(seed: int) -> None:
    batches = make_scenes(seed + 1000)
    scenes = [scene for batch in batches for scene in batch]
    whole = evaluate(batches)
    one_by_one = evaluate([[scene] for scene in scenes])
    first, second = evaluate(batches[:1]), evaluate(batches[1:])
    shipped = PanopticQuality(CONTEXT)
    shipped.load_state_dict(json.loads(json.dumps(second.state_dict())))
    first.merge(shipped)
    for metric in (one_by_one, first):
        for name in ("tp", "fp", "fn"):
            assert torch.equal(getattr(metric, name), getattr(whole, name))
        assert torch.allclose(metric.iou_sum, whole.iou_sum, rtol=0, atol=1e-12)
        assert metric.iou_sum.dtype == torch.float64 and metric.tp.dtype == torch.int64
        result, expected = metric.compute(), whole.compute()
        assert result.score == pytest.approx(expected.score, abs=1e-9, nan_ok=True)
        assert result.per_class == pytest.approx(expected.per_class, abs=1e-9)


def test_compute_leaves_the_states_and_reset_empties_them() -> None:
    metric = evaluate(make_scenes(3))
    states = json.dumps(metric.state_dict())
    assert metric.compute() == metric.compute()
    assert json.dumps(metric.state_dict()) == states
    metric.reset()
    assert metric.tp.sum() == 0 and metric.iou_sum.sum() == 0
    result = metric.compute()
    assert math.isnan(result.score) and result.details == {} and result.per_class == (None,) * K


def test_is_registered_with_its_scale_and_direction() -> None:
    assert METRICS.get("pq") is PanopticQuality
    assert (PanopticQuality.label, PanopticQuality.higher_is_better, PanopticQuality.bounds) == (
        "PQ",
        True,
        (0.0, 100.0),
    )
    assert PanopticQuality.accepts == (PanopticMap,)


def test_numbers_are_json_safe() -> None:
    result = evaluate(make_scenes(5)).compute()
    assert json.loads(json.dumps(result.to_json(), allow_nan=False))["score"] == pytest.approx(result.score)


# --- Things and stuff ----------------------------------------------------------------------


def test_things_and_stuff_follow_isthing_by_class_name() -> None:
    assert thing_classes(CONTEXT) == IS_THING


def test_without_categories_every_class_is_a_thing_and_stuff_numbers_are_absent() -> None:
    context = MetricContext(class_names=CLASS_NAMES, ignore_index=255)
    assert thing_classes(context) == (True,) * K
    batches = make_scenes(7)
    with_split, without = evaluate(batches).compute(), evaluate(batches, context).compute()
    assert without.score == with_split.score and without.per_class == with_split.per_class
    assert not any(key.endswith("_stuff") for key in without.details)
    assert without.details["pq_things"] == pytest.approx(without.score)


def test_detection_style_categories_make_the_uncategorised_background_stuff() -> None:
    """The demo data's categories: object classes without isthing, no category for class 0."""
    names = ("background", "striped", "checkered")
    categories = ({"id": 1, "name": "striped"}, {"id": 2, "name": "checkered", "supercategory": "pattern"})
    context = MetricContext(class_names=names, ignore_index=255, categories=categories)
    assert thing_classes(context) == (False, True, True)
    demo = MetricContext(
        class_names=names,
        ignore_index=255,
        categories=({"id": 0, "name": "background", "isthing": 0}, *({**c, "isthing": 1} for c in categories)),
    )
    assert thing_classes(demo) == (False, True, True)


def test_two_categories_with_a_class_name_are_a_dataset_error() -> None:
    categories = ({"id": 1, "name": "car", "isthing": 1}, {"id": 2, "name": "car", "isthing": 0})
    with pytest.raises(DatasetError, match="two categories are named 'car'"):
        PanopticQuality(MetricContext(class_names=("background", "car"), ignore_index=255, categories=categories))


def test_a_group_without_counted_classes_has_no_entries() -> None:
    # Only stuff in ground truth and prediction: no thing class is counted.
    gt = np.array([[3, 3, 3, 7, 7]])
    scene = Scene(gt, [3, 7], [0, 1], [False, False], gt.copy(), [3, 7], [0, 1])
    details = evaluate([[scene]]).compute().details
    assert sorted(details) == ["pq_stuff", "rq", "rq_stuff", "sq", "sq_stuff"]


# --- Bad input -----------------------------------------------------------------------------


def simple_scene() -> Scene:
    gt = np.array([[1, 1, 2, 2, 0]])
    return Scene(gt, [1, 2], [0, 2], [False, False], gt.copy(), [1, 2], [0, 2])


PREDICTION_FAULTS = {
    "label outside the classes": (
        lambda s: s.pred_labels.__setitem__(1, K),
        rf"predicted label {K} outside 0\.\.{K - 1}",
    ),
    "negative label": (lambda s: s.pred_labels.__setitem__(0, -1), r"predicted label -1 outside"),
    "id not listed": (
        lambda s: s.pred.__setitem__((0, 4), 77),
        r"predicted segment id 77 covers pixels but is not in its ids",
    ),
    "repeated id": (
        lambda s: (s.pred_ids.append(2), s.pred_labels.append(0)),
        r"predicted segment id 2 is listed 2 times",
    ),
    "id 0 listed": (
        lambda s: (s.pred_ids.append(0), s.pred_labels.append(0)),
        r"predicted segment id 0 is not positive",
    ),
}
TARGET_FAULTS = {
    "label outside the classes": (lambda s: s.gt_labels.__setitem__(0, 99), r"ground-truth label 99 outside"),
    "id not listed": (
        lambda s: s.gt.__setitem__((0, 4), 5),
        r"ground-truth segment id 5 covers pixels but is not in its ids",
    ),
    "repeated id": (
        lambda s: (s.gt_ids.append(1), s.gt_labels.append(0), s.gt_crowd.append(False)),
        r"ground-truth segment id 1 is listed 2 times",
    ),
    "negative id": (
        lambda s: (s.gt_ids.append(-4), s.gt_labels.append(0), s.gt_crowd.append(False)),
        r"ground-truth segment id -4 is not positive",
    ),
}


@pytest.mark.parametrize("fault", list(PREDICTION_FAULTS))
def test_bad_predictions_are_model_errors(fault: str) -> None:
    edit, message = PREDICTION_FAULTS[fault]
    scene = simple_scene()
    evaluate([[scene]])  # valid before the edit
    edit(scene)
    batch = {**batch_of([scene]), "index": SampleIndex((0,), ("img-7",))}
    with pytest.raises(ModelOutputError, match=rf"sample img-7: {message}"):
        PanopticQuality(CONTEXT).update([scene.prediction()], batch)


@pytest.mark.parametrize("fault", list(TARGET_FAULTS))
def test_bad_ground_truth_is_a_dataset_error(fault: str) -> None:
    edit, message = TARGET_FAULTS[fault]
    scene = simple_scene()
    edit(scene)
    with pytest.raises(DatasetError, match=rf"image 0 of the batch: {message}"):
        evaluate([[scene]])


def test_predictions_of_the_wrong_size_or_number_are_model_errors() -> None:
    scene = simple_scene()
    wrong_size = PanopticPredictions(torch.ones(2, 5, dtype=torch.int64), torch.tensor([1]), torch.tensor([0]))
    with pytest.raises(ModelOutputError, match=r"predicted segments of size \(2, 5\), ground truth \(1, 5\)"):
        PanopticQuality(CONTEXT).update([wrong_size], batch_of([scene]))
    with pytest.raises(ModelOutputError, match="2 panoptic predictions for a batch of 1 images"):
        PanopticQuality(CONTEXT).update([scene.prediction()] * 2, batch_of([scene]))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_on_cuda_the_numbers_are_those_of_the_cpu() -> None:
    batches = make_scenes(11)
    cpu = evaluate(batches)
    cuda = PanopticQuality(MetricContext(CLASS_NAMES, 255, CATEGORIES, device=torch.device("cuda")))
    for scenes in batches:
        batch = {"panoptic": PanopticMap(tuple(scene.target().to("cuda") for scene in scenes))}
        predictions = [
            PanopticPredictions(*(t.cuda() for t in (p.segments, p.ids, p.labels)))
            for p in (s.prediction() for s in scenes)
        ]
        cuda.update(predictions, batch)
    assert cuda.tp.device.type == "cuda"
    assert cuda.compute() == cpu.compute()
