"""Promptable segmentation's metric: mean IoU over prompt sets (SAM's mIoU), per prompt kind and instance size.

Every prompt set (one instance, one prompt kind) scores the IoU of its predicted mask with its
instance's mask, in percent; ``promptable_miou`` is their mean, and its details the mean of
the sets of each prompt kind (``points``, ``box``) and of each instance size (COCO's areas in
the clean image: ``small`` below 32², ``medium`` below 96², ``large``). NaN where there is no set.

Rows. The statistics hold one row per image: the sums of its prompt sets' IoU and their
counts, overall, per kind and per size. They add up, so any multiset of images scores as the
sets of those images do: each image's sets are the rows the gate sums per unit before it
resamples images, summed already. The statistical gate and the release criteria therefore
read this metric as any other.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import torch

from pytest_segrobust.core.errors import ModelOutputError
from pytest_segrobust.core.prompts import PROMPT_KINDS, PromptedInstances
from pytest_segrobust.core.types import Batch, field_of
from pytest_segrobust.metrics.base import DetailGroup, Metric, MetricContext, MetricResult, Reduction
from pytest_segrobust.metrics.registry import register_metric

SIZES: tuple[tuple[str, float], ...] = (("small", 32.0**2), ("medium", 96.0**2), ("large", float("inf")))
"""COCO's size classes: an instance is of the first whose bound its clean area is below."""
GROUPS: tuple[str, ...] = ("all", *PROMPT_KINDS, *(name for name, _ in SIZES))
STATISTICS: tuple[str, ...] = tuple(f"{column}:{group}" for group in GROUPS for column in ("iou", "count"))
"""Columns of a row: each group's summed IoU (fractions) and its number of prompt sets."""


def size_of(area: int) -> str:
    """The size class of an instance of ``area`` pixels."""
    return next(name for name, bound in SIZES if area < bound)


def scores_of(summed: np.ndarray) -> dict[str, np.ndarray]:
    """Each group's mean IoU in percent from summed rows ``(..., len(STATISTICS))``; NaN where it has no set."""
    scores = {}
    with np.errstate(invalid="ignore", divide="ignore"):
        for g, group in enumerate(GROUPS):
            iou, count = summed[..., 2 * g], summed[..., 2 * g + 1]
            scores[group] = np.where(count > 0, 100.0 * iou / np.where(count > 0, count, 1.0), np.nan)
    return scores


@register_metric
class PromptableMIoU(Metric):
    """Mean IoU over prompt sets, in percent (see the module)."""

    name = "promptable_miou"
    chance_by_classes = False  # each prompted instance against its own mask: all background scores 0
    label = "mIoU (prompted)"
    accepts = (PromptedInstances,)
    detail_labels: ClassVar[dict[str, str]] = {group: f"mIoU {group}" for group in GROUPS[1:]}
    detail_groups = (
        DetailGroup(
            PROMPT_KINDS,
            "with {detail} prompts",
            "Each instance asked with its {detail} prompt alone; the other kinds' sets are left out of these numbers.",
        ),
        DetailGroup(
            tuple(name for name, _ in SIZES),
            "of {detail} instances",
            "The prompt sets of {detail} instances alone, every kind (COCO's areas in the clean image: "
            "small below 32², medium below 96², large the rest).",
        ),
    )
    rows: list[torch.Tensor]

    def __init__(self, context: MetricContext) -> None:
        super().__init__(context)
        self.add_state("rows", [], Reduction.CONCAT)

    def update(self, predictions: list[torch.Tensor], batch: Batch) -> None:
        """Add each image's masks, one per prompt set (the task's checked predictions).

        Raises:
            ModelOutputError: when an image's masks are not one bool mask per prompt set.
        """
        for masks, target in zip(predictions, field_of(batch, PromptedInstances).targets):
            sets = target.prompt_sets()
            if masks.dtype != torch.bool or tuple(masks.shape) != (len(sets), *target.masks.shape[1:]):
                raise ModelOutputError(
                    f"{self.name}: expected {len(sets)} bool masks of size {tuple(target.masks.shape[1:])}, got "
                    f"{masks.dtype} {tuple(masks.shape)}"
                )
            row = torch.zeros(len(STATISTICS), dtype=torch.float64)
            if sets:
                truth = target.masks[[s.instance for s in sets]].to(masks.device)
                inter = (masks & truth).flatten(1).sum(dim=1).double()
                union = (masks | truth).flatten(1).sum(dim=1).double()
                ious = torch.where(union > 0, inter / union.clamp(min=1.0), torch.ones_like(union)).cpu()
                areas = target.areas.cpu().tolist()
                for iou, prompt_set in zip(ious.tolist(), sets):
                    for group in ("all", prompt_set.kind, size_of(int(areas[prompt_set.instance]))):
                        g = GROUPS.index(group)
                        row[2 * g] += iou
                        row[2 * g + 1] += 1.0
            self.rows.append(row)

    def compute(self) -> MetricResult:
        scores = {name: float(value) for name, value in scores_of(self.image_statistics().sum(axis=0)).items()}
        details = {group: scores[group] for group in GROUPS[1:]}
        return MetricResult(scores["all"], tuple(None for _ in self.context.class_names), details)

    def image_statistics(self) -> np.ndarray:
        """``(N, len(STATISTICS))``: per image, each group's summed IoU and count of prompt sets."""
        if not self.rows:
            return np.zeros((0, len(STATISTICS)), dtype=np.float64)
        return torch.stack([torch.as_tensor(row, dtype=torch.float64).reshape(-1) for row in self.rows]).numpy()

    @classmethod
    def score_of(cls, summed: np.ndarray) -> np.ndarray:
        return scores_of(summed)["all"]
