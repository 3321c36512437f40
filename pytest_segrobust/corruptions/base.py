"""The corruption model: typed severity tables, photometric vs geometric classes.

A corruption is a class that binds a :class:`SeverityTable` (five typed parameter rows)
to a pure function in :mod:`pytest_segrobust.corruptions.functional`. The class says which
targets it may touch: a :class:`PhotometricCorruption` returns the annotations it was given,
untouched, by construction; a :class:`GeometricCorruption` computes one sampling field per
image and resamples the image (bilinear) and every annotation (nearest) through it.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, Generic, NamedTuple, TypeVar

import torch

from pytest_segrobust.corruptions import functional as Fn
from pytest_segrobust.data.base import DEFAULT_IGNORE_INDEX, InstanceTarget, boxes_from_masks
from pytest_segrobust.seeding import generators

Params = TypeVar("Params")

MAX_SEVERITY = 5


class Category(str, Enum):
    """Corruption families used to group scores, as in the papers' tables."""

    NOISE = "noise"
    BLUR = "blur"
    COMPRESSION = "compression"
    DIGITAL = "digital"
    CAMERA = "camera"
    ENVIRONMENT = "environment"
    COMPOSED = "composed"


@dataclass(frozen=True)
class SeverityTable(Generic[Params]):
    """Five parameter sets, one per severity 1..5."""

    rows: tuple[Params, Params, Params, Params, Params]

    def __post_init__(self) -> None:
        if len(self.rows) != MAX_SEVERITY:
            raise ValueError(f"a severity table has {MAX_SEVERITY} rows, got {len(self.rows)}")

    def __getitem__(self, severity: int) -> Params:
        if not 1 <= severity <= MAX_SEVERITY:
            raise ValueError(f"severity must be 1..{MAX_SEVERITY} here, got {severity}")
        return self.rows[severity - 1]

    def describe(self) -> list[str]:
        """One human-readable line of named parameters per severity."""
        return [_describe_row(row) for row in self.rows]


def _describe_row(row: Any) -> str:
    if dataclasses.is_dataclass(row):
        return ", ".join(f"{f.name}={getattr(row, f.name)!r}" for f in dataclasses.fields(row))
    return repr(row)


@dataclass(frozen=True)
class CatalogueEntry:
    """A corruption and the presets (benchmarks) whose severity table it carries."""

    corruption: Corruption[Any]
    presets: tuple[str, ...]


class Corrupted(NamedTuple):
    """A corrupted batch and its annotations, moved with the image where geometry changed.

    Shape:
        images: ``(B, C, H, W)``; masks: ``(B, H, W)`` or ``None``; instances: one
        :class:`InstanceTarget` per image or ``None``.
    """

    images: torch.Tensor
    masks: torch.Tensor | None
    instances: list[InstanceTarget] | None = None


class Corruption(ABC, Generic[Params]):
    """A named corruption with a five-row severity table.

    Call it with a batch, a severity and one seed per sample (see
    :func:`pytest_segrobust.seeding.sample_seed`). Severity 0 returns the inputs unchanged.

    Attributes:
        name: Registry name, e.g. ``"gaussian_noise"``.
        category: Family the corruption is reported under.
        table: Parameters of severities 1..5.
    """

    geometric: bool = False

    def __init__(self, name: str, category: Category, table: SeverityTable[Params]) -> None:
        self.name = name
        self.category = category
        self.table = table

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, category={self.category.value!r})"

    def __call__(
        self,
        images: torch.Tensor,
        severity: int,
        seeds: Sequence[int],
        masks: torch.Tensor | None = None,
        ignore_index: int = DEFAULT_IGNORE_INDEX,
        instances: Sequence[InstanceTarget] | None = None,
    ) -> Corrupted:
        """Corrupt a batch.

        Args:
            images: Float images in ``[0, 1]``.
            severity: 0 (clean) to 5.
            seeds: One seed per image; it alone decides that image's random draws.
            masks: Optional semantic label maps moved along by geometric corruptions.
            ignore_index: Label given to pixels that enter the frame from outside.
            instances: Optional instance targets, one per image, moved along likewise.

        Shape:
            images: ``(B, C, H, W)``; masks: ``(B, H, W)``; return: same shapes.
        """
        if images.dim() != 4:
            raise ValueError(f"{self.name}: expected images of shape (B, C, H, W), got {tuple(images.shape)}")
        if len(seeds) != images.shape[0]:
            raise ValueError(f"{self.name}: got {len(seeds)} seeds for a batch of {images.shape[0]}")
        given = None if instances is None else list(instances)
        if given is not None and len(given) != images.shape[0]:
            raise ValueError(f"{self.name}: got {len(given)} instance targets for a batch of {images.shape[0]}")
        if severity == 0:
            return Corrupted(images, masks, given)
        params = self.table[severity]
        return self._corrupt(images, params, generators(seeds, images.device), masks, ignore_index, given)

    @abstractmethod
    def _corrupt(
        self,
        images: torch.Tensor,
        params: Params,
        rngs: list[torch.Generator],
        masks: torch.Tensor | None,
        ignore_index: int,
        instances: list[InstanceTarget] | None,
    ) -> Corrupted: ...


