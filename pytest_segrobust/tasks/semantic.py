"""Semantic segmentation: a class id per pixel, scored by mIoU by default."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from pytest_segrobust.core.errors import DatasetError, ModelOutputError
from pytest_segrobust.core.types import Batch, Field, Image, SemanticMask, field_of
from pytest_segrobust.data.base import Sample, SegmentationDataset
from pytest_segrobust.models.base import SegmentationModel
from pytest_segrobust.tasks import register_task
from pytest_segrobust.tasks.base import ImageAnnotation, Task, first_id, shaped_tensor, upload


@register_task
class SemanticTask(Task):
    name = "semantic"
    default_metrics = ("miou",)
    annotation = ImageAnnotation(
        "target",
        "mask",
        SemanticMask,
        tensor="mask",
        leading=0,
        what="semantic label map",
        needs="a semantic evaluation needs a dataset with one, e.g. pytest_segrobust.data.semantic_folder:SemanticFolder",
        mismatch="mask size {} differs",
    )
    model_protocol = SegmentationModel
    model_description = "a SegmentationModel (predict -> (B, H, W) class ids, device, fingerprint)"

    def targets(self, samples: Sequence[Sample], dataset: SegmentationDataset, device: torch.device) -> dict[str, Field]:
        labels = self.annotations(samples, dataset)
        for sample in samples:
            check_class_ids(sample, dataset)
        masks = upload(torch.stack([target.mask for target in labels]), device)
        return {"mask": SemanticMask(masks, dataset.ignore_index)}

    def check_predictions(self, predictions: Any, batch: Batch) -> torch.Tensor:
        images = field_of(batch, Image).data
        expected = (images.shape[0], *images.shape[-2:])
        predictions = shaped_tensor(
            predictions,
            expected,
            values="predictions",
            wanted=f"a tensor of shape {expected}",
            after=f"(class ids per pixel; first sample {first_id(batch)})",
        )
        if predictions.is_floating_point():
            if not bool(torch.isfinite(predictions).all()):
                raise ModelOutputError(f"model returned NaN or infinite values (batch starting at {first_id(batch)})")
            if not bool((predictions == predictions.round()).all()):
                raise ModelOutputError("model returned fractional values; expected integer class ids")
        return predictions


def check_class_ids(sample: Sample, dataset: SegmentationDataset) -> None:
    """Refuse a label map with a scored class id outside the dataset's classes: the dataset's fault, not a model's.

    Raises:
        DatasetError: naming the dataset, the sample, the class id found and the number of classes.
    """
    assert sample.target is not None
    labels, classes, ignore = sample.target.mask, len(dataset.class_names), dataset.ignore_index
    outside = (labels != ignore) & ((labels < 0) | (labels >= classes))
    if bool(outside.any()):
        found = int(labels[outside][0])
        raise DatasetError(
            f"{dataset.name}: sample {sample.sample_id}: ground truth holds class id {found}, outside 0..{classes - 1} "
            f"(the dataset's {classes} class_names; ignore_index {ignore} marks pixels not scored)"
        )
