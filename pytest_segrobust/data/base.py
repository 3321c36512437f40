"""What a dataset is to the harness: a sized, indexable stream of samples.

Datasets yield one sample at a time (never the whole set in memory); the evaluator
batches them. Images are ``uint8`` so that a dataset costs what its pixels cost, and the
evaluator converts them to float on the model's device.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import torch

DEFAULT_IGNORE_INDEX = 255


@dataclass(frozen=True)
class SemanticTarget:
    """Dense per-pixel class labels of one image.

    Shape:
        mask: ``(H, W)``, ``int64``; ``ignore_index`` marks pixels that are not scored.
    """

    mask: torch.Tensor


@dataclass(frozen=True)
class Sample:
    """One image with its annotation.

    Shape:
        image: ``(3, H, W)``, ``uint8``, RGB.

    Attributes:
        sample_id: Stable identifier of the image within its dataset. It seeds the
            corruption of this image, so it must not depend on position or split order.
    """

    sample_id: str
    image: torch.Tensor
    target: SemanticTarget


@runtime_checkable
class SegmentationDataset(Protocol):
    """A sized, indexable collection of :class:`Sample`."""

    name: str
    class_names: tuple[str, ...]
    ignore_index: int

    def __len__(self) -> int: ...

    def __getitem__(self, index: int) -> Sample: ...

    def fingerprint(self) -> str:
        """A string that changes whenever the content of the dataset changes."""
        ...
