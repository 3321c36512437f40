"""Panoptic segmentation: a segment per thing instance and per stuff region, scored by PQ by default."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import torch

from pytest_segrobust.core.errors import DatasetError, ModelOutputError
from pytest_segrobust.core.types import Batch, Field, Image, PanopticMap, PanopticPredictions, SampleIndex, field_of
from pytest_segrobust.core.wording import plural
from pytest_segrobust.data.base import Sample, SegmentationDataset
from pytest_segrobust.models.base import PanopticSegmentationModel
from pytest_segrobust.tasks import register_task
from pytest_segrobust.tasks.base import Task


@register_task
class PanopticTask(Task):
    name = "panoptic"
    default_metrics = ("pq",)
    target_types = (PanopticMap,)
    reads = ("image", "panoptic")
    collates: ClassVar[Mapping[str, type[Field]]] = {**Task.collates, "panoptic": PanopticMap}
    model_protocol = PanopticSegmentationModel
    model_description = "a PanopticSegmentationModel (predict -> one PanopticPredictions per image, device, fingerprint)"

    def targets(self, samples: Sequence[Sample], dataset: SegmentationDataset, device: torch.device) -> dict[str, Field]:
        targets = []
        for sample in samples:
            if sample.panoptic is None:
                raise DatasetError(
                    f"{dataset.name}: sample {sample.sample_id} has no panoptic annotation; a panoptic evaluation "
                    "needs a dataset with segments, e.g. pytest_segrobust.data.coco_panoptic:CocoPanoptic"
                )
            if tuple(sample.panoptic.segments.shape) != tuple(sample.image.shape[1:]):
                raise DatasetError(
                    f"{dataset.name}: sample {sample.sample_id}: panoptic map of size "
                    f"{tuple(sample.panoptic.segments.shape)} differs from image size {tuple(sample.image.shape[1:])}"
                )
            targets.append(sample.panoptic.to(device, non_blocking=True))
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
