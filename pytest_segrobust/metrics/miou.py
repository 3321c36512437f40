"""Mean intersection over union from a dataset-level confusion matrix.

The state is the confusion matrix alone (sufficient statistics): ``update`` adds a batch to
it on the model's device with one ``bincount``, ``compute`` is a pure function of it, and
two states merge by addition, so partial results from workers combine exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from pytest_segrobust.core.errors import DatasetError, ModelOutputError
from pytest_segrobust.core.statistics import weighted_sums
from pytest_segrobust.core.types import Batch, SemanticMask, field_of
from pytest_segrobust.metrics.base import Metric, MetricContext, MetricResult, Reduction
from pytest_segrobust.metrics.registry import register_metric


@dataclass(frozen=True)
class IoUResult:
    """mIoU in percent, and IoU per class (``None`` for classes absent from GT and prediction)."""

    miou: float
    per_class: tuple[float | None, ...]


class ConfusionMatrix:
    """Accumulates ``matrix[gt, pred]`` pixel counts over a dataset.

    Args:
        num_classes: Number of valid class ids ``0..num_classes-1``.
        ignore_index: Ground-truth label of pixels that are not scored.
        device: Where the matrix lives (the model's device).
    """

    def __init__(self, num_classes: int, ignore_index: int = 255, device: torch.device | str = "cpu") -> None:
        self.num_classes = num_classes
        self.ignore_index = ignore_index
        self.matrix = torch.zeros(num_classes, num_classes, dtype=torch.int64, device=device)

    def reset(self) -> None:
        """Empty the matrix, in place (it stays on its device).

        Not a :class:`~pytest_segrobust.metrics.base.Metric` (scripts accumulate with it
        directly): it declares no states, so it empties its one tensor itself.
        """
        self.matrix.zero_()

    def update(self, predictions: torch.Tensor, targets: torch.Tensor) -> None:
        """Add a batch.

        Shape:
            predictions, targets: ``(B, H, W)`` integer class ids, on the matrix's device.

        Raises:
            ModelOutputError: when a prediction is outside ``0..num_classes-1``.
        """
        self.matrix += confusion_counts(predictions, targets, self.num_classes, self.ignore_index)

    def merge(self, other: ConfusionMatrix) -> None:
        self.matrix += other.matrix.to(self.matrix.device)

    def compute(self) -> IoUResult:
        """IoU per class = TP / (TP + FP + FN); the mean runs over classes seen in GT or prediction."""
        return iou_from_confusion(self.matrix)

    def state_dict(self) -> list[list[int]]:
        """JSON-safe state."""
        return self.matrix.cpu().tolist()

    @classmethod
    def from_state(cls, state: list[list[int]], ignore_index: int = 255) -> ConfusionMatrix:
        metric = cls(len(state), ignore_index)
        metric.matrix = torch.tensor(state, dtype=torch.int64)
        return metric


def checked_class_ids(
    predictions: torch.Tensor, targets: torch.Tensor, num_classes: int, ignore_index: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Predictions and targets as int64, and the mask of scored (not ignored) pixels.

    Raises:
        ModelOutputError: when a prediction is outside ``0..K-1``.
        DatasetError: when a scored ground-truth label is (the semantic task refuses it first, naming the sample).
    """
    k = num_classes
    pred, gt = predictions.long(), targets.long()
    valid = gt != ignore_index
    low, high = torch.aminmax(pred)
    if low < 0 or high >= k:
        bad = pred[(pred < 0) | (pred >= k)][0].item()
        raise ModelOutputError(f"model predicted class id {bad}, outside 0..{k - 1}")
    low, high = torch.aminmax(torch.where(valid, gt, 0))
    if low < 0 or high >= k:
        bad = gt[valid & ((gt < 0) | (gt >= k))][0].item()
        raise DatasetError(f"ground truth holds class id {bad}, outside 0..{k - 1} (ignore {ignore_index})")
    return pred, gt, valid


def image_confusion_counts(predictions: torch.Tensor, targets: torch.Tensor, num_classes: int, ignore_index: int) -> torch.Tensor:
    """``counts[b, gt, pred]`` per image of one batch, on the inputs' device (one ``bincount``).

    Shape:
        predictions, targets: ``(B, H, W)`` integer class ids; return: ``(B, K, K)``, int64.

    Raises:
        ModelOutputError: when a prediction or a ground-truth label is outside ``0..K-1``.
    """
    k = num_classes
    pred, gt, valid = checked_class_ids(predictions, targets, k, ignore_index)
    batch = pred.shape[0]
    offset = (torch.arange(batch, device=pred.device) * (k * k)).view(-1, *([1] * (pred.dim() - 1)))
    index = torch.where(valid, offset + torch.where(valid, gt, 0) * k + pred, batch * k * k)
    return torch.bincount(index.flatten(), minlength=batch * k * k + 1)[: batch * k * k].view(batch, k, k)


def confusion_counts(predictions: torch.Tensor, targets: torch.Tensor, num_classes: int, ignore_index: int) -> torch.Tensor:
    """``counts[gt, pred]`` of one batch, on the inputs' device.

    Shape:
        predictions, targets: ``(B, H, W)`` integer class ids; return: ``(K, K)``, int64.

    Raises:
        ModelOutputError: when a prediction or a ground-truth label is outside ``0..K-1``.
    """
    k = num_classes
    pred, gt, valid = checked_class_ids(predictions, targets, k, ignore_index)
    # Ignored pixels go to one extra bin that is dropped: no boolean gathers on the hot path.
    gt = torch.where(valid, gt, 0)
    index = torch.where(valid, gt * k + pred, k * k)
    return torch.bincount(index.flatten(), minlength=k * k + 1)[: k * k].view(k, k)


@register_metric
class MeanIoU(Metric):
    """Mean intersection over union (percent) from the dataset's confusion matrix."""

    name = "miou"
    label = "mIoU"
    accepts = (SemanticMask,)
    matrix: torch.Tensor
    images: list[torch.Tensor]

    def __init__(self, context: MetricContext) -> None:
        super().__init__(context)
        k = len(context.class_names)
        self.add_state("matrix", torch.zeros(k, k, dtype=torch.int64, device=context.device), Reduction.SUM)
        # Per image its TP, FP and FN per class, for paired statistics.
        self.add_state("images", [], Reduction.CONCAT)

    def update(self, predictions: torch.Tensor, batch: Batch) -> None:
        mask = field_of(batch, SemanticMask)
        per_image = image_confusion_counts(predictions, mask.data, len(self.context.class_names), mask.ignore_index)
        self.matrix += per_image.sum(dim=0)
        tp = per_image.diagonal(dim1=1, dim2=2)
        # Kept on the model's device: no copy (and no GPU sync) per batch; image_statistics() moves them.
        self.images.append(torch.stack([tp, per_image.sum(dim=1) - tp, per_image.sum(dim=2) - tp], dim=-1))

    def compute(self) -> MetricResult:
        iou = iou_from_confusion(self.matrix)
        return MetricResult(iou.miou, iou.per_class)

    def image_statistics(self) -> np.ndarray:
        """``(N, K, 3)``: each image's true positives, false positives and false negatives per class."""
        k = len(self.context.class_names)
        parts = [torch.as_tensor(part).reshape(-1, k, 3).cpu() for part in self.images]
        return torch.cat(parts).numpy() if parts else np.zeros((0, k, 3), dtype=np.int64)

    @classmethod
    def resampled_class_scores(cls, statistics: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """IoU in percent of every class in each resample, ``(R, K)``; NaN where a class is in
        neither truth nor prediction of the resample (as the per-class table leaves it out)."""
        summed = weighted_sums(weights, statistics)
        union = summed[..., 0] + summed[..., 1] + summed[..., 2]
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(union > 0, 100.0 * summed[..., 0] / union, np.nan)

    @classmethod
    def score_of(cls, summed: np.ndarray) -> np.ndarray:
        """mIoU in percent of summed ``(..., K, 3)`` counts, over the classes present (NaN if none)."""
        tp, fp, fn = summed[..., 0], summed[..., 1], summed[..., 2]
        union = tp + fp + fn
        present = union > 0
        iou = np.where(present, tp / np.where(present, union, 1), 0.0)
        with np.errstate(invalid="ignore", divide="ignore"):
            return 100.0 * iou.sum(axis=-1) / present.sum(axis=-1)


def iou_from_confusion(matrix: torch.Tensor) -> IoUResult:
    """IoU per class and their mean over present classes, in percent.

    Shape:
        matrix: ``(K, K)`` counts, rows ground truth, columns prediction.
    """
    m = matrix.double().cpu()
    tp = m.diagonal()
    union = m.sum(0) + m.sum(1) - tp
    present = union > 0
    iou = torch.where(present, tp / union.clamp(min=1), torch.zeros_like(tp))
    per_class = tuple(float(v) * 100 if p else None for v, p in zip(iou.tolist(), present.tolist()))
    miou = float(iou[present].mean()) * 100 if bool(present.any()) else float("nan")
    return IoUResult(miou=miou, per_class=per_class)
