"""Boundary IoU for semantic segmentation (Cheng et al., CVPR 2021).

Boundary IoU compares only the thin band of each class region along its contour, so it
moves with the quality of the boundaries where mIoU hardly moves (a mask eroded by two pixels
keeps most of its area and loses much of its band).

Definition, as in the authors' reference ``mask_to_boundary``
(github.com/bowenc0221/boundary-iou-api, ``boundary_iou/utils/boundary_utils.py``):

* ``d = int(round(dilation_ratio * sqrt(H**2 + W**2)))``, at least 1, with Python's ``round``
  (halves go to the even integer: a 75x100 image, diagonal 125, has ``d = 2``).
* The inner band of a binary mask ``M`` is ``M_d = M - erode(M)``, where ``erode`` is ``d``
  erosions by a 3x3 square of ``M`` padded with zeros: one erosion by a ``(2d + 1)`` square,
  and the image border counts as contour (a region cut by the border has a band along it).
* Boundary IoU of class ``c`` is ``|G_d & P_d| / |G_d | P_d|`` for the class-``c`` masks
  ``G``, ``P`` of ground truth and prediction. Over a dataset the intersections and unions
  are summed per class, as the confusion matrix of mIoU is; the score is the mean over
  classes with a non-zero union, in percent.
* Ignored pixels: ``G`` is ``gt == c`` on the whole image, so an ignored region is outside
  every class and its edge is contour of the classes around it (the band of a class next to a
  VOC "boundary" band is there). Both bands are computed on the full images; ignored pixels
  are then left out of intersection and union, so what a model predicts on them never counts.

The band needs no one-hot masks: pixel ``p`` lies in the band of its own class, and of no
other, exactly when the ``(2d + 1)`` window around it holds another label or leaves the frame.
:func:`boundary_bands` finds that for every class at once, with sliding sums whose cost does
not grow with ``d``, so the work and memory of ``update`` are those of a few ``(B, H, W)``
maps whatever the number of classes and the image size.
"""

from __future__ import annotations

import math
from typing import ClassVar

import torch

from pytest_segrobust.core.types import Batch, SemanticMask, field_of
from pytest_segrobust.metrics.base import Metric, MetricContext, MetricResult, Reduction
from pytest_segrobust.metrics.miou import checked_class_ids
from pytest_segrobust.metrics.registry import register_metric

DEFAULT_DILATION_RATIO = 0.02


def boundary_width(height: int, width: int, dilation_ratio: float = DEFAULT_DILATION_RATIO) -> int:
    """Width ``d`` of the boundary band of an image, in pixels, as the reference computes it."""
    # Python's round (half to even) on the float64 diagonal, like the reference's
    # int(round(ratio * np.sqrt(h**2 + w**2))): the exact rounding decides d at x.5.
    return max(1, round(dilation_ratio * math.sqrt(height * height + width * width)))


def boundary_bands(labels: torch.Tensor, width: int) -> torch.Tensor:
    """Where each pixel lies in the inner boundary band of its own label's region.

    A pixel is in the band when a pixel of another label, or the outside of the image, lies
    within Chebyshev distance ``width`` of it: the region minus its erosion by a
    ``(2 width + 1)`` square with zero padding.

    Pixels within ``width`` of the frame are in the band. For the others the window lies in
    the image, and as it is connected it holds another label exactly when two neighbours in
    it differ: sliding sums (cumulative sums, so the cost does not grow with ``width``) of the
    differing horizontal and vertical neighbour pairs say where.

    Args:
        labels: Label maps; every value is a label (ignored pixels included).
        width: Band width ``d`` in pixels, at least 1.

    Shape:
        labels: ``(N, H, W)``, integer; return: ``(N, H, W)``, bool.
    """
    _, height, width_px = labels.shape
    size = 2 * width + 1
    bands = torch.ones(labels.shape, dtype=torch.bool, device=labels.device)
    if height < size or width_px < size:
        return bands  # every pixel is within ``width`` of the frame
    across = labels[:, :, 1:] != labels[:, :, :-1]  # (N, H, W - 1): pixel and its right neighbour
    down = labels[:, 1:, :] != labels[:, :-1, :]  # (N, H - 1, W): pixel and the one below
    # The window of interior pixel (y, x) holds the pairs across[y - d .. y + d, x - d .. x + d - 1]
    # and down[y - d .. y + d - 1, x - d .. x + d].
    pairs_across = _window_sums(_window_sums(across, size, dim=1), size - 1, dim=2)
    pairs_down = _window_sums(_window_sums(down, size - 1, dim=1), size, dim=2)
    bands[:, width : height - width, width : width_px - width] = (pairs_across > 0) | (pairs_down > 0)
    return bands


