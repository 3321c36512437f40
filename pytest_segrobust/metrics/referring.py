"""Referring segmentation metrics (R2-Bench RIS): mIoU, oIoU and precision at IoU thresholds.

Every sample is one expression with one target mask, and its sufficient statistics are its
intersection ``I`` and union ``U`` with the predicted mask (pixel counts). From them:

* ``referring_miou``: the mean over samples of ``I / U``, in percent;
* ``referring_oiou``: overall IoU, the cumulative ``sum(I) / sum(U)``, in percent (large
  objects weigh more);
* ``referring_p50`` .. ``referring_p90``: the percentage of samples with IoU >= 0.5 .. 0.9.

Convention for empty masks: a sample whose target and prediction are both empty (the
expression names nothing in the frame, e.g. after a geometric corruption moved the object
out, and the model found nothing) has IoU 1, the generalised-referring (gRefCOCO) rule; it
adds nothing to the cumulative ``I`` and ``U``. An oIoU whose cumulative union is 0 (every
sample empty and predicted empty) is therefore 100. With no sample at all every score is NaN.

The states are the per-sample ``I`` and ``U`` (``CONCAT``), kept on the model's device until
:meth:`~ReferringMetric.compute` or :meth:`~ReferringMetric.image_statistics` asks for them,
so workers and shards merge exactly. Every metric here reports the others in its details.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import torch

from pytest_segrobust.core.errors import ModelOutputError
from pytest_segrobust.core.types import Batch, ReferringMask, field_of
from pytest_segrobust.metrics.base import Metric, MetricContext, MetricResult, Reduction
from pytest_segrobust.metrics.registry import register_metric

PRECISION_THRESHOLDS: tuple[float, ...] = (0.5, 0.6, 0.7, 0.8, 0.9)
# Columns of image_statistics(): summed over any multiset of samples, they give its scores.
STATISTICS: tuple[str, ...] = (
    "intersection",
    "union",
    "iou",
    *(f"hit@{t}" for t in PRECISION_THRESHOLDS),
    "count",
)
_INTERSECTION, _UNION, _IOU, _COUNT = 0, 1, 2, len(STATISTICS) - 1
_HIT = {t: 3 + i for i, t in enumerate(PRECISION_THRESHOLDS)}
DETAIL_LABELS: dict[str, str] = {"miou": "mIoU", "oiou": "oIoU", **{f"p{round(t * 100)}": f"P@{round(t * 100)}" for t in PRECISION_THRESHOLDS}}


def intersections_and_unions(predictions: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-sample intersection and union pixel counts, on the inputs' device.

    Shape:
        predictions, targets: ``(B, H, W)``, bool; return: two ``(B,)``, int64.
    """
    predicted, target = predictions.flatten(1), targets.flatten(1)
    return (predicted & target).sum(dim=1), (predicted | target).sum(dim=1)


def sample_statistics(intersections: np.ndarray, unions: np.ndarray) -> np.ndarray:
    """Per-sample sufficient statistics, the columns of :data:`STATISTICS`.

    A sample with an empty union (target and prediction both empty) has IoU 1.

    Shape:
        intersections, unions: ``(N,)`` pixel counts; return: ``(N, len(STATISTICS))``, float64.
    """
    intersections = np.asarray(intersections, dtype=np.float64)
    unions = np.asarray(unions, dtype=np.float64)
    iou = np.where(unions > 0, intersections / np.where(unions > 0, unions, 1.0), 1.0)
    columns = [intersections, unions, iou, *((iou >= t).astype(np.float64) for t in PRECISION_THRESHOLDS)]
    return np.stack([*columns, np.ones_like(iou)], axis=-1)


def scores_of(summed: np.ndarray) -> dict[str, np.ndarray]:
    """Every referring score in percent from summed statistics ``(..., len(STATISTICS))``.

    Keys are those of :data:`DETAIL_LABELS`. NaN where the count is 0.
    """
    count = summed[..., _COUNT]
    with np.errstate(invalid="ignore", divide="ignore"):
        union = summed[..., _UNION]
        oiou = np.where(union > 0, summed[..., _INTERSECTION] / np.where(union > 0, union, 1.0), 1.0)
        scores = {
            "miou": 100.0 * summed[..., _IOU] / count,
            "oiou": np.where(count > 0, 100.0 * oiou, np.nan),
        }
        for threshold, column in _HIT.items():
            scores[f"p{round(threshold * 100)}"] = 100.0 * summed[..., column] / count
    return scores


