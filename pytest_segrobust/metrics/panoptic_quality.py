"""Panoptic quality (Kirillov et al., CVPR 2019), counted as panopticapi's ``pq_compute`` counts.

Per image (panopticapi ``pq_compute_single_core``):

* A ground-truth segment ``g`` and a predicted segment ``p`` of the same class match when
  ``IoU = |g & p| / (|p| + |g| - |g & p| - |p & void|) > 0.5``, where ``void`` is the
  ground truth's unlabelled pixels (segment id ``VOID`` = 0). Pixels the model leaves void
  are not a segment. With IoU above one half a segment matches at most one other.
* Crowd ground-truth segments are never matched. An unmatched ground-truth segment that is
  not crowd is a false negative (FN).
* An unmatched predicted segment is a false positive (FP) unless more than half of it lies on
  ground-truth void or on crowd segments of its own class; then it is ignored.
  panopticapi keeps one crowd segment per class and image (the last one listed); here every
  crowd segment of the class counts, which is the same on COCO (one crowd region per class).
* Segments listed without a pixel (a warp may push one out of the frame) do not exist: they
  are neither FN nor FP (panopticapi would reject such a listing).

Over the dataset the counts are summed per class: ``TP``, ``FP``, ``FN`` and the sum of the
matches' IoU. For class ``c``: ``PQ_c = sum IoU / (TP + FP/2 + FN/2)``, ``SQ_c = sum IoU / TP``
(0 without TP), ``RQ_c = TP / (TP + FP/2 + FN/2)``. PQ, SQ and RQ are means over the classes
with ``TP + FP + FN > 0``; the things and stuff numbers are the same means over the thing and
stuff classes (see :func:`thing_classes`). Everything is in percent.

Work per batch: every pixel's segment is replaced by its position in its image's segment
list, and one ``bincount`` over ``gt_position * n_pred + pred_position`` for the whole batch
gives every image's overlap matrix on the model's device. The matrices are small (segments
by segments); the matching runs on them on the CPU.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch

from pytest_segrobust.core.errors import DatasetError, ModelOutputError
from pytest_segrobust.core.types import (
    VOID,
    Batch,
    PanopticMap,
    PanopticPredictions,
    PanopticTarget,
    SampleIndex,
    field_of,
)
from pytest_segrobust.metrics.base import Metric, MetricContext, MetricResult, Reduction
from pytest_segrobust.metrics.registry import register_metric

# A match needs IoU above this; an unmatched prediction more than this fraction void or crowd is ignored.
MATCH_IOU = 0.5
IGNORED_FRACTION = 0.5


@dataclass(frozen=True)
class PanopticCounts:
    """Per-class sufficient statistics of panoptic quality.

    Shape:
        iou_sum: ``(K,)``, float64; tp, fp, fn: ``(K,)``, int64.
    """

    iou_sum: torch.Tensor
    tp: torch.Tensor
    fp: torch.Tensor
    fn: torch.Tensor

    @classmethod
    def zeros(cls, num_classes: int, device: torch.device | str = "cpu") -> PanopticCounts:
        def count() -> torch.Tensor:
            return torch.zeros(num_classes, dtype=torch.int64, device=device)

        return cls(torch.zeros(num_classes, dtype=torch.float64, device=device), count(), count(), count())

    def __add__(self, other: PanopticCounts) -> PanopticCounts:
        return PanopticCounts(self.iou_sum + other.iou_sum, self.tp + other.tp, self.fp + other.fp, self.fn + other.fn)


def thing_classes(context: MetricContext) -> tuple[bool, ...]:
    """Whether each of ``context.class_names`` is a thing class (else stuff).

    A class's category is the one of ``context.categories`` with the class's name.

    * Without categories every class is a thing: nothing says otherwise, and PQ itself does
      not depend on the split (things and stuff are matched alike), only the stuff numbers
      are then absent.
    * Otherwise class ``k`` is a thing when its category has ``isthing == 1``, as in COCO
      panoptic. A category without ``isthing`` counts as a thing: a detection-style list
      (COCO instances, the demo data's) names the countable objects and leaves the
      background out. A class without a category is stuff (the background of such a list).

    Raises:
        DatasetError: when two categories carry the name of one class.
    """
    if context.categories is None:
        return (True,) * len(context.class_names)
    by_name: dict[str, dict[str, Any]] = {}
    for category in context.categories:
        name = str(category.get("name"))
        if name in by_name and name in context.class_names:
            raise DatasetError(f"{context.name}: two categories are named {name!r}; its things/stuff kind is ambiguous")
        by_name[name] = category
    return tuple(name in by_name and by_name[name].get("isthing", 1) == 1 for name in context.class_names)


def segment_positions(segments: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """Each pixel's segment as ``1 + `` its position in ``ids``; 0 for void, ``S + 1`` for an unlisted id.

    Args:
        segments: Segment id per pixel, ``VOID`` for unlabelled pixels.
        ids: Distinct positive segment ids, on the device of ``segments``.

    Shape:
        segments: ``(H, W)``, integer; ids: ``(S,)``, integer; return: ``(H, W)``, int64.
    """
    count = int(ids.numel())
    segments = segments.long().contiguous()
    if count == 0:
        return (segments != VOID).long()
    sorted_ids, order = torch.sort(ids.long())
    where = torch.searchsorted(sorted_ids, segments).clamp_(max=count - 1)
    listed = sorted_ids[where] == segments
    positions = torch.where(listed, order[where] + 1, count + 1)
    return torch.where(segments == VOID, 0, positions)


def segment_overlaps(
    gt_positions: Sequence[torch.Tensor],
    gt_counts: Sequence[int],
    pred_positions: Sequence[torch.Tensor],
    pred_counts: Sequence[int],
) -> list[torch.Tensor]:
    """Pixel counts of every (ground-truth segment, predicted segment) pair, per image.

    Row and column 0 are void; row ``S + 1`` and column ``P + 1`` are ids missing from the
    lists. One ``bincount`` on the maps' device covers the whole batch.

    Args:
        gt_positions, pred_positions: Per image, :func:`segment_positions` of each side.
        gt_counts, pred_counts: Per image, the number of listed segments ``S`` and ``P``.

    Shape:
        gt_positions[i], pred_positions[i]: ``(H_i, W_i)``; return[i]: ``(S_i + 2, P_i + 2)``, int64, on the CPU.
    """
    if not gt_positions:
        return []
    flat, sizes, offset = [], [], 0
    for gt, rows, pred, columns in zip(gt_positions, gt_counts, pred_positions, pred_counts):
        flat.append((gt * (columns + 2) + pred).flatten() + offset)
        sizes.append((rows + 2) * (columns + 2))
        offset += sizes[-1]
    counts = torch.bincount(torch.cat(flat), minlength=offset).cpu()
    return [
        chunk.view(rows + 2, columns + 2) for chunk, rows, columns in zip(counts.split(sizes), gt_counts, pred_counts)
    ]


def match_segments(
    overlap: torch.Tensor,
    gt_labels: torch.Tensor,
    gt_crowd: torch.Tensor,
    pred_labels: torch.Tensor,
    num_classes: int,
) -> PanopticCounts:
    """TP, FP, FN and the matches' IoU sum per class of one image (the module's rules).

    Decisions compare integers (``2 |g & p| > union``), so no rounding can flip one.

    Shape:
        overlap: ``(S + 2, P + 2)`` from :func:`segment_overlaps`; gt_labels, gt_crowd: ``(S,)``;
        pred_labels: ``(P,)``; all on the CPU.
    """
    rows, columns = len(gt_labels), len(pred_labels)
    inside = overlap[: rows + 1, : columns + 1]  # unlisted ids have been rejected: their row and column are 0
    intersection = inside[1:, 1:]
    gt_area = inside[1:].sum(dim=1)
    pred_area = inside[:, 1:].sum(dim=0)
    pred_on_void = inside[0, 1:]
    same_class = gt_labels[:, None] == pred_labels[None, :]
    union = gt_area[:, None] + pred_area[None, :] - intersection - pred_on_void[None, :]
    matched = same_class & ~gt_crowd[:, None] & (2 * intersection > union)
    gt_index, pred_index = matched.nonzero(as_tuple=True)
    iou = intersection[gt_index, pred_index].double() / union[gt_index, pred_index].double()

    gt_matched = matched.any(dim=1)
    pred_matched = matched.any(dim=0)
    missed = ~gt_matched & ~gt_crowd & (gt_area > 0)
    on_own_crowd = (intersection * (gt_crowd[:, None] & same_class)).sum(dim=0)
    ignored = 2 * (pred_on_void + on_own_crowd) > pred_area
    spurious = ~pred_matched & (pred_area > 0) & ~ignored

    matched_labels = gt_labels[gt_index]
    return PanopticCounts(
        iou_sum=torch.bincount(matched_labels, weights=iou, minlength=num_classes).double(),
        tp=torch.bincount(matched_labels, minlength=num_classes),
        fp=torch.bincount(pred_labels[spurious], minlength=num_classes),
        fn=torch.bincount(gt_labels[missed], minlength=num_classes),
    )


def panoptic_counts(
    predictions: Sequence[PanopticPredictions],
    targets: Sequence[PanopticTarget],
    num_classes: int,
    image_names: Sequence[str] | None = None,
) -> PanopticCounts:
    """Per-class counts of a batch, on the CPU: the sum of :func:`image_panoptic_counts`."""
    total = PanopticCounts.zeros(num_classes)
    for counts in image_panoptic_counts(predictions, targets, num_classes, image_names):
        total = total + counts
    return total


def image_panoptic_counts(
    predictions: Sequence[PanopticPredictions],
    targets: Sequence[PanopticTarget],
    num_classes: int,
    image_names: Sequence[str] | None = None,
) -> list[PanopticCounts]:
    """Per-class counts of each image of a batch, on the CPU.

    Args:
        predictions: The model's segmentation of each image.
        targets: The ground truth of each image, in the same order.
        num_classes: Labels are ``0..num_classes - 1``.
        image_names: How messages name each image (default: its position in the batch).

    Raises:
        ModelOutputError: for a prediction of another size than its image, a predicted label
            outside the classes, a repeated or non-positive segment id, or a pixel whose
            segment id is not listed.
        DatasetError: for the same faults in the ground truth.
    """
    if len(predictions) != len(targets):
        raise ModelOutputError(f"{len(predictions)} panoptic predictions for a batch of {len(targets)} images")
    names = list(image_names) if image_names is not None else []
    if len(names) != len(targets):
        names = [f"image {i} of the batch" for i in range(len(targets))]
    gt_positions, pred_positions, gt_tables, pred_tables = [], [], [], []
    for name, predicted, target in zip(names, predictions, targets):
        device = target.segments.device
        if tuple(predicted.segments.shape) != tuple(target.segments.shape):
            raise ModelOutputError(
                f"{name}: predicted segments of size {tuple(predicted.segments.shape)}, "
                f"ground truth {tuple(target.segments.shape)}"
            )
        gt_labels, gt_crowd = _segment_table(target.ids, target.labels, target.iscrowd, num_classes, name, truth=True)
        pred_labels, _ = _segment_table(predicted.ids, predicted.labels, None, num_classes, name, truth=False)
        gt_positions.append(segment_positions(target.segments, target.ids.to(device)))
        pred_positions.append(segment_positions(predicted.segments.to(device), predicted.ids.to(device)))
        gt_tables.append((gt_labels, gt_crowd))
        pred_tables.append(pred_labels)

    gt_counts = [len(labels) for labels, _ in gt_tables]
    pred_counts = [len(labels) for labels in pred_tables]
    overlaps = segment_overlaps(gt_positions, gt_counts, pred_positions, pred_counts)
    per_image = []
    for index, overlap in enumerate(overlaps):
        rows, columns = gt_counts[index], pred_counts[index]
        if overlap[rows + 1].any():
            unlisted = _unlisted_id(targets[index].segments, gt_positions[index], rows)
            raise DatasetError(
                f"{names[index]}: ground-truth segment id {unlisted} covers pixels but is not in its ids"
            )
        if overlap[:, columns + 1].any():
            unlisted = _unlisted_id(predictions[index].segments, pred_positions[index], columns)
            raise ModelOutputError(
                f"{names[index]}: predicted segment id {unlisted} covers pixels but is not in its ids"
            )
        gt_labels, gt_crowd = gt_tables[index]
        per_image.append(match_segments(overlap, gt_labels, gt_crowd, pred_tables[index], num_classes))
    return per_image


def _segment_table(
    ids: torch.Tensor,
    labels: torch.Tensor,
    iscrowd: torch.Tensor | None,
    num_classes: int,
    name: str,
    truth: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Checked labels and crowd flags of one side's segments, on the CPU."""
    error = DatasetError if truth else ModelOutputError
    whose = "ground-truth" if truth else "predicted"
    ids, labels = ids.detach().cpu().long(), labels.detach().cpu().long()
    if ids.dim() != 1 or tuple(labels.shape) != tuple(ids.shape):
        raise error(
            f"{name}: {whose} ids and labels must have one shape (S,), got {tuple(ids.shape)} and {tuple(labels.shape)}"
        )
    crowd = torch.zeros(len(ids), dtype=torch.bool) if iscrowd is None else iscrowd.detach().cpu().bool()
    if tuple(crowd.shape) != tuple(ids.shape):
        raise error(f"{name}: {whose} iscrowd has shape {tuple(crowd.shape)}, ids {tuple(ids.shape)}")
    if len(ids):
        outside = (labels < 0) | (labels >= num_classes)
        if outside.any():
            raise error(f"{name}: {whose} label {int(labels[outside][0])} outside 0..{num_classes - 1}")
        if (ids <= VOID).any():
            raise error(
                f"{name}: {whose} segment id {int(ids[ids <= VOID][0])} is not positive ({VOID} marks void pixels)"
            )
        unique, counts = torch.unique(ids, return_counts=True)
        repeated = counts > 1
        if repeated.any():
            raise error(
                f"{name}: {whose} segment id {int(unique[repeated][0])} is listed {int(counts[repeated][0])} times"
            )
    return labels, crowd


