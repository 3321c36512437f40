"""Models: the protocol the harness calls, and adapters that fit models to it."""

from __future__ import annotations

from typing import Any

import torch

from pytest_segrobust.models.base import SegmentationModel
from pytest_segrobust.models.torch_module import TorchModuleSegmenter


def as_segmentation_model(
    obj: Any, device: torch.device | str | None = None, amp: bool = False
) -> SegmentationModel:
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


__all__ = ["SegmentationModel", "TorchModuleSegmenter", "as_segmentation_model"]
