"""Compression artefacts: real JPEG coding."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from pytest_segrobust.corruptions import functional as Fn
from pytest_segrobust.corruptions.base import CatalogueEntry, Category, PhotometricCorruption, SeverityTable


@dataclass(frozen=True)
class JpegParams:
    """JPEG quality, 1 (worst) to 95."""

    quality: int


JPEG_COMPRESSION = SeverityTable(tuple(JpegParams(q) for q in (25, 18, 15, 10, 7)))


class JpegCompression(PhotometricCorruption[JpegParams]):
    """Baseline JPEG encode and decode with Pillow (a real codec, not an imitation)."""

    def corrupt_images(self, images: torch.Tensor, params: JpegParams, rngs: list[torch.Generator]) -> torch.Tensor:
        return Fn.jpeg(images, params.quality)


CATALOGUE = (
    CatalogueEntry(
        JpegCompression("jpeg_compression", Category.COMPRESSION, JPEG_COMPRESSION), ("coco-p", "imagenet-c")
    ),
)
