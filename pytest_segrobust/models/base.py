"""What a model is to the harness: something that maps images to label maps or instances.

The suite's task says which protocol its models follow: a ``semantic`` suite calls
:class:`SegmentationModel`, an ``instance`` suite :class:`InstanceSegmentationModel`, a
``referring`` suite :class:`ReferringSegmentationModel` (images and expressions). All
take float images in ``[0, 1]`` on the model's ``device``; normalisation and resizing are
the model's business.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import torch

from pytest_segrobust.core.errors import ModelOutputError
from pytest_segrobust.core.prompts import PromptSet
from pytest_segrobust.core.types import InstancePredictions, PanopticPredictions

__all__ = [
    "REFERRING_LOGIT_THRESHOLD",
    "InstancePredictions",
    "InstanceSegmentationModel",
    "PanopticPredictions",
    "PanopticSegmentationModel",
    "PromptableSegmentationModel",
    "ReferringSegmentationModel",
    "SegmentationModel",
    "model_device",
]


@runtime_checkable
class SegmentationModel(Protocol):
    """A semantic segmentation model: one class id per pixel."""

    device: torch.device

    def predict(self, images: torch.Tensor) -> torch.Tensor:
        """Predict class ids.

        Shape:
            images: ``(B, 3, H, W)``, float in ``[0, 1]``.
            return: ``(B, H, W)``, integer class ids.
        """
        ...

    def fingerprint(self) -> str:
        """A string that changes whenever the model's behaviour may change (weights, config)."""
        ...


@runtime_checkable
class InstanceSegmentationModel(Protocol):
    """An instance segmentation model: scored masks with class labels, per image."""

    device: torch.device

    def predict(self, images: torch.Tensor) -> Sequence[InstancePredictions]:
        """Detect instances.

        Labels follow the dataset's contiguous numbering: label ``k`` is ``class_names[k]``
        (for COCO data, the ``k``-th category in id order; 0 is background).

        Shape:
            images: ``(B, 3, H, W)``, float in ``[0, 1]``.
            return: ``B`` predictions, masks ``(N_i, H, W)``.
        """
        ...

    def fingerprint(self) -> str:
        """A string that changes whenever the model's behaviour may change (weights, config)."""
        ...


@runtime_checkable
class PanopticSegmentationModel(Protocol):
    """A panoptic segmentation model: a segment id per pixel and a class per segment, per image."""

    device: torch.device

    def predict(self, images: torch.Tensor) -> Sequence[PanopticPredictions]:
        """Segment each image into things (one segment per instance) and stuff.

        Shape:
            images: ``(B, 3, H, W)``, float in ``[0, 1]``; return: ``B`` predictions of ``(H, W)``.
        """
        ...

    def fingerprint(self) -> str:
        """A string that changes whenever the model's behaviour may change (weights, config)."""
        ...


# A referring model's float output is logits: a pixel belongs to the mask where its logit
# is above 0, i.e. where sigmoid(logit) > 0.5.
REFERRING_LOGIT_THRESHOLD = 0.0


@runtime_checkable
class ReferringSegmentationModel(Protocol):
    """A referring segmentation model: one mask per image for the expression that goes with it."""

    device: torch.device

    def predict(self, images: torch.Tensor, texts: Sequence[str]) -> torch.Tensor:
        """Segment the region each expression names in its image.

        Return bool masks, or float logits that the task thresholds at
        :data:`REFERRING_LOGIT_THRESHOLD` (a pixel is in the mask where its logit is > 0).

        Shape:
            images: ``(B, 3, H, W)``, float in ``[0, 1]``; texts: ``B`` strings;
            return: ``(B, H, W)``, bool masks or float logits.
        """
        ...

    def fingerprint(self) -> str:
        """A string that changes whenever the model's behaviour may change (weights, config)."""
        ...


@runtime_checkable
class PromptableSegmentationModel(Protocol):
    """A promptable (SAM-style) segmentation model: one mask per prompt set.

    ``prompts[b]`` holds image ``b``'s prompt sets
    (:class:`~pytest_segrobust.core.prompts.PromptSet`: clicks with labels, or a box, in pixels
    of the image as given); a set with no prompt left is never passed.
    """

    device: torch.device

    def predict(self, images: torch.Tensor, prompts: Sequence[Sequence[PromptSet]]) -> Sequence[Any]:
        """Segment what each prompt set points at.

        Return, per image, ``(P, H, W)`` bool masks or float logits (thresholded at 0), or a pair
        ``(masks (P, M, H, W), scores (P, M))`` of several candidates per set, of which the task
        takes the best-scoring one.

        Shape:
            images: ``(B, 3, H, W)``, float in ``[0, 1]``; return: ``B`` items, ``P = len(prompts[b])``.
        """
        ...

    def fingerprint(self) -> str:
        """A string that changes whenever the model's behaviour may change (weights, config)."""
        ...


def model_device(model: object) -> torch.device:
    """The device a model says it runs on, from a ``torch.device`` or a string such as ``"cpu"``.

    Raises:
        ModelOutputError: naming the model's type when ``device`` is missing or not a device.
    """
    device = getattr(model, "device", None)
    if isinstance(device, torch.device):
        return device
    try:
        return torch.device(device)  # type: ignore[arg-type]
    except (TypeError, RuntimeError, ValueError):
        raise ModelOutputError(
            f"model {type(model).__name__}: attribute 'device' must be a torch.device or a device string "
            f"such as 'cpu' or 'cuda:0', got {device!r}"
        ) from None
