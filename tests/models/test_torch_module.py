"""The adapters that fit plain modules to the model protocols."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from pytest_segrobust.core.errors import ModelOutputError
from pytest_segrobust.models import (
    InstancePredictions,
    InstanceSegmentationModel,
    TorchModuleInstanceSegmenter,
    TorchModuleReferringSegmenter,
    TorchModuleSegmenter,
    as_instance_model,
)

IMAGES = torch.zeros(2, 3, 4, 6)


class Returns(torch.nn.Module):
    """A module that returns ``make(images)``; a parameter gives it weights to fingerprint."""

    def __init__(self, make: Any) -> None:
        super().__init__()
        self.make = make
        self.weight = torch.nn.Parameter(torch.ones(1))

    def forward(self, images: torch.Tensor) -> Any:
        return self.make(images)


def mask_rcnn_style(images: torch.Tensor) -> list[dict[str, torch.Tensor]]:
    """Two detections per image with soft masks (N, 1, H, W), as torchvision's Mask R-CNN returns them."""
    height, width = images.shape[-2:]
    probabilities = torch.linspace(0, 1, height * width).view(1, 1, height, width).repeat(2, 1, 1, 1)
    return [
        {
            "boxes": torch.zeros(2, 4),
            "masks": probabilities,
            "labels": torch.tensor([1, 2]),
            "scores": torch.tensor([0.9, 0.5]),
        }
        for _ in images
    ]


def test_soft_masks_are_thresholded_and_types_normalised() -> None:
    model = TorchModuleInstanceSegmenter(Returns(mask_rcnn_style), mask_threshold=0.5)
    predictions = model.predict(IMAGES)
    assert len(predictions) == 2 and all(isinstance(p, InstancePredictions) for p in predictions)
    first = predictions[0]
    assert first.masks.shape == (2, 4, 6) and first.masks.dtype == torch.bool
    assert first.masks[0].sum() == 12  # the upper half of linspace(0, 1, 24)
    assert first.labels.dtype == torch.int64 and first.scores.dtype == torch.float32


def test_bool_masks_int32_labels_half_scores_and_ready_predictions_are_accepted() -> None:
    ready = InstancePredictions(torch.ones(1, 4, 6, dtype=torch.bool), torch.tensor([3]), torch.tensor([0.7]))
    raw = {
        "masks": torch.ones(1, 4, 6, dtype=torch.bool),
        "labels": torch.tensor([2], dtype=torch.int32),
        "scores": torch.tensor([0.5], dtype=torch.float16),
    }
    first, second = TorchModuleInstanceSegmenter(Returns(lambda images: (ready, raw))).predict(IMAGES)
    assert first is ready
    assert second.labels.dtype == torch.int64 and second.scores.dtype == torch.float32


def test_the_module_runs_in_eval_mode_without_gradients() -> None:
    seen: dict[str, bool] = {}

    def record(images: torch.Tensor) -> list[dict[str, torch.Tensor]]:
        seen["grad"] = torch.is_grad_enabled()
        return mask_rcnn_style(images)

    module = Returns(record).train()
    TorchModuleInstanceSegmenter(module).predict(IMAGES)
    assert not module.training and not seen["grad"]


def detections(masks: torch.Tensor, labels: Any = None, scores: Any = None) -> dict[str, Any]:
    count = masks.shape[0]
    return {
        "masks": masks,
        "labels": torch.ones(count, dtype=torch.int64) if labels is None else labels,
        "scores": torch.ones(count) if scores is None else scores,
    }


BAD_OUTPUTS = {
    "a tensor": (lambda images: torch.zeros(2, 1, 4, 6), "expected a list of 2 per-image instance predictions"),
    "too few items": (lambda images: [detections(torch.ones(1, 4, 6))], "got a sequence of 1"),
    "a missing key": (lambda images: [{"masks": torch.ones(1, 4, 6), "labels": torch.ones(1)}] * 2, "missing scores"),
    "the wrong size": (lambda images: [detections(torch.ones(1, 2, 3))] * 2, r"expected \(N, 4, 6\)"),
    "multichannel masks": (lambda images: [detections(torch.ones(1, 2, 4, 6))] * 2, r"\(N, H, W\) or \(N, 1, H, W\)"),
    "float labels": (lambda images: [detections(torch.ones(1, 4, 6), labels=torch.ones(1))] * 2, "integer class ids"),
    "too few scores": (lambda images: [detections(torch.ones(2, 4, 6), scores=torch.ones(1))] * 2, "scores of shape"),
    "not a dict": (lambda images: ["person"] * 2, "expected a dict with masks, labels, scores"),
}


