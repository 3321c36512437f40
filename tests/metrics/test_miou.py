from __future__ import annotations

import math

import pytest
import torch

from pytest_segrobust.core.errors import ModelOutputError
from pytest_segrobust.metrics import ConfusionMatrix


def test_confusion_matrix_and_iou_match_a_hand_computation() -> None:
    target = torch.tensor([[[0, 0, 1, 1], [2, 2, 255, 1]]])
    pred = torch.tensor([[[0, 1, 1, 1], [2, 0, 2, 2]]])
    metric = ConfusionMatrix(num_classes=4, ignore_index=255)
    metric.update(pred, target)
    # rows = ground truth, columns = prediction; the ignored pixel is not counted
    assert metric.matrix.tolist() == [[1, 1, 0, 0], [0, 2, 1, 0], [1, 0, 1, 0], [0, 0, 0, 0]]
    result = metric.compute()
    # class 0: TP 1, FP 1, FN 1 -> 1/3; class 1: TP 2, FP 1, FN 1 -> 1/2; class 2: TP 1, FP 1, FN 1 -> 1/3
    assert result.per_class[:3] == pytest.approx([100 / 3, 50.0, 100 / 3])
    assert result.per_class[3] is None  # absent from GT and prediction: not in the mean
    assert result.miou == pytest.approx((100 / 3 + 50 + 100 / 3) / 3)


def test_class_only_predicted_counts_in_the_mean() -> None:
    metric = ConfusionMatrix(3)
    metric.update(torch.tensor([[[2, 0]]]), torch.tensor([[[0, 0]]]))
    result = metric.compute()
    assert result.per_class == pytest.approx([50.0, None, 0.0])
    assert result.miou == pytest.approx(25.0)


def test_batches_accumulate_like_one_batch_and_states_merge() -> None:
    g = torch.Generator().manual_seed(0)
    target = torch.randint(0, 5, (6, 16, 16), generator=g)
    pred = torch.randint(0, 5, (6, 16, 16), generator=g)
    whole = ConfusionMatrix(5)
    whole.update(pred, target)
    first, second = ConfusionMatrix(5), ConfusionMatrix(5)
    first.update(pred[:2], target[:2])
    second.update(pred[2:], target[2:])
    first.merge(ConfusionMatrix.from_state(second.state_dict()))
    assert torch.equal(first.matrix, whole.matrix)
    assert first.compute() == whole.compute()


def test_prediction_outside_the_classes_is_a_model_error() -> None:
    metric = ConfusionMatrix(3)
    with pytest.raises(ModelOutputError, match="class id 7, outside 0..2"):
        metric.update(torch.tensor([[[7]]]), torch.tensor([[[0]]]))


def test_all_ignored_gives_nan() -> None:
    metric = ConfusionMatrix(3)
    metric.update(torch.tensor([[[1]]]), torch.tensor([[[255]]]))
    assert math.isnan(metric.compute().miou)
