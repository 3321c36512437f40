"""Compression artefacts: real JPEG coding and pixelation."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from pytest_segrobust.corruptions import functional as Fn
from pytest_segrobust.corruptions.base import Category, PhotometricCorruption, SeverityTable
from pytest_segrobust.randomness.seeding import SampleStreams


@dataclass(frozen=True)
class JpegParams:
    """JPEG quality, 1 (worst) to 95."""

    quality: int


@dataclass(frozen=True)
class PixelateParams:
    """Down-scale factor of the box resize before the nearest-neighbour resize back."""

    factor: float


JPEG_COMPRESSION = SeverityTable(tuple(JpegParams(q) for q in (25, 18, 15, 10, 7)))
PIXELATE = SeverityTable(tuple(PixelateParams(f) for f in (0.6, 0.5, 0.4, 0.3, 0.25)))


class JpegCompression(PhotometricCorruption[JpegParams]):
    """Baseline JPEG encode and decode with Pillow (a real codec, not an imitation)."""

    def corrupt_images(self, images: torch.Tensor, params: JpegParams, streams: SampleStreams) -> torch.Tensor:
        return Fn.jpeg(images, params.quality)


class Pixelate(PhotometricCorruption[PixelateParams]):
    """Blocky low resolution: Pillow's box down-scale, then nearest-neighbour up-scale."""

    # One box sum, gather and row copy over the whole batch on the CPU costs less than 16 of
    # each (benchmarks/peers.py --against-kornia); every output value is summed from its own
    # window in pixel order and copied, whatever the batch, so no value changes.
    image_by_image_on_cpu = False

    def corrupt_images(self, images: torch.Tensor, params: PixelateParams, streams: SampleStreams) -> torch.Tensor:
        return Fn.pixelate(images, params.factor)


# One instance per severity table; the presets in registry.py list them, in each paper's order.
jpeg_compression = JpegCompression("jpeg_compression", Category.COMPRESSION, JPEG_COMPRESSION)
pixelate = Pixelate("pixelate", Category.COMPRESSION, PIXELATE)
