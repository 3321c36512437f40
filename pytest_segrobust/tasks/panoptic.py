"""Panoptic segmentation: a segment per thing instance and per stuff region, scored by PQ by default."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from pytest_segrobust.core.errors import ModelOutputError
from pytest_segrobust.core.types import Batch, Field, Image, PanopticMap, PanopticPredictions, SampleIndex, field_of
from pytest_segrobust.core.wording import plural
from pytest_segrobust.data.base import Sample, SegmentationDataset
from pytest_segrobust.models.base import PanopticSegmentationModel
from pytest_segrobust.tasks import register_task
from pytest_segrobust.tasks.base import ImageAnnotation, Task


@register_task
class PanopticTask(Task):
    name = "panoptic"
    default_metrics = ("pq",)
    annotation = ImageAnnotation(
        "panoptic",
        "panoptic",
        PanopticMap,
        tensor="segments",
        leading=0,
        what="panoptic annotation",
        needs="a panoptic evaluation needs a dataset with segments, e.g. pytest_segrobust.data.coco_panoptic:CocoPanoptic",
        mismatch="panoptic map of size {} differs",
    )
    model_protocol = PanopticSegmentationModel
    model_description = "a PanopticSegmentationModel (predict -> one PanopticPredictions per image, device, fingerprint)"

    def targets(self, samples: Sequence[Sample], dataset: SegmentationDataset, device: torch.device) -> dict[str, Field]:
        targets = (panoptic.to(device, non_blocking=True) for panoptic in self.annotations(samples, dataset))
        return {"panoptic": PanopticMap(tuple(targets))}

    def check_predictions(self, predictions: Any, batch: Batch) -> Sequence[PanopticPredictions]:
        ids = field_of(batch, SampleIndex).sample_ids
        size = field_of(batch, Image).size()
        if isinstance(predictions, torch.Tensor) or not isinstance(predictions, Sequence) or len(predictions) != len(ids):
            found = type(predictions).__name__
            if isinstance(predictions, Sequence):
                found = plural(len(predictions), "item")
            raise ModelOutputError(
                f"model returned {found}, expected a list of {len(ids)} PanopticPredictions (one per image)"
            )
        for sample_id, predicted in zip(ids, predictions):
            if not isinstance(predicted, PanopticPredictions):
                raise ModelOutputError(
                    f"model returned {type(predicted).__name__} for sample {sample_id}, expected PanopticPredictions"
                )
            if tuple(predicted.segments.shape) != size:
                raise ModelOutputError(
                    f"sample {sample_id}: predicted segments of size {tuple(predicted.segments.shape)}, image {size}"
                )
        return predictions
