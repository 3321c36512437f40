"""The corruption model: typed severity tables, photometric vs geometric classes.

A corruption is a class that binds a :class:`SeverityTable` (five typed parameter rows)
to a pure function in :mod:`pytest_segrobust.corruptions.functional`. It takes and returns a
batch of typed fields (:mod:`pytest_segrobust.types`) and dispatches on their types
(:mod:`pytest_segrobust.corruptions.kernels`): a :class:`PhotometricCorruption` changes
image-like fields and returns every other field untouched, by construction; a
:class:`GeometricCorruption` computes one sampling field per image and resamples every
field through it (bilinear for images, nearest for masks, instances and segments).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, ClassVar, Generic, TypeVar, overload

import torch

from pytest_segrobust.corruptions import functional as Fn
from pytest_segrobust.corruptions import kernels
from pytest_segrobust.extras import Extra
from pytest_segrobust.seeding import SampleStreams
from pytest_segrobust.types import Batch, Field, Image

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


class Corruption(ABC, Generic[Params]):
    """A named corruption with a five-row severity table.

    Call it with a batch, a severity and one seed per sample (see
    :func:`pytest_segrobust.seeding.sample_seed`). Severity 0 returns the inputs unchanged.

    Attributes:
        name: Registry name, e.g. ``"gaussian_noise"``.
        category: Family the corruption is reported under.
        table: Parameters of severities 1..5.
        requires: The extras whose packages it cannot run without (a corruption with a path of
            its own for installs without OpenCV requires none); checked when a suite is loaded.
    """

    geometric: bool = False
    requires: tuple[Extra, ...] = ()
    # On CPU a batch is corrupted one image at a time: a whole batch's float intermediates
    # (tens of MB at 512x512) fall out of the caches and make every image slower. Each image's
    # pixels depend on its seed alone, so no number changes. GPUs keep whole-batch kernels.
    # Class-wide, so that a benchmark can compare both schedules.
    image_by_image_on_cpu: ClassVar[bool] = True

    def __init__(self, name: str, category: Category, table: SeverityTable[Params]) -> None:
        self.name = name
        self.category = category
        self.table = table

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, category={self.category.value!r})"

    @overload
    def __call__(self, inputs: torch.Tensor, severity: int, seeds: Sequence[int]) -> torch.Tensor: ...

    @overload
    def __call__(self, inputs: Batch, severity: int, seeds: Sequence[int]) -> dict[str, Field]: ...

    def __call__(self, inputs: torch.Tensor | Batch, severity: int, seeds: Sequence[int]) -> torch.Tensor | dict[str, Field]:
        """Corrupt a batch: images alone, or a mapping of typed fields that move together.

        A tensor is taken as images and a tensor is returned. A mapping (a sample batch, see
        :mod:`pytest_segrobust.types`) returns a mapping with the same names: image-like
        fields corrupted, annotations moved with the image by geometric corruptions and
        untouched by photometric ones. Photometric and geometric corruptions work on CPU
        images one at a time (:attr:`image_by_image_on_cpu`); the result is the same.

        Args:
            inputs: Float images in ``[0, 1]``, or a batch of typed fields.
            severity: 0 (clean: the inputs are returned as given) to 5.
            seeds: One seed per image; it alone decides that image's random draws.

        Shape:
            inputs: images ``(B, C, H, W)``; return: the same shapes.
        """
        if isinstance(inputs, torch.Tensor):
            return self(to_batch(inputs), severity, seeds)["image"].data  # type: ignore[union-attr]
        batch = dict(inputs)
        size = self._check(batch, seeds)
        if severity == 0:
            return batch
        device = next(f for f in batch.values() if isinstance(f, Image)).data.device
        self.table[severity]  # fails for a severity outside 1..5
        return self._corrupt(batch, severity, seeds, size, device)

    def _image_by_image(self, device: torch.device, seeds: Sequence[int]) -> bool:
        """Whether a batch of ``seeds`` on ``device`` is corrupted one image at a time."""
        return device.type == "cpu" and len(seeds) > 1 and self.image_by_image_on_cpu

    def _check(self, batch: dict[str, Field], seeds: Sequence[int]) -> tuple[int, int]:
        images = [f for f in batch.values() if isinstance(f, Image)]
        if not images:
            raise ValueError(f"{self.name}: the batch has no Image field ({', '.join(batch) or 'no fields'})")
        if images[0].data.dim() != 4:
            raise ValueError(f"{self.name}: expected images of shape (B, C, H, W), got {tuple(images[0].data.shape)}")
        size, count = images[0].size(), images[0].batch_size()
        if len(seeds) != count:
            raise ValueError(f"{self.name}: got {len(seeds)} seeds for a batch of {count}")
        for name, field in batch.items():
            if field.batch_size() != count:
                raise ValueError(f"{self.name}: field {name!r} holds {field.batch_size()} samples, the images {count}")
            if field.size() not in (None, size):
                raise ValueError(f"{self.name}: field {name!r} has size {field.size()}, the images {size}")
        return size

    @abstractmethod
    def _corrupt(
        self, batch: dict[str, Field], severity: int, seeds: Sequence[int], size: tuple[int, int], device: torch.device
    ) -> dict[str, Field]:
        """Corrupt a checked batch at a severity 1..5; ``size`` is its ``(H, W)``."""


@contextlib.contextmanager
def whole_batches() -> Iterator[None]:
    """Corrupt CPU batches whole, as GPUs do, while inside: to test and time the batched kernels."""
    before = Corruption.image_by_image_on_cpu
    Corruption.image_by_image_on_cpu = False
    try:
        yield
    finally:
        Corruption.image_by_image_on_cpu = before


def to_batch(images: torch.Tensor) -> dict[str, Field]:
    """A batch of images alone."""
    return {"image": Image(images)}


class PhotometricCorruption(Corruption[Params]):
    """Changes pixel values only; every annotation passes through untouched (:func:`kernels.photometric`)."""

    geometric = False

    @abstractmethod
    def corrupt_images(self, images: torch.Tensor, params: Params, streams: SampleStreams) -> torch.Tensor:
        """Return the corrupted images, clipped to ``[0, 1]``.

        Every random draw comes from ``streams``, in an order fixed by the code (see
        :class:`~pytest_segrobust.seeding.SampleStreams`).

        Shape:
            images: ``(B, C, H, W)``; return: same.
        """

    def _corrupt(self, batch, severity, seeds, size, device):  # type: ignore[no-untyped-def]
        params = self.table[severity]

        # Every image-like field draws from fresh streams: the same seeds give the same draws.
        def change(images: torch.Tensor) -> torch.Tensor:
            if not self._image_by_image(device, seeds):
                return self.corrupt_images(images, params, SampleStreams(seeds, device))
            # Each result goes straight into the batch's output and is freed: concatenating
            # them would hold the whole batch twice and, with glibc's default malloc, fault
            # in fresh pages for every image's result.
            out: torch.Tensor | None = None
            for i, seed in enumerate(seeds):
                one = self.corrupt_images(images[i : i + 1], params, SampleStreams([seed], device))
                if out is None:
                    out = one.new_empty((len(seeds), *one.shape[1:]))
                out[i : i + 1] = one
            return out

        return {name: kernels.photometric(field, change) for name, field in batch.items()}


class GeometricCorruption(Corruption[Params]):
    """Moves pixels; one sampling field moves every field of the batch (:func:`kernels.warp`)."""

    geometric = True

    @abstractmethod
    def sampling_coordinates(
        self, params: Params, streams: SampleStreams, height: int, width: int, device: torch.device
    ) -> torch.Tensor:
        """Source pixel ``(x, y)`` of every output pixel, per sample.

        Shape:
            return: ``(B, H, W, 2)``, float, pixel centres at integers.
        """

    def _corrupt(self, batch, severity, seeds, size, device):  # type: ignore[no-untyped-def]
        params = self.table[severity]
        if self._image_by_image(device, seeds):
            try:
                alone = [{name: f.take(range(i, i + 1)) for name, f in batch.items()} for i in range(len(seeds))]
            except NotImplementedError:  # a field that cannot be cut into samples: the whole batch at once
                pass
            else:
                moved = [self._warp(one, params, [seed], size, device) for one, seed in zip(alone, seeds)]
                return {name: type(field).join([one[name] for one in moved]) for name, field in moved[0].items()}
        return self._warp(batch, params, seeds, size, device)

    def _warp(self, batch, params, seeds, size, device):  # type: ignore[no-untyped-def]
        coords = self.sampling_coordinates(params, SampleStreams(seeds, device), *size, device)
        return {name: kernels.warp(field, coords) for name, field in batch.items()}


class AffineCorruption(GeometricCorruption[Params]):
    """A geometric corruption whose sampling field is an affine map per sample (:func:`kernels.warp_affine`).

    Images can then be warped from the maps themselves (OpenCV's ``warpAffine`` on the CPU);
    the coordinates are computed from the maps, once, only for the fields that need them.
    """

    @abstractmethod
    def inverse_affine_maps(
        self, params: Params, streams: SampleStreams, height: int, width: int, device: torch.device
    ) -> torch.Tensor:
        """Per sample, the map taking an output pixel ``(x, y, 1)`` to its source ``(x, y)``.

        Shape:
            return: ``(B, 2, 3)``, float64, pixel centres at integers.
        """

    def sampling_coordinates(
        self, params: Params, streams: SampleStreams, height: int, width: int, device: torch.device
    ) -> torch.Tensor:
        # float64 maps keep the grid identical however the batch is composed.
        matrices = self.inverse_affine_maps(params, streams, height, width, device)
        return Fn.affine_coordinates(matrices, height, width, torch.float32)

    def _warp(self, batch, params, seeds, size, device):  # type: ignore[no-untyped-def]
        matrices = self.inverse_affine_maps(params, SampleStreams(seeds, device), *size, device)
        coords = functools.cache(lambda: Fn.affine_coordinates(matrices, *size, torch.float32))
        return {name: kernels.warp_affine(field, matrices, coords) for name, field in batch.items()}
