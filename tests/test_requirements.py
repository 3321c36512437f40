"""Release criteria: reading ``require:``, which rule applies to which cell, and the decisions."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from pytest_segrobust.core.errors import SuiteError
from pytest_segrobust.gate.verdict import Criteria, Observation, Status, judge
from pytest_segrobust.store.baselines import CellKey
from pytest_segrobust.suite.requirements import (
    CellPlace,
    Estimate,
    RequirementCheck,
    Rule,
    SuiteShape,
    decide,
    parse_requirements,
    summarize,
    unmet_lines,
)
from pytest_segrobust.suite.schema import load_suite

SHAPE = SuiteShape(
    headline="miou",
    metrics=("miou", "boundary_iou"),
    corruptions={"gaussian_noise": "noise", "shot_noise": "noise", "rotate": "geometric"},
    severities=(1, 3, 5),
    splits=None,
    reference_split=None,
    has_cd=True,
    lower_is_better=frozenset(),
    percent=frozenset({"miou", "boundary_iou"}),
)
NOISE3 = CellPlace("gaussian_noise", "noise", 3)


def rules_for(raw: dict, place: CellPlace, metric: str = "miou") -> dict[str, float]:
    requirements = parse_requirements(raw, SHAPE)
    return {n: r.threshold for n, r in requirements.cell_rules(metric, "miou", place).items()}


def test_top_level_numbers_hold_for_every_cell_of_the_headline() -> None:
    raw = {"score": 50, "gamma_r": 0.8, "gamma_a": 0.9}
    assert rules_for(raw, NOISE3) == {"score": 50, "gamma_r": 0.8, "gamma_a": 0.9}
    # A clean cell has a score and no robustness to require.
    assert rules_for(raw, CellPlace("clean", "clean", 0)) == {"score": 50}
    # The top-level rules are the headline's: a further metric has only its own.
    assert rules_for(raw, NOISE3, metric="boundary_iou") == {}


def test_the_narrowest_rule_applies() -> None:
    raw = {
        "gamma_r": 0.8,
        "categories": {"noise": {"gamma_r": 0.75}},
        "severities": {3: {"gamma_r": 0.85}},
        "corruptions": {"gaussian_noise": {"gamma_r": 0.7, "severities": {5: {"gamma_r": 0.5}}}},
    }
    assert rules_for(raw, CellPlace("rotate", "geometric", 1)) == {"gamma_r": 0.8}  # the suite's
    assert rules_for(raw, CellPlace("shot_noise", "noise", 1)) == {"gamma_r": 0.75}  # category
    assert rules_for(raw, CellPlace("shot_noise", "noise", 3)) == {"gamma_r": 0.85}  # severity beats category
    assert rules_for(raw, NOISE3) == {"gamma_r": 0.7}  # corruption beats severity
    assert rules_for(raw, CellPlace("gaussian_noise", "noise", 5)) == {"gamma_r": 0.5}  # nested: narrowest


def test_equally_narrow_rules_both_hold_so_the_stricter_decides() -> None:
    raw = {
        "categories": {"noise": {"severities": {3: {"gamma_r": 0.6}}}},
        "severities": {3: {"categories": {"noise": {"gamma_r": 0.7}}}},
    }
    assert rules_for(raw, NOISE3) == {"gamma_r": 0.7}


def test_an_error_metric_score_is_a_maximum_and_the_stricter_is_the_lower() -> None:
    shape = SuiteShape(**{**SHAPE.__dict__, "lower_is_better": frozenset({"miou"}), "percent": frozenset()})
    raw = {
        "categories": {"noise": {"severities": {3: {"score": 30}}}},
        "severities": {3: {"categories": {"noise": {"score": 20}}}},
    }
    requirements = parse_requirements(raw, shape)
    assert requirements.cell_rules("miou", "miou", NOISE3, score_at_least=False)["score"].threshold == 20
    assert requirements.cell_rules("miou", "miou", NOISE3, score_at_least=True)["score"].threshold == 30


def test_further_metric_and_class_rules() -> None:
    raw = {
        "classes": {"person": {"gamma_r": 0.75}},
        "corruptions": {"gaussian_noise": {"classes": {"person": {"gamma_r": 0.6}}}},
        "metrics": {"boundary_iou": {"gamma_r": 0.7, "classes": {"car": {"gamma_a": 0.9}}}},
    }
    requirements = parse_requirements(raw, SHAPE)
    assert {
        c: {n: r.threshold for n, r in rs.items()} for c, rs in requirements.class_rules("miou", "miou", NOISE3).items()
    } == {"person": {"gamma_r": 0.6}}
    rotate = CellPlace("rotate", "geometric", 3)
    assert requirements.class_rules("miou", "miou", rotate)["person"]["gamma_r"].threshold == 0.75
    assert rules_for(raw, NOISE3, metric="boundary_iou") == {"gamma_r": 0.7}
    assert requirements.class_rules("boundary_iou", "miou", NOISE3)["car"]["gamma_a"].threshold == 0.9


def test_split_rules_apply_to_their_split_and_are_narrower_than_the_suite() -> None:
    shape = SuiteShape(**{**SHAPE.__dict__, "splits": ("val", "ood-hard"), "reference_split": "val"})
    requirements = parse_requirements(
        {"gamma_r": 0.8, "splits": {"ood-hard": {"gamma_r": 0.6, "delta_pct": -20}}}, shape
    )
    hard = CellPlace("rotate", "geometric", 3, "ood-hard")
    assert requirements.cell_rules("miou", "miou", hard)["gamma_r"].threshold == 0.6
    assert (
        requirements.cell_rules("miou", "miou", CellPlace("rotate", "geometric", 3, "val"))["gamma_r"].threshold == 0.8
    )
    assert requirements.split_delta["ood-hard"].threshold == -20
    assert requirements.has_model_level


@pytest.mark.parametrize(
    ("raw", "field", "words"),
    [
        ({"gama_r": 0.8}, "require.gama_r", "unknown field"),
        ({"severities": {4: {"gamma_r": 0.8}}}, "require.severities.4", "runs severities 1, 3, 5"),
        ({"corruptions": {"fog": {"gamma_r": 0.8}}}, "require.corruptions.fog", "no corruption 'fog'"),
        (
            {"categories": {"weather": {"gamma_r": 0.8}}},
            "require.categories.weather",
            "no corruption of the suite is of category",
        ),
        (
            {"corruptions": {"rotate": {"corruptions": {"rotate": {"gamma_r": 1}}}}},
            "require.corruptions.rotate.corruptions",
            "nested",
        ),
        ({"metrics": {"miou": {"gamma_r": 0.8}}}, "require.metrics.miou", "headline"),
        ({"metrics": {"pq": {"gamma_r": 0.8}}}, "require.metrics.pq", "no metric 'pq'"),
        ({"splits": {"val": {"gamma_r": 0.8}}}, "require.splits", "no natural shifts"),
        ({"gamma_r": 0}, "require.gamma_r", "fraction above 0"),
        ({"gamma_r": "high"}, "require.gamma_r", "finite number"),
        ({"gamma_r": float("nan")}, "require.gamma_r", "finite number"),
        ({"score": 150}, "require.score", "percentage"),
        ({"aggregates": {"mpc": 45, "mpcc": 1}}, "require.aggregates.mpcc", "unknown field"),
        ({"classes": {"person": {"score": 1}}}, "require.classes.person.score", "unknown field"),
        ({}, "require", "states no threshold"),
        ([0.8], "require", "expected a mapping"),
    ],
)
def test_a_bad_require_block_names_the_field(raw: object, field: str, words: str) -> None:
    with pytest.raises(ValueError) as error:
        parse_requirements(raw, SHAPE)
    assert error.value.field == field  # type: ignore[attr-defined]
    assert words in str(error.value)


def test_mce_needs_a_reference_model() -> None:
    shape = SuiteShape(**{**SHAPE.__dict__, "has_cd": False})
    with pytest.raises(ValueError, match="reference model"):
        parse_requirements({"aggregates": {"mce": 100}}, shape)


def test_a_suite_file_reports_the_field_and_lines_are_known(tmp_path: Path) -> None:
    suite = tmp_path / "s.yaml"
    base = (
        "name: s\n"
        "dataset: {factory: pytest_segrobust.data.demo:demo_dataset}\n"
        "models: [{name: m, factory: pytest_segrobust.models.demo:tiny_unet}]\n"
        "corruptions: [gaussian_noise, rotate]\n"
        "severities: [1, 3]\n"
    )
    suite.write_text(base + "require:\n  gamma_r: 0.8\n  corruptions:\n    rotate:\n      gamma_r: 0.5\n")
    loaded = load_suite(suite)
    assert loaded.requirements is not None
    rules = loaded.requirements.cell_rules("miou", "miou", CellPlace("rotate", "geometric", 3))
    assert (rules["gamma_r"].path, rules["gamma_r"].line) == ("require.corruptions.rotate.gamma_r", 10)
    assert not loaded.gates_models
    suite.write_text(base + "require:\n  corruptions: {fog: {gamma_r: 0.5}}\n")
    with pytest.raises(
        SuiteError, match=r"s\.yaml: field 'require\.corruptions\.fog': the suite has no corruption 'fog'"
    ):
        load_suite(suite)
    suite.write_text(base + "require: {aggregates: {mpc: 40}}\n")
    assert load_suite(suite).gates_models


def test_gate_aggregates_margins_are_validated(tmp_path: Path) -> None:
    suite = tmp_path / "s.yaml"
    base = (
        "name: s\n"
        "dataset: {factory: pytest_segrobust.data.demo:demo_dataset}\n"
        "models: [{name: m, factory: pytest_segrobust.models.demo:tiny_unet}]\n"
        "corruptions: [rotate]\n"
        "gate: {aggregates: %s}\n"
    )
    suite.write_text(base % "{mpc: 0.5, mean_gamma_r: 0.005}")
    assert load_suite(suite).gate.aggregates == {"mpc": 0.5, "mean_gamma_r": 0.005}
    assert load_suite(suite).gates_models
    for bad, words in (("{mce: 1}", "unknown field"), ("{mpc: 0}", "margin > 0"), ("[mpc]", "expected a mapping")):
        suite.write_text(base % bad)
        with pytest.raises(SuiteError, match="gate.aggregates"):
            load_suite(suite)
        with pytest.raises(SuiteError, match=words):
            load_suite(suite)


# -- decisions ---------------------------------------------------------------------------------

RULE = Rule("gamma_r", 0.8, "require.gamma_r", 7)


def spread(centre: float, width: float, n: int = 4000, seed: int = 0) -> np.ndarray:
    return centre + width * np.random.default_rng(seed).standard_normal(n)


@pytest.mark.parametrize(
    ("centre", "outcome"),
    [(0.9, "pass"), (0.7, "fail"), (0.805, "inconclusive"), (0.795, "inconclusive")],
)
def test_a_minimum_is_decided_by_its_bounds(centre: float, outcome: str) -> None:
    check = decide("cell", "gamma_r", RULE, Estimate(centre, spread(centre, 0.01), 64), at_least=True, tail=0.025)
    assert check.outcome == outcome
    assert check.low < centre < check.high
    assert check.basis == "bootstrap"
    # What the number confirms at 80% power lies below its lower bound.
    assert check.confirmable < check.low


@pytest.mark.parametrize(("centre", "outcome"), [(0.7, "pass"), (0.9, "fail"), (0.8, "inconclusive")])
def test_a_maximum_is_decided_the_other_way(centre: float, outcome: str) -> None:
    check = decide("cell", "mCE", RULE, Estimate(centre, spread(centre, 0.01), 64), at_least=False, tail=0.025)
    assert check.outcome == outcome
    assert check.confirmable > check.high


def test_the_bounds_widen_with_the_family() -> None:
    estimate = Estimate(0.83, spread(0.83, 0.01), 64)
    alone = decide("cell", "gamma_r", RULE, estimate, at_least=True, tail=0.05)
    in_family = decide("cell", "gamma_r", RULE, estimate, at_least=True, tail=0.05 / 200)
    assert alone.outcome == "pass" and in_family.outcome == "inconclusive"
    assert in_family.low < alone.low


def test_without_a_statistical_gate_the_point_value_is_compared() -> None:
    assert decide("cell", "gamma_r", RULE, Estimate(0.8), at_least=True, tail=None).outcome == "pass"
    below = decide("cell", "gamma_r", RULE, Estimate(0.7999), at_least=True, tail=None)
    assert below.outcome == "fail" and below.basis == "point" and below.low is None
    assert "point value" in below.describe()


def test_a_nan_never_meets_a_requirement() -> None:
    for tail in (None, 0.05):
        check = decide("cell", "gamma_r", RULE, Estimate(math.nan, spread(0.9, 0.01), 64), at_least=True, tail=tail)
        assert check.outcome == "fail"


def test_a_check_round_trips_through_json() -> None:
    check = decide("cell", "gamma_r", RULE, Estimate(0.9, spread(0.9, 0.01), 64), at_least=True, tail=0.025)
    assert RequirementCheck.from_json(check.to_json()) == check
    with pytest.raises(ValueError):
        RequirementCheck.from_json({**check.to_json(), "extra": 1})


def test_unmet_requirements_are_one_line_each_naming_the_suite_line() -> None:
    checks = [
        decide(f"suites/s.yaml::m::rotate[{s}]", "gamma_r", RULE, Estimate(v), at_least=True, tail=None)
        for s, v in ((1, 0.9), (3, 0.7), (5, 0.5))
    ]
    (summary,) = summarize(checks)
    assert summary.outcome == "fail" and dict(summary.outcomes) == {"pass": 1, "fail": 2}
    assert summary.worst.subject == "suites/s.yaml::m::rotate[5]"
    (line,) = unmet_lines(checks, "suites/s.yaml")
    assert line.startswith("suites/s.yaml:7: require.gamma_r ≥ 0.8000 unmet for 2 of 3")
    assert "rotate[5]" in line
    assert unmet_lines(checks[:1], "suites/s.yaml") == []


# -- the cell's verdict -------------------------------------------------------------------------

KEY = CellKey("s", "m", "rotate", 3)
MET = decide("c", "gamma_r", RULE, Estimate(0.9), at_least=True, tail=None)
UNMET = decide("c", "gamma_r", RULE, Estimate(0.7), at_least=True, tail=None)
UNDECIDED = decide("c", "gamma_r", RULE, Estimate(0.805, spread(0.805, 0.01), 64), at_least=True, tail=0.025)
OBSERVED = {"score": 40.0, "gamma_r": 0.8}


def verdict(stored: dict | None, requirements: list | None, **kwargs: object):
    required = None if requirements is None else tuple(requirements)
    return judge(
        Observation(KEY, OBSERVED), Criteria(stored, {"score": 1.0, "gamma_r": 0.01}, requirements=required, **kwargs)
    )


def test_a_first_release_is_gated_by_its_requirements() -> None:
    met = verdict(None, [MET])
    assert met.status is Status.RECORDED and met.passed and met.write
    unmet = verdict(None, [UNMET])
    assert unmet.status is Status.UNMET and not unmet.passed and unmet.write
    assert "require.gamma_r" in unmet.message and "no baseline yet" in unmet.message
    # In a suite with require:, a cell no rule applies to is recorded too; without require:, a
    # missing baseline fails, as it always did.
    assert verdict(None, []).status is Status.RECORDED
    assert verdict(None, None).status is Status.NEW


def test_an_unmet_requirement_fails_a_cell_its_baseline_passes() -> None:
    passed = verdict(OBSERVED, [MET])
    assert passed.status is Status.PASSED
    failed = verdict(OBSERVED, [UNMET])
    assert failed.status is Status.UNMET and "1 requirement not met" in failed.message


def test_a_regression_and_an_unmet_requirement_are_both_reported() -> None:
    both = verdict({"score": 50.0, "gamma_r": 0.9}, [UNMET])
    assert both.status is Status.REGRESSED
    assert "regressed" in both.message and "requirement not met" in both.message


def test_an_update_still_fails_an_unmet_requirement_and_writes() -> None:
    updated = judge(Observation(KEY, OBSERVED), Criteria(OBSERVED, {}, update=True, requirements=(UNMET,)))
    assert updated.status is Status.UNMET and updated.write and not updated.passed


@pytest.mark.parametrize(
    ("policy", "status", "passes"),
    [("fail", Status.INCONCLUSIVE, False), ("warn", Status.PASSED, True), ("pass", Status.PASSED, True)],
)
def test_an_undecided_requirement_follows_the_inconclusive_policy(policy: str, status: Status, passes: bool) -> None:
    result = verdict(OBSERVED, [UNDECIDED], inconclusive=policy)
    assert result.status is status and result.passed is passes
    assert (result.warning is not None) is (policy == "warn")
