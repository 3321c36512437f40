from __future__ import annotations

import math

import pytest

from pytest_segrobust.metrics.robustness import absolute_robustness, mean, relative_robustness


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


def test_corruption_degradation_matches_kamann_and_rother() -> None:
    from pytest_segrobust.metrics.robustness import corruption_degradation, error, relative_corruption_degradation

    model = [error(s) for s in (70.0, 60.0, 50.0)]  # D = 0.3, 0.4, 0.5
    reference = [error(s) for s in (60.0, 50.0, 40.0)]  # D = 0.4, 0.5, 0.6
    assert corruption_degradation(model, reference) == pytest.approx(1.2 / 1.5)
    # clean D: model 0.2, reference 0.3 -> (0.1 + 0.2 + 0.3) / (0.1 + 0.2 + 0.3)
    assert relative_corruption_degradation(model, error(80.0), reference, error(70.0)) == pytest.approx(1.0)
    assert math.isnan(corruption_degradation([0.1], [0.0]))


def test_per_class_relative_robustness_skips_undefined_classes() -> None:
    from pytest_segrobust.metrics.robustness import per_class_relative_robustness

    gammas = per_class_relative_robustness([None, 80.0, 0.0, 50.0, 40.0], [None, 60.0, 10.0, None, 50.0])
    assert gammas == [None, pytest.approx(0.75), None, None, pytest.approx(1.25)]
    with pytest.raises(ValueError, match="2 clean per-class values against 1"):
        per_class_relative_robustness([1.0, 2.0], [1.0])


def test_an_error_metric_degrades_by_rising_towards_its_worst_end() -> None:
    # An error rate in percent (best 0, worst 100): 20 -> 40 uses up 20 of the 80 points left to the worst end.
    assert relative_robustness(20.0, 40.0, higher_is_better=False, worst=100.0) == pytest.approx(60 / 80)
    assert absolute_robustness(20.0, 40.0, higher_is_better=False, scale=100.0) == pytest.approx(0.8)
    assert relative_robustness(20.0, 10.0, higher_is_better=False, worst=100.0) > 1.0
    assert math.isnan(relative_robustness(100.0, 100.0, higher_is_better=False, worst=100.0))


def test_a_unit_scale_divides_gamma_a_by_one() -> None:
    assert absolute_robustness(0.8, 0.6, scale=1.0) == pytest.approx(0.8)
    assert relative_robustness(0.8, 0.6) == pytest.approx(0.75)


def test_gamma_follows_the_metric_class_declaration() -> None:
    from pytest_segrobust.engine.evaluation import CellResult, EvalResult
    from pytest_segrobust.metrics import METRICS, Metric, MetricResult

    class ErrorRate(Metric):
        name, label, higher_is_better, bounds = "test_error_rate", "error", False, (0.0, 1.0)

        def update(self, predictions, batch) -> None: ...  # type: ignore[no-untyped-def]
        def compute(self) -> MetricResult: ...  # type: ignore[empty-body]

    METRICS.register(ErrorRate)
    cell = CellResult(
        corrupted=EvalResult({"test_error_rate": MetricResult(0.5, ())}, 1, 0.0),
        clean=EvalResult({"test_error_rate": MetricResult(0.2, ())}, 1, 0.0),
    )
    assert cell.gamma_r == pytest.approx(0.5 / 0.8) and cell.gamma_a == pytest.approx(0.7)
