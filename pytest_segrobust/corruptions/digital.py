"""Digital corruptions: global tone changes."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from pytest_segrobust.corruptions import functional as Fn
from pytest_segrobust.corruptions.base import CatalogueEntry, Category, PhotometricCorruption, SeverityTable


@dataclass(frozen=True)
class ContrastParams:
    """Enhancement factor of PIL's ``ImageEnhance.Contrast`` (above 1: more contrast)."""

    factor: float


# Schiappa et al. raise contrast; ImageNet-C's contrast reduces it (a different table and op).
CONTRAST_COCO_P = SeverityTable(tuple(ContrastParams(f) for f in (1.2, 1.4, 1.6, 1.8, 2.0)))


class Contrast(PhotometricCorruption[ContrastParams]):
    """Stretch pixel values away from the image's mean luma."""

    def corrupt_images(self, images: torch.Tensor, params: ContrastParams, rngs: list[torch.Generator]) -> torch.Tensor:
        return Fn.enhance_contrast(images, params.factor)


CATALOGUE = (CatalogueEntry(Contrast("contrast", Category.DIGITAL, CONTRAST_COCO_P), ("coco-p",)),)