class PhotometricCorruption(Corruption[Params]):
    """Changes pixel values only; annotations pass through untouched."""

    geometric = False

    @abstractmethod
    def corrupt_images(self, images: torch.Tensor, params: Params, rngs: list[torch.Generator]) -> torch.Tensor:
        """Return the corrupted images, clipped to ``[0, 1]``.

        Shape:
            images: ``(B, C, H, W)``; return: same.
        """

    def _corrupt(self, images, params, rngs, masks, ignore_index, instances):  # type: ignore[no-untyped-def]
        return Corrupted(self.corrupt_images(images, params, rngs), masks, instances)


class GeometricCorruption(Corruption[Params]):
    """Moves pixels; the same sampling field moves every annotation with the image."""

    geometric = True

    @abstractmethod
    def sampling_coordinates(
        self, params: Params, rngs: list[torch.Generator], height: int, width: int, device: torch.device
    ) -> torch.Tensor:
        """Source pixel ``(x, y)`` of every output pixel, per sample.

        Shape:
            return: ``(B, H, W, 2)``, float, pixel centres at integers.
        """

    def warp_images(self, images: torch.Tensor, coords: torch.Tensor, mode: str = "bilinear") -> torch.Tensor:
        """Resample images through ``coords``; outside the frame becomes black.

        ``mode="nearest"`` resamples exactly like the annotations, which is how tests
        check that image and annotations move together.

        Shape:
            images: ``(B, C, H, W)``; coords: ``(B, H, W, 2)``; return: same as images.
        """
        if mode == "nearest":
            return Fn.sample_nearest(images, coords, fill=0)
        return Fn.sample_bilinear(images, coords, fill=0.0).clamp_(0.0, 1.0)

    def warp_masks(self, masks: torch.Tensor, coords: torch.Tensor, ignore_index: int) -> torch.Tensor:
        """Resample label maps by nearest neighbour; outside the frame becomes ``ignore_index``.

        Shape:
            masks: ``(B, H, W)``; coords: ``(B, H, W, 2)``; return: same as masks.
        """
        return Fn.sample_nearest(masks, coords, fill=ignore_index)

    def warp_instances(self, instances: InstanceTarget, coords: torch.Tensor) -> InstanceTarget:
        """Resample one image's instance masks, recompute tight boxes, drop vanished instances.

        Shape:
            coords: ``(1, H, W, 2)``, the sampling field of that image.
        """
        if len(instances) == 0:
            return instances
        masks = Fn.sample_nearest(instances.masks[None].to(torch.uint8), coords, fill=0)[0].bool()
        kept = masks.flatten(1).any(dim=1)
        masks = masks[kept]
        return InstanceTarget(masks, instances.labels[kept], boxes_from_masks(masks), instances.iscrowd[kept])

    def _corrupt(self, images, params, rngs, masks, ignore_index, instances):  # type: ignore[no-untyped-def]
        h, w = images.shape[-2:]
        coords = self.sampling_coordinates(params, rngs, h, w, images.device)
        warped_masks = None if masks is None else self.warp_masks(masks, coords, ignore_index)
        warped_instances = (
            None if instances is None else [self.warp_instances(t, coords[i : i + 1]) for i, t in enumerate(instances)]
        )
        return Corrupted(self.warp_images(images, coords), warped_masks, warped_instances)
