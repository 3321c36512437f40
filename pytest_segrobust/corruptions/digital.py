"""Tone and colour corruptions: contrast, brightness, darkness, saturation."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from pytest_segrobust.corruptions import functional as Fn
from pytest_segrobust.corruptions.base import Category, PhotometricCorruption, SeverityTable
from pytest_segrobust.randomness.seeding import SampleStreams


@dataclass(frozen=True)
class ContrastParams:
    """Enhancement factor of PIL's ``ImageEnhance.Contrast`` (above 1: more contrast)."""

    factor: float


@dataclass(frozen=True)
class ContrastReductionParams:
    """ImageNet-C's contrast: each channel keeps ``factor`` of its deviation from its mean."""

    factor: float


@dataclass(frozen=True)
class BrightnessParams:
    """Amount added to the HSV value channel."""

    amount: float


@dataclass(frozen=True)
class DarknessParams:
    """Factor of PIL's ``ImageEnhance.Brightness`` (below 1: darker)."""

    factor: float


@dataclass(frozen=True)
class SaturateParams:
    """HSV saturation becomes ``clip(s * scale + shift)``."""

    scale: float
    shift: float


# Schiappa et al. raise contrast; ImageNet-C's contrast reduces it (a different table and op).
CONTRAST_COCO_P = SeverityTable(tuple(ContrastParams(f) for f in (1.2, 1.4, 1.6, 1.8, 2.0)))
CONTRAST_IMAGENET_C = SeverityTable(tuple(ContrastReductionParams(f) for f in (0.4, 0.3, 0.2, 0.1, 0.05)))
BRIGHTNESS = SeverityTable(tuple(BrightnessParams(a) for a in (0.1, 0.2, 0.3, 0.4, 0.5)))
DARKNESS = SeverityTable(tuple(DarknessParams(f) for f in (0.9, 0.8, 0.7, 0.6, 0.5)))
# Not monotone: severities 1-2 desaturate, 3-5 oversaturate.
SATURATE = SeverityTable(tuple(SaturateParams(a, b) for a, b in ((0.3, 0), (0.1, 0), (2, 0), (5, 0.1), (20, 0.2))))


class Contrast(PhotometricCorruption[ContrastParams]):
    """Stretch pixel values away from the image's mean luma."""

    def corrupt_images(self, images: torch.Tensor, params: ContrastParams, streams: SampleStreams) -> torch.Tensor:
        return Fn.enhance_contrast(images, params.factor)


class ContrastReduction(PhotometricCorruption[ContrastReductionParams]):
    """Flatten each channel toward its mean over the image (ImageNet-C's ``contrast``)."""

    def corrupt_images(
        self, images: torch.Tensor, params: ContrastReductionParams, streams: SampleStreams
    ) -> torch.Tensor:
        return Fn.reduce_contrast(images, params.factor)


class Brightness(PhotometricCorruption[BrightnessParams]):
    """Raise the HSV value of every pixel (ImageNet-C's ``brightness``)."""

    # Pixel by pixel, one compiled pass over the whole batch on the CPU: cheaper than image by
    # image, whose per-image calls and copies into the output cost more than the pass itself
    # (benchmarks/peers.py --against-kornia). A pixel's value depends on that pixel alone.
    image_by_image_on_cpu = False

    def corrupt_images(
        self, images: torch.Tensor, params: BrightnessParams, streams: SampleStreams
    ) -> torch.Tensor:
        return Fn.shift_value(images, params.amount)


class Darkness(PhotometricCorruption[DarknessParams]):
    """Blend with black (Schiappa et al.'s darkness, PIL's ``ImageEnhance.Brightness``)."""

    # As Brightness: one pass over the whole batch (a value depends on that value alone).
    image_by_image_on_cpu = False

    def corrupt_images(self, images: torch.Tensor, params: DarknessParams, streams: SampleStreams) -> torch.Tensor:
        return Fn.enhance_brightness(images, params.factor)


class Saturate(PhotometricCorruption[SaturateParams]):
    """Scale and shift the HSV saturation (ImageNet-C's ``saturate``)."""

    def corrupt_images(self, images: torch.Tensor, params: SaturateParams, streams: SampleStreams) -> torch.Tensor:
        return Fn.scale_saturation(images, params.scale, params.shift)


# One instance per severity table; the presets in registry.py list them, in each paper's order.
contrast_coco_p = Contrast("contrast", Category.DIGITAL, CONTRAST_COCO_P)
contrast_imagenet_c = ContrastReduction("contrast", Category.DIGITAL, CONTRAST_IMAGENET_C)
# Schiappa et al. file brightness under environment, ImageNet-C under digital.
brightness_coco_p = Brightness("brightness", Category.ENVIRONMENT, BRIGHTNESS)
brightness_imagenet_c = Brightness("brightness", Category.DIGITAL, BRIGHTNESS)
darkness = Darkness("darkness", Category.ENVIRONMENT, DARKNESS)
saturate = Saturate("saturate", Category.DIGITAL, SATURATE)
