"""Geometric corruptions: they move pixels, and the annotations move with them."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from pytest_segrobust.corruptions import functional as Fn
from pytest_segrobust.corruptions.base import CatalogueEntry, Category, GeometricCorruption, SeverityTable


@dataclass(frozen=True)
class RotateParams:
    """Rotation magnitude in degrees; the sign is drawn per image."""

    degrees: float


ROTATE = SeverityTable(tuple(RotateParams(d) for d in (20, 30, 40, 50, 60)))


class Rotate(GeometricCorruption[RotateParams]):
    """Rotation about the image centre by +/- ``degrees``; corners fill black / ignore."""

    def sampling_coordinates(
        self, params: RotateParams, rngs: list[torch.Generator], height: int, width: int, device: torch.device
    ) -> torch.Tensor:
        angles = Fn.random_signs(rngs, device).to(torch.float64) * params.degrees
        # float64 keeps the sampling grid identical however the batch is composed.
        matrices = Fn.rotation_about_centre(angles, height, width)
        return Fn.affine_coordinates(matrices, height, width).to(torch.float32)


CATALOGUE = (CatalogueEntry(Rotate("rotate", Category.CAMERA, ROTATE), ("coco-p",)),)
