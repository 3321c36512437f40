"""Prompted instances: the field of a promptable task (SAM-style models given points and boxes).

Each image of a batch carries its ground-truth instances (their masks) and, per instance, the
prompts a protocol drew for it (:mod:`pytest_segrobust.data.prompt_protocol`): clicks (points
with a foreground or background label) and a box. The model is asked once per *prompt set*:
for every instance, one set per prompt kind the protocol declares (``points``, ``box``), in
instance order, then kind order (:meth:`InstancePrompts.prompt_sets`).

The masks travel with the prompts in one field because a geometric corruption moves both
through one map and decides what is kept from the moved masks
(:mod:`pytest_segrobust.corruptions.prompt_kernels`), and prompt perturbations read the other
instances (a box taken from a neighbour, a click on the background).

Coordinates are pixels with pixel centres at integers, ``(x, y)``; boxes are ``(x0, y0, x1, y1)``
with exclusive ends, as :class:`~pytest_segrobust.core.types.InstanceTarget`'s.

Layer 0: tensors only.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from pytest_segrobust.core.types import Field, ImageTargets

FOREGROUND = 1
"""The label of a click on the instance."""
BACKGROUND = 0
"""The label of a click off the instance (a negative click)."""
ABSENT = -1
"""The label of a point slot that holds no click (padding, or a click a corruption dropped)."""

POINTS = "points"
BOX = "box"
PROMPT_KINDS: tuple[str, ...] = (POINTS, BOX)
"""The prompt kinds a protocol may declare, in the order an instance's prompt sets come."""


@dataclass(frozen=True)
class PromptSet:
    """The prompts of one request to the model: one instance, one kind.

    Attributes:
        points: The clicks, ``(P, 2)`` float32 ``(x, y)``; none for a box prompt.
        labels: ``(P,)`` int64, :data:`FOREGROUND` or :data:`BACKGROUND` per click.
        box: ``(4,)`` float32 ``(x0, y0, x1, y1)`` (exclusive ends), or ``None``.
        kind: The prompt kind (``points`` or ``box``).
        instance: The instance's position in its image's :class:`InstancePrompts`.
    """

    points: torch.Tensor
    labels: torch.Tensor
    box: torch.Tensor | None
    kind: str
    instance: int

    @property
    def empty(self) -> bool:
        """Whether no prompt is left (every click dropped, no box): the model is not asked, the set scores 0."""
        return self.box is None and int(self.points.shape[0]) == 0


@dataclass(frozen=True)
class FramePrompt:
    """The prompts that start one object of a clip (promptable video object segmentation).

    A video task whose reference is prompts rather than masks gives each object one
    :class:`PromptSet` (its clicks and/or its box together, ``kind`` naming them, e.g.
    ``"points,box"``) at the first frame the object is shown in, after a temporal perturbation
    reordered the frames and a geometric one moved the prompts.

    Attributes:
        object_id: The object's id in the clip's ground truth (what the model returns for it).
        frame: The index of the frame the prompts are given in (in the clip as the model sees it).
        prompt: The clicks and box, in pixels of that frame.
    """

    object_id: int
    frame: int
    prompt: PromptSet


@dataclass(frozen=True)
class InstancePrompts:
    """One image's prompted instances.

    Attributes:
        masks: ``(N, H, W)`` bool, each instance's mask (what its prompt sets are scored against).
        points: ``(N, K, 2)`` float32 ``(x, y)`` click slots per instance.
        point_labels: ``(N, K)`` int64: :data:`FOREGROUND`, :data:`BACKGROUND` or :data:`ABSENT`.
        boxes: ``(N, 4)`` float32 box per instance (meaningless where ``box_given`` is false).
        box_given: ``(N,)`` bool, whether the instance has a box prompt.
        tight: ``(N,)`` bool, whether the box is its mask's tight box (a geometric corruption then
            recomputes it from the moved mask) or was perturbed (its corners are moved instead).
        areas: ``(N,)`` int64, each instance's area in the clean image: its size class, which a
            corruption does not change.
        kinds: The prompt kinds asked, comma-separated in :data:`PROMPT_KINDS` order (``"points,box"``).
    """

    masks: torch.Tensor
    points: torch.Tensor
    point_labels: torch.Tensor
    boxes: torch.Tensor
    box_given: torch.Tensor
    tight: torch.Tensor
    areas: torch.Tensor
    kinds: str

    def __len__(self) -> int:
        return int(self.masks.shape[0])

    def kept(self, keep: torch.Tensor) -> InstancePrompts:
        """The instances where ``keep`` (``(N,)`` bool) is true, in order."""
        return InstancePrompts(
            self.masks[keep], self.points[keep], self.point_labels[keep], self.boxes[keep],
            self.box_given[keep], self.tight[keep], self.areas[keep], self.kinds,
        )

    def with_prompts(
        self, points: torch.Tensor, point_labels: torch.Tensor, boxes: torch.Tensor, box_given: torch.Tensor,
        tight: torch.Tensor,
    ) -> InstancePrompts:
        """The same instances with other prompts (a perturbation's)."""
        return InstancePrompts(self.masks, points, point_labels, boxes, box_given, tight, self.areas, self.kinds)

    def prompt_sets(self) -> list[PromptSet]:
        """Every request to the model, instance by instance, kind by kind."""
        kinds = self.kinds.split(",")
        sets: list[PromptSet] = []
        for i in range(len(self)):
            for kind in kinds:
                if kind == POINTS:
                    present = self.point_labels[i] != ABSENT
                    sets.append(PromptSet(self.points[i][present], self.point_labels[i][present], None, kind, i))
                else:
                    box = self.boxes[i] if bool(self.box_given[i]) else None
                    empty = torch.zeros(0, 2, dtype=torch.float32, device=self.points.device)
                    sets.append(PromptSet(empty, torch.zeros(0, dtype=torch.int64, device=empty.device), box, kind, i))
        return sets

    def to(self, device: torch.device | str) -> InstancePrompts:
        """The same prompts on ``device``."""
        moved = (t.to(device) for t in (self.masks, self.points, self.point_labels, self.boxes, self.box_given, self.tight, self.areas))
        return InstancePrompts(*moved, self.kinds)  # type: ignore[call-arg]


