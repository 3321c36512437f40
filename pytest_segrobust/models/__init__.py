"""Models: the protocols the harness calls, and adapters that fit models to them.

Layer 3: imports the layers below and :mod:`pytest_segrobust.tasks`.
"""

from __future__ import annotations

from typing import Any

import torch

from pytest_segrobust.models.adapters import adapt_model, register_adapter
from pytest_segrobust.models.base import (
    InstancePredictions,
    InstanceSegmentationModel,
    PanopticPredictions,
    PanopticSegmentationModel,
    ReferringSegmentationModel,
    SegmentationModel,
)
from pytest_segrobust.models.components import ComponentInstances, ComponentPanoptic, connected_components
from pytest_segrobust.models.torch_module import (
    TorchModuleInstanceSegmenter,
    TorchModulePanopticSegmenter,
    TorchModuleReferringSegmenter,
    TorchModuleSegmenter,
)


def as_segmentation_model(obj: Any, device: torch.device | str | None = None, amp: bool = False) -> SegmentationModel:
    """Fit what a factory returned to :class:`SegmentationModel` (see :func:`adapt_model`).

    Raises:
        TypeError: for anything no adapter fits, saying what was expected.
    """
    from pytest_segrobust.tasks import get_task

    return adapt_model(obj, get_task("semantic"), device=device, amp=amp)


def as_instance_model(
    obj: Any, device: torch.device | str | None = None, amp: bool = False
) -> InstanceSegmentationModel:
    """Fit what a factory returned to :class:`InstanceSegmentationModel` (see :func:`adapt_model`).

    Raises:
        TypeError: for anything no adapter fits, saying what was expected.
    """
    from pytest_segrobust.tasks import get_task

    return adapt_model(obj, get_task("instance"), device=device, amp=amp)


__all__ = [
    "ComponentInstances",
    "ComponentPanoptic",
    "InstancePredictions",
    "InstanceSegmentationModel",
    "PanopticPredictions",
    "PanopticSegmentationModel",
    "ReferringSegmentationModel",
    "SegmentationModel",
    "TorchModuleInstanceSegmenter",
    "TorchModulePanopticSegmenter",
    "TorchModuleReferringSegmenter",
    "TorchModuleSegmenter",
    "adapt_model",
    "as_instance_model",
    "as_segmentation_model",
    "connected_components",
    "register_adapter",
]
