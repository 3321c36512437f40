"""How a geometric corruption moves prompted instances: masks and prompts through one map.

The masks move as instance masks do (:func:`~pytest_segrobust.corruptions.functional.sample_nearest`:
output pixel ``p`` shows source pixel ``s(p) = floor(coords[p] + 0.5)``, nothing from outside
the frame); an instance whose moved mask is empty is dropped with its prompts. A click at source
pixel ``q`` moves to the output pixel

* among those that show ``q`` (``s(p) = q``), the one whose sampling position ``coords[p]`` is
  nearest ``q``;
* where no output pixel shows ``q``, the output pixel whose sampling position is nearest ``q``,
  when that position lies within one pixel of ``q`` in both axes (nearest-neighbour resampling
  skipped ``q``'s pixel, as a rotation skips a few); otherwise the click has left the frame and
  is dropped;

ties go to the first in raster order. A foreground click is kept where its instance's moved mask
holds its new pixel, a background click where no moved instance mask does; either is dropped
where its new pixel shows nothing of the source (void: outside the frame). So a kept foreground
click lies in its instance's moved mask exactly, and a click whose pixel some output pixel
shows, inside its instance, is kept. A tight box is the moved mask's tight box; a perturbed box
(:attr:`~pytest_segrobust.core.prompts.InstancePrompts.tight` false) has its corners moved by the
same rule and becomes their bounding box. Photometric corruptions pass the field through
(:func:`~pytest_segrobust.corruptions.kernels.photometric`'s default) and it has no frames.
"""

from __future__ import annotations

import torch

from pytest_segrobust.core.prompts import (
    ABSENT,
    BACKGROUND,
    FOREGROUND,
    ClipObjectPrompts,
    ClipPrompts,
    InstancePrompts,
    PromptedInstances,
)
from pytest_segrobust.core.types import boxes_from_masks
from pytest_segrobust.corruptions import functional as Fn
from pytest_segrobust.corruptions import kernels


@kernels.warp.register
def _(field: PromptedInstances, coords: torch.Tensor) -> PromptedInstances:
    moved = tuple(move_prompts(target, coords[i]) for i, target in enumerate(field.targets))
    return PromptedInstances(moved, int(coords.shape[1]), int(coords.shape[2]))


