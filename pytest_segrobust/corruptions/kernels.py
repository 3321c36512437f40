"""Per-type kernels: how each kind of field is corrupted, dispatched on its type.

Three generic functions, extended with ``@photometric.register`` / ``@warp.register`` /
``@reorder.register`` by the module that defines a new field type (as torchvision transforms
v2 dispatches on ``tv_tensors``):

* :func:`photometric` changes the pixel values of pixel fields (images, video frames). Its
  default passes a field through untouched, so masks, instances and any future annotation
  are safe from photometric corruptions by construction.
* :func:`warp` resamples a field through a sampling field: one per sample, or one per frame
  of a clip. Its default raises: a field that cannot move with the image must never silently
  stay where it was.
* :func:`reorder` reorders or repeats the frames of a field with a time axis (temporal
  corruptions). Its default passes a field without frames through and raises for one with
  frames, for the same reason.

:func:`warp_affine` serves affine corruptions (rotate, shear, translate): it hands a type its
inverse maps as well, and by default warps it through their coordinates with :func:`warp`.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence

import torch

from pytest_segrobust.core.types import (
    VOID,
    Audio,
    Expressions,
    Field,
    Image,
    InstanceMasks,
    InstanceTarget,
    PanopticMap,
    PanopticTarget,
    ReferringMask,
    SampleIndex,
    SemanticMask,
    Video,
    VideoMasks,
    boxes_from_masks,
)
from pytest_segrobust.corruptions import functional as Fn
from pytest_segrobust.randomness.seeding import StreamKeys

# Changes images ``(N, C, H, W)`` in [0, 1], each drawing from its own key (one per image);
# bound to the corruption's params.
ImageFunction = Callable[[torch.Tensor, Sequence[int]], torch.Tensor]


@functools.singledispatch
def photometric(field: Field, change: ImageFunction, keys: StreamKeys) -> Field:
    """Apply a pixel-value change to a pixel field; every other field passes through.

    A kernel hands ``change`` the field's images with one key each, taken from ``keys``
    (:class:`~pytest_segrobust.randomness.seeding.StreamKeys`).
    """
    return field


@photometric.register
def _(field: Image, change: ImageFunction, keys: StreamKeys) -> Image:
    return Image(change(field.data, keys.seeds))


@photometric.register
def _(field: Video, change: ImageFunction, keys: StreamKeys) -> Video:
    # The frames as images, each with its key: the clip's own (once per clip) or its frame's.
    b, t = field.data.shape[:2]
    frames = change(field.data.flatten(0, 1), keys.frames(t))
    return dataclasses.replace(field, data=frames.unflatten(0, (b, t)))


@functools.singledispatch
def warp(field: Field, coords: torch.Tensor) -> Field:
    """Resample ``field`` so that output pixel ``p`` shows source position ``coords[p]``.

    Shape:
        coords: ``(B, H, W, 2)``, source ``(x, y)`` per output pixel, pixel centres at integers.

    Raises:
        TypeError: for a field type without a geometric kernel.
    """
    raise TypeError(
        f"{type(field).__name__} has no geometric kernel, so a geometric corruption cannot move it with the "
        "image; register one with @pytest_segrobust.corruptions.kernels.warp.register"
    )


@warp.register
def _(field: Image, coords: torch.Tensor) -> Image:
    # Outside the frame becomes black.
    return Image(Fn.sample_bilinear(field.data, coords, fill=0.0).clamp_(0.0, 1.0))


@functools.singledispatch
def warp_affine(field: Field, matrices: torch.Tensor, coords: Callable[[], torch.Tensor]) -> Field:
    """Resample ``field`` through per-sample inverse affine maps: by default :func:`warp` at ``coords()``.

    ``coords()`` returns the maps' sampling coordinates (computed once, on first call); a
    type with a kernel of its own for affine maps registers it here.

    Shape:
        matrices: ``(B, 2, 3)``, output ``(x, y, 1)`` to source ``(x, y)``; coords: returns ``(B, H, W, 2)``.
    """
    return warp(field, coords())


@warp_affine.register
def _(field: Image, matrices: torch.Tensor, coords: Callable[[], torch.Tensor]) -> Image:
    return Image(Fn.sample_affine_bilinear(field.data, matrices, coords, fill=0.0).clamp_(0.0, 1.0))


@warp.register
def _(field: SemanticMask, coords: torch.Tensor) -> SemanticMask:
    # Nearest neighbour; pixels from outside the frame are not scored.
    return SemanticMask(Fn.sample_nearest(field.data, coords, fill=field.ignore_index), field.ignore_index)


@warp.register
def _(field: InstanceMasks, coords: torch.Tensor) -> InstanceMasks:
    warped = tuple(_warp_instances(target, coords[i : i + 1]) for i, target in enumerate(field.targets))
    return InstanceMasks(warped, int(coords.shape[1]), int(coords.shape[2]))


def _warp_instances(target: InstanceTarget, coords: torch.Tensor) -> InstanceTarget:
    """Resample one image's instance masks, recompute tight boxes, drop vanished instances."""
    if len(target) == 0:
        return target
    masks = Fn.sample_nearest(target.masks[None].to(torch.uint8), coords, fill=0)[0].bool()
    kept = masks.flatten(1).any(dim=1)
    masks = masks[kept]
    return InstanceTarget(masks, target.labels[kept], boxes_from_masks(masks), target.iscrowd[kept])


