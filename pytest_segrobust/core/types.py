"""Typed targets: what a batch of samples holds, field by field.

A batch is a mapping of names to typed fields (``{"image": Image(...), "mask":
SemanticMask(...)}``). Corruptions dispatch on the type of each field (see
:mod:`pytest_segrobust.corruptions.kernels`): a photometric corruption changes pixel fields
(:class:`PixelField`: images, video frames) and passes every other one through; a geometric
corruption moves every field with one sampling field; a temporal corruption reorders or
repeats the frames of every field with a time axis (:meth:`Field.frames`). Metrics find their
ground truth by type (:func:`field_of`), never by name or position. A new kind of target is
one new field class here or in its own module, plus its kernels.

Clips: :class:`Video` frames, :class:`VideoMasks` (an object id per pixel and frame) and
:class:`Audio` (a waveform whose samples are aligned with the frames) share the time axis
``T``; each carries the source frame id of every position, so a temporal corruption's
reordering is visible in the batch.

This module is neutral: it knows tensors, not tasks, metrics or corruptions.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import torch

from pytest_segrobust.core.errors import DatasetError, ModelOutputError

DEFAULT_IGNORE_INDEX = 255
# Segment id of unlabelled (void) pixels in a panoptic map.
VOID = 0


class Field:
    """A batch-level target: every field knows its batch size and its image size.

    A field can be cut into samples and put back together (:meth:`take`, :meth:`join`), so a
    batch can be corrupted image by image, or part by part. The defaults serve a dataclass
    whose tensor, tuple and list attributes hold one entry per sample along their first axis
    and whose other attributes (an ignore index, the image size) hold for the whole batch, as
    every field here does; a field of another shape overrides both.
    """

    def batch_size(self) -> int:
        raise NotImplementedError

    def size(self) -> tuple[int, int] | None:
        """``(H, W)`` of the images the field belongs to; ``None`` for a field without pixels."""
        raise NotImplementedError

    def frames(self) -> int | None:
        """``T``, the number of frames of the clips the field belongs to; ``None`` for a field without a time axis."""
        return None

    def device(self) -> torch.device | None:
        """Where the field's tensors live: the first tensor among a dataclass's attributes (and the
        targets they hold); ``None`` for a field without tensors."""
        return _device_of(self)

    def take(self, indices: Sequence[int]) -> Field:
        """Samples ``indices`` of the batch, in that order, as a field of the same type.

        A ``range`` of step 1 gives views of the tensors; other indices copy them.

        Raises:
            NotImplementedError: for a field that is not a dataclass and does not override this.
        """
        if not dataclasses.is_dataclass(self):
            raise NotImplementedError(f"{type(self).__name__} does not say how to cut it into samples")
        return dataclasses.replace(self, **{name: _take(value, indices) for name, value in _per_sample_values(self)})

    @classmethod
    def join(cls, parts: Sequence[Field]) -> Field:
        """The batch of ``parts`` (fields of this type, in order): what :meth:`take` cut, put back."""
        first = parts[0]
        joined: dict[str, object] = {}
        for name, value in _per_sample_values(first):
            pieces = [getattr(part, name) for part in parts]
            joined[name] = torch.cat(pieces) if isinstance(value, torch.Tensor) else type(value)(x for p in pieces for x in p)
        return dataclasses.replace(first, **joined)  # type: ignore[type-var]


def _device_of(value: object) -> torch.device | None:
    if isinstance(value, torch.Tensor):
        return value.device
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        found = (_device_of(getattr(value, f.name)) for f in dataclasses.fields(value))
        return next((device for device in found if device is not None), None)
    if isinstance(value, (tuple, list)):
        return next((device for device in map(_device_of, value) if device is not None), None)
    return None


def _per_sample_values(field: Field) -> list[tuple[str, torch.Tensor | tuple[object, ...] | list[object]]]:
    """The attributes of a dataclass field that hold one entry per sample: its tensors, tuples and lists."""
    values = ((f.name, getattr(field, f.name)) for f in dataclasses.fields(field))  # type: ignore[arg-type]
    return [(name, value) for name, value in values if isinstance(value, (torch.Tensor, tuple, list))]


def _take(value: torch.Tensor | tuple[object, ...] | list[object], indices: Sequence[int]) -> object:
    if isinstance(value, torch.Tensor):
        if isinstance(indices, range) and indices.step == 1:
            return value[indices.start : indices.stop]
        return value[torch.as_tensor(list(indices), dtype=torch.long, device=value.device)]
    return type(value)(value[i] for i in indices)


class PixelField(Field):
    """A field of float pixels in ``[0, 1]`` in its ``data`` tensor: what photometric and geometric
    corruptions act on (:class:`Image`, :class:`Video`, or a new type deriving from this one)."""

    data: torch.Tensor

    def device(self) -> torch.device:
        return self.data.device


class _PictureData:
    """Sizes of a field whose ``data`` holds a picture per sample, ``(B, ..., H, W)``: images,
    class maps, referring masks, and clips (:class:`_ClipData`). Listed before :class:`Field`
    among a field's bases, so that its methods win over the field's defaults."""

    data: torch.Tensor

    def batch_size(self) -> int:
        return int(self.data.shape[0])

    def size(self) -> tuple[int, int]:
        return int(self.data.shape[-2]), int(self.data.shape[-1])


@dataclass(frozen=True)
class Image(_PictureData, PixelField):
    """Float images in ``[0, 1]``.

    Shape:
        data: ``(B, C, H, W)``.
    """

    data: torch.Tensor


def _frame_positions(batch: int, frames: int, device: torch.device) -> torch.Tensor:
    """``0 .. T - 1`` for every clip of a batch: the frame ids of clips as they were read.

    Shape:
        return: ``(B, T)``, int64.
    """
    return torch.arange(frames, dtype=torch.int64, device=device).expand(batch, frames).contiguous()


class _ClipData(_PictureData):
    """Sizes of a field whose ``data`` holds clips, ``(B, T, ..., H, W)``: :class:`Video`'s frames
    and :class:`VideoMasks`' masks."""

    def frames(self) -> int:
        return int(self.data.shape[1])


