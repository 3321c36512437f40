from __future__ import annotations

import torch

from pytest_segrobust.data.base import InstanceTarget, boxes_from_masks


def test_boxes_are_tight_with_exclusive_ends() -> None:
    masks = torch.zeros(3, 6, 8, dtype=torch.bool)
    masks[0, 1:3, 2:5] = True  # rows 1..2, cols 2..4
    masks[1, 5, 7] = True  # a single pixel in the corner
    boxes = boxes_from_masks(masks)
    assert boxes.tolist() == [[2, 1, 5, 3], [7, 5, 8, 6], [0, 0, 0, 0]]  # empty mask -> zeros
    assert boxes.dtype == torch.float32


def test_from_masks_defaults_to_no_crowd() -> None:
    target = InstanceTarget.from_masks(torch.ones(2, 4, 4), torch.tensor([1, 2]))
    assert len(target) == 2 and target.masks.dtype == torch.bool
    assert target.iscrowd.tolist() == [False, False]
    assert target.boxes.tolist() == [[0, 0, 4, 4], [0, 0, 4, 4]]
