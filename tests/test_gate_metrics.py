"""Tolerances and margins per metric, on each metric's scale, and the direction of every check:
an error metric (lower is better) regresses by rising, under a tolerance and under the
statistical gate alike."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from pytest_segrobust.core.errors import SuiteError
from pytest_segrobust.core.statistics import RunScores, of_sums, paired_gamma_r_change, resample_weights
from pytest_segrobust.gate.verdict import Criteria, Observation, PairedRuns, Status, allowances, judge, paired_checks
from pytest_segrobust.metrics import METRICS
from pytest_segrobust.metrics.robustness import relative_robustness
from pytest_segrobust.store.baselines import CellKey
from pytest_segrobust.suite.schema import Allowance, Suite, Tolerance, load_suite
from tests.fakes import FAKES_SOURCE, PixelError

SUITE = """\
name: s
dataset: {factory: pytest_segrobust.data.demo:demo_dataset}
models: [{name: m, factory: pytest_segrobust.models.demo:tiny_unet}]
corruptions: [gaussian_noise]
severities: [3]
"""


@pytest.fixture
def pixel_error(monkeypatch: pytest.MonkeyPatch) -> type[PixelError]:
    """The 0..1 error metric, registered for this test only."""
    monkeypatch.setitem(METRICS._entries, PixelError.name, PixelError)
    return PixelError


def suite_of(tmp_path: Path, extra: str) -> Suite:
    path = tmp_path / "s.yaml"
    path.write_text(SUITE + extra)
    return load_suite(path)


# -- the YAML ---------------------------------------------------------------------------------


def test_a_metric_may_have_its_own_tolerance_and_takes_the_suites_otherwise(tmp_path: Path) -> None:
    suite = suite_of(
        tmp_path,
        "metrics: [miou, boundary_iou]\ntolerance: {score: 0.5, gamma_r: 0.02, metrics: {boundary_iou: {score: 0.25}}}\n",
    )
    assert suite.tolerance == Tolerance(0.02, 0.5, {"boundary_iou": Allowance(score=0.25)})
    assert (suite.tolerance.score_of("miou"), suite.tolerance.gamma_r_of("miou")) == (0.5, 0.02)
    assert (suite.tolerance.score_of("boundary_iou"), suite.tolerance.gamma_r_of("boundary_iou")) == (0.25, 0.02)


def test_every_percentage_metric_keeps_todays_numbers_to_the_last_bit() -> None:
    # Stored baselines were gated by the suite-wide numbers as they are: on a 0..100 scale they must not move.
    for name in METRICS.names():
        if METRICS.get(name).scale() == 100:
            for score in (1.0, 0.3, 2.5, 1e-7):
                assert Tolerance(score=score).score_of(name) == score


def test_a_metric_on_another_scale_gets_the_same_share_of_it(pixel_error: type[PixelError]) -> None:
    assert Tolerance().score_of("pixel_error") == pytest.approx(0.01)
    assert Tolerance(score=2.5).score_of("pixel_error") == pytest.approx(0.025)
    assert Tolerance(metrics={"pixel_error": Allowance(score=0.002)}).score_of("pixel_error") == 0.002
    assert Tolerance(gamma_r=0.03).gamma_r_of("pixel_error") == 0.03  # gamma_r is a fraction on any scale


@pytest.mark.parametrize(
    "extra, field, message",
    [
        (
            "tolerance: {scroe: 1}\n",
            "tolerance.scroe",
            "unknown field; expected gamma_r, score or metrics (did you mean 'score'?)",
        ),
        (
            "tolerance: {boundary_iou: {score: 1}}\n",
            "tolerance.boundary_iou",
            "unknown field; expected gamma_r, score or metrics (a metric's own goes under metrics: {boundary_iou: ",
        ),
        (
            "tolerance: {miou: {score: 1}}\n",
            "tolerance.miou",
            "unknown field; expected gamma_r, score or metrics (a metric's own goes under metrics: {miou: ",
        ),
        ("tolerance: {metrics: [boundary_iou]}\n", "tolerance.metrics", "expected a mapping of the suite's metrics"),
        (
            "tolerance: {metrics: {boundry_iou: {score: 1}}}\n",
            "tolerance.metrics.boundry_iou",
            "not a metric of the suite (miou, boundary_iou) (did you mean 'boundary_iou'?)",
        ),
        (
            "tolerance: {metrics: {map: {score: 1}}}\n",
            "tolerance.metrics.map",
            "not a metric of the suite (miou, boundary_iou)",
        ),
        (
            "tolerance: {metrics: {boundary_iou: 0.5}}\n",
            "tolerance.metrics.boundary_iou",
            "expected a mapping with gamma_r and/or score (the score in boundary_iou's units), got 0.5",
        ),
        ("tolerance: {metrics: {boundary_iou: {}}}\n", "tolerance.metrics.boundary_iou", "expected a mapping with"),
        (
            "tolerance: {metrics: {boundary_iou: {scor: 1}}}\n",
            "tolerance.metrics.boundary_iou.scor",
            "unknown field; expected gamma_r or score",
        ),
        (
            "tolerance: {metrics: {boundary_iou: {score: -1}}}\n",
            "tolerance.metrics.boundary_iou.score",
            "expected a number >= 0, got -1",
        ),
        ("tolerance: {metrics: {miou: {gamma_r: .inf}}}\n", "tolerance.metrics.miou.gamma_r", "expected a number >= 0"),
        ("tolerance: 1.0\n", "tolerance", "expected a mapping with gamma_r, score and/or metrics, got 1.0"),
    ],
)
def test_a_bad_tolerance_is_refused_naming_the_file_and_the_field(
    tmp_path: Path, extra: str, field: str, message: str
) -> None:
    with pytest.raises(SuiteError) as caught:
        suite_of(tmp_path, "metrics: [miou, boundary_iou]\n" + extra)
    assert str(caught.value).startswith(f"{tmp_path / 's.yaml'}: field '{field}': {message}")


def test_a_statistical_gate_takes_margins_per_metric(tmp_path: Path, pixel_error: type[PixelError]) -> None:
    suite = suite_of(
        tmp_path, "metrics: [miou, pixel_error]\ngate: {margin: {score: 0.5, metrics: {pixel_error: {score: 0.003}}}}\n"
    )
    assert suite.gate is not None
    assert allowances(suite.gate.margin, suite.metrics, corrupted=True) == (
        {"score": 0.5, "gamma_r": 0.01, "pixel_error.score": 0.003, "pixel_error.gamma_r": 0.01},
        ("pixel_error.score",),
    )
    with pytest.raises(SuiteError) as caught:
        suite_of(tmp_path, "metrics: [miou, pixel_error]\ngate: {margin: {metrics: {pixel_error: {score: 0}}}}\n")
    assert "field 'gate.margin.metrics.pixel_error.score': expected a non-inferiority margin > 0" in str(caught.value)
    assert "gate by tolerance: {metrics: {pixel_error: {score: 0}}} instead" in str(caught.value)


def test_a_lower_is_better_metric_may_be_gated_by_statistics_but_not_its_aggregates(
    tmp_path: Path, pixel_error: type[PixelError]
) -> None:
    assert suite_of(tmp_path, "metric: pixel_error\ngate: {}\n").gate is not None
    with pytest.raises(SuiteError, match=r"field 'gate\.aggregates': .* pixel_error is lower-is-better"):
        suite_of(tmp_path, "metric: pixel_error\ngate: {aggregates: {mpc: 0.01}}\n")


# -- what the gate allows each number --------------------------------------------------------


def test_allowances_name_each_number_of_a_cell_in_its_metrics_units(pixel_error: type[PixelError]) -> None:
    allowed = Tolerance(gamma_r=0.02, score=1.0, metrics={"miou": Allowance(score=0.5)})
    assert allowances(allowed, ("pixel_error", "miou"), corrupted=False) == (
        {"score": pytest.approx(0.01), "miou.score": 0.5},
        ("score",),
    )
    numbers, _ = allowances(allowed, ("pixel_error", "miou"), corrupted=True)
    assert numbers["gamma_r"] == numbers["miou.gamma_r"] == 0.02


def test_an_error_metric_on_a_0_to_1_scale_regresses_by_rising_beyond_its_scaled_tolerance(
    pixel_error: type[PixelError],
) -> None:
    key = CellKey("s", "m", "gaussian_noise", 3)
    tolerances, rising = allowances(Tolerance(), ("miou", "pixel_error"), corrupted=False)
    stored = {"score": 60.0, "pixel_error.score": 0.100}
    # 0.9 of a point under the shared score tolerance of 1.0 would pass; on a 0..1 scale it is 0.009.
    against = Criteria(stored, tolerances, lower_is_better=rising)
    within = judge(Observation(key, {"score": 60.0, "pixel_error.score": 0.109}), against)
    assert within.status is Status.PASSED
    worse = judge(Observation(key, {"score": 60.0, "pixel_error.score": 0.115}), against)
    assert worse.status is Status.REGRESSED
    assert "  pixel_error.score: observed 0.1150, baseline 0.1000, delta 0.0150, tolerance 0.0100" in worse.message


# -- the statistical gate's direction ---------------------------------------------------------


def pixel_runs(rng: np.random.Generator, images: int, shift: float) -> tuple[np.ndarray, np.ndarray]:
    """Per-image (wrong, scored) pixels of a baseline and of a candidate whose error moves by ``shift``."""
    base = rng.uniform(0.05, 0.3, size=images)
    cand = np.clip(base + shift + rng.normal(0, 0.005, size=images), 0, 1)
    scored = np.full(images, 1000.0)
    return np.stack([base * scored, scored], axis=1), np.stack([cand * scored, scored], axis=1)


@pytest.mark.parametrize(
    "shift, outcome, improved", [(0.05, "fail", False), (-0.05, "pass", True), (0.0, "pass", False)]
)
def test_the_paired_gate_fails_an_error_metric_that_rises_and_passes_one_that_falls(
    shift: float, outcome: str, improved: bool
) -> None:
    rng, images = np.random.default_rng(3), 64
    weights = resample_weights(images, 400, seed=5)
    statistic = of_sums(PixelError.score_of)
    base, cand = pixel_runs(rng, images, shift)
    clean = [RunScores.of(base * np.array([0.5, 1.0]), statistic, weights)] * 2  # the same clean run on both sides
    baseline_corrupted, corrupted = RunScores.of(base, statistic, weights), RunScores.of(cand, statistic, weights)
    runs = {"": PairedRuns(clean[0], baseline_corrupted, clean[1], corrupted, worst=1.0)}
    observed = {"score": corrupted.observed}
    stored = {"score": baseline_corrupted.observed}
    (check,) = paired_checks(observed, stored, runs, {"score": 0.01}, 0.95, lower_is_better=["score"])
    assert check.outcome == outcome and check.improved is improved and not check.higher_is_better
    if outcome == "fail":
        assert check.low > 0.01 and "entirely above the margin 0.0100" in check.describe()
        # Read as higher-is-better, the same rise would have passed as an improvement: the bug this fixes.
        (wrong_way,) = paired_checks(observed, stored, runs, {"score": 0.01}, 0.95)
        assert wrong_way.outcome == "pass" and wrong_way.improved


def test_gamma_r_is_measured_from_the_metrics_worst_end() -> None:
    weights = resample_weights(8, 50, seed=1)
    statistic = of_sums(PixelError.score_of)
    rng = np.random.default_rng(0)

    def run(error: float) -> RunScores:
        scored = np.full(8, 100.0)
        return RunScores.of(
            np.stack([rng.uniform(error - 0.02, error + 0.02, 8) * scored, scored], axis=1), statistic, weights
        )

    base_clean, base_corrupted, clean, corrupted = run(0.1), run(0.3), run(0.12), run(0.25)
    change = paired_gamma_r_change(base_clean, base_corrupted, clean, corrupted, worst=1.0)

    def gamma(c: RunScores, k: RunScores) -> float:
        return relative_robustness(c.observed, k.observed, higher_is_better=False, worst=1.0)

    assert change.observed == pytest.approx(gamma(clean, corrupted) - gamma(base_clean, base_corrupted))
    assert math.isfinite(change.standard_error) and change.standard_error > 0


# -- end to end: an error metric under the statistical gate -----------------------------------

GATED = """\
name: errors
dataset: {{factory: segrobust_fakes:band_scenes, kwargs: {{size: 16}}}}
models:
  - {{name: binner, factory: segrobust_fakes:red_binner, kwargs: {{smoothing: {smoothing}}}}}