def _unlisted_id(segments: torch.Tensor, positions: torch.Tensor, count: int) -> int:
    """An id of ``segments`` that its list lacks (the error path only)."""
    return int(segments.to(positions.device)[positions == count + 1][0])


def _mean(values: torch.Tensor, counted: torch.Tensor) -> float:
    return float(values[counted].mean()) * 100


def panoptic_quality(counts: PanopticCounts, is_thing: Sequence[bool]) -> MetricResult:
    """PQ (the score), PQ per class and the SQ, RQ and things/stuff means, in percent.

    The score is NaN when no class has a TP, FP or FN. A class without one is ``None`` in
    ``per_class``; a group (all, things, stuff) without such a class has no entries in
    ``details``, so they stay finite and JSON-safe.
    """
    iou_sum, tp = counts.iou_sum.detach().cpu().double(), counts.tp.detach().cpu().double()
    fp, fn = counts.fp.detach().cpu().double(), counts.fn.detach().cpu().double()
    denominator = tp + 0.5 * fp + 0.5 * fn
    counted = (tp + fp + fn) > 0
    safe = denominator.clamp(min=0.5)  # counted classes have denominator >= 0.5
    pq = torch.where(counted, iou_sum / safe, 0.0)
    sq = torch.where(tp > 0, iou_sum / tp.clamp(min=1), 0.0)
    rq = torch.where(counted, tp / safe, 0.0)
    things = torch.tensor(list(is_thing), dtype=torch.bool)
    per_class = tuple(v * 100 if c else None for v, c in zip(pq.tolist(), counted.tolist()))
    details: dict[str, float] = {}
    for suffix, group in (("", counted), ("_things", counted & things), ("_stuff", counted & ~things)):
        if group.any():
            if suffix:
                details[f"pq{suffix}"] = _mean(pq, group)
            details[f"sq{suffix}"] = _mean(sq, group)
            details[f"rq{suffix}"] = _mean(rq, group)
    score = _mean(pq, counted) if counted.any() else math.nan
    return MetricResult(score, per_class, details)


