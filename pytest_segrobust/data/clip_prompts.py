"""Prompts for a clip's objects: what a VOS suite's prompt reference draws from the clean clip.

A ``task: vos`` suite may start its objects with prompts instead of masks::

    reference: {points: {count: 1, where: center}, box: tight}

with the options of a promptable suite's ``prompts:`` (:mod:`pytest_segrobust.data.prompt_protocol`).
Each object gets prompts at every annotated frame that shows it, drawn from its mask there in the
clean clip; the model is given those of the first frame that shows it in the clip as it sees it,
so an untouched clip starts each object at its first shown frame, and a temporal perturbation
that brings another of its frames first starts it there, with that frame's own prompts (as the
mask reference gives that frame's mask, :func:`~pytest_segrobust.tasks.vos.reference_masks`).
Random clicks come from the clip's own streams keyed by (suite seed, clip id, object id,
``"frame"``, frame index, prompt kind): they do not depend on batch, order, worker or device.
"""

from __future__ import annotations

import torch

from pytest_segrobust.core.prompts import ABSENT, ClipObjectPrompts
from pytest_segrobust.data.clips import ClipObjects
from pytest_segrobust.data.prompt_protocol import PromptProtocol


def clip_prompts(protocol: PromptProtocol, objects: ClipObjects, clip_id: str, seed: int) -> ClipObjectPrompts:
    """Every object's prompts at every annotated frame that shows it, on the CPU.

    Args:
        protocol: The suite's reference protocol.
        objects: The clip's objects, as the dataset gives them (clean).
        clip_id: The clip's sample id.
        seed: The suite's seed.
    """
    masks = objects.masks.cpu()
    frames, count = int(masks.shape[0]), len(objects.object_ids)
    # The protocol's click slots per object, as an empty draw has them.
    slots = int(protocol.keyed_prompts(torch.zeros(0, *masks.shape[1:], dtype=torch.bool), [], seed).points.shape[1])
    points = torch.zeros(frames, count, slots, 2, dtype=torch.float32)
    labels = torch.full((frames, count, slots), ABSENT, dtype=torch.int64)
    boxes = torch.zeros(frames, count, 4, dtype=torch.float32)
    box_given = torch.zeros(frames, count, dtype=torch.bool)
    ids = torch.tensor(objects.object_ids, dtype=torch.int64).view(-1, 1, 1)
    for frame in range(frames):
        if not bool(objects.annotated[frame]):
            continue
        shown_masks = masks[frame].unsqueeze(0) == ids  # (O, H, W)
        shown = shown_masks.flatten(1).any(dim=1).nonzero().flatten().tolist()
        if not shown:
            continue
        keys = [(clip_id, objects.object_ids[i], "frame", frame) for i in shown]
        drawn = protocol.keyed_prompts(shown_masks[shown], keys, seed)
        points[frame, shown] = drawn.points
        labels[frame, shown] = drawn.point_labels
        boxes[frame, shown] = drawn.boxes
        box_given[frame, shown] = drawn.box_given
    return ClipObjectPrompts(objects.object_ids, points, labels, boxes, box_given)
