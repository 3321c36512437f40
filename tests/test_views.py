"""Class views: a class id per pixel of every built-in target and prediction."""

from __future__ import annotations

import pytest
import torch

from pytest_segrobust.core.types import (
    Image,
    InstanceMasks,
    InstancePredictions,
    InstanceTarget,
    PanopticMap,
    PanopticPredictions,
    PanopticTarget,
    SemanticMask,
    Video,
    VideoMasks,
)
from pytest_segrobust.pictures.views import NOTHING, NoClassView, class_map, class_maps, still, truth_maps


def test_class_views_of_every_built_in_target_and_prediction() -> None:
    mask = SemanticMask(torch.tensor([[[0, 255], [2, 1]]]), ignore_index=255)
    assert class_maps(mask)[0].tolist() == [[0, NOTHING], [2, 1]]
    masks = torch.tensor([[[True, True], [False, False]], [[False, True], [False, False]]])
    instances = InstanceMasks((InstanceTarget.from_masks(masks, torch.tensor([1, 3])),), 2, 2)
    assert class_maps(instances)[0].tolist() == [[1, 3], [NOTHING, NOTHING]]
    # Predicted instances: below SHOWN_SCORE left out, the most confident painted on top.
    predicted = InstancePredictions(masks, torch.tensor([1, 3]), torch.tensor([0.9, 0.6]))
    assert class_map(predicted).tolist() == [[1, 1], [NOTHING, NOTHING]]
    weak = InstancePredictions(masks, torch.tensor([1, 3]), torch.tensor([0.2, 0.6]))
    assert class_maps([weak])[0].tolist() == [[NOTHING, 3], [NOTHING, NOTHING]]
    segments = torch.tensor([[0, 7], [9, 9]])
    panoptic = PanopticPredictions(segments, torch.tensor([7, 9]), torch.tensor([2, 4]))
    assert class_map(panoptic).tolist() == [[NOTHING, 2], [4, 4]]
    target = PanopticMap(
        (PanopticTarget(segments, torch.tensor([7, 9]), torch.tensor([2, 4]), torch.tensor([False, False])),)
    )
    assert class_maps(target)[0].tolist() == [[NOTHING, 2], [4, 4]]
    with pytest.raises(NoClassView, match="str has no class view"):
        class_maps("nope")


def test_truth_is_the_first_target_field_with_a_view() -> None:
    mask = SemanticMask(torch.tensor([[[0, 255], [2, 1]]]), ignore_index=255)
    assert truth_maps({"other": "no view", "mask": mask})[0].tolist() == [[0, NOTHING], [2, 1]]  # type: ignore[dict-item]
    assert truth_maps({}) is None


def test_the_report_reexports_the_views_it_draws_with() -> None:
    # Views registered through the report's old names land in the same registry.
    from pytest_segrobust.report import overlays

    assert overlays.class_maps is class_maps and overlays.class_map is class_map and overlays.NOTHING == NOTHING


def test_a_clip_is_drawn_by_its_middle_frame_and_an_image_batch_as_it_is() -> None:
    frames = torch.arange(2 * 5 * 3 * 4 * 4, dtype=torch.float32).reshape(2, 5, 3, 4, 4)
    masks = torch.arange(2 * 5 * 4 * 4).reshape(2, 5, 4, 4) % 3
    batch = {"video": Video.of(frames), "video_masks": VideoMasks.of(masks)}
    shown, predictions = still(batch, masks + 1)
    assert isinstance(shown["video"], Image) and torch.equal(shown["video"].data, frames[:, 2])
    assert isinstance(shown["video_masks"], SemanticMask) and torch.equal(shown["video_masks"].data, masks[:, 2])
    assert torch.equal(predictions, masks[:, 2] + 1)
    images = {"image": Image(frames[:, 0])}
    assert still(images, "as it was") == (images, "as it was")