@dataclass(frozen=True)
class PromptedInstances(ImageTargets, Field):
    """The prompted instances of every image of a batch (the promptable task's ground truth and prompts)."""

    targets: tuple[InstancePrompts, ...]
    height: int
    width: int


@dataclass(frozen=True)
class ClipObjectPrompts:
    """One clip's objects and their prompts at every frame (promptable video object segmentation).

    A protocol draws each object's prompts at every annotated frame that shows it
    (:mod:`pytest_segrobust.data.clip_prompts`); they move with their frame, and the model is
    given those of the first frame that shows the object in the clip as it sees it
    (:meth:`frame_prompt`).

    Attributes:
        object_ids: The clip's objects, in order (axis ``O``).
        points: ``(T, O, K, 2)`` float32 ``(x, y)`` click slots per frame and object.
        labels: ``(T, O, K)`` int64: :data:`FOREGROUND`, :data:`BACKGROUND` or :data:`ABSENT`.
        boxes: ``(T, O, 4)`` float32 ``(x0, y0, x1, y1)`` (exclusive ends).
        box_given: ``(T, O)`` bool, whether the object has a box prompt at that frame.
    """

    object_ids: tuple[int, ...]
    points: torch.Tensor
    labels: torch.Tensor
    boxes: torch.Tensor
    box_given: torch.Tensor

    def at_frames(self, order: torch.Tensor) -> ClipObjectPrompts:
        """The prompts of source frame ``order[t]`` at position ``t`` (a temporal perturbation's order ``(T',)``)."""
        order = order.to(self.points.device)
        return ClipObjectPrompts(
            self.object_ids, self.points[order], self.labels[order], self.boxes[order], self.box_given[order]
        )

    def to(self, device: torch.device | str) -> ClipObjectPrompts:
        """The same prompts on ``device``."""
        moved = (t.to(device) for t in (self.points, self.labels, self.boxes, self.box_given))
        return ClipObjectPrompts(self.object_ids, *moved)

    def frame_prompt(self, index: int, frame: int, kinds: str) -> FramePrompt:
        """Object ``object_ids[index]``'s prompts at position ``frame``, as one set of kinds ``kinds``
        (empty where every click was dropped and no box is given)."""
        present = self.labels[frame, index] != ABSENT
        box = self.boxes[frame, index] if bool(self.box_given[frame, index]) else None
        prompt = PromptSet(self.points[frame, index][present], self.labels[frame, index][present], box, kinds, index)
        return FramePrompt(self.object_ids[index], frame, prompt)


@dataclass(frozen=True)
class ClipPrompts(Field):
    """The prompts of every clip of a batch, with the object masks they were drawn from (a VOS suite's
    prompt reference).

    The masks travel with the prompts for the reason :class:`PromptedInstances`' do: a geometric
    corruption moves both through one map and keeps what the moved masks hold
    (:mod:`pytest_segrobust.corruptions.prompt_kernels`); a temporal one moves both with their frames.

    Attributes:
        masks: ``(B, T, H, W)`` integer object ids per pixel (the clips' annotations, 0 background).
        clips: Each clip's :class:`ClipObjectPrompts`.
        kinds: The prompt kinds drawn, comma-separated in :data:`PROMPT_KINDS` order (``"points,box"``).
    """

    masks: torch.Tensor
    clips: tuple[ClipObjectPrompts, ...]
    kinds: str

    def batch_size(self) -> int:
        return int(self.masks.shape[0])

    def size(self) -> tuple[int, int]:
        return int(self.masks.shape[-2]), int(self.masks.shape[-1])

    def frames(self) -> int:
        return int(self.masks.shape[1])