@warp.register
def _(field: SampleIndex, coords: torch.Tensor) -> SampleIndex:
    return field  # no pixels: nothing moves


@warp.register
def _(field: PanopticMap, coords: torch.Tensor) -> PanopticMap:
    # Segment ids move by nearest neighbour; outside the frame is void; vanished segments go.
    warped = []
    for i, target in enumerate(field.targets):
        segments = Fn.sample_nearest(target.segments[None], coords[i : i + 1], fill=VOID)[0]
        warped.append(PanopticTarget(segments, target.ids, target.labels, target.iscrowd).present())
    return PanopticMap(tuple(warped))


@warp.register
def _(field: ReferringMask, coords: torch.Tensor) -> ReferringMask:
    # Nearest neighbour; what moves in from outside the frame is not the referred object.
    warped = Fn.sample_nearest(field.data.to(torch.uint8), coords, fill=0)
    return ReferringMask(warped.bool())


@warp.register
def _(field: Expressions, coords: torch.Tensor) -> Expressions:
    return field  # text has no pixels: nothing moves


@warp.register
def _(field: Audio, coords: torch.Tensor) -> Audio:
    return field  # sound has no pixels: nothing moves


# Clips. A sampling field of shape (B, H, W, 2) is the clip's: every frame moves alike, so the
# frames are resampled as planes of one image (the same values as frame by frame). One of shape
# (B, T, H, W, 2) gives each frame its own.


def _per_frame(coords: torch.Tensor) -> bool:
    return coords.dim() == 5


@warp.register
def _(field: Video, coords: torch.Tensor) -> Video:
    b, t, c, h, w = field.data.shape
    if _per_frame(coords):
        frames = Fn.sample_bilinear(field.data.flatten(0, 1), coords.flatten(0, 1), fill=0.0)
    else:
        frames = Fn.sample_bilinear(field.data.reshape(b, t * c, h, w), coords, fill=0.0)
    return dataclasses.replace(field, data=frames.reshape(b, t, c, *coords.shape[-3:-1]).clamp_(0.0, 1.0))


@warp_affine.register
def _(field: Video, matrices: torch.Tensor, coords: Callable[[], torch.Tensor]) -> Video:
    b, t, c, h, w = field.data.shape
    if matrices.dim() == 4:  # one map per frame
        flat_coords = lambda: coords().flatten(0, 1)
        frames = Fn.sample_affine_bilinear(field.data.flatten(0, 1), matrices.flatten(0, 1), flat_coords, fill=0.0)
    else:
        frames = Fn.sample_affine_bilinear(field.data.reshape(b, t * c, h, w), matrices, coords, fill=0.0)
    return dataclasses.replace(field, data=frames.reshape(b, t, c, h, w).clamp_(0.0, 1.0))


@warp.register
def _(field: VideoMasks, coords: torch.Tensor) -> VideoMasks:
    # Nearest neighbour; what moves in from outside the frame is background, as for referring masks.
    if _per_frame(coords):
        masks = Fn.sample_nearest(field.data.flatten(0, 1), coords.flatten(0, 1), fill=0)
        masks = masks.unflatten(0, field.data.shape[:2])
    else:
        masks = Fn.sample_nearest(field.data, coords, fill=0)
    return dataclasses.replace(field, data=masks)


