"""What the report says reads true: counts, margins, the closest decision, near chance, partial runs, units."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from pytest_segrobust.gate.verdict import Criteria, Observation, Status, judge
from pytest_segrobust.report import (
    GateSummary,
    ReleaseSummary,
    RunVerdict,
    SuiteReport,
    build_report,
    release_lines,
    render_markdown,
    tables,
)
from pytest_segrobust.report.coverage import RunCoverage, headline
from pytest_segrobust.store.baselines import CellKey
from pytest_segrobust.store.decisions import ModelOutcome, PairedCheck, RequirementCheck, RuleSummary
from pytest_segrobust.store.records import CellRecord
from pytest_segrobust.suite.requirements import summarize
from tests.report.test_report import SCORES_A, cells

NOISE = CellKey("demo", "m", "gaussian_noise", 3)
TOLERANCES = {"score": 1.0, "gamma_r": 0.01}


def test_gamma_r_that_rose_as_the_score_fell_is_no_improvement() -> None:
    # Clean 80 -> 66, corrupted 50 -> 49.5 (within its tolerance): gamma_r rose from 0.625 to 0.75.
    fell = judge(Observation(NOISE, {"score": 49.5, "gamma_r": 0.75}), Criteria({"score": 50.0, "gamma_r": 0.625}, TOLERANCES))
    assert fell.status is Status.ROSE_AS_CLEAN_FELL and fell.passed
    risen = judge(Observation(NOISE, {"score": 52.0, "gamma_r": 0.75}), Criteria({"score": 50.0, "gamma_r": 0.625}, TOLERANCES))
    assert risen.status is Status.IMPROVED
    line = RunVerdict(True, {"rose-as-clean-fell": 2, "improved": 1}).line()
    assert line == "PASS · 3 cells: 2 where γr rose as the clean score fell, 1 improved"
    assert tables.STATUS_MARK["rose-as-clean-fell"] == "γr rose as the clean score fell"


def test_counts_of_errors_take_their_plural() -> None:
    assert RunVerdict(False, {"regressed": 1, "error": 2}).line() == "FAIL · 3 cells: 1 regressed, 2 errors"
    assert RunVerdict(False, {"error": 1}).line() == "FAIL · 1 cell: 1 error"


def test_the_aggregate_gate_shows_margins_as_the_suite_declares_them() -> None:
    aggregate = PairedCheck("rPC", 0.5, 0.52, 0.02, -0.03, -0.01, "pass", 12, None, None, True, "clip")
    decision = ModelOutcome("s.yaml::a::aggregates", "s", "a", "passed", checks=(aggregate,))
    release = ReleaseSummary(requirements=(), models=(decision,), basis="bootstrap")
    (row,) = tables.model_gates({"s": SuiteReport("s", release=release)}).rows
    assert row[7] == "0.0200"


def decision(subject: str, observed: float, low: float, high: float, outcome: str) -> RequirementCheck:
    return RequirementCheck(subject, "mPC", "require.mpc", 7, 40.0, True, observed, low, high, outcome, 40.9, 16)


def test_the_release_table_shows_the_closest_decision_and_names_a_worse_one() -> None:
    checks = [
        decision("s.yaml::m::fog[5]", 30.0, 28.0, 32.0, "fail"),
        decision("s.yaml::m::fog[1]", 41.0, 40.2, 41.8, "pass"),
        decision("s.yaml::m::snow[1]", 55.0, 54.0, 56.0, "pass"),
    ]
    (summary,) = summarize(checks)
    assert summary.worst.subject == "s.yaml::m::fog[5]"
    assert summary.closest is not None and summary.closest.subject == "s.yaml::m::fog[1]"
    row = summary  # the report shows the release criteria's own summary
    (shown,) = tables.release_criteria({"s": SuiteReport("s", release=ReleaseSummary((row,), (), "bootstrap"))}).rows
    assert shown[3] == "3 decisions; closest: s.yaml::m::fog[1]; worst: s.yaml::m::fog[5] (30.00)"
    assert shown[4:6] == ("41.00", "[40.20, 41.80]")
    assert row.to_json()["closest"]["subject"] == "s.yaml::m::fog[1]"


def test_a_passing_require_says_it_held_and_an_unmet_one_says_where() -> None:
    row = RuleSummary("require.mpc", 7, "mPC", 40.0, True, {"pass": 3}, decision("m", 41.0, 40.2, 41.8, "pass"), None)
    held = build_report(cells("a", 80.0, SCORES_A), {}).with_suite("s", release=ReleaseSummary((row,), (), "bootstrap"))
    assert release_lines(held) == ["suite s: require: held: 1 requirement met (3 decisions)"]
    unmet = ReleaseSummary((dataclasses.replace(row, outcomes={"fail": 3}),), (), "bootstrap", ("s.yaml:7: unmet",))
    assert release_lines(held.with_suite("s", release=unmet)) == ["s.yaml:7: unmet"]


def test_a_run_of_one_whole_suite_file_is_not_called_partial() -> None:
    whole = RunCoverage(evaluated=7, errors=0, narrowed_to=["suites/demo.yaml"], full_report="segrobust-report.md")
    assert headline(whole) == (
        "Run of suites/demo.yaml only: this report covers all 7 cells, not the rest of the suites folder; "
        "the full report, segrobust-report.md, is left as it was."
    )
    some = dataclasses.replace(whole, evaluated=5, deselected=["a", "b"])
    assert headline(some).startswith("Partial run: this report covers 5 of the 7 cells it collected")


def vos_records(model: str, clean: float) -> list[CellRecord]:
    records = cells(model, clean, {("frame_freeze", "temporal", 1): clean - 1})
    for record in records:
        record.class_names = ["background", "object"]
    return records


def suite_of(metric: str, task: str) -> Any:
    """The fields of a suite the report reads."""
    return SimpleNamespace(
        task=task, metric=metric, metrics=(metric,), seed=0, shifts=None, path=Path("s.yaml"), degradation=None,
        gate=None, requirements=None, reads_text=False, reads_clips=False,
    )  # fmt: skip


def test_near_chance_only_where_the_metric_has_a_chance_level_and_on_the_models_line() -> None:
    near = build_report(vos_records("a", 30.0), {"s": suite_of("vos_jf", "vos")})
    assert near.suites["s"].models["a"].summary.chance is None
    assert "near chance" not in render_markdown(near)
    # Two classes under mIoU: chance is 50, and 30 is near it: said on the model's line, above the tables.
    markdown = render_markdown(build_report(vos_records("a", 30.0), {"s": suite_of("miou", "semantic")}))
    line = next(text for text in markdown.splitlines() if text.startswith("- **a**"))
    assert "⚠ near chance: 0.6× chance (50.0, K=2)" in line
    assert markdown.index("near chance: 0.6×") == markdown.index(line) + line.index("near chance: 0.6×")


def test_a_report_without_classes_has_no_per_class_table() -> None:
    assert "Per class" not in render_markdown(build_report(vos_records("a", 70.0), {"s": suite_of("vos_jf", "vos")}))
    records = vos_records("a", 70.0)
    for record in records:
        record.clean_per_class, record.per_class = [None, 70.0], [None, 69.0]
    assert "Per class" in render_markdown(build_report(records, {}))


def test_the_gate_counts_clips_where_the_task_resamples_clips() -> None:
    record = cells("a", 80.0, SCORES_A)[1]
    record.checks = [
        {"metric": "gamma_r", "observed": 0.5, "baseline": 0.52, "low": -0.04, "high": 0.01, "margin": 0.01,
         "outcome": "inconclusive", "images": 12, "images_to_decide": 40, "detectable": 0.05, "unit": "clip"}
    ]  # fmt: skip
    gate = GateSummary(margin_gamma_r=0.01, margin_score=1.0, confidence=0.95, multiplicity="bonferroni", numbers=1,
                       level=0.05, inconclusive="fail", resamples=100, unit="clip")  # fmt: skip
    table, warnings = tables.statistical_gate(gate, [record])
    assert table.rows[0][1].startswith("paired bootstrap of per-clip statistics")
    assert warnings[0].endswith("; about 40 clips (now 12) would decide it")
    assert "with 12 clips it cannot confirm a gamma_r margin of 0.01" in warnings[1]
    assert "images" not in " ".join(warnings)
