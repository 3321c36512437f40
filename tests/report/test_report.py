"""The report: every table and figure the papers show, from records alone."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from PIL import Image

from pytest_segrobust.metrics.robustness import relative_robustness
from pytest_segrobust.report import (
    CorruptionErrorReference,
    Report,
    ShiftSplits,
    build_report,
    plots,
    render_markdown,
    write_report,
)
from pytest_segrobust.report.model import RunEnvironment
from pytest_segrobust.store.records import CellRecord


def cells(model: str, clean: float, scores: dict[tuple[str, str, int], float]) -> list[CellRecord]:
    def record(corruption: str, category: str, severity: int, score: float) -> CellRecord:
        gamma_r = None if severity == 0 else relative_robustness(clean, score)
        gamma_a = None if severity == 0 else 1 - (clean - score) / 100
        return CellRecord(
            nodeid=f"s.yaml::{model}::{corruption}::{severity}", suite="s", model=model, corruption=corruption,
            category=category, severity=severity, score=score, clean_score=clean, gamma_r=gamma_r, gamma_a=gamma_a,
            per_class=[], class_names=[], num_images=4, seconds=0.1, status="passed",
        )

    return [record("clean", "clean", 0, clean)] + [record(c, cat, s, v) for (c, cat, s), v in scores.items()]


SCORES_A = {("gaussian_noise", "noise", 1): 70.0, ("gaussian_noise", "noise", 5): 40.0, ("rotate", "camera", 1): 75.0, ("rotate", "camera", 5): 72.0}
SCORES_B = {("gaussian_noise", "noise", 1): 60.0, ("gaussian_noise", "noise", 5): 20.0, ("rotate", "camera", 1): 70.0, ("rotate", "camera", 5): 65.0}


@pytest.fixture
def report() -> Report:
    records = cells("a", 80.0, SCORES_A) + cells("b", 75.0, SCORES_B)
    built = build_report(records, {})
    return built.with_suite("s", cd=CorruptionErrorReference("a", (1,)))


def test_headline_numbers(report: Report) -> None:
    summary = report.suites["s"].models["a"].summary
    assert summary.clean_score == 80.0
    assert summary.mpc == pytest.approx((70 + 40 + 75 + 72) / 4)
    assert summary.rpc == pytest.approx(summary.mpc / 80)
    assert summary.mean_gamma_r == pytest.approx(sum(relative_robustness(80, v) for v in SCORES_A.values()) / 4)


def test_markdown_has_every_table(report: Report) -> None:
    markdown = render_markdown(report)
    for title in (
        "### Headline",
        "### γr per corruption (mean over severities)",
        "### score per corruption (mean over severities)",
        "### score against severity",
        "### a: γr per corruption and severity",
        "### Corruption degradation against a",
        "### Baseline comparison",
    ):
        assert title in markdown, title
    assert "| model | noise<br>gaussian_noise | camera<br>rotate | mean |" in markdown
    # CD of b on noise, severity 1 only: (1 - 0.60) / (1 - 0.70)
    assert f"| b | {100 * 0.4 / 0.3:.1f} |" in markdown


def test_figures_are_written_and_linked(report: Report, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    gallery = Image.new("RGB", (10, 10))
    written = write_report(report, tmp_path / "out", galleries={"s": gallery}).files
    names = sorted(p.relative_to(tmp_path).as_posix() for p in written)
    figures = ["out-figures/s-gallery.png", "out-figures/s-heatmap.png", "out-figures/s-severity.png"]
    assert names == [*figures, "out.json", "out.md"]
    markdown = (tmp_path / "out.md").read_text()
    assert "![γr heatmap](out-figures/s-heatmap.png)" in markdown and "(out-figures/s-gallery.png)" in markdown
    assert Image.open(tmp_path / "out-figures" / "s-heatmap.png").size[0] > 100
    assert json.loads((tmp_path / "out.json").read_text())["suites"]["s"]["figures"]["severity"] == "out-figures/s-severity.png"


def test_figures_go_into_a_folder_made_for_them(report: Report, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    written = write_report(report, tmp_path / "new" / "deeper" / "out").files
    assert sorted(p.relative_to(tmp_path / "new" / "deeper").as_posix() for p in written) == [
        "out-figures/s-heatmap.png", "out-figures/s-severity.png", "out.json", "out.md"
    ]


def test_without_matplotlib_the_tables_stay(report: Report, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(plots, "_matplotlib", lambda: None)
    written = write_report(report, tmp_path / "out").files
    assert sorted(p.name for p in written) == ["out.json", "out.md"]
    assert "### Headline" in (tmp_path / "out.md").read_text()


def test_json_is_strict_json(report: Report, tmp_path: Path) -> None:
    report.suites["s"].models["a"].cells[0].score = float("nan")
    write_report(report, tmp_path / "out")
    json.loads((tmp_path / "out.json").read_text(), parse_constant=lambda c: pytest.fail(f"non-standard {c}"))


def instance_cells() -> dict[str, list[CellRecord]]:
    """Two corrupted cells of one model with per-class AP: classes x, y (animal) and z (vehicle)."""
    names = ["background", "x", "y", "z"]
    groups = [None, "animal", "animal", "vehicle"]
    clean = [None, 80.0, 40.0, 50.0]

    def record(corruption: str, category: str, per_class: list[float | None], score: float) -> CellRecord:
        return CellRecord(
            nodeid=f"s.yaml::m::{corruption}::1", suite="s", model="m", corruption=corruption, category=category,
            severity=1, score=score, clean_score=60.0, gamma_r=relative_robustness(60.0, score),
            gamma_a=1 - (60.0 - score) / 100, per_class=per_class, class_names=names, num_images=4, seconds=0.1,
            status="passed", clean_per_class=clean, supercategories=groups,
            details={"ap50": 70.0, "bbox_ap": 30.0}, clean_details={"ap50": 90.0, "bbox_ap": 50.0},
        )

    clean_record = record("clean", "clean", clean, 60.0)
    clean_record.severity, clean_record.gamma_r, clean_record.gamma_a = 0, None, None
    return {
        "m": [
            clean_record,
            record("gaussian_noise", "noise", [None, 40.0, 40.0, 25.0], 35.0),  # x .5, y 1, z .5
            record("rotate", "camera", [None, 60.0, 20.0, None], 40.0),  # x .75, y .5, z undefined
        ]
    }


def test_per_class_and_supercategory_gamma_r() -> None:
    from pytest_segrobust.report import tables

    models = instance_cells()
    cells = tables.corrupted(models["m"])
    assert tables.class_gamma_r(cells) == pytest.approx({"x": 0.625, "y": 0.75, "z": 0.5})
    # per cell: noise animal (0.5 + 1) / 2 = 0.75, vehicle 0.5; rotate animal (0.75 + 0.5) / 2 = 0.625
    assert tables.supercategory_gamma_r(cells) == pytest.approx({"animal": 0.6875, "vehicle": 0.5})
    table = tables.supercategory_by_category(models)
    assert table.header == ("model", "supercategory", "noise", "camera", "all")
    assert table.rows == (("m", "animal", "0.750", "0.625", "0.688"), ("m", "vehicle", "0.500", "–", "0.500"))
    per_class = tables.per_class(models, "mask AP")
    assert per_class.rows[0] == ("x", "animal", "80.00", "0.625")  # background has no AP: left out
    assert len(per_class.rows) == 3


def test_metric_details_table_shows_clean_and_mean_companions() -> None:
    from pytest_segrobust.report import detail_labels, tables

    table = tables.metric_details(instance_cells(), "mask AP", detail_labels("map"))
    assert table.header == ("model", "corruption", "mask AP", "AP50", "box AP")
    assert table.rows[0] == ("m", "clean", "60.00", "90.00", "50.00")
    assert table.rows[1] == ("m", "gaussian_noise", "35.00", "70.00", "30.00")


def test_a_new_table_is_a_renderer_registered_in_its_place(report: Report, tmp_path: Path) -> None:
    from pytest_segrobust.core.errors import UnknownNameError
    from pytest_segrobust.report import SUITE_SECTIONS, SuiteReport
    from pytest_segrobust.report.html import render_html
    from pytest_segrobust.report.tables import Table

    def cells_per_model(suite: SuiteReport) -> list[Table]:
        rows = tuple((row, str(len(model.cells))) for row, model in suite.models.items())
        return [Table("Cells per model", ("model", "cells"), rows)]

    before = SUITE_SECTIONS.names()
    SUITE_SECTIONS.register("cells per model", before="baseline comparison")(cells_per_model)
    try:
        markdown = render_markdown(report)
        page = render_html(report, tmp_path)
    finally:
        SUITE_SECTIONS.unregister("cells per model")
    assert "| a | 5 |" in markdown and "| b | 5 |" in markdown
    assert markdown.index("### Corruption degradation against a") < markdown.index("### Cells per model")
    assert markdown.index("### Cells per model") < markdown.index("### Baseline comparison")
    assert "<td>a</td><td class=\"num\">5</td>" in page  # the page shows it as a table of its own
    assert SUITE_SECTIONS.names() == before and "### Cells per model" not in render_markdown(report)
    with pytest.raises(UnknownNameError, match="unknown suite section 'nothing'"):
        SUITE_SECTIONS.register("late", before="nothing")


def test_the_report_is_built_once_from_the_records_it_is_given() -> None:
    records = cells("a", 80.0, SCORES_A)
    report = build_report(records, {})
    before = report.to_json()
    records[1].score = 0.0  # the caller's records change: the report does not
    assert report.to_json() == before and report.suites["s"].models["a"].cells[1].score == SCORES_A[("gaussian_noise", "noise", 1)]
    with pytest.raises(dataclasses.FrozenInstanceError):
        report.suites["s"].figures = {}  # type: ignore[misc]


def test_the_typed_leaves_write_the_json_the_report_always_had(report: Report) -> None:
    # A reader of the JSON report (a dashboard, a later run) sees the same keys in the same order
    # as when these leaves were plain mappings.
    environment = RunEnvironment(git_commit="abc", git_dirty=False, device="cpu", versions={"torch": "2"})
    report = dataclasses.replace(report, environment=environment).with_suite("s", shifts=ShiftSplits("day", ("day", "night")))
    data = json.loads(json.dumps(report.to_json()))
    suite = data["suites"]["s"]
    assert suite["cd"] == {"reference": "a", "noise_severities": [1]}
    assert suite["shifts"] == {"reference": "day", "splits": ["day", "night"]}
    assert list(data["environment"]) == [
        "git_commit", "git_dirty", "started", "wall_seconds", "device", "platform", "versions", "malloc", "threads"
    ]
    assert data["environment"]["versions"] == {"torch": "2"}
    assert suite["models"]["a"]["summary"]["chance"] is None  # the records name no classes
