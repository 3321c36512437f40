"""Weather corruptions: fog, frost, snow and spatter (ImageNet-C semantics, per-image layers)."""

from __future__ import annotations

import torch

from pytest_segrobust.corruptions import functional as Fn
from pytest_segrobust.corruptions.base import Category, PhotometricCorruption, SeverityTable
from pytest_segrobust.corruptions.functional.weather import FogParams, FrostParams, SnowParams, SpatterParams
from pytest_segrobust.randomness.seeding import SampleStreams

# ImageNet-C's constants; COCO-P and Cityscapes-C use them unchanged.
FOG = SeverityTable(tuple(FogParams(c, d) for c, d in ((1.5, 2.0), (2.0, 2.0), (2.5, 1.7), (2.5, 1.5), (3.0, 1.4))))
FROST = SeverityTable(tuple(FrostParams(a, b) for a, b in ((1, 0.4), (0.8, 0.6), (0.7, 0.7), (0.65, 0.7), (0.6, 0.75))))
SNOW = SeverityTable(
    (
        SnowParams(0.1, 0.3, 3, 0.5, 10, 4, 0.8),
        SnowParams(0.2, 0.3, 2, 0.5, 12, 4, 0.7),
        SnowParams(0.55, 0.3, 4, 0.9, 12, 8, 0.7),
        SnowParams(0.55, 0.3, 4.5, 0.85, 12, 8, 0.65),
        SnowParams(0.55, 0.3, 2.5, 0.85, 12, 12, 0.55),
    )
)
SPATTER = SeverityTable(
    (
        SpatterParams(0.65, 0.3, 4, 0.69, 0.6, "water"),
        SpatterParams(0.65, 0.3, 3, 0.68, 0.6, "water"),
        SpatterParams(0.65, 0.3, 2, 0.68, 0.5, "water"),
        SpatterParams(0.65, 0.3, 1, 0.65, 1.5, "mud"),
        SpatterParams(0.67, 0.4, 1, 0.65, 1.5, "mud"),
    )
)


class Fog(PhotometricCorruption[FogParams]):
    """A diamond-square plasma haze over a contrast-compressed image."""

    def corrupt_images(self, images: torch.Tensor, params: FogParams, streams: SampleStreams) -> torch.Tensor:
        return Fn.fog(images, params, streams)


class Frost(PhotometricCorruption[FrostParams]):
    """Ice crystals on the lens: the image dimmed and a frost layer added.

    The frost layer is procedural (see :func:`~pytest_segrobust.corruptions.functional.frost_layer`):
    ImageNet-C crops one of its frost photographs, which this package does not ship; each
    image here crops one of five procedural textures with the statistics of the five
    photographs the reference draws from, built once per size and cached.
    """

    def corrupt_images(self, images: torch.Tensor, params: FrostParams, streams: SampleStreams) -> torch.Tensor:
        return Fn.frost(images, params, streams)


class Snow(PhotometricCorruption[SnowParams]):
    """Falling snow: streaked flakes over a whitened scene."""

    def corrupt_images(self, images: torch.Tensor, params: SnowParams, streams: SampleStreams) -> torch.Tensor:
        return Fn.snow(images, params, streams)


class Spatter(PhotometricCorruption[SpatterParams]):
    """Water drops (severities 1-3) or mud splashes (4-5) on the lens.

    Water shading uses the reference's operators: OpenCV's Canny and distance transform on
    the CPU when OpenCV is installed, torch ports of them otherwise (see
    :func:`~pytest_segrobust.corruptions.functional.weather.water_shading`).
    """

    def corrupt_images(self, images: torch.Tensor, params: SpatterParams, streams: SampleStreams) -> torch.Tensor:
        return Fn.spatter(images, params, streams)


# One instance per severity table; the presets in registry.py list them, in each paper's order.
fog = Fog("fog", Category.ENVIRONMENT, FOG)
frost = Frost("frost", Category.ENVIRONMENT, FROST)
snow = Snow("snow", Category.ENVIRONMENT, SNOW)
spatter = Spatter("spatter", Category.ENVIRONMENT, SPATTER)