class ReferringMetric(Metric):
    """What the referring metrics share: per-sample intersection and union states.

    Subclasses set ``key``, the entry of :func:`scores_of` they report as their score.
    """

    key: ClassVar[str]
    accepts = (ReferringMask,)
    chance_by_classes = False  # the referred mask against its truth: all background scores 0
    detail_labels = DETAIL_LABELS
    intersections: list[torch.Tensor]
    unions: list[torch.Tensor]

    def __init__(self, context: MetricContext) -> None:
        super().__init__(context)
        self.add_state("intersections", [], Reduction.CONCAT)
        self.add_state("unions", [], Reduction.CONCAT)
        self.keep_row_units()  # an expression's image: the gate resamples images

    def update(self, predictions: torch.Tensor, batch: Batch) -> None:
        """Add a batch of bool masks ``(B, H, W)`` (the task has thresholded logits).

        Raises:
            ModelOutputError: when the masks are not bool or not the targets' shape.
        """
        target = field_of(batch, ReferringMask).data
        if predictions.dtype != torch.bool or predictions.shape != target.shape:
            raise ModelOutputError(
                f"{self.name}: expected bool masks of shape {tuple(target.shape)}, got {predictions.dtype} "
                f"{tuple(predictions.shape)}"
            )
        intersection, union = intersections_and_unions(predictions.to(target.device), target)
        # Kept on the model's device: no copy (and no GPU sync) per batch.
        self.intersections.append(intersection)
        self.unions.append(union)
        self.add_row_units(batch)

    def compute(self) -> MetricResult:
        scores = {name: float(value) for name, value in scores_of(self.image_statistics().sum(axis=0)).items()}
        details = {name: value for name, value in scores.items() if name != self.key}
        return MetricResult(scores[self.key], tuple(None for _ in self.context.class_names), details)

    def image_statistics(self) -> np.ndarray:
        """``(N, len(STATISTICS))``: each sample's I, U, IoU, hits at 0.5..0.9 and a count of 1."""
        intersections = [torch.as_tensor(part).reshape(-1).cpu() for part in self.intersections]
        unions = [torch.as_tensor(part).reshape(-1).cpu() for part in self.unions]
        if not intersections:
            return np.zeros((0, len(STATISTICS)), dtype=np.float64)
        return sample_statistics(torch.cat(intersections).numpy(), torch.cat(unions).numpy())

    @classmethod
    def score_of(cls, summed: np.ndarray) -> np.ndarray:
        """The metric's score in percent from summed statistics ``(..., len(STATISTICS))``."""
        return scores_of(summed)[cls.key]


@register_metric
class ReferringMeanIoU(ReferringMetric):
    """Mean over samples (expressions) of each sample's IoU, in percent."""

    name = "referring_miou"
    label = "mIoU"
    key = "miou"


@register_metric
class ReferringOverallIoU(ReferringMetric):
    """Overall IoU: cumulative intersection over cumulative union of all samples, in percent."""

    name = "referring_oiou"
    label = "oIoU"
    key = "oiou"


class ReferringPrecision(ReferringMetric):
    """Percentage of samples whose IoU is at least ``threshold``."""

    threshold: ClassVar[float]


def precision_metric(threshold: float) -> type[ReferringPrecision]:
    """The registered ``referring_pNN`` metric of one of :data:`PRECISION_THRESHOLDS`."""
    percent = round(threshold * 100)
    class_name = f"ReferringPrecision{percent}"
    attributes = {
        "__module__": __name__,
        "__qualname__": class_name,
        "__doc__": f"Percentage of samples whose IoU is at least {threshold}.",
        "name": f"referring_p{percent}",
        "label": f"P@{percent}",
        "key": f"p{percent}",
        "threshold": threshold,
    }
    return register_metric(type(class_name, (ReferringPrecision,), attributes))


# One class per threshold, each a module attribute under its own name (so that it pickles).
ReferringPrecision50, ReferringPrecision60, ReferringPrecision70, ReferringPrecision80, ReferringPrecision90 = (
    precision_metric(threshold) for threshold in PRECISION_THRESHOLDS
)
