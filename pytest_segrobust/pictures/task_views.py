"""The view a task declares: how its predictions and ground truth become the report's pictures.

A task's :attr:`~pytest_segrobust.tasks.base.Task.picture_view` is a :class:`PictureView`.
Most tasks' is :data:`CLASS_VIEW`, the class views of :mod:`pytest_segrobust.pictures.views`; a
promptable task's draws one panel per prompt kind with the prompts on it
(:class:`~pytest_segrobust.pictures.prompted.PromptView`). The search for a cell's worst images
(:mod:`pytest_segrobust.engine.worst_images`) asks the view and never the task's name.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from pytest_segrobust.core.types import Batch
from pytest_segrobust.pictures.values import ImageLoss, PromptMarks
from pytest_segrobust.pictures.views import class_maps, truth_maps


@dataclass(frozen=True, eq=False)
class Drawing:
    """One image's prediction as its pictures show it.

    Attributes:
        maps: The class map, or one per panel.
        panels: The panels' names (``()``: one class map).
        prompts: Per panel, the prompts the model was given (``()``: none to draw).

    Shape:
        maps: ``(H, W)`` int64, or ``(len(panels), H, W)``.
    """

    maps: torch.Tensor
    panels: tuple[str, ...] = ()
    prompts: tuple[PromptMarks, ...] = ()


class PictureView(ABC):
    """How a task's predictions and ground truth become pictures of one image (a task's
    :attr:`~pytest_segrobust.tasks.base.Task.picture_view`).

    Each method reads a batch of one image, as the task collated it (and a corruption left it),
    and the task's checked predictions of it; clips come as their middle frame
    (:func:`~pytest_segrobust.pictures.views.still`).
    """

    @abstractmethod
    def prediction(self, batch: Batch, predictions: Any) -> Drawing:
        """The picture of the batch's first image's prediction.

        Raises:
            NoClassView: when the predictions have no view to draw
                (:class:`~pytest_segrobust.pictures.views.NoClassView`).
        """

    @abstractmethod
    def truth(self, batch: Batch) -> torch.Tensor | None:
        """The batch's first image's ground truth as a class map ``(H, W)`` int64 (``None``: none to draw)."""

    def legend(self, class_names: Sequence[str], losses: Sequence[ImageLoss]) -> tuple[str, ...]:
        """The name of each class id the pictures of ``losses`` paint: by default the dataset's classes."""
        return tuple(str(name) for name in class_names)


class ClassView(PictureView):
    """A class id per pixel: the registered class views of the predictions' and targets' types."""

    def prediction(self, batch: Batch, predictions: Any) -> Drawing:
        return Drawing(class_maps(predictions)[0])

    def truth(self, batch: Batch) -> torch.Tensor | None:
        maps = truth_maps(batch)
        return None if maps is None else maps[0]


CLASS_VIEW = ClassView()
"""The view of every task that declares no other."""