@dataclass(frozen=True)
class Video(_ClipData, PixelField):
    """Clips of float frames in ``[0, 1]``; position ``t`` of clip ``b`` shows source frame ``frame_ids[b, t]``.

    Photometric corruptions change every frame (drawing once per clip or once per frame, see
    :class:`~pytest_segrobust.randomness.seeding.StreamKeys`); geometric ones move every frame with the
    clip's sampling field (or each frame with its own); temporal ones reorder or repeat frames
    and their ids.

    Shape:
        data: ``(B, T, C, H, W)``; frame_ids: ``(B, T)``, int64.
    """

    data: torch.Tensor
    frame_ids: torch.Tensor

    @classmethod
    def of(cls, data: torch.Tensor) -> Video:
        """Clips as they were read: frame ids ``0 .. T - 1``."""
        return cls(data, _frame_positions(int(data.shape[0]), int(data.shape[1]), data.device))


@dataclass(frozen=True)
class VideoMasks(_ClipData, Field):
    """Per-frame object masks of clips (video object segmentation): an object id per pixel and frame.

    ``0`` is background and ``ignore_index`` marks pixels that are not scored; clip ``b``'s
    objects are ``object_ids[b]`` (what a model is asked to segment, e.g. those of the first
    frame). ``annotated[b, t]`` says whether frame ``t`` has an annotation at all (sparse
    datasets label every fifth frame); ``frame_ids`` move with the frames as :class:`Video`'s do.
    ``unseen[b][i]`` says whether object ``object_ids[b][i]``'s category is outside the training
    categories (YouTube-VOS's seen / unseen split); left out, every object is seen.
    Geometric corruptions move every frame's masks (nearest neighbour, background from outside
    the frame); temporal ones move them with their frames.

    Shape:
        data: ``(B, T, H, W)``, int64; annotated: ``(B, T)``, bool; frame_ids: ``(B, T)``, int64.
    """

    data: torch.Tensor
    object_ids: tuple[tuple[int, ...], ...]
    annotated: torch.Tensor
    frame_ids: torch.Tensor
    ignore_index: int = DEFAULT_IGNORE_INDEX
    unseen: tuple[tuple[bool, ...], ...] = ()

    def __post_init__(self) -> None:
        if not self.unseen:  # every object seen: one flag per object, so that take() and join() cut it alike
            object.__setattr__(self, "unseen", tuple((False,) * len(ids) for ids in self.object_ids))
        if [len(flags) for flags in self.unseen] != [len(ids) for ids in self.object_ids]:
            raise ValueError(
                f"unseen must hold one flag per object of each clip, got {[len(f) for f in self.unseen]} flags "
                f"for {[len(ids) for ids in self.object_ids]} objects"
            )

    @classmethod
    def of(cls, data: torch.Tensor, ignore_index: int = DEFAULT_IGNORE_INDEX) -> VideoMasks:
        """Masks of every frame, as read: every frame annotated, frame ids ``0 .. T - 1``, the
        objects those of the first frame."""
        batch, frames = int(data.shape[0]), int(data.shape[1])
        objects = tuple(tuple(int(i) for i in clip[0].unique().tolist() if i not in (0, ignore_index)) for clip in data)
        annotated = torch.ones(batch, frames, dtype=torch.bool, device=data.device)
        return cls(data, objects, annotated, _frame_positions(batch, frames, data.device), ignore_index)


