"""The corruption model: typed severity tables; photometric, geometric and temporal kinds.

A corruption is a class that binds a :class:`SeverityTable` (five typed parameter rows)
to a pure function in :mod:`pytest_segrobust.corruptions.functional`. It takes and returns a
batch of typed fields (:mod:`pytest_segrobust.core.types`), acts on the fields it declares
(:attr:`Corruption.acts_on`) and dispatches on their types
(:mod:`pytest_segrobust.corruptions.kernels`): a :class:`PhotometricCorruption` changes
pixel fields (images, video frames) and returns every other field untouched, by
construction; a :class:`GeometricCorruption` computes one sampling field per image (or per
frame of a clip) and resamples every field through it (bilinear for pixels, nearest for
masks, instances and segments); a :class:`TemporalCorruption` draws one frame order per clip
and reorders or repeats the frames of every field with a time axis.

A new family (text, acoustic, a plugin's own field type) is a subclass of
:class:`Corruption` in a module of its own: it declares the field types it acts on and
implements ``_corrupt``, drawing from the keys of :class:`~pytest_segrobust.randomness.seeding.StreamKeys`.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar, overload

import torch

from pytest_segrobust.core.errors import DatasetError
from pytest_segrobust.core.extras import Extra
from pytest_segrobust.core.modality import Category, Modality, modality_of_category
from pytest_segrobust.core.types import Batch, Field, Image, PixelField, SampleIndex, Video, frames_of
from pytest_segrobust.corruptions import functional as Fn
from pytest_segrobust.corruptions import kernels
from pytest_segrobust.randomness.seeding import FrameDraws, SampleStreams, StreamKeys

Params = TypeVar("Params")

MAX_SEVERITY = 5


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


@dataclass(frozen=True)
class NotedTable(SeverityTable[Params]):
    """A severity table whose description says how the cell draws or scales its rows (what a
    baseline's conditions compare, so numbers measured under another rule are refused, not compared)."""

    note: str = ""

    def describe(self) -> list[str]:
        return [f"{line}; {self.note}" for line in super().describe()]


def _describe_row(row: Any) -> str:
    if dataclasses.is_dataclass(row):
        return ", ".join(f"{f.name}={getattr(row, f.name)!r}" for f in dataclasses.fields(row))
    return repr(row)


class Corruption(ABC, Generic[Params]):
    """A named corruption with a five-row severity table.

    Call it with a batch, a severity and one seed per sample (see
    :func:`pytest_segrobust.randomness.seeding.sample_seed`). Severity 0 returns the inputs unchanged.

    Attributes:
        name: Registry name, e.g. ``"gaussian_noise"``.
        category: Family the corruption is reported under; it says the corruption's
            :attr:`modality`.
        table: Parameters of severities 1..5.
        requires: The extras whose packages it cannot run without (a corruption with a path of
            its own for installs without OpenCV requires none); checked when a suite is loaded.
        acts_on: The field types it acts on; a batch must hold one of them.
        frame_draws: Whether it draws once per clip (the default: every frame of a clip alike)
            or once per frame (:func:`with_frame_draws`).
    """

    geometric: bool = False
    temporal: bool = False
    requires: tuple[Extra, ...] = ()
    acts_on: tuple[type[Field], ...] = (PixelField,)
    frame_draws: FrameDraws = FrameDraws.CLIP
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

    @property
    def modality(self) -> Modality:
        """What it acts on, as its category says (:class:`~pytest_segrobust.core.modality.Category`).

        Read through the category's value, so that a plugin's family whose category is an enum of
        its own counts as visual, as the report counts its cells (:func:`modality_of_category`).
        """
        return modality_of_category(self.category.value)

    @property
    def kind(self) -> str:
        """What ``segrobust list`` shows beside the category: how it changes its input (a temporal
        corruption its clip's frame order, a geometric one where pixels are, a photometric one their values)."""
        return "frame order" if self.temporal else "geometric" if self.geometric else "photometric"

    @overload
    def __call__(self, inputs: torch.Tensor, severity: int, seeds: Sequence[int]) -> torch.Tensor: ...

    @overload
    def __call__(self, inputs: Batch, severity: int, seeds: Sequence[int]) -> dict[str, Field]: ...

    def __call__(self, inputs: torch.Tensor | Batch, severity: int, seeds: Sequence[int]) -> torch.Tensor | dict[str, Field]:
        """Corrupt a batch: images alone, or a mapping of typed fields that move together.

        A tensor is taken as images and a tensor is returned. A mapping (a sample batch, see
        :mod:`pytest_segrobust.core.types`) returns a mapping with the same names: image-like
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
        device = self._device(batch)
        self.table[severity]  # fails for a severity outside 1..5
        return self._corrupt(batch, severity, seeds, size, device)

    def accepts(self, kind: type[Field]) -> bool:
        """Whether it acts on fields of type ``kind``: ``accepts(Image)`` for an image corruption,
        not for a temporal one (which needs a :class:`~pytest_segrobust.core.types.Video`)."""
        return any(issubclass(kind, acted) for acted in self.acts_on)

    def drawing(self, frame_draws: FrameDraws) -> Corruption[Params]:
        """A copy that draws along a clip's frames as ``frame_draws`` says (:func:`with_frame_draws`);
        a corruption made of others (a composition) copies them too."""
        copied = copy.copy(self)
        copied.frame_draws = FrameDraws(frame_draws)
        return copied

    def keys(self, seeds: Sequence[int]) -> StreamKeys:
        """The stream keys of a batch of ``seeds``, drawn along frames as :attr:`frame_draws` says."""
        return StreamKeys(tuple(int(seed) for seed in seeds), self.frame_draws)

    def _device(self, batch: dict[str, Field]) -> torch.device:
        """Where the batch's work happens: the device of the first field it acts on that has tensors."""
        acted = [f for f in batch.values() if isinstance(f, self.acts_on)]
        others = [f for f in batch.values() if not isinstance(f, self.acts_on)]
        found = (f.device() for f in (*acted, *others))
        return next((device for device in found if device is not None), torch.device("cpu"))

    def _image_by_image(self, device: torch.device, seeds: Sequence[int]) -> bool:
        """Whether a batch of ``seeds`` on ``device`` is corrupted one image at a time."""
        return device.type == "cpu" and len(seeds) > 1 and self.image_by_image_on_cpu

    def _check(self, batch: dict[str, Field], seeds: Sequence[int]) -> tuple[int, int] | None:
        """The batch's ``(H, W)`` (``None`` for a batch without pixels), once every field agrees on it,
        on the batch size and on the number of frames."""
        acted = [f for f in batch.values() if isinstance(f, self.acts_on)]
        if not acted:
            kinds = " or ".join("pixel (Image, Video)" if kind is PixelField else kind.__name__ for kind in self.acts_on)
            have = ", ".join(f"{name}: {type(f).__name__}" for name, f in batch.items()) or "no fields"
            raise ValueError(f"{self.name}: needs one {kinds} field, the batch has none ({have})")
        for f in acted:
            if isinstance(f, Image) and f.data.dim() != 4:
                raise ValueError(f"{self.name}: expected images of shape (B, C, H, W), got {tuple(f.data.shape)}")
            if isinstance(f, Video) and f.data.dim() != 5:
                raise ValueError(f"{self.name}: expected clips of shape (B, T, C, H, W), got {tuple(f.data.shape)}")
        first = acted[0]
        size, count = first.size(), first.batch_size()
        if size is None:
            size = next((s for f in batch.values() if (s := f.size()) is not None), None)
        what = f"the {type(first).__name__} field"
        if len(seeds) != count:
            raise ValueError(f"{self.name}: got {len(seeds)} seeds for a batch of {count}")
        for name, field in batch.items():
            if field.batch_size() != count:
                raise ValueError(f"{self.name}: field {name!r} holds {field.batch_size()} samples, {what} {count}")
            if field.size() not in (None, size):
                raise ValueError(f"{self.name}: field {name!r} has size {field.size()}, {what} {size}")
        try:
            frames_of(batch)
        except ValueError as exc:
            raise ValueError(f"{self.name}: {exc}") from None
        return size

    @abstractmethod
    def _corrupt(
        self,
        batch: dict[str, Field],
        severity: int,
        seeds: Sequence[int],
        size: tuple[int, int] | None,
        device: torch.device,
    ) -> dict[str, Field]:
        """Corrupt a checked batch at a severity 1..5; ``size`` is its ``(H, W)`` (``None``: no pixels)."""


def with_frame_draws(corruption: Corruption[Params], frame_draws: FrameDraws) -> Corruption[Params]:
    """A copy of ``corruption`` that draws along a clip's frames as ``frame_draws`` says.

    Its name and table are the original's: a suite that runs both gives them cells of their own.
    A composition's parts draw so too.
    """
    return corruption.drawing(frame_draws)


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
    """Changes pixel values only; every annotation passes through untouched (:func:`kernels.photometric`).

    A pixel field's kernel hands :meth:`corrupt_images` its images with one key each: an
    image's is its sample's seed, a clip's frames have :meth:`StreamKeys.frames`.
    """

    geometric = False

    @abstractmethod
    def corrupt_images(self, images: torch.Tensor, params: Params, streams: SampleStreams) -> torch.Tensor:
        """Return the corrupted images, clipped to ``[0, 1]``.

        Every random draw comes from ``streams``, in an order fixed by the code (see
        :class:`~pytest_segrobust.randomness.seeding.SampleStreams`).

        Shape:
            images: ``(B, C, H, W)``; return: same.
        """

    def _corrupt(self, batch, severity, seeds, size, device):  # type: ignore[no-untyped-def]
        params = self.table[severity]

        # Every pixel field draws from fresh streams: the same keys give the same draws.
        def change(images: torch.Tensor, keys: Sequence[int]) -> torch.Tensor:
            if not self._image_by_image(device, keys):
                return self.corrupt_images(images, params, SampleStreams(keys, device))
            # Each result goes straight into the batch's output and is freed: concatenating
            # them would hold the whole batch twice and, with glibc's default malloc, fault
            # in fresh pages for every image's result.
            out: torch.Tensor | None = None
            for i, key in enumerate(keys):
                one = self.corrupt_images(images[i : i + 1], params, SampleStreams([key], device))
                if out is None:
                    out = one.new_empty((len(keys), *one.shape[1:]))
                out[i : i + 1] = one
            return out

        keys = self.keys(seeds)
        return {name: kernels.photometric(field, change, keys) for name, field in batch.items()}


class GeometricCorruption(Corruption[Params]):
    """Moves pixels; one sampling field moves every field of the batch (:func:`kernels.warp`).

    A clip's frames share their clip's sampling field (``(B, H, W, 2)``); drawn once per frame
    (:attr:`Corruption.frame_draws`), each frame has its own (``(B, T, H, W, 2)``).
    """

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

    def warp_coordinates(
        self, params: Params, streams: SampleStreams, height: int, width: int, device: torch.device
    ) -> torch.Tensor:
        """The coordinates a batch's fields are warped through: :meth:`sampling_coordinates` unless
        a corruption hands its kernels a field it keeps (they never write into it, see ``_warp``)."""
        return self.sampling_coordinates(params, streams, height, width, device)

    def _warp(self, batch, params, seeds, size, device):  # type: ignore[no-untyped-def]
        keys, frames = self._warp_keys(batch, seeds, size)
        coords = self.warp_coordinates(params, SampleStreams(keys, device), *size, device)
        if frames is not None:
            coords = coords.unflatten(0, (len(seeds), frames))
        # Every field reads the same coordinates, which may be a field kept for other batches
        # (warp_coordinates): a kernel that writes into them would move the fields after it,
        # and later batches, somewhere else. Refused, by the tensor's version counter (it
        # counts in-place writes through every view).
        version = coords._version
        moved = {name: kernels.warp(field, coords) for name, field in batch.items()}
        if coords._version != version:
            written = ", ".join(f"{name}: {type(field).__name__}" for name, field in batch.items())
            raise RuntimeError(
                f"{self.name}: a warp kernel wrote into the sampling coordinates it was given (fields {written}); "
                "kernels must leave them as they are"
            )
        return moved

    def _warp_keys(
        self, batch: dict[str, Field], seeds: Sequence[int], size: tuple[int, int] | None
    ) -> tuple[Sequence[int], int | None]:
        """The keys of the sampling fields: one per sample, or one per frame (then also ``T``)."""
        if size is None:
            raise ValueError(f"{self.name}: the batch has no pixels to move ({', '.join(batch)})")
        frames = frames_of(batch) if self.frame_draws is FrameDraws.FRAME else None
        if frames is None:
            return seeds, None
        return self.keys(seeds).frames(frames), frames


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
        keys, frames = self._warp_keys(batch, seeds, size)
        matrices = self.inverse_affine_maps(params, SampleStreams(keys, device), *size, device)
        if frames is None:
            coords = functools.cache(lambda: Fn.affine_coordinates(matrices, *size, torch.float32))
        else:  # one map per frame: (B, T, 2, 3) and (B, T, H, W, 2)
            flat = matrices
            matrices = matrices.unflatten(0, (len(seeds), frames))
            coords = functools.cache(
                lambda: Fn.affine_coordinates(flat, *size, torch.float32).unflatten(0, (len(seeds), frames))
            )
        return {name: kernels.warp_affine(field, matrices, coords) for name, field in batch.items()}


def _clip_names(batch: Batch, rows: list[int] | None, unnamed: str) -> str:
    """The ids of the batch's clips ``rows`` (all where None), from its SampleIndex; ``unnamed`` without one."""
    index = next((f for f in batch.values() if isinstance(f, SampleIndex)), None)
    if index is None:
        return unnamed
    return ", ".join(index.sample_ids if rows is None else [index.sample_ids[row] for row in rows])


class TemporalCorruption(Corruption[Params]):
    """Reorders or repeats frames; every field with a time axis follows (:func:`kernels.reorder`).

    One frame order is drawn per clip, from the clip's own seed: position ``t`` of clip ``b``
    shows its source frame ``order[b, t]``, with that frame's masks and frame id. Fields
    without a time axis pass through; :class:`~pytest_segrobust.core.types.Audio` keeps playing in time.
    Every order changes its clip, which takes two frames: clips of one frame are refused
    (:meth:`frame_count`).
    """

    temporal = True
    acts_on = (Video,)

    @abstractmethod
    def frame_order(self, params: Params, streams: SampleStreams, frames: int, device: torch.device) -> torch.Tensor:
        """The source frame of every position of every clip, drawn from ``streams`` alone.

        Shape:
            return: ``(B, T)``, int64 in ``[0, T)``.
        """

    def frame_count(self, batch: Batch) -> int:
        """The number of frames of the batch's clips, once it is one an order can change (2 or more).

        Raises:
            DatasetError: naming the clips (by the batch's :class:`~pytest_segrobust.core.types.SampleIndex`)
                when they have a single frame.
        """
        frames = frames_of(batch)
        assert frames is not None  # a Video field has frames
        if frames < 2:
            clips = _clip_names(batch, None, "of the batch")
            raise DatasetError(
                f"{self.name}: clips {clips} have {frames} frame; a temporal perturbation reorders 2 or more, so "
                "it cannot change them (leave clips of one frame out of the dataset of a suite with temporal cells)"
            )
        return frames

    def refuse_still_clips(self, batch: Batch, order: torch.Tensor, severity: int) -> None:
        """Refuse an order that shows a clip as one frame repeated: a still picture scores a
        video metric trivially (a propagated first-frame mask is right on every frame), so the
        cell's score would say the model got better under perturbation.

        Raises:
            DatasetError: naming each such clip, its frame count and the frames that remain.
        """
        still = (order == order[:, :1]).all(dim=1)
        if not bool(still.any()):
            return
        rows = still.nonzero().flatten().tolist()
        clips = _clip_names(batch, rows, f"{len(rows)} clips")
        frames = order.shape[1]
        raise DatasetError(
            f"{self.name}[{severity}] leaves clip(s) {clips} ({frames} frames) with 1 distinct frame: a still "
            "picture scores a video metric trivially, so this cell would say nothing about the model. Leave "
            f"severity {severity} of {self.name} out of the suite, or clips this short out of its dataset"
        )

    def _corrupt(self, batch, severity, seeds, size, device):  # type: ignore[no-untyped-def]
        frames = self.frame_count(batch)
        order = self.frame_order(self.table[severity], SampleStreams(seeds, device), frames, device)
        self.refuse_still_clips(batch, order, severity)
        return {name: kernels.reorder(field, order) for name, field in batch.items()}
