"""A real run's report: verdict first, provenance, frame kept, worst images (through pytester)."""

from __future__ import annotations

import json

import pytest
from PIL import Image

from tests.plugin_project import CELLS, SINGLE_PROCESS, run


# Under xdist the controller measures the worst images again: tests/test_plugin.py's
# test_the_xdist_controller_records_compares_and_caches draws them with two workers.
@SINGLE_PROCESS
def test_report_of_a_run_says_verdict_provenance_and_shows_worst_images(
    project: pytest.Pytester, dist: list[str]
) -> None:
    run(project, "--segrobust-update-baselines", *dist, figures=True).assert_outcomes(passed=CELLS)
    markdown = (project.path / "segrobust-report.md").read_text()
    assert markdown.splitlines()[2] == f"**PASS · {CELLS} cells: {CELLS} written to the baseline**"
    report = json.loads((project.path / "segrobust-report.json").read_text())
    assert report["verdict"]["passed"]
    assert report["environment"]["wall_seconds"] > 0 and "torch" in report["environment"]["versions"]
    suite = report["suites"]["bands"]
    cells = suite["models"]["binner"]["cells"]
    assert {c["model_fingerprint"] for c in cells} != {None} and len({c["model_fingerprint"] for c in cells}) == 1
    assert {c["dataset_fingerprint"] for c in cells} == {"bands-8-32x32-0"}
    assert "| bands | binner | cpu | 0 | 8 | `bands-8-32x32-0` |" in markdown
    # rotate is geometric: the share of the 32 x 32 frame it keeps, per severity.
    assert list(suite["frame_kept"]["corruptions"]) == ["rotate"] and suite["frame_kept"]["size"] == [32, 32]
    # The worst cell is strong noise; its images that fell most are drawn next to the report.
    worst = suite["worst_images"]["binner"]
    assert (worst["corruption"], worst["severity"], worst["considered"]) == ("gaussian_noise", 5, 8)
    assert len(worst["images"]) == 3 and worst["images"][0]["drop"] >= worst["images"][-1]["drop"]
    picture = project.path / suite["figures"][worst["figure"]]
    assert picture == project.path / "segrobust-report-figures" / "bands-worst-binner.png"
    assert Image.open(picture).size[0] > 5 * 128  # the 32 x 32 images enlarged to tiles of 128
    assert "![binner: images that lost most under gaussian_noise s5](segrobust-report-figures/bands-worst-binner.png)" in markdown


def test_the_wall_time_covers_the_whole_run_worst_images_and_figures_included(project: pytest.Pytester) -> None:
    import datetime

    from tests.test_shards import SLOW_MODULE

    # A model that takes 0.15 s a batch: re-evaluating its worst images after the cells takes over a second.
    project.makepyfile(slow_fakes=SLOW_MODULE)
    suite = project.path / "suites" / "bands.yaml"
    slow = suite.read_text().replace("segrobust_fakes:red_binner", "slow_fakes:slow_binner")
    suite.write_text(slow.replace(", kwargs: {smoothing: 5}", ""))
    run(project, "--segrobust-update-baselines", figures=True).assert_outcomes(passed=CELLS)
    report = json.loads((project.path / "segrobust-report.json").read_text())
    started = datetime.datetime.fromisoformat(report["environment"]["started"]).timestamp()  # whole seconds
    ended = started + report["environment"]["wall_seconds"]
    figures = [project.path / name for name in report["suites"]["bands"]["figures"].values()]
    assert len(figures) == 4 and "worst-binner" in report["suites"]["bands"]["worst_images"]["binner"]["figure"]
    # Measured after the last figure was written (less the second "started" drops), before the markdown.
    assert ended >= max(path.stat().st_mtime for path in figures) - 1.0
    assert ended <= (project.path / "segrobust-report.md").stat().st_mtime + 0.05
    assert "_Wall time: from the start of the run" in (project.path / "segrobust-report.md").read_text()


def test_figures_none_writes_the_tables_and_says_how_to_get_the_figures(project: pytest.Pytester) -> None:
    run(project, "--segrobust-update-baselines", figures=True).assert_outcomes(passed=CELLS)
    assert (project.path / "segrobust-report-figures").is_dir()  # an earlier report's, removed below
    result = run(project, "--segrobust", "--segrobust-figures=none", "--segrobust-report-html")
    result.assert_outcomes(passed=CELLS)
    assert not (project.path / "segrobust-report-figures").exists()
    assert not list(project.path.rglob("*.png"))
    report = json.loads((project.path / "segrobust-report.json").read_text())
    suite = report["suites"]["bands"]
    # Nothing drawn, and no picture measured: no figure, gallery or worst images, and no warning for them.
    assert suite["figures"] == {} and "worst_images" not in suite and "warnings" not in report
    assert "--segrobust-figures=none" in report["figures_left_out"]
    markdown = (project.path / "segrobust-report.md").read_text()
    assert "Figures left out (`--segrobust-figures=none`)" in markdown and "--segrobust-figures=all" in markdown
    assert "### γr per corruption (mean over severities)" in markdown and "![" not in markdown  # the tables stay
    assert "Figures left out" in (project.path / "segrobust-report.html").read_text()


def test_figures_option_takes_all_or_none(project: pytest.Pytester) -> None:
    result = run(project, "--segrobust", "--segrobust-figures=some")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--segrobust-figures: invalid choice: 'some'*"])
