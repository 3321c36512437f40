"""Per-type kernels: how each kind of field is corrupted, dispatched on its type.

Two generic functions, extended with ``@photometric.register`` / ``@warp.register`` by the
module that defines a new field type (as torchvision transforms v2 dispatches on
``tv_tensors``):

* :func:`photometric` changes the pixel values of image-like fields. Its default passes a
  field through untouched, so masks, instances and any future annotation are safe from
  photometric corruptions by construction.
* :func:`warp` resamples a field through a sampling field. Its default raises: a field that
  cannot move with the image must never silently stay where it was.

:func:`warp_affine` serves affine corruptions (rotate, shear, translate): it hands a type its
inverse maps as well, and by default warps it through their coordinates with :func:`warp`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch

from pytest_segrobust.corruptions import functional as Fn
from pytest_segrobust.types import (
    VOID,
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
    boxes_from_masks,
)

# Changes images ``(B, C, H, W)`` in [0, 1]; bound to the corruption's params and random streams.
ImageFunction = Callable[[torch.Tensor], torch.Tensor]


@functools.singledispatch
def photometric(field: Field, change: ImageFunction) -> Field:
    """Apply a pixel-value change to an image-like field; every other field passes through."""
    return field


@photometric.register
def _(field: Image, change: ImageFunction) -> Image:
    return Image(change(field.data))


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