@dataclass(frozen=True)
class Audio(Field):
    """Waveforms of clips, aligned with their frames (audio-visual segmentation).

    Frame ``t`` of clip ``b`` is heard in samples ``frame_bounds[b, t, 0]`` (inclusive) to
    ``frame_bounds[b, t, 1]`` (exclusive) of ``data[b]``. Audio has no pixels: photometric and
    geometric corruptions leave it alone. Temporal corruptions leave it alone too: a frozen or
    reordered picture does not stop the sound, which keeps playing in time (the bounds index
    time, not the frames shown). Acoustic perturbations act on it.

    Attributes:
        sample_rate: Samples per second.
        layout: The channels, named and comma-separated (``"mono"``, ``"left,right"``).

    Shape:
        data: ``(B, C, S)``, float in ``[-1, 1]``; frame_bounds: ``(B, T, 2)``, int64.
    """

    data: torch.Tensor
    frame_bounds: torch.Tensor
    sample_rate: int
    layout: str = "mono"

    @classmethod
    def of(cls, data: torch.Tensor, sample_rate: int, frames: int, layout: str = "mono") -> Audio:
        """Waveforms cut into ``frames`` equal spans, one per frame (the last takes what remains)."""
        batch, length = int(data.shape[0]), int(data.shape[-1])
        starts = torch.arange(frames, dtype=torch.int64, device=data.device) * length // frames
        stops = torch.cat([starts[1:], torch.tensor([length], dtype=torch.int64, device=data.device)])
        bounds = torch.stack([starts, stops], dim=1).expand(batch, frames, 2).contiguous()
        return cls(data, bounds, sample_rate, layout)

    def channels(self) -> tuple[str, ...]:
        """The name of each channel of :attr:`data`, in order."""
        return tuple(self.layout.split(","))

    def batch_size(self) -> int:
        return int(self.data.shape[0])

    def size(self) -> None:
        return None

    def frames(self) -> int:
        return int(self.frame_bounds.shape[1])

    def frame(self, sample: int, frame: int) -> torch.Tensor:
        """The waveform heard while frame ``frame`` of clip ``sample`` is shown.

        Shape:
            return: ``(C, frame_bounds[sample, frame, 1] - frame_bounds[sample, frame, 0])``.
        """
        start, stop = (int(v) for v in self.frame_bounds[sample, frame])
        return self.data[sample, :, start:stop]


