"""Class views: a class id per pixel of a prediction or a target, for pictures of them.

A class view is registered per type, as the corruption kernels are (``@class_maps.register``
for a batch-level value, ``@class_map.register`` for one image's prediction): semantic masks as
they are, instances painted by class (highest score on top), panoptic segments by their class.
A type without a view leaves its suite without pictures, and the report says why.

Most tasks' :attr:`~pytest_segrobust.tasks.base.Task.picture_view` is made of these
(:data:`pytest_segrobust.pictures.task_views.CLASS_VIEW`).

This module is neutral: it imports :mod:`pytest_segrobust.core.types` and torch only, so the code
that measures pictures (:mod:`pytest_segrobust.engine.worst_images`) and any reader can share it.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import singledispatch
from typing import Any

import torch

from pytest_segrobust.core.types import (
    Batch,
    Image,
    InstanceMasks,
    InstancePredictions,
    PanopticMap,
    PanopticPredictions,
    ReferringMask,
    SampleIndex,
    SemanticMask,
    Video,
    VideoMasks,
)

# A pixel without a class in a view: ignored, void, or covered by no shown instance.
NOTHING = -1
# Instances at least this confident are painted; weaker ones would bury the picture.
SHOWN_SCORE = 0.5


class NoClassView(TypeError):
    """A task's predictions or targets have no class view, so its images cannot be drawn."""


def still(batch: Batch, predictions: Any = None) -> tuple[Batch, Any]:
    """A batch of clips as the pictures show it: the middle frame of each clip, and of its predictions.

    ``Video`` becomes an ``Image`` of that frame, ``VideoMasks`` the ``SemanticMask`` of its
    object ids, and predictions ``(B, T, H, W)`` their frame; a batch without clips comes back
    as it is. Scores are the clip's: only what is drawn is one frame.
    """
    video = next((f for f in batch.values() if isinstance(f, Video)), None)
    if video is None:
        return batch, predictions
    frame = video.frames() // 2
    shown: dict[str, Any] = {}
    for name, value in batch.items():
        if isinstance(value, Video):
            shown[name] = Image(value.data[:, frame])
        elif isinstance(value, VideoMasks):
            shown[name] = SemanticMask(value.data[:, frame], value.ignore_index)
        else:
            shown[name] = value
    if isinstance(predictions, VideoMasks):
        predictions = predictions.data
    if isinstance(predictions, torch.Tensor) and predictions.dim() == 4:
        predictions = predictions[:, frame]
    return shown, predictions


@singledispatch
def class_maps(value: Any) -> list[torch.Tensor]:
    """A class id per pixel for each image of a batch-level value (predictions or a target field).

    Shape:
        return: ``B`` tensors of ``(H, W)``, int64, on the CPU; :data:`NOTHING` where no class is shown.

    Raises:
        NoClassView: for a type without a registered view.
    """
    raise NoClassView(
        f"{type(value).__name__} has no class view to draw; register one with "
        "@pytest_segrobust.pictures.views.class_maps.register"
    )


@singledispatch
def class_map(value: Any) -> torch.Tensor:
    """A class id per pixel for one image's prediction (an element of a list of predictions).

    Raises:
        NoClassView: for a type without a registered view.
    """
    raise NoClassView(
        f"{type(value).__name__} has no class view to draw; register one with "
        "@pytest_segrobust.pictures.views.class_map.register"
    )


@class_maps.register
def _(value: torch.Tensor) -> list[torch.Tensor]:
    return [row.detach().to("cpu", torch.int64) for row in value]


@class_maps.register(list)
@class_maps.register(tuple)
def _(value: Sequence[Any]) -> list[torch.Tensor]:
    return [class_map(item) for item in value]


@class_maps.register
def _(value: SemanticMask) -> list[torch.Tensor]:
    data = value.data.detach().to("cpu", torch.int64)
    return list(torch.where(data == value.ignore_index, NOTHING, data))


@class_maps.register
def _(value: InstanceMasks) -> list[torch.Tensor]:
    return [_paint(t.masks, t.labels, torch.zeros(len(t))) for t in value.targets]


@class_maps.register
def _(value: ReferringMask) -> list[torch.Tensor]:
    return list(value.data.detach().to("cpu", torch.int64))  # 1: the referred region (class "referent")


@class_maps.register
def _(value: PanopticMap) -> list[torch.Tensor]:
    return [_segment_classes(t.segments, t.ids, t.labels) for t in value.targets]


@class_map.register
def _(value: InstancePredictions) -> torch.Tensor:
    confident = value.scores >= SHOWN_SCORE
    return _paint(value.masks[confident], value.labels[confident], value.scores[confident])


@class_map.register
def _(value: PanopticPredictions) -> torch.Tensor:
    return _segment_classes(value.segments, value.ids, value.labels)


def _paint(masks: torch.Tensor, labels: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
    """Instances painted by class, the most confident last (on top)."""
    height, width = masks.shape[-2:]
    out = torch.full((height, width), NOTHING, dtype=torch.int64)
    for index in torch.argsort(scores.detach().cpu().float(), stable=True).tolist():
        out[masks[index].detach().cpu().bool()] = int(labels[index])
    return out


def _segment_classes(segments: torch.Tensor, ids: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    segments = segments.detach().cpu()
    out = torch.full(segments.shape, NOTHING, dtype=torch.int64)
    for segment, label in zip(ids.tolist(), labels.tolist()):
        out[segments == segment] = int(label)
    return out


def truth_maps(batch: Batch) -> list[torch.Tensor] | None:
    """The class view of the batch's ground truth: its first target field that has one."""
    for value in batch.values():
        if isinstance(value, (Image, SampleIndex)):
            continue
        try:
            return class_maps(value)
        except NoClassView:
            continue
    return None

