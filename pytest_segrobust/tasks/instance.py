"""Instance segmentation: scored masks with class labels per image, scored by COCO mask AP by default."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from pytest_segrobust.core.errors import ModelOutputError
from pytest_segrobust.core.types import Batch, Field, InstanceMasks, InstancePredictions, SampleIndex, field_of
from pytest_segrobust.data.base import Sample, SegmentationDataset
from pytest_segrobust.models.base import InstanceSegmentationModel
from pytest_segrobust.tasks import register_task
from pytest_segrobust.tasks.base import ImageAnnotation, Task, first_id


@register_task
class InstanceTask(Task):
    name = "instance"
    default_metrics = ("map",)
    annotation = ImageAnnotation(
        "instances",
        "instances",
        InstanceMasks,
        tensor="masks",
        leading=1,
        what="instance annotations",
        needs="an instance evaluation needs a dataset with instances, e.g. COCO-format data",
        mismatch="instance masks of size {} differ",
    )
    model_protocol = InstanceSegmentationModel
    model_description = "an InstanceSegmentationModel (predict -> one InstancePredictions per image, device, fingerprint)"

    def targets(self, samples: Sequence[Sample], dataset: SegmentationDataset, device: torch.device) -> dict[str, Field]:
        targets = [instances.to(device, non_blocking=True) for instances in self.annotations(samples, dataset)]
        height, width = samples[0].image.shape[1:]
        return {"instances": InstanceMasks(tuple(targets), int(height), int(width))}

    def check_predictions(self, predictions: Any, batch: Batch) -> Sequence[InstancePredictions]:
        ids = field_of(batch, SampleIndex).sample_ids
        if isinstance(predictions, torch.Tensor) or not isinstance(predictions, Sequence):
            raise ModelOutputError(
                f"model returned {type(predictions).__name__}, expected a list of {len(ids)} InstancePredictions "
                "(one per image) from an instance model"
            )
        if len(predictions) != len(ids):
            raise ModelOutputError(
                f"model returned {len(predictions)} instance predictions for a batch of {len(ids)} "
                f"(first sample {first_id(batch)})"
            )
        for sample_id, predicted in zip(ids, predictions):
            if not isinstance(predicted, InstancePredictions):
                raise ModelOutputError(
                    f"model returned {type(predicted).__name__} for sample {sample_id}, expected InstancePredictions"
                )
        return predictions