@dataclass(frozen=True)
class SemanticMask(_PictureData, Field):
    """Class ids per pixel; ``ignore_index`` marks pixels that are not scored.

    Shape:
        data: ``(B, H, W)``, integer.
    """

    data: torch.Tensor
    ignore_index: int = DEFAULT_IGNORE_INDEX


@dataclass(frozen=True)
class InstanceTarget:
    """Object instances of one image.

    Boxes are ``(x0, y0, x1, y1)`` in pixels with exclusive ends: a mask covering columns
    3..5 has ``x0 = 3, x1 = 6``, so ``x1 - x0`` is the COCO width.

    Shape:
        masks: ``(N, H, W)``, bool; labels: ``(N,)``, int64; boxes: ``(N, 4)``, float32;
        iscrowd: ``(N,)``, bool.
    """

    masks: torch.Tensor
    labels: torch.Tensor
    boxes: torch.Tensor
    iscrowd: torch.Tensor

    @classmethod
    def from_masks(cls, masks: torch.Tensor, labels: torch.Tensor, iscrowd: torch.Tensor | None = None) -> InstanceTarget:
        """Build a target whose boxes are tight around ``masks``."""
        crowd = torch.zeros(len(labels), dtype=torch.bool, device=masks.device) if iscrowd is None else iscrowd
        return cls(masks.bool(), labels.long(), boxes_from_masks(masks), crowd.bool())

    def __len__(self) -> int:
        return int(self.labels.numel())

    def to(self, device: torch.device | str, non_blocking: bool = False) -> InstanceTarget:
        """The same instances on ``device``."""
        return InstanceTarget(
            *(t.to(device, non_blocking=non_blocking) for t in (self.masks, self.labels, self.boxes, self.iscrowd))
        )


class ImageTargets:
    """Sizes of a field that holds one target per image in ``targets``, every image ``height`` x ``width``
    (instances, prompted instances). Listed before :class:`Field` among a field's bases."""

    targets: tuple[Any, ...]
    height: int
    width: int

    def batch_size(self) -> int:
        return len(self.targets)

    def size(self) -> tuple[int, int]:
        return self.height, self.width


@dataclass(frozen=True)
class InstanceMasks(ImageTargets, Field):
    """Instances of every image of a batch; an image's masks have the image's size."""

    targets: tuple[InstanceTarget, ...]
    height: int
    width: int


@dataclass(frozen=True)
class PanopticTarget:
    """One image's panoptic segmentation: a segment id per pixel and each segment's class.

    Segment ids are arbitrary positive integers (``VOID`` = 0 is unlabelled). ``labels[i]``
    and ``iscrowd[i]`` describe segment ``ids[i]``.

    Shape:
        segments: ``(H, W)``, int64; ids, labels: ``(S,)``, int64; iscrowd: ``(S,)``, bool.
    """

    segments: torch.Tensor
    ids: torch.Tensor
    labels: torch.Tensor
    iscrowd: torch.Tensor

    def to(self, device: torch.device | str, non_blocking: bool = False) -> PanopticTarget:
        """The same segmentation on ``device``."""
        return PanopticTarget(
            *(t.to(device, non_blocking=non_blocking) for t in (self.segments, self.ids, self.labels, self.iscrowd))
        )

    def present(self) -> PanopticTarget:
        """The segments that still cover a pixel (a warp may move others out of the frame)."""
        kept = torch.isin(self.ids, self.segments.unique())
        return PanopticTarget(self.segments, self.ids[kept], self.labels[kept], self.iscrowd[kept])


@dataclass(frozen=True)
class PanopticMap(Field):
    """Panoptic segmentations of every image of a batch."""

    targets: tuple[PanopticTarget, ...]

    def batch_size(self) -> int:
        return len(self.targets)

    def size(self) -> tuple[int, int]:
        height, width = self.targets[0].segments.shape
        return int(height), int(width)


@dataclass(frozen=True)
class ReferringMask(_PictureData, Field):
    """The one region each sample's referring expression names (referring segmentation).

    An empty mask is a valid target: the expression names nothing in the frame (a geometric
    corruption may move the object out of it).

    Shape:
        data: ``(B, H, W)``, bool.
    """

    data: torch.Tensor


