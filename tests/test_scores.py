from __future__ import annotations

import math

import pytest

from pytest_segrobust.scores import absolute_robustness, mean, relative_robustness


def test_relative_robustness_formula() -> None:
    assert relative_robustness(80.0, 60.0) == pytest.approx(1 - (80 - 60) / 80)  # 0.75
    assert relative_robustness(80.0, 80.0) == 1.0


def test_absolute_robustness_formula() -> None:
    assert absolute_robustness(80.0, 60.0) == pytest.approx(1 - (80 - 60) / 100)  # 0.8


def test_scores_are_never_clipped_above_one() -> None:
    assert relative_robustness(40.0, 50.0) == pytest.approx(1.25)
    assert absolute_robustness(40.0, 50.0) == pytest.approx(1.10)


def test_relative_robustness_of_a_zero_clean_score_is_undefined() -> None:
    assert math.isnan(relative_robustness(0.0, 10.0))


def test_mean_of_nothing_is_nan() -> None:
    assert math.isnan(mean([]))
    assert mean([1.0, 2.0]) == 1.5
