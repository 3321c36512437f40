"""Blur corruptions: defocus, Gaussian, frosted glass, motion, zoom and spatially varying PSF blur."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from pytest_segrobust.corruptions import functional as Fn
from pytest_segrobust.corruptions.base import Category, PhotometricCorruption, SeverityTable
from pytest_segrobust.randomness.seeding import SampleStreams


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

    # One dense conv2d over the batch is cheaper than one per image, on CPU too (at 512x512,
    # image by image took 1.3-1.5x the wall and CPU time of the whole batch, measured interleaved).
    image_by_image_on_cpu = False

    def corrupt_images(
        self, images: torch.Tensor, params: DefocusBlurParams, streams: SampleStreams
    ) -> torch.Tensor:
        kernel = Fn.disk_kernel(params.radius, params.alias_blur)
        return Fn.filter2d(images, kernel).clamp_(0.0, 1.0)


@dataclass(frozen=True)
class GaussianBlurParams:
    """Standard deviation in pixels of scikit-image's ``gaussian`` (truncated at 4 sigma)."""

    sigma: float


@dataclass(frozen=True)
class GlassBlurParams:
    """Blur sigma, largest pixel displacement, and number of shuffle passes."""

    sigma: float
    max_delta: int
    iterations: int


@dataclass(frozen=True)
class MotionTrailParams:
    """ImageNet-C's motion blur: trail length ``2 * radius + 1`` taps with Gaussian fall-off ``sigma``."""

    radius: int
    sigma: float


@dataclass(frozen=True)
class MotionLineParams:
    """imgaug's ``MotionBlur``: side of the square kernel holding the motion line."""

    kernel_size: int


@dataclass(frozen=True)
class ZoomBlurParams:
    """Zoom factors averaged with the image, exactly as ``numpy.arange`` produces them."""

    factors: tuple[float, ...]


@dataclass(frozen=True)
class PsfBlurParams:
    """Gaussian PSF sigma at the image centre and in its corners (ours, see :class:`PsfBlur`)."""

    centre_sigma: float
    corner_sigma: float


def _arange(start: float, stop: float, step: float) -> tuple[float, ...]:
    # numpy's float arange, quirks included: arange(1, 1.10, .02) ends with 1.1 (six factors).
    return tuple(float(v) for v in np.arange(start, stop, step))


GAUSSIAN_BLUR = SeverityTable(tuple(GaussianBlurParams(s) for s in (1, 2, 3, 4, 6)))
GLASS_BLUR = SeverityTable(
    tuple(GlassBlurParams(*p) for p in ((0.7, 1, 2), (0.9, 2, 1), (1, 2, 3), (1.1, 3, 2), (1.5, 4, 2)))
)
MOTION_BLUR_IMAGENET_C = SeverityTable(
    tuple(MotionTrailParams(r, s) for r, s in ((10, 3), (15, 5), (15, 8), (15, 12), (20, 15)))
)
MOTION_BLUR_COCO_P = SeverityTable(tuple(MotionLineParams(k) for k in (7, 9, 13, 17, 25)))
ZOOM_BLUR_COCO_P = SeverityTable(
    tuple(
        ZoomBlurParams(_arange(*r))
        for r in ((1, 1.05, 0.01), (1, 1.07, 0.01), (1, 1.10, 0.02), (1, 1.12, 0.02), (1.03, 1.18, 0.03))
    )
)
ZOOM_BLUR_IMAGENET_C = SeverityTable(
    tuple(
        ZoomBlurParams(_arange(*r))
        for r in ((1, 1.11, 0.01), (1, 1.16, 0.01), (1, 1.21, 0.02), (1, 1.26, 0.02), (1, 1.31, 0.03))
    )
)
PSF_BLUR = SeverityTable(
    tuple(PsfBlurParams(c, e) for c, e in ((0.0, 1.0), (0.3, 1.6), (0.5, 2.3), (0.7, 3.2), (1.0, 4.5)))
)


def _uniform(streams: SampleStreams, low: float, high: float, count: int) -> list[list[float]]:
    # Per-sample scalars, one draw of ``count`` per sample, on the host for the kernels' Python.
    return (low + (high - low) * streams.uniform((count,), dtype=torch.float64)).tolist()


class GaussianBlur(PhotometricCorruption[GaussianBlurParams]):
    """scikit-image's ``gaussian``: separable, truncated at 4 sigma, edges replicated."""

    def corrupt_images(
        self, images: torch.Tensor, params: GaussianBlurParams, streams: SampleStreams
    ) -> torch.Tensor:
        return Fn.gaussian_blur(images, params.sigma).clamp_(0.0, 1.0)