@dataclass(frozen=True)
class Expressions(Field):
    """One referring expression per sample (``"the striped square right of the dotted circle"``).

    It has no pixels: geometric corruptions carry it through unchanged, and only text
    perturbations change it.
    """

    texts: tuple[str, ...]

    def batch_size(self) -> int:
        return len(self.texts)

    def size(self) -> None:
        return None


@dataclass(frozen=True)
class SampleIndex(Field):
    """Where each image of a batch comes from: its position in the dataset and its sample id.

    It has no pixels, so corruptions carry it through unchanged; metrics that record
    images (COCO) number them by position.

    Attributes:
        units: Where the task resamples units of several samples (the image of a referring
            expression, the clip of an R-VOS one), each sample's unit id; ``None`` where every
            sample is its own unit. Metrics with a row per sample keep them beside their rows
            (:meth:`~pytest_segrobust.metrics.base.Metric.row_units`).
    """

    positions: tuple[int, ...]
    sample_ids: tuple[str, ...]
    units: tuple[str, ...] | None = None

    def batch_size(self) -> int:
        return len(self.positions)

    def size(self) -> None:
        return None


Batch = Mapping[str, Field]
F = TypeVar("F", bound=Field)


def field_of(batch: Batch, kind: type[F]) -> F:
    """The one field of type ``kind`` in ``batch``.

    Raises:
        KeyError: when the batch has no such field, or more than one.
    """
    found = [value for value in batch.values() if isinstance(value, kind)]
    if len(found) != 1:
        have = ", ".join(f"{name}: {type(value).__name__}" for name, value in batch.items())
        raise KeyError(f"expected exactly one {kind.__name__} field, the batch has {len(found)} ({have})")
    return found[0]


def frames_of(batch: Batch) -> int | None:
    """The number of frames ``T`` of the batch's clips; ``None`` for a batch without a time axis.

    Raises:
        ValueError: when two fields have different numbers of frames.
    """
    counts = {name: count for name, value in batch.items() if (count := value.frames()) is not None}
    if len(set(counts.values())) > 1:
        have = ", ".join(f"{name}: {count}" for name, count in counts.items())
        raise ValueError(f"the fields of a batch have different numbers of frames ({have})")
    return next(iter(counts.values()), None)


def boxes_from_masks(masks: torch.Tensor) -> torch.Tensor:
    """Tight ``(x0, y0, x1, y1)`` boxes (exclusive ends) of binary masks; empty masks give zeros.

    Shape:
        masks: ``(N, H, W)``; return: ``(N, 4)``, float32.
    """
    n, h, w = masks.shape
    if n == 0:
        return torch.zeros(0, 4, dtype=torch.float32, device=masks.device)
    rows, cols = masks.any(dim=2), masks.any(dim=1)  # (N, H), (N, W)
    y = torch.arange(h, device=masks.device)
    x = torch.arange(w, device=masks.device)
    big = max(h, w) + 1
    y0 = torch.where(rows, y, big).amin(dim=1)
    y1 = torch.where(rows, y, -1).amax(dim=1) + 1
    x0 = torch.where(cols, x, big).amin(dim=1)
    x1 = torch.where(cols, x, -1).amax(dim=1) + 1
    boxes = torch.stack([x0, y0, x1, y1], dim=1).float()
    return torch.where(rows.any(dim=1, keepdim=True), boxes, torch.zeros_like(boxes))


