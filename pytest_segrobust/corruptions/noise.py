"""Noise corruptions: sensor and photon noise added per pixel."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from pytest_segrobust.corruptions import functional as Fn
from pytest_segrobust.corruptions.base import Category, PhotometricCorruption, SeverityTable
from pytest_segrobust.randomness.seeding import SampleStreams


@dataclass(frozen=True)
class GaussianNoiseParams:
    """Standard deviation of additive noise on the ``[0, 1]`` scale."""

    std: float


@dataclass(frozen=True)
class ShotNoiseParams:
    """Photon count scale: the image becomes ``poisson(x * photons) / photons``."""

    photons: float


@dataclass(frozen=True)
class ImpulseNoiseParams:
    """Fraction of values (each channel on its own) replaced by salt (1) or pepper (0), half each."""

    amount: float


@dataclass(frozen=True)
class SpeckleNoiseParams:
    """Standard deviation of the multiplicative noise: ``x + x * N(0, std)``."""

    std: float


@dataclass(frozen=True)
class IntensityNoiseParams:
    """Weight ``w_s`` of the noise in Kamann & Rother's eq. 1, ``log2(2^x + w_s (N_lum + N_chrom))``.

    The values are ours, the paper publishes none: chosen so that severity 1 is mild (noise
    std about 0.04 on black, 0.02 on white) and severity 5 strong (about 0.27 on black,
    0.13 on white), bracketing ImageNet-C's Gaussian noise (0.08 to 0.38) from below since
    this noise is concentrated in the dark.
    """

    weight: float


# Schiappa et al. (COCO-P) and ImageNet-C share the Gaussian and impulse constants.
GAUSSIAN_NOISE = SeverityTable(tuple(GaussianNoiseParams(s) for s in (0.08, 0.12, 0.18, 0.26, 0.38)))
SHOT_NOISE_COCO_P = SeverityTable(tuple(ShotNoiseParams(p) for p in (250, 100, 50, 30, 15)))
SHOT_NOISE_IMAGENET_C = SeverityTable(tuple(ShotNoiseParams(p) for p in (60, 25, 12, 5, 3)))
IMPULSE_NOISE = SeverityTable(tuple(ImpulseNoiseParams(a) for a in (0.03, 0.06, 0.09, 0.17, 0.27)))
SPECKLE_NOISE_COCO_P = SeverityTable(tuple(SpeckleNoiseParams(s) for s in (0.15, 0.2, 0.25, 0.3, 0.35)))
SPECKLE_NOISE_IMAGENET_C = SeverityTable(tuple(SpeckleNoiseParams(s) for s in (0.15, 0.2, 0.35, 0.45, 0.6)))
INTENSITY_NOISE = SeverityTable(tuple(IntensityNoiseParams(w) for w in (0.02, 0.04, 0.06, 0.09, 0.13)))


class GaussianNoise(PhotometricCorruption[GaussianNoiseParams]):
    """Additive white Gaussian noise, independent per pixel and channel.

    The normals are :meth:`~pytest_segrobust.randomness.seeding.SampleStreams.exact_normal`'s:
    float32 steps alone, a third of the CPU of the float64 transform the other noises draw
    with, within 3 float32 ulps of its values and the same bits on every device.
    """

    def corrupt_images(
        self, images: torch.Tensor, params: GaussianNoiseParams, streams: SampleStreams
    ) -> torch.Tensor:
        return Fn.additive_gaussian_noise(images, streams.exact_normal(images.shape[1:], images.dtype), params.std)


class ShotNoise(PhotometricCorruption[ShotNoiseParams]):
    """Poisson (photon counting) noise: fewer photons, noisier image."""

    def corrupt_images(
        self, images: torch.Tensor, params: ShotNoiseParams, streams: SampleStreams
    ) -> torch.Tensor:
        return Fn.shot_noise(images, params.photons, streams)


class ImpulseNoise(PhotometricCorruption[ImpulseNoiseParams]):
    """Salt-and-pepper noise as scikit-image's ``random_noise(mode="s&p")``: per value, not per pixel."""

    def corrupt_images(
        self, images: torch.Tensor, params: ImpulseNoiseParams, streams: SampleStreams
    ) -> torch.Tensor:
        return Fn.salt_and_pepper(images, params.amount, streams)


class SpeckleNoise(PhotometricCorruption[SpeckleNoiseParams]):
    """Multiplicative Gaussian noise, independent per pixel and channel."""

    def corrupt_images(
        self, images: torch.Tensor, params: SpeckleNoiseParams, streams: SampleStreams
    ) -> torch.Tensor:
        return Fn.speckle_noise(images, Fn.standard_normal_like(images, streams), params.std)


class IntensityNoise(PhotometricCorruption[IntensityNoiseParams]):
    """Kamann & Rother's camera noise: grey plus colour noise in linear space, darker is noisier."""

    def corrupt_images(
        self, images: torch.Tensor, params: IntensityNoiseParams, streams: SampleStreams
    ) -> torch.Tensor:
        b, c, h, w = images.shape
        # One draw per sample: channel 0 is the luminance field, the rest chrominance.
        fields = Fn.standard_normal_like(images.new_empty(b, c + 1, h, w), streams)
        return Fn.intensity_noise(images, fields[:, :1], fields[:, 1:], params.weight)


# One instance per severity table; the presets in registry.py list them, in each paper's order.
gaussian_noise = GaussianNoise("gaussian_noise", Category.NOISE, GAUSSIAN_NOISE)
shot_noise_coco_p = ShotNoise("shot_noise", Category.NOISE, SHOT_NOISE_COCO_P)
shot_noise_imagenet_c = ShotNoise("shot_noise", Category.NOISE, SHOT_NOISE_IMAGENET_C)
impulse_noise = ImpulseNoise("impulse_noise", Category.NOISE, IMPULSE_NOISE)
speckle_noise_coco_p = SpeckleNoise("speckle_noise", Category.NOISE, SPECKLE_NOISE_COCO_P)
speckle_noise_imagenet_c = SpeckleNoise("speckle_noise", Category.NOISE, SPECKLE_NOISE_IMAGENET_C)
intensity_noise = IntensityNoise("intensity_noise", Category.NOISE, INTENSITY_NOISE)
