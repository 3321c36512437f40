"""The verdict on a cell, as a pure function: no pytest, no files."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pytest_segrobust.core.statistics import Change, Outcome, non_inferiority
from pytest_segrobust.gate.verdict import (
    Check,
    Criteria,
    GatedNumber,
    Observation,
    Status,
    ToleranceCheck,
    decide_paired,
    judge,
    tolerance_checks,
)
from pytest_segrobust.store.baselines import CellKey
from pytest_segrobust.store.decisions import PairedCheck

NOISE = CellKey("demo", "m", "gaussian_noise", 3)
TOLERANCES = {"score": 1.0, "gamma_r": 0.01}
OBSERVED = {"score": 60.0, "gamma_r": 0.66, "gamma_a": 0.7}


def test_within_tolerance_passes_and_compares_every_toleranced_number() -> None:
    verdict = judge(Observation(NOISE, OBSERVED), Criteria({"score": 60.5, "gamma_r": 0.665}, TOLERANCES))
    assert verdict.status is Status.PASSED and verdict.passed and not verdict.write
    assert {c.metric for c in verdict.checks} == {"score", "gamma_r"}


def test_above_tolerance_is_an_improvement_that_passes() -> None:
    verdict = judge(Observation(NOISE, OBSERVED), Criteria({"score": 50.0, "gamma_r": 0.5}, TOLERANCES))
    assert verdict.status is Status.IMPROVED and verdict.passed


def test_a_regression_fails_with_the_full_message() -> None:
    stored = {"score": 60.0, "gamma_r": 0.7}
    verdict = judge(Observation(NOISE, OBSERVED), Criteria(stored, TOLERANCES, baseline_file="b/demo.json"))
    assert verdict.status is Status.REGRESSED and not verdict.passed and not verdict.write
    assert verdict.message.splitlines() == [
        "demo::m::gaussian_noise::3 regressed:",
        "  gamma_r: observed 0.6600, baseline 0.7000, delta -0.0400, tolerance 0.0100",
        "  baseline file: b/demo.json",
        "  if the new numbers are intended: pytest --segrobust --segrobust-update-baselines",
    ]


def test_a_cell_with_a_node_id_is_named_by_it_with_the_command_that_updates_it_alone() -> None:
    nodeid = "suites/demo.yaml::m::gaussian_noise[3]"
    stored = {"score": 60.0, "gamma_r": 0.7}
    verdict = judge(
        Observation(NOISE, OBSERVED, nodeid=nodeid), Criteria(stored, TOLERANCES, baseline_file="b/demo.json")
    )
    lines = verdict.message.splitlines()
    assert lines[0] == "suites/demo.yaml::m::gaussian_noise[3] regressed:"
    assert lines[-1] == (
        "  if the new numbers are intended: "
        "pytest --segrobust 'suites/demo.yaml::m::gaussian_noise[3]' --segrobust-update-baselines"
    )
    new = judge(Observation(NOISE, OBSERVED, nodeid=nodeid), Criteria(None, TOLERANCES, baseline_file="b/demo.json"))
    assert new.message.startswith(f"{nodeid}: no baseline yet in b/demo.json")
    assert new.message.endswith("it is written at the end of the run: re-run to compare")
    sharded = judge(Observation(NOISE, OBSERVED, nodeid=nodeid), Criteria(None, TOLERANCES, sharded=True))
    assert sharded.message.endswith("`segrobust merge` writes it: re-run to compare")


def test_numbers_that_round_to_zero_print_without_a_minus_sign() -> None:
    exact = judge(Observation(NOISE, {"gamma_r": 0.69998}), Criteria({"gamma_r": 0.7}, {"gamma_r": 0.0}))
    assert exact.status is Status.REGRESSED
    assert "  gamma_r: observed 0.7000, baseline 0.7000, delta 0.0000, tolerance 0.0000" in exact.message.splitlines()
    undecided = PairedCheck("score", 59.99999, 60.0, 1.0, low=-1.5, high=0.00004, outcome="inconclusive", images=8)
    verdict = judge(Observation(NOISE, OBSERVED), Criteria({"score": 60.0}, {}, paired=(undecided,)))
    assert verdict.status is Status.INCONCLUSIVE
    assert (
        "  score: change 0.0000, interval [-1.5000, 0.0000] straddles -1.0000; "
        "the change lies within a standard error of the margin: more images may decide either way"
    ) in verdict.message.splitlines()
    assert "-0.0000" not in exact.message + verdict.message


def test_no_baseline_fails_and_records() -> None:
    verdict = judge(Observation(NOISE, OBSERVED), Criteria(None, TOLERANCES, baseline_file="b/demo.json"))
    assert verdict.status is Status.NEW and verdict.write and not verdict.replace_all and not verdict.passed
    assert "no baseline yet in b/demo.json; recorded score=60.0000, gamma_r=0.6600" in verdict.message


@pytest.mark.parametrize("stored", [None, {"score": 90.0, "gamma_r": 0.9}])
def test_an_update_records_whatever_is_stored(stored) -> None:
    verdict = judge(Observation(NOISE, OBSERVED), Criteria(stored, TOLERANCES, update=True))
    assert verdict.status is Status.UPDATED and verdict.passed and verdict.write and not verdict.replace_all


def test_an_unusable_baseline_fails_or_is_rewritten_by_an_update() -> None:
    problem = "b/demo.json: recorded under other conditions than this run (seed: baseline 0, this run 7)"
    failing = judge(Observation(NOISE, OBSERVED), Criteria(None, TOLERANCES, baseline_problem=problem))
    assert failing.status is Status.ERROR and failing.message == problem and not failing.write
    rewriting = judge(Observation(NOISE, OBSERVED), Criteria(None, TOLERANCES, update=True, baseline_problem=problem))
    assert rewriting.status is Status.UPDATED and rewriting.write and rewriting.replace_all


@pytest.mark.parametrize("update", [False, True])
@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_a_non_finite_observation_is_never_compared_nor_stored(update: bool, bad: float) -> None:
    observed = OBSERVED | {"gamma_r": bad}
    stored = {"score": 60.0, "gamma_r": 0.66}
    verdict = judge(Observation(NOISE, observed, metric_label="mIoU"), Criteria(stored, TOLERANCES, update=update))
    assert verdict.status is Status.ERROR and not verdict.write and not verdict.passed
    assert f"gamma_r is {bad}" in verdict.message and "nothing is written to the baseline" in verdict.message


def test_an_undefined_gamma_r_says_why() -> None:
    observation = Observation(NOISE, OBSERVED | {"gamma_r": math.nan}, metric_label="mIoU", clean_score=0.0)
    verdict = judge(observation, Criteria(None, TOLERANCES, update=True))
    assert "(the clean mIoU is 0, so relative robustness is undefined)" in verdict.message


def test_a_non_finite_stored_number_is_a_regression_that_says_so() -> None:
    verdict = judge(Observation(NOISE, OBSERVED), Criteria({"score": 60.0, "gamma_r": math.nan}, TOLERANCES))
    assert verdict.status is Status.REGRESSED
    assert "(stored gamma_r is nan, not a finite number)" in verdict.message


def test_an_error_metric_regresses_by_rising() -> None:
    stored = {"score": 10.0}
    worse = judge(Observation(NOISE, {"score": 12.0}), Criteria(stored, {"score": 1.0}, lower_is_better=("score",)))
    assert worse.status is Status.REGRESSED and "score: observed 12.0000, baseline 10.0000" in (worse.message or "")
    better = judge(Observation(NOISE, {"score": 8.0}), Criteria(stored, {"score": 1.0}, lower_is_better=("score",)))
    assert better.status is Status.IMPROVED and better.passed
    # The same numbers for a higher-is-better score: the other way round.
    assert judge(Observation(NOISE, {"score": 12.0}), Criteria(stored, {"score": 1.0})).status is Status.IMPROVED


def test_an_update_compares_for_the_record_and_passes_whatever_it_finds() -> None:
    stored = {"score": 90.0, "gamma_r": 0.9}
    verdict = judge(Observation(NOISE, OBSERVED), Criteria(stored, TOLERANCES, update=True))
    assert verdict.status is Status.UPDATED and verdict.passed and verdict.write
    assert {c.metric: c.regressed for c in verdict.checks} == {"score": True, "gamma_r": True}


def test_a_changed_model_is_gated_all_the_same_and_a_failure_names_the_change() -> None:
    change = "model m differs from the one b/demo.json was made with (fingerprint 2222, recorded 1111)"
    passing = judge(Observation(NOISE, OBSERVED), Criteria(dict(OBSERVED), TOLERANCES, model_change=change))
    assert passing.status is Status.PASSED and passing.passed
    stored = {"score": 70.0, "gamma_r": 0.66}
    against = Criteria(stored, TOLERANCES, baseline_file="b/demo.json", model_change=change)
    failing = judge(Observation(NOISE, OBSERVED), against)
    assert failing.status is Status.REGRESSED and f"  baseline file: b/demo.json\n  {change}\n" in failing.message


@pytest.mark.parametrize("paired", [None, (PairedCheck("score", 60.0, 60.0, 1.0, low=-0.1, high=0.1, outcome="pass", images=8),)])
def test_a_stored_cell_without_a_gated_number_fails_naming_it_and_an_update_rewrites_it(paired) -> None:
    stored = {"score": 60.0, "gamma_a": 0.7}  # gamma_r removed by hand
    failing = judge(
        Observation(NOISE, OBSERVED), Criteria(stored, TOLERANCES, baseline_file="b/demo.json", paired=paired)
    )
    assert failing.status is Status.ERROR and not failing.passed and not failing.write
    assert failing.message == (
        "demo::m::gaussian_noise::3: b/demo.json: models.m.gaussian_noise.3 has no gamma_r, which the suite gates, "
        "so the cell cannot be compared (was the file edited by hand?); restore it, or rewrite the cell with "
        "pytest --segrobust --segrobust-update-baselines"
    )
    rewriting = judge(Observation(NOISE, OBSERVED), Criteria(stored, TOLERANCES, update=True, paired=paired))
    assert rewriting.status is Status.UPDATED and rewriting.write and not rewriting.replace_all
    # A further metric's number, in a cell of a split.
    key = CellKey("demo", "m", "gaussian_noise", 3, split="night")
    tolerances = TOLERANCES | {"boundary_iou.score": 1.0}
    observed = OBSERVED | {"boundary_iou.score": 50.0}
    stored = {"score": 60.0, "gamma_r": 0.66}
    verdict = judge(Observation(key, observed), Criteria(stored, tolerances, baseline_file="b/demo.json"))
    assert "b/demo.json: models.m.night.gaussian_noise.3 has no boundary_iou.score, which" in verdict.message


# -- the checks: one protocol, two kinds ------------------------------------------------------


def test_checks_mark_regressions_and_improvements() -> None:
    checks = tolerance_checks(
        {"score": 58.5, "gamma_r": 0.80}, {"score": 60.0, "gamma_r": 0.75}, {"score": 1.0, "gamma_r": 0.01}
    )
    by_metric = {c.metric: c for c in checks}
    assert by_metric["score"].regressed and by_metric["score"].delta == pytest.approx(-1.5)
    assert by_metric["score"].outcome == Outcome.FAIL
    assert by_metric["gamma_r"].improved and not by_metric["gamma_r"].regressed
    within = ToleranceCheck("score", 59.5, 60.0, 1.0)
    assert not within.regressed and not within.improved and within.outcome == Outcome.PASS


def test_a_point_value_falling_by_exactly_its_tolerance_passes() -> None:
    # A point value is never undecided: a tolerance of 0 demands the number unchanged, and gets it.
    assert ToleranceCheck("score", 60.0, 60.0, 0.0).outcome == Outcome.PASS
    assert ToleranceCheck("score", 59.0, 60.0, 1.0).outcome == Outcome.PASS
    assert ToleranceCheck("score", 11.0, 10.0, 1.0, higher_is_better=False).outcome == Outcome.PASS
    assert ToleranceCheck("score", 11.5, 10.0, 1.0, higher_is_better=False).outcome == Outcome.FAIL


@pytest.mark.parametrize(("observed", "stored"), [(math.nan, 60.0), (60.0, math.nan), (math.inf, 60.0), (60.0, -math.inf)])
def test_a_non_finite_number_on_either_side_is_always_a_regression(observed: float, stored: float) -> None:
    check = ToleranceCheck("score", observed, stored, 100.0)
    assert check.regressed and not check.improved
    assert "not a finite number" in (check.problem or "")
    assert "not a finite number" in check.describe()


@pytest.mark.parametrize(
    ("values", "expected"),
    # The inconclusive change lies more than a standard error from the margin: only there is a sample-size hint given.
    [(np.linspace(-3.0, -2.0, 101), "fail"), (np.linspace(-0.5, 0.5, 101), "pass"), (np.linspace(-1.1, -0.1, 101), "inconclusive")],
)
def test_a_paired_check_decides_by_the_one_three_state_rule(values: np.ndarray, expected: str) -> None:
    change = Change(float(values.mean()), values, images=10_000)
    check = decide_paired(GatedNumber("score", 60.0 + change.observed, 60.0), change, margin=1.0, confidence=0.9)
    assert check.outcome == expected == non_inferiority(*change.interval(0.9), 1.0)
    assert check.regressed is (expected == "fail")
    assert (check.images_to_decide is not None) is (expected == "inconclusive")


def test_both_kinds_of_check_are_checks_that_describe_themselves() -> None:
    tolerance: Check = ToleranceCheck("score", 58.0, 60.0, 1.0)
    paired: Check = PairedCheck("score", 58.0, 60.0, 1.0, low=-2.5, high=-1.5, outcome="fail", images=8)
    undecided: Check = PairedCheck("gamma_r", 0.6, 0.61, 0.01, low=-0.03, high=0.01, outcome="inconclusive", images=8, images_to_decide=40)
    assert tolerance.regressed and paired.regressed and not undecided.regressed
    assert tolerance.describe() == "  score: observed 58.0000, baseline 60.0000, delta -2.0000, tolerance 1.0000"
    assert paired.describe() == (
        "  score: observed 58.0000, baseline 60.0000, delta -2.0000, interval [-2.5000, -1.5000] entirely below the margin -1.0000"
    )
    assert undecided.describe() == (
        "  gamma_r: change -0.0100, interval [-0.0300, 0.0100] straddles -0.0100; about 40 images (now 8) would decide it"
    )
    verdict = judge(Observation(NOISE, OBSERVED), Criteria({"score": 60.0, "gamma_r": 0.61}, {}, paired=(undecided,)))
    assert verdict.status is Status.INCONCLUSIVE and undecided.describe() in verdict.message.splitlines()