@dataclass(frozen=True)
class InstancePredictions:
    """What an instance segmentation model returns for one image.

    Labels follow the dataset's contiguous numbering (``1..K``, 0 is background and never
    predicted).

    Shape:
        masks: ``(N, H, W)``, bool; labels: ``(N,)``, int64; scores: ``(N,)``, float.
    """

    masks: torch.Tensor
    labels: torch.Tensor
    scores: torch.Tensor

    def __post_init__(self) -> None:
        if self.masks.dim() != 3 or self.masks.dtype != torch.bool:
            raise ModelOutputError(
                f"instance masks must be a bool tensor of shape (N, H, W), got {self.masks.dtype} "
                f"of shape {tuple(self.masks.shape)} (threshold mask probabilities in the adapter)"
            )
        count = self.masks.shape[0]
        if tuple(self.labels.shape) != (count,) or tuple(self.scores.shape) != (count,):
            raise ModelOutputError(
                f"{count} instance masks need labels and scores of shape ({count},), got "
                f"{tuple(self.labels.shape)} and {tuple(self.scores.shape)}"
            )
        if self.labels.is_floating_point() or self.labels.is_complex() or self.labels.dtype == torch.bool:
            raise ModelOutputError(f"instance labels must be integer class ids, got {self.labels.dtype}")
        if not self.scores.is_floating_point():
            raise ModelOutputError(f"instance scores must be floating point, got {self.scores.dtype}")

    def __len__(self) -> int:
        return int(self.labels.numel())


@dataclass(frozen=True)
class PanopticPredictions:
    """What a panoptic segmentation model returns for one image.

    Every pixel carries a segment id (``0`` = void: the model abstains there); segment
    ``ids[i]`` has class ``labels[i]`` in the dataset's numbering (label ``k`` is
    ``class_names[k]``). Stuff classes have one segment per image, thing classes one per
    instance.

    Shape:
        segments: ``(H, W)``, int64; ids, labels: ``(S,)``, int64.
    """

    segments: torch.Tensor
    ids: torch.Tensor
    labels: torch.Tensor

    def __post_init__(self) -> None:
        if self.segments.dim() != 2 or self.segments.is_floating_point() or self.segments.dtype == torch.bool:
            raise ModelOutputError(
                f"panoptic segments must be an integer tensor of shape (H, W), got {self.segments.dtype} "
                f"of shape {tuple(self.segments.shape)}"
            )
        if self.ids.dim() != 1 or tuple(self.labels.shape) != tuple(self.ids.shape):
            raise ModelOutputError(
                f"panoptic ids and labels must have one shape (S,), got {tuple(self.ids.shape)} and {tuple(self.labels.shape)}"
            )
        if self.ids.is_floating_point() or self.labels.is_floating_point():
            raise ModelOutputError("panoptic ids and labels must be integers")


class Categorised(Protocol):
    """What the category helpers read of a dataset (or a metric's context): its name and classes.

    A dataset may also have ``categories``, COCO category dicts (``id``, ``name``, and
    optionally ``supercategory``), read with ``getattr``.
    """

    name: str
    class_names: Sequence[str]


def instance_categories(dataset: Categorised) -> tuple[dict[str, Any], ...]:
    """COCO category dicts of labels ``1..K``, in label order.

    Label ``k`` is ``class_names[k]`` (0 is background). A dataset's own ``categories``
    are used when it has them (their names must then be ``class_names[1:]``); otherwise
    the classes become categories with ids ``1..K``.

    Raises:
        DatasetError: when the dataset's categories do not match its class names.
    """
    names = tuple(dataset.class_names[1:])
    given = getattr(dataset, "categories", None)
    if given is None:
        return tuple({"id": label, "name": name} for label, name in enumerate(names, 1))
    categories = tuple(sorted((dict(c) for c in given), key=lambda c: c["id"]))
    if tuple(c["name"] for c in categories) != names:
        raise DatasetError(
            f"{dataset.name}: categories in id order ({', '.join(c['name'] for c in categories)}) are not "
            f"class_names[1:] ({', '.join(names)}); instance labels would be ambiguous"
        )
    return categories


def supercategories(dataset: Categorised) -> list[str | None]:
    """The COCO supercategory of each of ``class_names`` (``None`` where there is none)."""
    of_name = {c["name"]: c.get("supercategory") for c in getattr(dataset, "categories", None) or ()}
    return [of_name.get(name) for name in dataset.class_names]