def moved_positions(points: torch.Tensor, coords: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Where source points go under a sampling field, and whether their new pixel shows the source.

    Args:
        points: Source ``(x, y)`` positions; rounded to pixels as nearest neighbour rounds.
        coords: One image's sampling field: output pixel -> source ``(x, y)``.

    Returns:
        The output pixel ``(x, y)`` of every point (see the module) and whether the point is still
        in the picture: its pixel is shown there, or skipped beside a shown one, and not void.

    Shape:
        points: ``(P, 2)``; coords: ``(H, W, 2)``; return: ``(P, 2)`` float32, ``(P,)`` bool.
    """
    height, width = int(coords.shape[0]), int(coords.shape[1])
    count = int(points.shape[0])
    if count == 0:
        return points.new_zeros(0, 2), torch.zeros(0, dtype=torch.bool, device=points.device)
    flat = coords.reshape(-1, 2).to(torch.float64)
    shown = torch.floor(flat + 0.5)  # (HW, 2): the source pixel each output pixel shows
    source = torch.floor(points.to(flat.device, torch.float64) + 0.5)  # (P, 2)
    # Among the output pixels that show a source pixel, the one sampling nearest its centre
    # (the first in raster order on a tie), for every source pixel at once: O(HW), not O(P HW).
    on_frame = (shown[:, 0] >= 0) & (shown[:, 0] < width) & (shown[:, 1] >= 0) & (shown[:, 1] < height)
    slot = torch.where(on_frame, shown[:, 1] * width + shown[:, 0], torch.full_like(shown[:, 0], height * width)).long()
    offset = (flat[:, 0] - shown[:, 0]) ** 2 + (flat[:, 1] - shown[:, 1]) ** 2
    nearest = torch.full((height * width + 1,), float("inf"), dtype=torch.float64, device=flat.device)
    nearest = nearest.scatter_reduce(0, slot, offset, reduce="amin")
    positions = torch.arange(height * width, device=flat.device)
    best = torch.full((height * width + 1,), height * width, dtype=torch.long, device=flat.device)
    best = best.scatter_reduce(0, slot, torch.where(offset == nearest[slot], positions, height * width), reduce="amin")
    on_source = (source[:, 0] >= 0) & (source[:, 0] < width) & (source[:, 1] >= 0) & (source[:, 1] < height)
    wanted = torch.where(on_source, source[:, 1] * width + source[:, 0], torch.full_like(source[:, 0], height * width)).long()
    chosen = best[wanted]
    lost = (chosen == height * width).nonzero().flatten()
    if lost.numel():  # no output pixel shows the point's pixel: the one sampling nearest it
        away = source[lost]
        distance = (flat[None, :, 0] - away[:, :1]) ** 2 + (flat[None, :, 1] - away[:, 1:]) ** 2
        chosen = chosen.index_put((lost,), distance.argmin(dim=1))
    xs, ys = (chosen % width).to(torch.float32), torch.div(chosen, width, rounding_mode="floor").to(torch.float32)
    sample = shown[chosen]
    inside = (sample[:, 0] >= 0) & (sample[:, 0] < width) & (sample[:, 1] >= 0) & (sample[:, 1] < height)
    # A pixel no output pixel shows was skipped by the resampling (a sampling position lies within
    # one pixel of it) or has left the frame (none does).
    inside &= (flat[chosen] - source).abs().amax(dim=1) <= 1.0
    return torch.stack([xs, ys], dim=1).to(points.device), inside.to(points.device)


def move_prompts(target: InstancePrompts, coords: torch.Tensor) -> InstancePrompts:
    """One image's instances and prompts moved through its sampling field ``coords`` ``(H, W, 2)`` (see the module)."""
    if len(target) == 0:
        return target
    masks = Fn.sample_nearest(target.masks[None].to(torch.uint8), coords[None], fill=0)[0].bool()
    moved = prompts_on_moved(target, masks, coords)
    return moved.kept(masks.flatten(1).any(dim=1))


def prompts_on_moved(target: InstancePrompts, masks: torch.Tensor, coords: torch.Tensor) -> InstancePrompts:
    """``target``'s prompts moved through ``coords`` beside its masks already moved through it (``masks``):
    every instance kept, one whose moved mask is empty with its clicks dropped and an empty box.

    Shape:
        masks: ``(N, H', W')``, bool; coords: ``(H', W', 2)``.
    """
    count, slots = int(target.points.shape[0]), int(target.points.shape[1])
    where, inside = moved_positions(target.points.reshape(-1, 2), coords)
    xs, ys = where[:, 0].long(), where[:, 1].long()
    owner = torch.arange(count, device=masks.device).repeat_interleave(slots)
    on_own = masks[owner, ys, xs] if count * slots else torch.zeros(0, dtype=torch.bool, device=masks.device)
    on_any = masks[:, ys, xs].any(dim=0) if count * slots else on_own
    labels = target.point_labels.reshape(-1)
    keep = inside & (((labels == FOREGROUND) & on_own) | ((labels == BACKGROUND) & ~on_any))
    labels = torch.where(keep & (labels != ABSENT), labels, torch.full_like(labels, ABSENT))
    points = torch.where(keep[:, None], where, torch.zeros_like(where)).reshape(count, slots, 2)
    boxes = boxes_from_masks(masks)
    if not bool(target.tight.all()):
        loose = ~target.tight
        boxes[loose] = _moved_boxes(target.boxes[loose], coords)
    return InstancePrompts(
        masks, points, labels.reshape(count, slots), boxes, target.box_given, target.tight, target.areas, target.kinds
    )


def _moved_boxes(boxes: torch.Tensor, coords: torch.Tensor) -> torch.Tensor:
    """Perturbed boxes: the bounding box of their four moved corners (exclusive ends)."""
    if boxes.shape[0] == 0:
        return boxes
    x0, y0, x1, y1 = boxes.unbind(dim=1)
    corners = torch.stack([torch.stack(c, dim=1) for c in ((x0, y0), (x1 - 1, y0), (x0, y1 - 1), (x1 - 1, y1 - 1))], dim=1)
    where, _ = moved_positions(corners.reshape(-1, 2), coords)
    where = where.reshape(-1, 4, 2)
    low, high = where.amin(dim=1), where.amax(dim=1) + 1
    return torch.cat([low, high], dim=1)


# Clips (a VOS suite's prompt reference): each frame's prompts move through that frame's map, as
# its masks do (a sampling field (B, H, W, 2) is the clip's, one of (B, T, H, W, 2) each frame's);
# a temporal corruption moves them with their frames.


@kernels.warp.register
def _(field: ClipPrompts, coords: torch.Tensor) -> ClipPrompts:
    per_frame = coords.dim() == 5
    if per_frame:
        masks = Fn.sample_nearest(field.masks.flatten(0, 1), coords.flatten(0, 1), fill=0).unflatten(0, field.masks.shape[:2])
    else:
        masks = Fn.sample_nearest(field.masks, coords, fill=0)
    clips = []
    for b, clip in enumerate(field.clips):
        frame_coords = [coords[b, t] if per_frame else coords[b] for t in range(field.frames())]
        clips.append(_moved_clip(clip, masks[b], frame_coords, field.kinds))
    return ClipPrompts(masks, tuple(clips), field.kinds)


def _moved_clip(
    clip: ClipObjectPrompts, masks: torch.Tensor, coords: list[torch.Tensor], kinds: str
) -> ClipObjectPrompts:
    """One clip's prompts moved frame by frame beside its moved masks ``(T, H', W')``."""
    frames, count = int(masks.shape[0]), len(clip.object_ids)
    points = torch.zeros(frames, count, *clip.points.shape[2:], dtype=clip.points.dtype, device=masks.device)
    labels = torch.full((frames, count, int(clip.labels.shape[2])), ABSENT, dtype=torch.int64, device=masks.device)
    boxes = torch.zeros(frames, count, 4, dtype=clip.boxes.dtype, device=masks.device)
    box_given = torch.zeros(frames, count, dtype=torch.bool, device=masks.device)
    ids = torch.tensor(clip.object_ids, dtype=masks.dtype, device=masks.device).view(-1, 1, 1)
    for frame in range(frames):
        if not bool((clip.labels[frame] != ABSENT).any() | clip.box_given[frame].any()):
            continue  # no object is shown here: nothing to move
        objects = masks[frame].unsqueeze(0) == ids  # (O, H', W'): the moved masks
        target = InstancePrompts(
            objects, clip.points[frame], clip.labels[frame], clip.boxes[frame], clip.box_given[frame],
            torch.ones(count, dtype=torch.bool, device=masks.device), torch.zeros(count, dtype=torch.int64, device=masks.device), kinds,
        )
        moved = prompts_on_moved(target, objects, coords[frame])
        points[frame], labels[frame], boxes[frame] = moved.points, moved.point_labels, moved.boxes
        box_given[frame] = moved.box_given & objects.flatten(1).any(dim=1)  # a mask gone takes its box along
    return ClipObjectPrompts(clip.object_ids, points, labels, boxes, box_given)


@kernels.reorder.register
def _(field: ClipPrompts, order: torch.Tensor) -> ClipPrompts:
    # A frame's prompts go where the frame goes: a repeated frame repeats them, a dropped one takes them along.
    rows = torch.arange(field.masks.shape[0], device=field.masks.device)[:, None]
    masks = field.masks[rows, order.to(field.masks.device)]
    return ClipPrompts(masks, tuple(clip.at_frames(order[b]) for b, clip in enumerate(field.clips)), field.kinds)


@kernels.split_frames.register
def _(field: ClipPrompts) -> ClipPrompts:
    frames = field.frames()
    one = [torch.tensor([t]) for t in range(frames)]
    clips = tuple(clip.at_frames(t) for clip in field.clips for t in one)
    return ClipPrompts(field.masks.flatten(0, 1).unsqueeze(1), clips, field.kinds)


@kernels.join_frames.register
def _(field: ClipPrompts, frames: int) -> ClipPrompts:
    clips = []
    for start in range(0, len(field.clips), frames):
        parts = field.clips[start : start + frames]
        clips.append(
            ClipObjectPrompts(
                parts[0].object_ids,
                torch.cat([p.points for p in parts]),
                torch.cat([p.labels for p in parts]),
                torch.cat([p.boxes for p in parts]),
                torch.cat([p.box_given for p in parts]),
            )
        )
    return ClipPrompts(field.masks.squeeze(1).unflatten(0, (-1, frames)), tuple(clips), field.kinds)
