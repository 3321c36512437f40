"""Geometric corruptions: they move pixels, and the annotations move with them."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Literal

import torch

from pytest_segrobust.corruptions import functional as Fn
from pytest_segrobust.corruptions.base import AffineCorruption, Category, GeometricCorruption, SeverityTable
from pytest_segrobust.randomness.seeding import SampleStreams


@dataclass(frozen=True)
class RotateParams:
    """Rotation magnitude in degrees; the sign is drawn per image."""

    degrees: float


ROTATE = SeverityTable(tuple(RotateParams(d) for d in (20, 30, 40, 50, 60)))


class Rotate(AffineCorruption[RotateParams]):
    """Rotation about the image centre by +/- ``degrees``; corners fill black / ignore."""

    def inverse_affine_maps(
        self, params: RotateParams, streams: SampleStreams, height: int, width: int, device: torch.device
    ) -> torch.Tensor:
        angles = Fn.random_signs(streams, torch.float64, params.degrees)
        return Fn.rotation_about_centre(angles, height, width)


@dataclass(frozen=True)
class ShearParams:
    """Horizontal shear in degrees (the tilt of vertical lines); the sign is drawn per image."""

    degrees: float


SHEAR = SeverityTable(tuple(ShearParams(d) for d in (5, 10, 15, 20, 25)))


ShearConvention = Literal["tan", "legacy"]
"""How a shear angle becomes a matrix: see :class:`Shear`."""


class Shear(AffineCorruption[ShearParams]):
    """imgaug's ``Affine(shear=+/-degrees)``: an x-shear about the image centre.

    imgaug 0.4.0 builds the shear with scikit-image's ``AffineTransform``, whose meaning of
    ``shear`` changed in scikit-image 0.21, so the same imgaug call gives two geometries:

    * ``convention="tan"`` (the default; imgaug 0.4.0 on scikit-image >= 0.21): vertical
      lines tilt by ``angle``, rows stay put (the source of ``(x, y)`` is
      ``(x + tan(angle) (y - cy), y)``).
    * ``convention="legacy"`` (imgaug 0.4.0 on scikit-image <= 0.20, which the COCO-P authors
      most likely ran): content shifts by ``sin(angle)`` per row and rows are drawn towards
      the centre row by ``cos(angle)`` (the source of ``(x, y)`` is
      ``(x + tan(angle) (y - cy), cy + (y - cy) / cos(angle))``), so the top and bottom
      bands read from outside the frame.

    Either way the labels move with the image.
    """

    def __init__(
        self, name: str, category: Category, table: SeverityTable[ShearParams], convention: ShearConvention = "tan"
    ) -> None:
        super().__init__(name, category, table)
        if convention not in ("tan", "legacy"):
            raise ValueError(f"unknown shear convention {convention!r}: expected 'tan' or 'legacy'")
        self.convention = convention

    def inverse_affine_maps(
        self, params: ShearParams, streams: SampleStreams, height: int, width: int, device: torch.device
    ) -> torch.Tensor:
        angles = Fn.random_signs(streams, torch.float64, params.degrees)
        return Fn.shear_x_about_centre(angles, height, width, squeeze_rows=self.convention == "legacy")


@dataclass(frozen=True)
class TranslateParams:
    """Shift in pixels along each axis; each axis draws its own sign per image."""

    pixels: int


TRANSLATE = SeverityTable(tuple(TranslateParams(p) for p in (20, 40, 60, 80, 100)))


class Translate(AffineCorruption[TranslateParams]):
    """Shift by ``+/-pixels`` horizontally and ``+/-pixels`` vertically.

    The shift is in pixels whatever the image size, as in Schiappa et al.: on an image no
    larger than the shift everything leaves the frame, the image turns black and every
    label becomes the ignore label.
    """

    def inverse_affine_maps(
        self, params: TranslateParams, streams: SampleStreams, height: int, width: int, device: torch.device
    ) -> torch.Tensor:
        # Both signs come from each image's own streams: x first, then y.
        dx = Fn.random_signs(streams, torch.float64, params.pixels)
        dy = Fn.random_signs(streams, torch.float64, params.pixels)
        return Fn.translation(torch.stack([dx, dy], dim=-1))


@dataclass(frozen=True)
class ElasticParams:
    """Scale of the smoothed random displacement field (ImageNet-C's ``alpha``)."""

    alpha: float


ELASTIC = SeverityTable(tuple(ElasticParams(250 * f) for f in (0.05, 0.065, 0.085, 0.1, 0.12)))


class ElasticTransform(GeometricCorruption[ElasticParams]):
    """ImageNet-C's elastic transform (imagecorruptions 1.1.2), moving the labels too.

    The reference reads beyond the border by mirroring (``map_coordinates(mode="reflect")``)
    and leaves labels where they were. Here the mirroring is folded into the sampling field
    itself, so every output pixel reads a point inside the frame: the image is what mirrored
    bilinear sampling gives, and the labels, resampled through the same field by nearest
    neighbour, stay aligned with it and never become the ignore label.
    """

    def sampling_coordinates(
        self, params: ElasticParams, streams: SampleStreams, height: int, width: int, device: torch.device
    ) -> torch.Tensor:
        coords = Fn.elastic_coordinates(streams, height, width, params.alpha, device, dtype=torch.float32)
        return Fn.reflect_coordinates(coords, height, width)


@dataclass(frozen=True)
class RadialDistortionParams:
    """Coefficients of ``r_src = r * (1 + k1 r^2 + k2 r^4)``, ``r`` over the half-diagonal.

    Kamann & Rother publish no constants. Ours run from mild to strong barrel distortion:
    a corner reads 4%, 8%, 13%, 20% and 28% of the half-diagonal beyond itself.
    """

    k1: float
    k2: float


RADIAL_DISTORTION = SeverityTable(
    tuple(RadialDistortionParams(a, b) for a, b in ((0.03, 0.01), (0.06, 0.02), (0.10, 0.03), (0.15, 0.05), (0.20, 0.08)))
)


class GeometricDistortion(GeometricCorruption[RadialDistortionParams]):
    """Radially symmetric barrel lens distortion about the image centre (no randomness).

    The corners and the middle of the edges read from outside the frame: black in the
    image, the ignore label in the annotations.
    """

    def sampling_coordinates(
        self, params: RadialDistortionParams, streams: SampleStreams, height: int, width: int, device: torch.device
    ) -> torch.Tensor:
        # A copy: the caller may write into it.
        return self.warp_coordinates(params, streams, height, width, device).clone()

    def warp_coordinates(
        self, params: RadialDistortionParams, streams: SampleStreams, height: int, width: int, device: torch.device
    ) -> torch.Tensor:
        # The kept field itself, every sample a view of it (a copy is 2 MiB a sample at
        # 512x512): the kernels never write into it (GeometricCorruption._warp refuses one
        # that does), and a field written into all the same is made anew.
        key = (params.k1, params.k2, height, width, torch.device(device))
        field, version = _radial_field(*key)
        if field._version != version:
            _radial_field.cache_clear()
            field, version = _radial_field(*key)
        return field.expand(len(streams), -1, -1, -1)


@functools.lru_cache(maxsize=16)
def _radial_field(k1: float, k2: float, height: int, width: int, device: torch.device) -> tuple[torch.Tensor, int]:
    # The distortion depends on nothing but its coefficients and the frame, and computing it
    # (in float64) took twice as long as the warp itself: computed once per size and severity,
    # with the version counter it was made with (an in-place write moves it on).
    field = Fn.radial_distortion_coordinates(k1, k2, height, width, device).to(torch.float32)
    return field, field._version


# One instance per severity table; the presets in registry.py list them, in each paper's order.
rotate = Rotate("rotate", Category.CAMERA, ROTATE)
shear = Shear("shear", Category.DIGITAL, SHEAR)
shear_legacy = Shear("shear", Category.DIGITAL, SHEAR, convention="legacy")
"""COCO-P's shear as imgaug 0.4.0 drew it on scikit-image <= 0.20; a suite option swaps it for ``shear``."""
translate = Translate("translate", Category.CAMERA, TRANSLATE)
elastic_transform = ElasticTransform("elastic_transform", Category.DIGITAL, ELASTIC)
geometric_distortion = GeometricDistortion("geometric_distortion", Category.CAMERA, RADIAL_DISTORTION)
