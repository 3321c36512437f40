"""Models: the protocols the harness calls, and adapters that fit models to them."""

from __future__ import annotations

from typing import Any

import torch

from pytest_segrobust.models.base import InstancePredictions, InstanceSegmentationModel, SegmentationModel
from pytest_segrobust.models.components import ComponentInstances, connected_components
from pytest_segrobust.models.torch_module import TorchModuleInstanceSegmenter, TorchModuleSegmenter


def as_segmentation_model(obj: Any, device: torch.device | str | None = None, amp: bool = False) -> SegmentationModel:
    """Fit what a factory returned to :class:`SegmentationModel`.

    Objects that already follow the protocol pass through (they manage their own device
    and precision); ``nn.Module`` instances are wrapped by :class:`TorchModuleSegmenter`
    on ``device``, under autocast when ``amp`` is set.

    Raises:
        TypeError: for anything else, saying what was expected.
    """
    if isinstance(obj, SegmentationModel):
        return obj
    if isinstance(obj, torch.nn.Module):
        return TorchModuleSegmenter(obj, device=device, amp=amp)
    raise TypeError(
        f"expected a SegmentationModel (predict, device, fingerprint) or a torch.nn.Module, got {type(obj).__name__}"
    )


def as_instance_model(
    obj: Any, device: torch.device | str | None = None, amp: bool = False
) -> InstanceSegmentationModel:
    """Fit what a factory returned to :class:`InstanceSegmentationModel`.

    Objects that already follow the protocol pass through (they manage their own device
    and precision); ``nn.Module`` instances are wrapped by :class:`TorchModuleInstanceSegmenter`
    on ``device``, under autocast when ``amp`` is set.

    Raises:
        TypeError: for anything else, saying what was expected.
    """
    if isinstance(obj, InstanceSegmentationModel):
        return obj
    if isinstance(obj, torch.nn.Module):
        return TorchModuleInstanceSegmenter(obj, device=device, amp=amp)
    raise TypeError(
        "expected an InstanceSegmentationModel (predict, device, fingerprint) or a torch.nn.Module, "
        f"got {type(obj).__name__}"
    )


__all__ = [
    "ComponentInstances",
    "InstancePredictions",
    "InstanceSegmentationModel",
    "SegmentationModel",
    "TorchModuleInstanceSegmenter",
    "TorchModuleSegmenter",
    "as_instance_model",
    "as_segmentation_model",
    "connected_components",
]
