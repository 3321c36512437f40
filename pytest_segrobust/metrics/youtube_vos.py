"""YouTube-VOS's overall score G: the mean of J and F over seen and over unseen categories.

YouTube-VOS splits its validation objects by whether their category is among the training
categories (``VideoMasks.unseen``) and reports J_seen, J_unseen, F_seen, F_unseen and G, their
mean. Each object is scored on the annotated frames after the one it is given in (the first
annotated position that shows it, as :func:`~pytest_segrobust.tasks.vos.reference_masks`
gives it to the model), to the clip's end: an object that appears late is not credited for
the empty frames before it. J and F per frame are DAVIS's (:mod:`pytest_segrobust.metrics.video`).

Statistics: a clip's row holds, for the seen and the unseen objects, the sums of their J-Mean
and F-Mean and their count. Rows add up, so the gate resamples clips. G is the mean of the
four numbers over the splits that have objects (a dataset without unseen objects has G =
(J_seen + F_seen) / 2).
"""

from __future__ import annotations

import warnings
from typing import Any, ClassVar

import numpy as np
import torch

from pytest_segrobust.core.types import Batch, VideoMasks, field_of
from pytest_segrobust.metrics.base import MetricResult
from pytest_segrobust.metrics.registry import register_metric
from pytest_segrobust.metrics.video import (
    ClipRowsMetric,
    RegionAndBoundaryAllFrames,
    boundary_radius,
    predicted_object_ids,
)

SPLITS = ("seen", "unseen")
COLUMNS = tuple(f"{name}_{split}" for split in SPLITS for name in ("j", "f", "objects"))


def given_frames(masks: VideoMasks, clip: int) -> list[int | None]:
    """The position each object of ``clip`` is given in: the first annotated one that shows it (``None``: never)."""
    truth = masks.data[clip]
    annotated = masks.annotated[clip].to(torch.bool)
    found: list[int | None] = []
    for object_id in masks.object_ids[clip]:
        shown = ((truth == object_id).flatten(1).any(dim=1) & annotated).nonzero().flatten()
        found.append(int(shown[0]) if len(shown) else None)
    return found


@register_metric
class YoutubeVosG(ClipRowsMetric):
    """G: the mean of J_seen, J_unseen, F_seen and F_unseen (percent), YouTube-VOS's headline."""

    name, label = "youtube_vos_g", "G"
    accepts = (VideoMasks,)
    detail_labels: ClassVar[dict[str, str]] = {
        f"{name}_{split}": f"{name.upper()}_{split}" for split in SPLITS for name in ("j", "f")
    }

    @classmethod
    def details_of(cls, summed: np.ndarray) -> dict[str, np.ndarray]:
        """J and F of each split in percent, from summed rows ``(..., 6)``; NaN for a split without objects."""
        out = {}
        with np.errstate(invalid="ignore", divide="ignore"):
            for index, split in enumerate(SPLITS):
                objects = summed[..., 3 * index + 2]
                out[f"j_{split}"] = 100.0 * summed[..., 3 * index] / objects
                out[f"f_{split}"] = 100.0 * summed[..., 3 * index + 1] / objects
        return out

    @classmethod
    def score_of(cls, summed: np.ndarray) -> np.ndarray:
        details = cls.details_of(summed)
        values = np.stack([details[key] for key in ("j_seen", "f_seen", "j_unseen", "f_unseen")])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # no object at all: NaN, said once by the gate
            return np.nanmean(values, axis=0)

    def update(self, predictions: Any, batch: Batch) -> None:
        """Add a batch of clips: predicted ids ``(B, T, H, W)``.

        Raises:
            ModelOutputError: when the predictions are not integer ids of the targets' shape.
        """
        target = field_of(batch, VideoMasks)
        predicted = predicted_object_ids(predictions, target, self.name)
        radius = boundary_radius(*target.size())
        frames = RegionAndBoundaryAllFrames(self.context)  # its per-frame J and F, not its rows
        rows = np.zeros((target.batch_size(), len(COLUMNS)), dtype=np.float64)
        for clip, objects in enumerate(target.object_ids):
            annotated = target.annotated[clip].to(torch.bool).nonzero().flatten()
            if not objects or len(annotated) == 0:
                continue
            values = frames._object_frame_values(
                predicted[clip, annotated], target.data[clip, annotated], objects, target.ignore_index, radius
            )
            positions = annotated.tolist()
            for index, given in enumerate(given_frames(target, clip)):
                scored = [k for k, position in enumerate(positions) if given is not None and position > given]
                if not scored:
                    continue  # given in the last annotated frame, or never: nothing to score
                split = 3 * int(target.unseen[clip][index])
                rows[clip, split] += values["J"][index, scored].mean()
                rows[clip, split + 1] += values["F"][index, scored].mean()
                rows[clip, split + 2] += 1
        # A tensor, not the array: state_dict() writes tensors as JSON, and arrays not at all.
        self.clips.append(torch.from_numpy(rows))
        self.add_row_units(batch)

    def image_statistics(self) -> np.ndarray:
        """``(N, 6)``: per clip, for seen then unseen objects, the sums of their J-Mean and F-Mean and their count."""
        parts = [torch.as_tensor(part, dtype=torch.float64).reshape(-1, len(COLUMNS)).cpu() for part in self.clips]
        return torch.cat(parts).numpy() if parts else np.zeros((0, len(COLUMNS)))

    def compute(self) -> MetricResult:
        summed = self.image_statistics().sum(axis=0)
        details = {name: float(value) for name, value in self.details_of(summed).items()}
        return MetricResult(float(self.score_of(summed)), tuple(None for _ in self.context.class_names), details)
