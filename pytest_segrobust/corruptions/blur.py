"""Blur corruptions: optical defocus and friends."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from pytest_segrobust.corruptions import functional as Fn
from pytest_segrobust.corruptions.base import CatalogueEntry, Category, PhotometricCorruption, SeverityTable


@dataclass(frozen=True)
class DefocusBlurParams:
    """Disk radius in pixels and the sigma softening the aliased disk."""

    radius: float
    alias_blur: float


DEFOCUS_BLUR = SeverityTable(
    tuple(DefocusBlurParams(r, a) for r, a in ((3, 0.1), (4, 0.5), (6, 0.5), (8, 0.5), (10, 0.5)))
)


class DefocusBlur(PhotometricCorruption[DefocusBlurParams]):
    """Out-of-focus blur: convolution with a (slightly softened) disk."""

    def corrupt_images(self, images: torch.Tensor, params: DefocusBlurParams, rngs: list[torch.Generator]) -> torch.Tensor:
        kernel = Fn.disk_kernel(params.radius, params.alias_blur)
        return Fn.filter2d(images, kernel).clamp_(0.0, 1.0)


CATALOGUE = (CatalogueEntry(DefocusBlur("defocus_blur", Category.BLUR, DEFOCUS_BLUR), ("coco-p", "imagenet-c")),)
