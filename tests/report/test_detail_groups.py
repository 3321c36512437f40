"""A metric's detail groups get a table per detail, and no section shows a table the records give nothing to."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_segrobust.metrics.robustness import relative_robustness
from pytest_segrobust.report import (
    SUITE_SECTIONS,
    Report,
    SuiteReport,
    WorstEntry,
    build_report,
    render_markdown,
    write_report,
)
from pytest_segrobust.report.tables import Table
from pytest_segrobust.store.records import CellRecord

CLEAN = {"points": 30.0, "box": 60.0, "small": 50.0, "medium": 40.0, "large": None}
# Per corrupted cell: its score and its details (no large instance in the data: no value anywhere).
CORRUPTED = {
    ("rotate", "camera", 3): (40.0, {"points": 25.0, "box": 55.0, "small": 44.0, "medium": 36.0, "large": None}),
    # Its medium instances all rotated out of the frame: that detail undefined here alone.
    ("rotate", "camera", 5): (35.0, {"points": 20.0, "box": 50.0, "small": 38.0, "medium": None, "large": None}),
    ("box_jitter", "prompt", 5): (38.0, {"points": 30.0, "box": 46.0, "small": 41.0, "medium": 35.0, "large": None}),
}


def promptable_cells() -> list[CellRecord]:
    """A promptable suite's cells as a run records them: the dataset's classes and supercategories with
    no value per class, and the metric's details per prompt kind and per instance size."""
    names, groups = ["background", "striped", "smooth"], [None, "pattern", "plain"]

    def record(corruption: str, category: str, severity: int, score: float, details: dict[str, float | None]) -> CellRecord:
        return CellRecord(
            nodeid=f"p.yaml::m::{corruption}[{severity}]", suite="p", model="m", corruption=corruption,
            category=category, severity=severity, score=score, clean_score=45.0,
            gamma_r=relative_robustness(45.0, score) if severity else None,
            gamma_a=1 - (45.0 - score) / 100 if severity else None, per_class=[None] * 3, class_names=names,
            num_images=16, seconds=0.1, status="passed", clean_per_class=[None] * 3, supercategories=groups,
            details=details, clean_details=CLEAN,
        )  # fmt: skip

    return [record("clean", "clean", 0, 45.0, CLEAN)] + [record(*cell, *numbers) for cell, numbers in CORRUPTED.items()]


@pytest.fixture(scope="module")
def report() -> Report:
    no_pictures = WorstEntry("rotate", 5, 35.0 / 45.0, 16, note="no pictures: Tensor has no class view to draw")
    return build_report(promptable_cells(), {}).with_suite(
        "p", task="promptable", metric="promptable_miou", metrics=("promptable_miou",), worst_images={"m": no_pictures}
    )


def tables_of(markdown: str) -> dict[str, list[str]]:
    """Each markdown table's lines (header, rule, rows) by the heading above it."""
    found: dict[str, list[str]] = {}
    heading = ""
    for line in markdown.splitlines():
        if line.startswith("#"):
            heading = line.lstrip("# ")
        elif line.startswith("|"):
            found.setdefault(heading, []).append(line)
    return found


def test_a_table_per_prompt_kind_and_per_instance_size_that_the_records_hold(report: Report) -> None:
    shown = tables_of(render_markdown(report))
    titles = [f"mIoU (prompted) {end}" for end in ("with points prompts", "with box prompts", "of small instances")]
    assert all(title in shown for title in [*titles, "mIoU (prompted) of medium instances"])
    assert "mIoU (prompted) of large instances" not in shown  # no value anywhere: no table
    assert shown["mIoU (prompted) of small instances"][2:] == [
        "| m | clean | 50.00 |  |  |",
        "| m | rotate |  | 44.00 | 38.00 |",
        "| m | box_jitter |  | – | 41.00 |",
    ]
    assert shown["mIoU (prompted) of medium instances"][0] == "| model | corruption | clean | s3 | s5 |"
    # The companions' table has a column per detail the records hold, and none for large instances.
    assert "mIoU large" not in shown["mIoU (prompted) and its companions (mean over severities)"][0]


def test_the_size_tables_show_the_numbers_the_json_report_carries(report: Report, tmp_path: Path) -> None:
    write_report(report, tmp_path / "out", figures=False)
    cells = json.loads((tmp_path / "out.json").read_text())["suites"]["p"]["models"]["m"]["cells"]
    assert cells[0]["clean_details"] == CLEAN and [cell["details"] for cell in cells[1:]] == [d for _, d in CORRUPTED.values()]
    shown = tables_of((tmp_path / "out.md").read_text())
    for size in ("small", "medium"):
        rows = [row.strip("| ").split(" | ") for row in shown[f"mIoU (prompted) of {size} instances"][2:]]
        assert float(rows[0][2]) == cells[0]["clean_details"][size]
        by_cell = {(row[1], severity): value for row in rows[1:] for severity, value in zip((3, 5), row[3:])}
        for cell in cells[1:]:
            value = cell["details"][size]
            assert by_cell[cell["corruption"], cell["severity"]] == ("–" if value is None else f"{value:.2f}")
    companions = tables_of((tmp_path / "out.md").read_text())["mIoU (prompted) and its companions (mean over severities)"]
    assert companions[3].startswith("| m | rotate | 37.50 | 22.50 | 52.50 | 41.00 | – |")  # medium: s5 undefined


def test_no_section_shows_a_table_the_records_give_nothing_to(report: Report) -> None:
    markdown = render_markdown(report)
    for title, lines in tables_of(markdown).items():
        assert len(lines) > 2, f"{title}: a header without a row"
    # Classes and supercategories without a value per class, worst cells without an image: none shown.
    assert "Per class" not in markdown and "per supercategory" not in markdown
    assert "Images whose" not in markdown


def test_a_registered_renderer_s_table_without_rows_is_left_out(report: Report) -> None:
    def nothing_yet(suite: SuiteReport) -> list[Table]:
        return [Table("Nothing yet", ("model", "value"), ())]

    SUITE_SECTIONS.register("nothing yet")(nothing_yet)
    try:
        markdown = render_markdown(report)
    finally:
        SUITE_SECTIONS.unregister("nothing yet")
    assert "Nothing yet" not in markdown and "### Baseline comparison" in markdown
