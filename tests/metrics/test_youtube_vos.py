"""YouTube-VOS's G (seen / unseen J and F) against a computation from the definition, one object and frame at a time."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from pytest_segrobust.core.errors import ModelOutputError
from pytest_segrobust.core.types import VideoMasks
from pytest_segrobust.metrics import METRICS, MetricContext
from pytest_segrobust.metrics.video import boundary_radius
from tests.metrics.test_video import reference_f, reference_j

IGNORE = 255


def generated(rng: np.random.Generator, clips: int = 3, frames: int = 7, size: tuple[int, int] = (18, 22)):
    """True and predicted ids, objects, unseen flags and annotated frames; objects 3 appear late, clip 0 has no unseen."""
    height, width = size
    truth = np.zeros((clips, frames, height, width), dtype=np.int64)
    objects, unseen = [], []
    for b in range(clips):
        ids = (1, 2) if b == 0 else (1, 2, 3)
        for object_id in ids:
            start = 0 if object_id < 3 else 2 + b % 2
            for t in range(start, frames):
                top, left = rng.integers(0, height - 5), rng.integers(0, width - 5)
                truth[b, t, top : top + int(rng.integers(2, 6)), left : left + int(rng.integers(2, 6))] = object_id
        objects.append(ids)
        unseen.append(tuple(bool(b) and object_id == 3 for object_id in ids) if b != 2 else (False, True, True))
    truth[1, 4, :2, :3] = IGNORE  # unscored pixels
    predicted = truth.copy()
    predicted[truth == IGNORE] = 0
    flip = rng.random(truth.shape) < 0.08
    predicted[flip] = rng.integers(0, 4, int(flip.sum()))
    annotated = np.ones((clips, frames), dtype=bool)
    annotated[2, ::2] = False  # sparse annotation
    annotated[2, 0] = True
    return predicted, truth, tuple(objects), tuple(unseen), annotated


def reference_g(predicted, truth, objects, unseen, annotated) -> dict[str, float]:
    """From the definition: each object over the annotated frames after the first annotated one that shows it."""
    radius = math.ceil(0.008 * math.hypot(*truth.shape[-2:]))
    sums = {(m, s): [] for m in ("j", "f") for s in ("seen", "unseen")}
    for b, ids in enumerate(objects):
        for object_id, is_unseen in zip(ids, unseen[b], strict=True):
            shown = [t for t in range(truth.shape[1]) if annotated[b, t] and (truth[b, t] == object_id).any()]
            frames = [t for t in range(truth.shape[1]) if annotated[b, t] and shown and t > shown[0]]
            if not frames:
                continue
            split = "unseen" if is_unseen else "seen"
            void = [truth[b, t] == IGNORE for t in frames]
            js = [reference_j(predicted[b, t] == object_id, truth[b, t] == object_id, v) for t, v in zip(frames, void)]
            fs = [
                reference_f(predicted[b, t] == object_id, truth[b, t] == object_id, v, radius)
                for t, v in zip(frames, void)
            ]
            sums["j", split].append(np.mean(js))
            sums["f", split].append(np.mean(fs))
    numbers = {f"{m}_{s}": 100.0 * float(np.mean(v)) if v else math.nan for (m, s), v in sums.items()}
    present = [v for v in numbers.values() if not math.isnan(v)]
    return {"g": float(np.mean(present)), **numbers}


def batch_of(truth, objects, unseen, annotated, clips: slice) -> dict[str, VideoMasks]:
    data = torch.from_numpy(truth[clips])
    frame_ids = torch.arange(data.shape[1]).expand(data.shape[0], -1).contiguous()
    masks = VideoMasks(data, objects[clips], torch.from_numpy(annotated[clips]), frame_ids, IGNORE, unseen[clips])
    return {"objects": masks}


class _Context:
    name, class_names, ignore_index = "clips", ("background", "object"), IGNORE


@pytest.mark.parametrize("seed", [0, 1])
def test_g_and_its_four_numbers_match_the_definition(seed: int) -> None:
    predicted, truth, objects, unseen, annotated = generated(np.random.default_rng(seed))
    metric = METRICS.get("youtube_vos_g")(MetricContext.of(_Context(), torch.device("cpu")))
    for part in (slice(0, 2), slice(2, 3)):  # two batches
        metric.update(torch.from_numpy(predicted[part]), batch_of(truth, objects, unseen, annotated, part))
    result = metric.compute()
    expected = reference_g(predicted, truth, objects, unseen, annotated)
    assert result.score == pytest.approx(expected["g"], abs=1e-6)
    for name in ("j_seen", "f_seen", "j_unseen", "f_unseen"):
        assert result.details[name] == pytest.approx(expected[name], abs=1e-6), name
    # Rows add up: the clips' rows summed score as the whole, and one clip's row as that clip.
    rows = metric.image_statistics()
    assert rows.shape == (3, 6)
    assert metric.score_of(rows.sum(axis=0)) == pytest.approx(result.score)
    alone = reference_g(predicted[1:2], truth[1:2], objects[1:2], unseen[1:2], annotated[1:2])
    assert metric.score_of(rows[1]) == pytest.approx(alone["g"], abs=1e-6)


def test_without_unseen_objects_g_is_the_mean_of_the_seen_numbers() -> None:
    predicted, truth, objects, unseen, annotated = generated(np.random.default_rng(3))
    metric = METRICS.get("youtube_vos_g")(MetricContext.of(_Context(), torch.device("cpu")))
    metric.update(torch.from_numpy(predicted[:1]), batch_of(truth, objects, unseen, annotated, slice(0, 1)))
    result = metric.compute()
    assert math.isnan(result.details["j_unseen"]) and math.isnan(result.details["f_unseen"])
    assert result.score == pytest.approx((result.details["j_seen"] + result.details["f_seen"]) / 2)


def test_an_object_is_not_credited_for_the_frames_before_it_appears() -> None:
    truth = np.zeros((1, 5, 12, 12), dtype=np.int64)
    truth[0, 3:, 2:6, 2:6] = 1  # appears at frame 3
    predicted = np.zeros_like(truth)  # never predicted: the empty frames before 3 would score 1 each
    masks = batch_of(truth, ((1,),), ((False,),), np.ones((1, 5), dtype=bool), slice(0, 1))
    metric = METRICS.get("youtube_vos_g")(MetricContext.of(_Context(), torch.device("cpu")))
    metric.update(torch.from_numpy(predicted), masks)
    assert metric.compute().score == 0.0
    assert boundary_radius(12, 12) == 1


def test_predictions_that_are_not_integer_ids_of_the_targets_shape_are_model_errors() -> None:
    truth = np.zeros((1, 3, 4, 4), dtype=np.int64)
    truth[..., :2, :2] = 1
    masks = batch_of(truth, ((1,),), ((False,),), np.ones((1, 3), dtype=bool), slice(0, 1))
    metric = METRICS.get("youtube_vos_g")(MetricContext.of(_Context(), torch.device("cpu")))
    with pytest.raises(ModelOutputError, match=r"youtube_vos_g: expected integer object ids of shape \(1, 3, 4, 4\)"):
        metric.update(torch.zeros(1, 3, 4, 4), masks)
    with pytest.raises(ModelOutputError, match=r"got torch.complex64 \(1, 3, 4, 4\)"):
        metric.update(torch.zeros(1, 3, 4, 4, dtype=torch.complex64), masks)
    with pytest.raises(ModelOutputError, match=r"got torch.int64 \(1, 3, 4, 5\)"):
        metric.update(torch.zeros(1, 3, 4, 5, dtype=torch.int64), masks)
