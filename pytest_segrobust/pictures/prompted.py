"""The picture view of promptable predictions (SAM-style): per prompt kind, each instance's
predicted mask with the prompts the model was given for it.

The model is asked once per prompt set (one instance, one kind:
:meth:`~pytest_segrobust.core.prompts.InstancePrompts.prompt_sets`), so a picture has a panel
per prompt kind the protocol declares (``points``, ``box``), each painting the masks its sets
returned by instance (instance ``i`` is class id ``i + 1``, named ``instance i+1`` in the
legend) and carrying those sets' clicks and boxes (:class:`~pytest_segrobust.pictures.values.PromptMarks`)
as the model got them: after a geometric corruption moved them, after a prompt perturbation
changed them. The ground truth paints each instance's mask the same way.

An instance a geometric corruption moved out of the frame is no longer asked; the instances
after it are then numbered one lower in the corrupted picture than in the clean one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from pytest_segrobust.core.prompts import PromptedInstances
from pytest_segrobust.core.types import Batch, field_of
from pytest_segrobust.pictures.task_views import Drawing, PictureView
from pytest_segrobust.pictures.values import ImageLoss, PromptMarks
from pytest_segrobust.pictures.views import NOTHING, NoClassView

NO_INSTANCE = "no instance"
"""The legend's name of class id 0, which the pictures never paint."""


class PromptView(PictureView):
    """Promptable predictions and targets as pictures (see the module)."""

    def prediction(self, batch: Batch, predictions: Any) -> Drawing:
        """One panel per prompt kind: the masks of that kind's sets, by instance, and their prompts.

        Args:
            batch: A batch of one image with its :class:`~pytest_segrobust.core.prompts.PromptedInstances`.
            predictions: The task's checked predictions: per image, one bool mask per prompt set.

        Raises:
            NoClassView: for predictions that are not one mask per prompt set of the image.
        """
        target = field_of(batch, PromptedInstances).targets[0]
        sets = target.prompt_sets()
        masks = predictions[0] if isinstance(predictions, Sequence) and predictions else None
        if not isinstance(masks, torch.Tensor) or tuple(masks.shape) != (len(sets), *target.masks.shape[1:]):
            raise NoClassView(
                f"{type(predictions).__name__} is not one mask per prompt set ({len(sets)} of "
                f"{tuple(target.masks.shape[1:])}) to draw"
            )
        masks = masks.detach().cpu().bool()
        kinds = tuple(target.kinds.split(","))
        maps = torch.full((len(kinds), *masks.shape[1:]), NOTHING, dtype=torch.int64)
        marks = []
        for panel, kind in enumerate(kinds):
            chosen = [(index, prompt_set) for index, prompt_set in enumerate(sets) if prompt_set.kind == kind]
            for index, prompt_set in chosen:  # instance order: a later instance is painted over an earlier one
                maps[panel][masks[index]] = prompt_set.instance + 1
            points = [s.points.detach().cpu().float() for _, s in chosen]
            boxes = [(s.box.detach().cpu().float(), s.instance + 1) for _, s in chosen if s.box is not None]
            marks.append(
                PromptMarks(
                    points=torch.cat(points).reshape(-1, 2) if points else torch.zeros(0, 2),
                    labels=torch.cat([s.labels.detach().cpu().long() for _, s in chosen]).reshape(-1)
                    if chosen
                    else torch.zeros(0, dtype=torch.int64),
                    point_owners=torch.tensor(
                        [s.instance + 1 for _, s in chosen for _ in range(int(s.points.shape[0]))], dtype=torch.int64
                    ),
                    boxes=torch.stack([box for box, _ in boxes]).reshape(-1, 4) if boxes else torch.zeros(0, 4),
                    box_owners=torch.tensor([owner for _, owner in boxes], dtype=torch.int64),
                )
            )
        return Drawing(maps, kinds, tuple(marks))

    def truth(self, batch: Batch) -> torch.Tensor | None:
        """Each instance's mask, painted by instance (a later one over an earlier one).

        Shape:
            return: ``(H, W)``, int64; :data:`~pytest_segrobust.pictures.views.NOTHING` outside every instance.
        """
        masks = field_of(batch, PromptedInstances).targets[0].masks.detach().cpu().bool()
        out = torch.full(tuple(masks.shape[1:]), NOTHING, dtype=torch.int64)
        for index, mask in enumerate(masks):
            out[mask] = index + 1
        return out

    def legend(self, class_names: Sequence[str], losses: Sequence[ImageLoss]) -> tuple[str, ...]:
        """``no instance``, then ``instance 1`` up to the most instances any picture paints."""
        maps = [m for loss in losses for m in (*loss.predictions(True), *loss.predictions(False), loss.truth, loss.moved_truth)]
        most = max((int(m.max()) for m in maps if m is not None and m.numel()), default=0)
        return (NO_INSTANCE, *(f"instance {number}" for number in range(1, most + 1)))


PROMPT_VIEW = PromptView()
"""The view a promptable task declares."""