@pytest.mark.parametrize(("make", "message"), BAD_OUTPUTS.values(), ids=BAD_OUTPUTS.keys())
def test_wrong_output_says_what_was_expected(make: Any, message: str) -> None:
    with pytest.raises(ModelOutputError, match=message):
        TorchModuleInstanceSegmenter(Returns(make)).predict(IMAGES)


def test_fingerprint_follows_weights_and_settings() -> None:
    module = Returns(mask_rcnn_style)
    base = TorchModuleInstanceSegmenter(module).fingerprint()
    assert TorchModuleInstanceSegmenter(Returns(mask_rcnn_style)).fingerprint() == base
    assert TorchModuleInstanceSegmenter(module, mask_threshold=0.3).fingerprint() != base
    assert TorchModuleInstanceSegmenter(module, amp=True).fingerprint() != base
    with torch.no_grad():
        module.weight.add_(1)
    assert TorchModuleInstanceSegmenter(module).fingerprint() != base


def test_amp_runs_under_autocast() -> None:
    dtypes: list[torch.dtype] = []

    def record(images: torch.Tensor) -> list[dict[str, torch.Tensor]]:
        dtypes.append(torch.nn.functional.linear(images[..., :1], torch.ones(1, 1)).dtype)
        return mask_rcnn_style(images)

    TorchModuleInstanceSegmenter(Returns(record), amp=True).predict(IMAGES)
    assert dtypes == [torch.bfloat16]


def test_as_instance_model_wraps_modules_and_passes_models_through() -> None:
    wrapped = as_instance_model(Returns(mask_rcnn_style))
    assert isinstance(wrapped, TorchModuleInstanceSegmenter) and isinstance(wrapped, InstanceSegmentationModel)
    assert as_instance_model(wrapped) is wrapped
    with pytest.raises(TypeError, match="expected an InstanceSegmentationModel"):
        as_instance_model(object())


def test_segmenter_takes_torchvision_mappings_and_resizes_logits() -> None:
    logits = torch.zeros(2, 3, 2, 3)
    logits[:, 2, :, 1:] = 1.0
    predicted = TorchModuleSegmenter(Returns(lambda images: {"out": logits})).predict(IMAGES)
    assert predicted.shape == (2, 4, 6) and predicted[:, :, 2:].eq(2).all() and predicted[:, :, 0].eq(0).all()
    with pytest.raises(ModelOutputError, match="without key 'out'"):
        TorchModuleSegmenter(Returns(lambda images: {"aux": logits})).predict(IMAGES)
    with pytest.raises(ModelOutputError, match=r"\(B, K, H, W\)"):
        TorchModuleSegmenter(Returns(lambda images: logits[0])).predict(IMAGES)


class ReturnsForTexts(torch.nn.Module):
    """A referring module that returns ``make(images)`` whatever the expressions."""

    def __init__(self, make: Any) -> None:
        super().__init__()
        self.make = make

    def forward(self, images: torch.Tensor, texts: list[str]) -> Any:
        return self.make(images)


def test_referring_segmenter_takes_torchvision_mappings_as_the_segmenter_does() -> None:
    logits = torch.full((2, 4, 6), -1.0)
    logits[1] = 1.0
    masks = TorchModuleReferringSegmenter(ReturnsForTexts(lambda images: {"out": logits})).predict(IMAGES, ["a", "b"])
    assert masks.dtype == torch.bool and not masks[0].any() and masks[1].all()
    with pytest.raises(ModelOutputError, match=r"without key 'out' \(keys: \['aux'\]\)"):
        TorchModuleReferringSegmenter(ReturnsForTexts(lambda images: {"aux": logits})).predict(IMAGES, ["a", "b"])