def _window_sums(values: torch.Tensor, size: int, dim: int) -> torch.Tensor:
    """Sums over every window of ``size`` consecutive entries along ``dim`` (windows inside only).

    Shape:
        values: ``(..., n, ...)``; return: ``(..., n - size + 1, ...)``, int32.
    """
    sums = torch.cumsum(values, dim=dim, dtype=torch.int32)
    sums = torch.cat([torch.zeros_like(sums.narrow(dim, 0, 1)), sums], dim=dim)
    count = values.shape[dim] - size + 1
    return sums.narrow(dim, size, count) - sums.narrow(dim, 0, count)


def boundary_counts(
    predictions: torch.Tensor,
    targets: torch.Tensor,
    num_classes: int,
    ignore_index: int,
    dilation_ratio: float = DEFAULT_DILATION_RATIO,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-class ``|G_d & P_d|`` and ``|G_d | P_d|`` of one batch, on the inputs' device.

    Shape:
        predictions, targets: ``(B, H, W)`` integer class ids; return: two ``(K,)``, int64.

    Raises:
        ModelOutputError: when a prediction or a ground-truth label is outside ``0..K-1``.
    """
    k = num_classes
    pred, gt, valid = checked_class_ids(predictions, targets, k, ignore_index)
    # Ignored pixels get label k: outside every class for the bands, one bin dropped below.
    gt = torch.where(valid, gt, k)
    height, width = gt.shape[-2:]
    bands = boundary_bands(torch.cat([gt, pred]), boundary_width(int(height), int(width), dilation_ratio))
    in_gt, in_pred = bands[: len(gt)] & valid, bands[len(gt) :] & valid
    both = in_gt & in_pred & (gt == pred)

    def per_class(where: torch.Tensor, classes: torch.Tensor) -> torch.Tensor:
        # Pixels outside ``where`` go to the extra bin k: no boolean gathers.
        return torch.bincount(torch.where(where, classes, k).flatten(), minlength=k + 1)[:k]

    intersection = per_class(both, gt)
    union = per_class(in_gt, gt) + per_class(in_pred, pred) - intersection
    return intersection, union


@register_metric
class BoundaryIoU(Metric):
    """Mean boundary IoU over classes (percent), from per-class band intersections and unions.

    Attributes:
        dilation_ratio: Band width as a fraction of the image diagonal (0.02 in the paper);
            a subclass with its own ``name`` may change it.
    """

    name = "boundary_iou"
    label = "boundary IoU"
    accepts = (SemanticMask,)
    dilation_ratio: ClassVar[float] = DEFAULT_DILATION_RATIO
    intersection: torch.Tensor
    union: torch.Tensor

    def __init__(self, context: MetricContext) -> None:
        super().__init__(context)
        per_class = torch.zeros(len(context.class_names), dtype=torch.int64, device=context.device)
        self.add_state("intersection", per_class, Reduction.SUM)
        self.add_state("union", per_class, Reduction.SUM)

    def update(self, predictions: torch.Tensor, batch: Batch) -> None:
        mask = field_of(batch, SemanticMask)
        intersection, union = boundary_counts(
            predictions, mask.data, len(self.context.class_names), mask.ignore_index, self.dilation_ratio
        )
        self.intersection += intersection
        self.union += union

    def compute(self) -> MetricResult:
        intersection, union = self.intersection.double().cpu(), self.union.double().cpu()
        present = union > 0
        iou = torch.where(present, intersection / union.clamp(min=1), torch.zeros_like(union))
        per_class = tuple(float(v) * 100 if p else None for v, p in zip(iou.tolist(), present.tolist()))
        score = float(iou[present].mean()) * 100 if bool(present.any()) else float("nan")
        return MetricResult(score, per_class)
