"""The top of the report: the verdict, the regressed cells, the run's environment, chance levels."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from pytest_segrobust.report import (
    GateSummary,
    ReleaseSummary,
    SuiteReport,
    build_report,
    render_markdown,
    run_verdict,
    tables,
    terminal_summary,
    verdict,
)
from pytest_segrobust.report.environment import describe_device, run_environment
from pytest_segrobust.report.model import RunEnvironment
from pytest_segrobust.store.decisions import ModelOutcome, PairedCheck
from pytest_segrobust.store.records import CellRecord
from tests.report.test_report import SCORES_A, cells


def regressed(records: list[CellRecord], corruption: str, severity: int, delta: float, tolerance: float = 0.01) -> None:
    """Mark one cell of ``records`` as regressed: its gamma_r fell ``delta`` below its baseline."""
    record = next(r for r in records if r.corruption == corruption and r.severity == severity)
    assert record.gamma_r is not None
    record.status = "regressed"
    record.baseline = {"gamma_r": record.gamma_r - delta, "score": record.score}
    record.checks = [
        {"metric": "gamma_r", "observed": record.gamma_r, "baseline": record.gamma_r - delta, "tolerance": tolerance,
         "higher_is_better": True, "regressed": True, "improved": False},
        {"metric": "score", "observed": record.score, "baseline": record.score, "tolerance": 1.0,
         "higher_is_better": True, "regressed": False, "improved": False},
    ]


def test_verdict_passes_only_without_failing_cells() -> None:
    records = cells("a", 80.0, SCORES_A)
    assert run_verdict(records, {}, []).line() == "PASS · 5 cells: 5 passed"
    records[1].status = "improved"
    records[2].status = "new"
    verdict = run_verdict(records, {"s.yaml::a::fog[1]": "boom"}, ["s.yaml::a::fog[2]"])
    assert not verdict.passed
    # Failing outcomes first, then the others; an error without a record and a missing cell count too.
    assert verdict.line() == "FAIL · 7 cells: 1 new (no baseline), 1 error, 1 without a result, 3 passed, 1 improved"


def test_counts_of_one_are_singular_in_the_verdict_and_the_summary() -> None:
    records = cells("a", 80.0, SCORES_A)[:1]
    assert run_verdict(records, {}, []).line() == "PASS · 1 cell: 1 passed"
    records[0].status = "updated"  # an update writes every cell, changed or not
    assert run_verdict(records, {}, []).line() == "PASS · 1 cell: 1 written to the baseline"
    report = build_report(records, {}, errors={"s.yaml::a::fog[1]": "boom"})
    assert verdict(report).line() == "FAIL · 2 cells: 1 error, 1 written to the baseline"
    assert "1 cell failed with an error (no result): s.yaml::a::fog[1]" in terminal_summary(report)
    assert "**1 cell failed with an error and has no result**; the tables below leave them out:" in render_markdown(report)


def test_markdown_opens_with_verdict_then_a_line_per_model_then_regressed_cells_worst_first() -> None:
    records = cells("a", 80.0, SCORES_A)
    regressed(records, "gaussian_noise", 5, delta=-0.02)
    regressed(records, "rotate", 1, delta=-0.10)
    records[0].baseline = {"score": 88.3}  # the clean score fell 8.3 points, within a loose tolerance
    records[0].checks = [{"metric": "score", "observed": 80.0, "baseline": 88.3, "tolerance": 10.0, "regressed": False}]
    unchanged = cells("b", 70.0, SCORES_A)
    for r in unchanged:
        r.baseline = {"score": r.score}
        r.checks = [{"metric": "score", "observed": r.score, "baseline": r.score, "tolerance": 1.0, "regressed": False}]
    report = build_report(records + unchanged, {})
    environment = RunEnvironment(git_commit="abc123", git_dirty=True, wall_seconds=75.0, device="cpu")
    report = dataclasses.replace(report, environment=environment)
    markdown = render_markdown(report)
    lines = markdown.splitlines()
    assert lines[2] == "**FAIL · 10 cells: 2 regressed, 8 passed**"
    # One line per model first, with the metric's name and the run's numbers.
    assert lines[4:7] == [
        "- **a** in `s`: clean score -8.30 (88.30 → 80.00); 5 cells: 2 regressed, 3 passed",
        "- **b** in `s`: unchanged (every number as its baseline; 5 cells: 5 passed)",
        "",
    ]
    assert lines[7] == "### Regressed cells"
    table = markdown.split("### Regressed cells")[1].split("###")[0]
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    # One row per cell, its numbers as columns, in the order the caption states.
    assert [row.split(" | ")[0] for row in rows] == ["| `s.yaml::a::rotate::1`", "| `s.yaml::a::gaussian_noise::5`"]
    assert rows[0].split(" | ")[1:] == ["score", "75.00", "75.00", "0.00", "1.038", "0.938", "-0.100", "γr -0.100 (tolerance 0.010) |"]
    assert "| cell | metric | baseline | now | Δ | baseline γr | now γr | Δγr |" in table
    assert "Worst first: cells are ordered by the largest fall of any of their numbers" in table
    assert "| git commit | abc123 (uncommitted changes) |" in markdown
    assert "| wall time | 1 min 15 s |" in markdown and tables.WALL_TIME_NOTE in markdown
    assert markdown.index("### Run") < markdown.index("### What was measured") < markdown.index("## Suite `s`")
    assert report.to_json()["verdict"] == {"passed": False, "counts": {"regressed": 2, "passed": 8}, "line": lines[2].strip("*")}
    assert verdict(report).line() == "FAIL · 10 cells: 2 regressed, 8 passed"
    assert verdict(report).line() not in terminal_summary(report)  # the terminal prints it last, after every file


def test_a_model_line_counts_an_updates_changed_cells_and_the_models_errors() -> None:
    records = cells("a", 80.0, SCORES_A)
    for r in records:
        r.status = "updated"
        r.baseline = {"score": r.score}
        r.checks = [{"metric": "score", "observed": r.score, "baseline": r.score, "tolerance": 1.0, "regressed": False}]
    records[1].checks = [{"metric": "score", "observed": records[1].score, "baseline": 69.0, "tolerance": 1.0}]
    report = build_report(records, {}, errors={"s.yaml::a::fog[1]": "boom", "s.yaml::c::fog[1]": "no model"})
    lines = render_markdown(report).splitlines()
    assert lines[4:7] == [
        "- **a** in `s`: clean score 0.00 (80.00 → 80.00); 6 cells: 1 error, 5 written to the baseline (1 changed)",
        "- `s.yaml::c`: 1 cell failed with an error, none with a result",
        "",
    ]


def test_regressions_name_further_metrics_and_lower_is_better_numbers() -> None:
    record = cells("a", 80.0, SCORES_A)[1]
    record.checks = [
        {"metric": "pq.score", "observed": 50.0, "baseline": 55.0, "tolerance": 1.0, "higher_is_better": True, "regressed": True},
        {"metric": "err.score", "observed": 12.0, "baseline": 10.0, "tolerance": 4.0, "higher_is_better": False, "regressed": True},
    ]
    (row,) = tables.regressed_cells([record], {"s": {"": "mIoU", "pq": "PQ"}}).rows
    assert row[1] == "mIoU" and row[-1] == "PQ -5.00 (tolerance 1.00); err +2.00 (tolerance 4.00)"  # furthest first


def test_a_change_that_rounds_to_nothing_prints_without_a_sign() -> None:
    record = cells("a", 80.0, SCORES_A)[1]
    record.baseline = {"score": record.score, "gamma_r": 0.66004}
    record.gamma_r = 0.66
    record.checks = [  # tolerance 0 (exact): a change of -0.00004 regresses, and shows as 0.000, not -0.000
        {"metric": "gamma_r", "observed": 0.66, "baseline": 0.66004, "tolerance": 0.0, "regressed": True},
    ]
    (row,) = tables.regressed_cells([record], {"s": {"": "mIoU"}}).rows
    assert row[5:] == ("0.660", "0.660", "0.000", "γr 0.000 (tolerance 0.000)")
    signed = [tables.signed(v, 2) for v in (-0.004, 0.0, -0.0, 0.004, -0.006, 0.006)]
    assert signed == ["0.00", "0.00", "0.00", "0.00", "-0.01", "+0.01"]
    assert [tables.fmt(v, 3) for v in (-0.0004, -0.0, -0.0006)] == ["0.000", "0.000", "-0.001"]


def test_what_was_measured_shows_device_seed_images_and_fingerprints() -> None:
    records = cells("a", 80.0, SCORES_A)
    for r in records:
        r.model_fingerprint, r.dataset_fingerprint = "m" * 64, "d" * 8  # a digest is cut, a short name is not
        r.device = "cpu"
    records[-1].device = "cuda:1"  # a model moved between cells shows both
    report = build_report(records, {})
    report = report.with_suite("s", seed=7)
    table = tables.measured(report.suites)
    assert table.rows == (("s", "a", "cpu/cuda:1", "7", "4", "`dddddddd`", f"`{'m' * 16}`…", "5", "0.5 s"),)


def test_what_was_measured_keeps_two_splits_of_one_dataset_apart() -> None:
    # The demo dataset's fingerprints: two splits share their first 27 characters.
    easy, hard = (f"demo-scenes:v3.1:split=ood-{split}:size=64:image_size=64" for split in ("easy", "hard"))
    records = cells("a", 80.0, SCORES_A) + cells("b", 80.0, SCORES_A)
    for r in records:
        r.dataset_fingerprint = easy if r.model == "a" else hard
        r.model_fingerprint = "f" * 40 + r.model * 24  # digests alike in their first 40 characters
    table = tables.measured(build_report(records, {}).suites)
    shown = {row[1]: row[5:7] for row in table.rows}
    assert shown["a"][0] == "`demo-scenes:v3.1:split=ood-easy`…"
    assert shown["b"][0] == "`demo-scenes:v3.1:split=ood-hard`…"
    assert shown["a"][1] == f"`{'f' * 40}a`…" and shown["b"][1] == f"`{'f' * 40}b`…"


def test_the_cpu_is_the_device_and_the_threads_a_row_of_their_own_in_the_singular_for_one() -> None:
    from pytest_segrobust.runtime.threads import ThreadSetting

    assert describe_device(torch.device("cpu")) == "cpu"
    assert ThreadSetting(1, "auto: 2 cores / 2 xdist workers").describe() == (
        "1 thread per process (auto: 2 cores / 2 xdist workers)"
    )
    assert ThreadSetting(8, "--segrobust-threads 8").describe().startswith("8 threads per process")


def test_environment_outside_git(tmp_path: Path) -> None:
    info = run_environment(tmp_path, torch.device("cpu"), started=0.0)
    assert info.git_commit is None and info.git_dirty is None
    assert "torch" in info.versions
    assert info.device is not None and info.device.startswith("cpu")
    assert info.started is not None and info.started.startswith("1970-01-01")
    assert "not a git checkout" in dict(tables.environment(info).rows)["git commit"]


@pytest.mark.parametrize(
    ("clean", "classes", "near"),
    [
        (28.0, 5, True),  # 1.4x the chance level of 20
        (31.0, 5, False),  # 1.55x
        (55.0, 2, True),  # two classes: capped at chance 50 + 10 points
        (61.0, 2, False),
    ],
)
def test_near_chance_follows_class_count(clean: float, classes: int, near: bool) -> None:
    records = cells("a", clean, {("gaussian_noise", "noise", 1): clean})
    for r in records:
        r.class_names = [f"c{k}" for k in range(classes)]
        r.clean_per_class = [clean] * classes
    info = tables.chance(records, (0.0, 100.0), higher_is_better=True)
    assert info is not None and info.near is near
    assert info.level == pytest.approx(100 / classes)


def test_chance_counts_only_scored_classes_and_follows_direction() -> None:
    records = cells("a", 30.0, {})
    records[0].class_names = ["background", "x", "y", "z"]
    records[0].clean_per_class = [None, 30.0, 30.0, 30.0]  # background is not scored (AP)
    assert tables.chance(records, (0.0, 100.0), True).classes == 3
    # An error rate on (best 0, worst 1) with 4 classes: chance sits at 0.75, near it below ~0.6.
    records[0].clean_per_class, records[0].clean_score = [], 0.7
    info = tables.chance(records, (0.0, 1.0), higher_is_better=False)
    assert info is not None and info.level == pytest.approx(0.75) and info.near


def test_headline_flags_a_near_chance_model() -> None:
    records = cells("good", 80.0, SCORES_A) + cells("chance", 28.0, {("gaussian_noise", "noise", 1): 29.0})
    for r in records:
        r.class_names, r.clean_per_class, r.per_class = ["a", "b", "c", "d", "e"], [1.0] * 5, [1.0] * 5
    suite = SimpleNamespace(
        task="semantic", metric="miou", metrics=("miou",), seed=0, shifts=None, path=Path("s.yaml"), degradation=None, gate=None,
        requirements=None, reads_text=False, reads_clips=False,
    )
    report = build_report(records, {"s": suite})  # type: ignore[dict-item]
    summaries = {model: entry.summary for model, entry in report.suites["s"].models.items()}
    assert summaries["chance"].near_chance and not summaries["good"].near_chance
    assert summaries["chance"].chance.near and not summaries["good"].chance.near
    headline = tables.headline(summaries, "mIoU")
    assert {row[0]: row[-1] for row in headline.rows} == {
        "good": "4.0× chance (20.0, K=5)",
        "chance": "⚠ near chance: 1.4× chance (20.0, K=5)",
    }
    assert "near chance" in headline.note
    # A suite the report does not know has no metric, so no chance level.
    assert build_report(records, {}).suites["s"].models["chance"].summary.chance is None


def test_a_zero_margin_never_shows_as_minus_zero_and_one_cell_is_singular() -> None:
    from pytest_segrobust.run.baseline_writes import replaced_sidecar

    check = {"metric": "rPC", "observed": 0.5, "baseline": 0.5, "low": 0.0, "high": 0.0, "margin": 0.0}
    aggregate = PairedCheck(**check, outcome="inconclusive", images=4)
    decision = ModelOutcome("s.yaml::a::aggregates", "s", "a", "inconclusive", checks=(aggregate,))
    release = ReleaseSummary(requirements=(), models=(decision,), basis="bootstrap")
    (row,) = tables.model_gates({"s": SuiteReport("s", release=release)}).rows
    assert row[6:8] == ("[0.0000, 0.0000]", "0.0000")
    record = cells("a", 80.0, SCORES_A)[1]
    record.checks = [check | {"metric": "gamma_r", "outcome": "inconclusive", "images": 4}]
    gate = GateSummary(margin_gamma_r=0.0, margin_score=0.0, confidence=0.95, multiplicity="bonferroni", numbers=1,
                       level=0.05, inconclusive="fail", resamples=100)
    (warning,) = tables.statistical_gate(gate, [record])[1]
    assert warning.endswith("gamma_r: inconclusive, interval [0.000, 0.000] straddles 0") and "-0" not in warning
    replaced = SimpleNamespace(unreadable="bad", cells={"m::clean", "m::fog::1"}, measured={"m::clean"}, shown="s.npz")
    lines = replaced_sidecar(replaced)  # type: ignore[arg-type]
    assert "with the statistics of the 1 cell this update measured" in lines[0]
    assert "s.npz: 1 cell not measured by this update has no statistics now" in lines[1]
