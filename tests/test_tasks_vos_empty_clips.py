"""The vos task's output check on a clip that asks for no object (a sequence that shows none)."""

from __future__ import annotations

import pytest
import torch

from pytest_segrobust.core.errors import ModelOutputError
from pytest_segrobust.core.types import SampleIndex, VideoMasks
from pytest_segrobust.tasks import get_task


def test_a_clip_without_objects_takes_background_and_refuses_any_id() -> None:
    truth = torch.zeros(2, 3, 4, 4, dtype=torch.int64)
    truth[1, :, :2, :2] = 1
    masks = VideoMasks.of(truth)
    assert masks.object_ids == ((), (1,))
    batch = {"objects": masks, "index": SampleIndex((0, 1), ("fog", "lynx"))}
    task = get_task("vos")
    assert torch.equal(task.check_predictions(truth.clone(), batch), truth)
    stray = truth.clone()
    stray[0, 1, 3, 3] = 1
    with pytest.raises(ModelOutputError, match=r"model returned object ids \[1\] in clip fog, which asks for none"):
        task.check_predictions(stray, batch)