class GlassBlur(PhotometricCorruption[GlassBlurParams]):
    """Frosted glass: blur, 8-bit quantise, chains of random local pixel swaps, blur again.

    The reference's sequential pixel swaps are reproduced exactly (offsets drawn from each
    image's own stream), without a loop over pixels; see
    :func:`~pytest_segrobust.corruptions.functional.blur.glass_blur`.
    """

    def corrupt_images(
        self, images: torch.Tensor, params: GlassBlurParams, streams: SampleStreams
    ) -> torch.Tensor:
        return Fn.glass_blur(images, params.sigma, params.max_delta, params.iterations, streams)


class MotionTrailBlur(PhotometricCorruption[MotionTrailParams]):
    """ImageNet-C's motion blur: a one-sided Gaussian trail at an angle drawn per image in ``U(-45, 45)``."""

    def corrupt_images(
        self, images: torch.Tensor, params: MotionTrailParams, streams: SampleStreams
    ) -> torch.Tensor:
        h, w = images.shape[-2:]
        angles = _uniform(streams, -45.0, 45.0, 1)
        return torch.stack(
            [
                Fn.motion_blur(image, Fn.motion_trail_taps(params.radius, params.sigma, angle, h, w), Fn.Border.NEAREST)
                for image, (angle,) in zip(images, angles)
            ]
        ).clamp_(0.0, 1.0)


class MotionLineBlur(PhotometricCorruption[MotionLineParams]):
    """imgaug's ``MotionBlur`` with its defaults, as Schiappa et al. used it.

    Per image: angle ``U(0, 360)``, direction ``U(-1, 1)`` (a weight ramp along the line; 0
    is uniform), kernel from
    :func:`~pytest_segrobust.corruptions.functional.blur.motion_line_kernel`, ``Border.MIRROR``
    (reflect-101) as OpenCV's ``filter2D``.
    """

    def corrupt_images(
        self, images: torch.Tensor, params: MotionLineParams, streams: SampleStreams
    ) -> torch.Tensor:
        draws = [(360.0 * a, 2.0 * d - 1.0) for a, d in _uniform(streams, 0.0, 1.0, 2)]
        return torch.stack(
            [
                Fn.motion_blur(
                    image, Fn.kernel_taps(Fn.motion_line_kernel(params.kernel_size, angle, direction)), Fn.Border.MIRROR
                )
                for image, (angle, direction) in zip(images, draws)
            ]
        ).clamp_(0.0, 1.0)


class ZoomBlur(PhotometricCorruption[ZoomBlurParams]):
    """The mean of the image and its centre zooms (ImageNet-C's ``zoom_blur``)."""

    def corrupt_images(self, images: torch.Tensor, params: ZoomBlurParams, streams: SampleStreams) -> torch.Tensor:
        return Fn.zoom_blur(images, params.factors)


class PsfBlur(PhotometricCorruption[PsfBlurParams]):
    """Spatially varying blur that grows from the image centre to the corners.

    Kamann & Rother blur with three PSF sets simulated in Zemax for an automotive camera,
    which are not published. This is a Gaussian-PSF approximation of the same behaviour
    (sigma growing with the squared distance from the centre), with five severities of our
    choosing where the paper has three.
    """

    def corrupt_images(self, images: torch.Tensor, params: PsfBlurParams, streams: SampleStreams) -> torch.Tensor:
        return Fn.psf_blur(images, params.centre_sigma, params.corner_sigma)


# One instance per severity table; the presets in registry.py list them, in each paper's order.
defocus_blur = DefocusBlur("defocus_blur", Category.BLUR, DEFOCUS_BLUR)
gaussian_blur = GaussianBlur("gaussian_blur", Category.BLUR, GAUSSIAN_BLUR)
glass_blur = GlassBlur("glass_blur", Category.BLUR, GLASS_BLUR)
motion_blur_coco_p = MotionLineBlur("motion_blur", Category.BLUR, MOTION_BLUR_COCO_P)
motion_blur_imagenet_c = MotionTrailBlur("motion_blur", Category.BLUR, MOTION_BLUR_IMAGENET_C)
zoom_blur_coco_p = ZoomBlur("zoom_blur", Category.BLUR, ZOOM_BLUR_COCO_P)
zoom_blur_imagenet_c = ZoomBlur("zoom_blur", Category.BLUR, ZOOM_BLUR_IMAGENET_C)
psf_blur = PsfBlur("psf_blur", Category.BLUR, PSF_BLUR)