@functools.singledispatch
def reorder(field: Field, order: torch.Tensor) -> Field:
    """Show source frame ``order[b, t]`` of clip ``b`` at position ``t``: the frames reordered or repeated.

    A field without a time axis (:meth:`Field.frames` is ``None``) passes through.

    Shape:
        order: ``(B, T')``, int64 indices into the field's ``T`` frames.

    Raises:
        TypeError: for a field with frames and without a temporal kernel.
    """
    if field.frames() is None:
        return field
    raise TypeError(
        f"{type(field).__name__} has frames but no temporal kernel, so a temporal corruption cannot move them "
        "with the video; register one with @pytest_segrobust.corruptions.kernels.reorder.register"
    )


def _gather_frames(values: torch.Tensor, order: torch.Tensor) -> torch.Tensor:
    """``values[b, order[b, t]]`` for every ``b, t``. Shape: values ``(B, T, ...)``; return ``(B, T', ...)``."""
    rows = torch.arange(values.shape[0], device=values.device)[:, None]
    return values[rows, order.to(values.device)]


@reorder.register
def _(field: Video, order: torch.Tensor) -> Video:
    return Video(_gather_frames(field.data, order), _gather_frames(field.frame_ids, order))


@reorder.register
def _(field: VideoMasks, order: torch.Tensor) -> VideoMasks:
    # The annotation of a frame goes where the frame goes: a frozen frame's masks are frozen with it.
    return dataclasses.replace(
        field,
        data=_gather_frames(field.data, order),
        annotated=_gather_frames(field.annotated, order),
        frame_ids=_gather_frames(field.frame_ids, order),
    )


@reorder.register
def _(field: Audio, order: torch.Tensor) -> Audio:
    return field  # the sound plays on in time whatever the picture does (see Audio)


@functools.singledispatch
def split_frames(field: Field) -> Field:
    """Clips of ``T`` frames as ``B * T`` one-frame clips, clip-major: frame ``t`` of clip ``b`` is
    clip ``b * T + t``. What a corruption that treats every frame on its own (a dynamic mixture)
    cuts a batch into; :func:`join_frames` puts it back.

    Raises:
        TypeError: for a field type without the two kernels.
    """
    raise TypeError(
        f"{type(field).__name__} cannot be cut into frames, so a perturbation drawn per frame cannot reach them; "
        "register kernels with @pytest_segrobust.corruptions.kernels.split_frames.register (and join_frames)"
    )


@functools.singledispatch
def join_frames(field: Field, frames: int) -> Field:
    """``B * T`` one-frame clips, clip-major, as ``B`` clips of ``frames`` frames: :func:`split_frames` undone."""
    raise TypeError(f"{type(field).__name__} cannot be joined from frames; register @join_frames.register")


def _one_frame_each(values: torch.Tensor) -> torch.Tensor:
    """Shape: ``(B, T, ...)`` to ``(B * T, 1, ...)``."""
    return values.flatten(0, 1).unsqueeze(1)


def _clips_of(values: torch.Tensor, frames: int) -> torch.Tensor:
    """Shape: ``(B * T, 1, ...)`` to ``(B, T, ...)``."""
    return values.squeeze(1).unflatten(0, (-1, frames))


@split_frames.register
def _(field: Video) -> Video:
    return Video(_one_frame_each(field.data), _one_frame_each(field.frame_ids))


@join_frames.register
def _(field: Video, frames: int) -> Video:
    return Video(_clips_of(field.data, frames), _clips_of(field.frame_ids, frames))


@split_frames.register
def _(field: VideoMasks) -> VideoMasks:
    frames = field.frames()
    return dataclasses.replace(
        field,
        data=_one_frame_each(field.data),
        object_ids=tuple(ids for ids in field.object_ids for _ in range(frames)),
        unseen=tuple(flags for flags in field.unseen for _ in range(frames)),
        annotated=_one_frame_each(field.annotated),
        frame_ids=_one_frame_each(field.frame_ids),
    )


@join_frames.register
def _(field: VideoMasks, frames: int) -> VideoMasks:
    return dataclasses.replace(
        field,
        data=_clips_of(field.data, frames),
        object_ids=field.object_ids[::frames],
        unseen=field.unseen[::frames],
        annotated=_clips_of(field.annotated, frames),
        frame_ids=_clips_of(field.frame_ids, frames),
    )
