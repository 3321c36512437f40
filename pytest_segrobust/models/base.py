"""What a model is to the harness: something that maps images to label maps."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import torch


@runtime_checkable
class SegmentationModel(Protocol):
    """A semantic segmentation model.

    ``predict`` receives float images in ``[0, 1]`` on ``device`` and returns one class id
    per pixel. Normalisation and resizing are the model's business.
    """

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