@register_metric
class PanopticQuality(Metric):
    """Panoptic quality in percent; SQ, RQ and the things/stuff split as details.

    States are per-class sums, so batches, workers and shards merge by addition, and each
    image's own counts (for paired statistics: PQ of any multiset of images is PQ of the sum
    of their counts, :meth:`score_of`).
    """

    name = "pq"
    label = "PQ"
    accepts = (PanopticMap,)
    detail_labels: ClassVar[dict[str, str]] = {
        f"{kind}{suffix}": f"{kind.upper()}{label}"
        for kind in ("pq", "sq", "rq")
        for suffix, label in (("", ""), ("_things", " things"), ("_stuff", " stuff"))
    }
    iou_sum: torch.Tensor
    tp: torch.Tensor
    fp: torch.Tensor
    fn: torch.Tensor
    images: list[torch.Tensor]

    def __init__(self, context: MetricContext) -> None:
        super().__init__(context)
        self.is_thing = thing_classes(context)
        zeros = PanopticCounts.zeros(len(context.class_names), context.device)
        for name in ("iou_sum", "tp", "fp", "fn"):
            self.add_state(name, getattr(zeros, name), Reduction.SUM)
        self.add_state("images", [], Reduction.CONCAT)

    def update(self, predictions: Sequence[PanopticPredictions], batch: Batch) -> None:
        targets = field_of(batch, PanopticMap).targets
        num_classes = len(self.context.class_names)
        per_image = image_panoptic_counts(predictions, targets, num_classes, _image_names(batch, len(targets)))
        counts = PanopticCounts.zeros(num_classes)
        for image in per_image:
            counts = counts + image
        device = self.iou_sum.device
        self.iou_sum = self.iou_sum + counts.iou_sum.to(device)
        self.tp = self.tp + counts.tp.to(device)
        self.fp = self.fp + counts.fp.to(device)
        self.fn = self.fn + counts.fn.to(device)
        if per_image:  # the matching ran on the CPU: the per-image counts stay there
            self.images.append(
                torch.stack([torch.stack([c.tp.double(), c.fp.double(), c.fn.double(), c.iou_sum], dim=-1) for c in per_image])
            )

    def compute(self) -> MetricResult:
        return panoptic_quality(PanopticCounts(self.iou_sum, self.tp, self.fp, self.fn), self.is_thing)

    def image_statistics(self) -> np.ndarray:
        """``(N, K, 4)`` float64: each image's TP, FP and FN counts and its matches' IoU sum per class."""
        k = len(self.context.class_names)
        parts = [torch.as_tensor(part, dtype=torch.float64).reshape(-1, k, 4).cpu() for part in self.images]
        return torch.cat(parts).numpy() if parts else np.zeros((0, k, 4), dtype=np.float64)

    @classmethod
    def score_of(cls, summed: np.ndarray) -> np.ndarray:
        """PQ in percent of summed ``(..., K, 4)`` statistics: the mean over classes with a TP, FP
        or FN of ``IoU sum / (TP + FP / 2 + FN / 2)`` (NaN where no class has one), as :meth:`compute`."""
        tp, fp, fn, iou_sum = summed[..., 0], summed[..., 1], summed[..., 2], summed[..., 3]
        counted = (tp + fp + fn) > 0
        pq = np.where(counted, iou_sum / np.where(counted, tp + 0.5 * fp + 0.5 * fn, 1.0), 0.0)
        with np.errstate(invalid="ignore", divide="ignore"):
            return 100.0 * pq.sum(axis=-1) / counted.sum(axis=-1)


def _image_names(batch: Batch, count: int) -> list[str]:
    """Sample ids of the batch's images for messages, or their positions when the batch has none."""
    try:
        sample_ids = field_of(batch, SampleIndex).sample_ids
    except KeyError:
        sample_ids = ()
    if len(sample_ids) != count:
        return [f"image {i} of the batch" for i in range(count)]
    return [f"sample {sample_id}" for sample_id in sample_ids]
