"""Referring segmentation (R2-Bench RIS): one mask per image for the expression that names it.

Each sample is one expression with its image and the region it names: an image with three
expressions is three samples (ids ``image/ref/sentence``), each scored on its own. Models
follow :class:`~pytest_segrobust.models.base.ReferringSegmentationModel`:
``predict(images, texts)`` returns ``(B, H, W)`` bool masks, or float logits that are
thresholded at 0 (a pixel is in the mask where its logit is > 0, i.e. sigmoid > 0.5). The
default metrics are the mean of per-sample IoU and the overall (cumulative) IoU; precision
at IoU 0.5..0.9 are metrics of their own (and details of both). Suite keys: ``text_replay``
and ``mixture`` (:mod:`pytest_segrobust.tasks.referring_cells`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

import torch

from pytest_segrobust.core.errors import DatasetError, ModelOutputError
from pytest_segrobust.core.types import Batch, Expressions, Field, Image, ReferringMask, field_of
from pytest_segrobust.data.base import Sample, SegmentationDataset
from pytest_segrobust.models.base import ReferringSegmentationModel
from pytest_segrobust.tasks import register_task
from pytest_segrobust.tasks.base import SuiteCells, Task, first_id, logit_masks, non_empty_text, upload
from pytest_segrobust.tasks.referring_cells import TEXT_SUITE_KEYS, TextKeys, text_cells


@register_task
class ReferringTask(TextKeys, Task):
    name = "referring"
    default_metrics = ("referring_miou", "referring_oiou")
    target_types = (ReferringMask, Expressions)
    reads = ("image", "referring")
    collates: ClassVar[Mapping[str, type[Field]]] = {
        **Task.collates,
        "expression": Expressions,
        "referring_mask": ReferringMask,
    }
    model_protocol = ReferringSegmentationModel
    model_description = (
        "a ReferringSegmentationModel (predict(images, texts) -> (B, H, W) bool masks or float logits, "
        "device, fingerprint)"
    )
    suite_keys = TEXT_SUITE_KEYS
    groups_samples = True  # a sample is an expression; several describe one image

    def suite_cells(
        self, options: Mapping[str, Any], corruptions: tuple[str, ...], resolve: Callable[..., Any]
    ) -> SuiteCells:
        """``text_replay`` and ``mixture`` (:mod:`pytest_segrobust.tasks.referring_cells`)."""
        return text_cells(options, corruptions, resolve)  # type: ignore[arg-type]

    def targets(self, samples: Sequence[Sample], dataset: SegmentationDataset, device: torch.device) -> dict[str, Field]:
        for sample in samples:
            referring = sample.referring
            if referring is None:
                raise DatasetError(
                    f"{dataset.name}: sample {sample.sample_id} has no referring expression; a referring evaluation "
                    "needs a referring dataset, e.g. pytest_segrobust.data.referring:ReferringJsonl"
                )
            non_empty_text(referring.expression, dataset, sample, "referring expression")
            if referring.mask.dtype != torch.bool or tuple(referring.mask.shape) != tuple(sample.image.shape[1:]):
                raise DatasetError(
                    f"{dataset.name}: sample {sample.sample_id}: expected a bool mask of the image's size "
                    f"{tuple(sample.image.shape[1:])}, got {referring.mask.dtype} {tuple(referring.mask.shape)}"
                )
        masks = torch.stack([s.referring.mask for s in samples if s.referring is not None])
        return {
            "expression": Expressions(tuple(s.referring.expression for s in samples if s.referring is not None)),
            "referring_mask": ReferringMask(upload(masks, device)),
        }

    def predict(self, model: Any, batch: Batch) -> Any:
        """``model.predict(images, texts)`` with the batch's (possibly perturbed) expressions as a list."""
        return model.predict(field_of(batch, Image).data, list(field_of(batch, Expressions).texts))

    def check_predictions(self, predictions: Any, batch: Batch) -> torch.Tensor:
        """Bool masks ``(B, H, W)``: bool predictions as they are, float logits thresholded at 0.

        Raises:
            ModelOutputError: for a non-tensor, a wrong batch size or shape, an integer dtype,
                or NaN / infinite logits.
        """
        images = field_of(batch, Image).data
        expected = (int(images.shape[0]), *(int(v) for v in images.shape[-2:]))
        if not isinstance(predictions, torch.Tensor):
            raise ModelOutputError(
                f"model returned {type(predictions).__name__}, expected a tensor of shape {expected} "
                "(one mask per expression)"
            )
        shape = tuple(predictions.shape)
        if predictions.dim() >= 1 and shape[0] != expected[0]:
            raise ModelOutputError(
                f"model returned {shape[0]} masks for a batch of {expected[0]} expressions "
                f"(first sample {first_id(batch)})"
            )
        if shape != expected:
            raise ModelOutputError(
                f"model returned masks of shape {shape}, expected {expected} (one (H, W) mask per expression "
                f"at the input resolution; first sample {first_id(batch)})"
            )
        return logit_masks(predictions, batch, first="batch starting at")