corruptions: [gaussian_noise]
severities: [2]
metric: pixel_error
gate:
  margin: {{gamma_r: 0.05, score: 1.0}}   # score: 1.0 of a 0..100 scale, 0.01 of the pixel error
  resamples: 400
batch_size: 8
"""
CONFTEST = """\
from pytest_segrobust.metrics import register_metric
from segrobust_fakes import PixelError

register_metric(PixelError)
"""


def test_an_error_metric_under_the_statistical_gate_fails_when_it_rises_and_passes_when_it_falls(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(METRICS, "_entries", dict(METRICS._entries))  # the project's registration ends with the test
    pytester.makepyfile(segrobust_fakes=FAKES_SOURCE)
    pytester.makeconftest(CONFTEST)
    pytester.makeini("[pytest]\npythonpath = .\n")
    (pytester.path / "suites").mkdir()

    def run(smoothing: int, *args: str) -> pytest.RunResult:
        (pytester.path / "suites" / "errors.yaml").write_text(GATED.format(smoothing=smoothing))
        return pytester.runpytest("--segrobust", "-p", "no:cacheprovider", *args)

    def clean_check() -> dict:
        report = json.loads((pytester.path / "segrobust-report.json").read_text())
        cells = report["suites"]["errors"]["models"]["binner"]["cells"]
        return next(c for c in cells if c["severity"] == 0)["checks"][0]

    run(5, "--segrobust-update-baselines").assert_outcomes(passed=2)
    run(5).assert_outcomes(passed=2)  # unchanged: the statistics reproduce the stored gamma_r too
    # A smoother binner misreads more pixels at every border: its error rises by about 0.08.
    worse = run(9)
    worse.assert_outcomes(failed=2)
    worse.stdout.fnmatch_lines(["*errors.yaml::binner::clean regressed:*", "*entirely above the margin 0.0100*"])
    check = clean_check()
    assert check["outcome"] == "fail" and check["low"] > 0.01 and not check["higher_is_better"]
    # Recorded with the smoother binner, the sharper one is better: it passes.
    run(9, "--segrobust-update-baselines").assert_outcomes(passed=2)
    better = run(5)
    better.assert_outcomes(passed=2)
    assert clean_check()["outcome"] == "pass" and clean_check()["improved"]
