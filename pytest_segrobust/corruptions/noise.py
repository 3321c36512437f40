"""Noise corruptions: sensor and photon noise added per pixel."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from pytest_segrobust.corruptions import functional as Fn
from pytest_segrobust.corruptions.base import CatalogueEntry, Category, PhotometricCorruption, SeverityTable


@dataclass(frozen=True)
class GaussianNoiseParams:
    """Standard deviation of additive noise on the ``[0, 1]`` scale."""

    std: float


@dataclass(frozen=True)
class ShotNoiseParams:
    """Photon count scale: the image becomes ``poisson(x * photons) / photons``."""

    photons: float


# Schiappa et al. (COCO-P) and ImageNet-C share the Gaussian constants.
GAUSSIAN_NOISE = SeverityTable(tuple(GaussianNoiseParams(s) for s in (0.08, 0.12, 0.18, 0.26, 0.38)))
SHOT_NOISE_COCO_P = SeverityTable(tuple(ShotNoiseParams(p) for p in (250, 100, 50, 30, 15)))
SHOT_NOISE_IMAGENET_C = SeverityTable(tuple(ShotNoiseParams(p) for p in (60, 25, 12, 5, 3)))


class GaussianNoise(PhotometricCorruption[GaussianNoiseParams]):
    """Additive white Gaussian noise, independent per pixel and channel."""

    def corrupt_images(self, images: torch.Tensor, params: GaussianNoiseParams, rngs: list[torch.Generator]) -> torch.Tensor:
        return Fn.additive_gaussian_noise(images, Fn.standard_normal_like(images, rngs), params.std)


class ShotNoise(PhotometricCorruption[ShotNoiseParams]):
    """Poisson (photon counting) noise: fewer photons, noisier image."""

    def corrupt_images(self, images: torch.Tensor, params: ShotNoiseParams, rngs: list[torch.Generator]) -> torch.Tensor:
        return Fn.shot_noise(images, params.photons, rngs)


CATALOGUE = (
    CatalogueEntry(GaussianNoise("gaussian_noise", Category.NOISE, GAUSSIAN_NOISE), ("coco-p", "imagenet-c")),
    CatalogueEntry(ShotNoise("shot_noise", Category.NOISE, SHOT_NOISE_COCO_P), ("coco-p",)),
    CatalogueEntry(ShotNoise("shot_noise", Category.NOISE, SHOT_NOISE_IMAGENET_C), ("imagenet-c",)),
)
