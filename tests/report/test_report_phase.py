"""The end of a run: where figures go, what the page embeds, and what a hang or Ctrl-C in the report costs."""

from __future__ import annotations

import base64
import io
import json
import os
import re
from pathlib import Path

import pytest
import torch
from PIL import Image

from pytest_segrobust.report import ImageDrop, WorstEntry, build_report, figures_folder, render_markdown, write_report
from pytest_segrobust.report.html import EMBEDDED_WIDTH, render_html
from tests.plugin_project import BLACKOUT_CONFTEST, CELLS, baseline, run
from tests.report.test_report import SCORES_A, cells

FIGURES = "segrobust-report-figures"
PARTIAL_FIGURES = "segrobust-report-partial-figures"


def pngs(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.glob("*.png"))


def figure_files(report_json: Path) -> list[str]:
    """The figures a written report links, as paths relative to its folder."""
    report = json.loads(report_json.read_text())
    return sorted(file for suite in report["suites"].values() for file in suite["figures"].values())


# -- one folder of figures per report ------------------------------------------------------------


def test_figures_go_into_one_folder_per_report_and_reruns_replace_them(project: pytest.Pytester) -> None:
    # Imported here, pyplot outlives each in-process run (pytester drops the modules a run imported,
    # and a second import of matplotlib in one process mixes the two copies' classes).
    pytest.importorskip("matplotlib.pyplot")
    # What earlier versions left in the project root, and a figure of a suite the project no longer has.
    (project.path / "segrobust-report-bands-heatmap.png").write_bytes(b"old")
    (project.path / FIGURES).mkdir()
    (project.path / FIGURES / "gone-heatmap.png").write_bytes(b"old")
    full = run(project, "--segrobust-update-baselines", figures=True)
    full.assert_outcomes(passed=CELLS)
    linked = figure_files(project.path / "segrobust-report.json")
    assert len(linked) >= 4 and all(file.startswith(f"{FIGURES}/") for file in linked)
    assert [f"{FIGURES}/{name}" for name in pngs(project.path / FIGURES)] == linked  # one file per figure
    assert pngs(project.path) == []
    # The terminal names the documents, and the figures in one line.
    assert not any(line.endswith(".png") for line in full.outlines)
    count = len(linked)
    assert f"wrote {count} figures to {project.path / FIGURES}{os.sep}" in full.outlines
    for _ in range(2):  # partial runs: their own folder, replaced by the next
        partial = run(project, "--segrobust", "-k", "gaussian_noise", figures=True)
        partial.assert_outcomes(passed=2)
        partial_linked = figure_files(project.path / "segrobust-report-partial.json")
        assert [f"{PARTIAL_FIGURES}/{name}" for name in pngs(project.path / PARTIAL_FIGURES)] == partial_linked
        assert pngs(project.path) == [] and len(pngs(project.path / FIGURES)) == count
    markdown = (project.path / "segrobust-report-partial.md").read_text()
    assert f"]({PARTIAL_FIGURES}/bands-heatmap.png)" in markdown


def test_a_figure_is_dropped_from_its_folder_when_the_report_no_longer_has_it(tmp_path: Path) -> None:
    report = build_report(cells("a", 80.0, SCORES_A), {})
    write_report(report, tmp_path / "out", galleries={"s": Image.new("RGB", (8, 8))})
    assert "s-gallery.png" in pngs(figures_folder(tmp_path / "out"))
    report = build_report(cells("a", 80.0, SCORES_A), {})
    report = write_report(report, tmp_path / "out").report  # no gallery this time
    assert "s-gallery.png" not in pngs(tmp_path / "out-figures")
    assert "gallery" not in report.suites["s"].figures


# -- what goes wrong in the report is a warning of the report -----------------------------------


class BrokenPicture:
    """A picture whose file cannot be written."""

    def save(self, path: Path, format: str) -> None:
        raise RuntimeError("no room for this picture")


def test_a_figure_that_cannot_be_drawn_is_a_warning_in_the_report(tmp_path: Path) -> None:
    report = build_report(cells("a", 80.0, SCORES_A), {})
    done = write_report(report, tmp_path / "out", galleries={"s": BrokenPicture()})  # type: ignore[dict-item]
    report, written = done.report, done.files
    assert tmp_path / "out.md" in written  # no ReportIncomplete: the documents are whole
    assert list(report.warnings) == ["figure gallery of suite s not drawn: RuntimeError: no room for this picture"]
    markdown = (tmp_path / "out.md").read_text()
    assert markdown.rstrip().endswith("- figure gallery of suite s not drawn: RuntimeError: no room for this picture")
    assert "## Left out of this report" in markdown
    assert json.loads((tmp_path / "out.json").read_text())["warnings"] == list(report.warnings)


BROKEN_PLOT_CONFTEST = """
from pytest_segrobust.report import plots

_original = plots.heatmap


def _broken(*args, **kwargs):
    raise RuntimeError("the plot broke")


def pytest_configure(config):
    plots.heatmap = _broken


def pytest_unconfigure(config):
    plots.heatmap = _original
"""


def test_a_plot_that_fails_does_not_fail_the_run(project: pytest.Pytester) -> None:
    pytest.importorskip("matplotlib.pyplot")
    project.makeconftest(BROKEN_PLOT_CONFTEST)
    result = run(project, "--segrobust-update-baselines", figures=True)
    result.assert_outcomes(passed=CELLS)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["warning: figure heatmap of suite bands not drawn: RuntimeError: the plot broke"])
    assert not any(line.startswith("error:") for line in result.outlines)
    report = json.loads((project.path / "segrobust-report.json").read_text())
    assert "heatmap" not in report["suites"]["bands"]["figures"] and "severity" in report["suites"]["bands"]["figures"]


# Models that misbehave only when the report runs them again (one image at a time) or once interrupted.
PICKY_MODELS = """
import time

import torch

from segrobust_fakes import RedBinner


class SlowAlone(RedBinner):
    '''Answers batches at once, but hangs on the first single image (the report's worst images).'''

    slept = False

    def forward(self, images):
        if images.shape[0] == 1 and not self.slept:
            self.slept = True
            time.sleep(20)
        return super().forward(images)


def slow_alone():
    return SlowAlone(smoothing=5)


class InterruptOnBlack(RedBinner):
    '''Raises KeyboardInterrupt (Ctrl-C) on an all-black batch, and on every call after it.'''

    interrupted = False

    def forward(self, images):
        if self.interrupted or not bool(images.any()):
            self.interrupted = True
            raise KeyboardInterrupt
        return super().forward(images)


def interrupt_on_black():
    return InterruptOnBlack(smoothing=5)
"""


def one_model_suite(project: pytest.Pytester, factory: str, corruptions: str, extra: str = "") -> None:
    project.makepyfile(picky_models=PICKY_MODELS)
    (project.path / "suites" / "bands.yaml").write_text(
        "name: bands\ndataset: {factory: segrobust_fakes:band_scenes}\n"
        f"models: [{{name: binner, factory: 'picky_models:{factory}'}}]\n"
        f"corruptions: {corruptions}\nseverities: [1, 5]\nbatch_size: 4\n{extra}"
    )


def test_a_model_that_hangs_in_the_report_costs_its_pictures_not_the_run(project: pytest.Pytester) -> None:
    one_model_suite(project, "slow_alone", "[gaussian_noise]", extra="timeout: 3\n")
    result = run(project, "--segrobust-update-baselines", figures=True)
    result.assert_outcomes(passed=3)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["warning: no worst images for bands binner: *stopped after the time limit of 3 s*"])
    report = json.loads((project.path / "segrobust-report.json").read_text())
    assert any("time limit of 3 s" in warning for warning in report["warnings"])
    assert "binner" not in report["suites"]["bands"]["worst_images"]
    assert set(baseline(project)["models"]["binner"]) == {"clean", "gaussian_noise"}


def test_an_interrupted_update_keeps_the_cells_it_finished(project: pytest.Pytester) -> None:
    project.makeconftest(BLACKOUT_CONFTEST)
    one_model_suite(project, "interrupt_on_black", "[rotate, blackout]")
    # A subprocess: before the baselines came first, the second Ctrl-C escaped pytest itself.
    result = project.runpytest_subprocess("-p", "no:cacheprovider", "--segrobust-update-baselines")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    stored = baseline(project)["models"]["binner"]
    assert set(stored) == {"clean", "rotate", "blackout"}
    assert set(stored["rotate"]) == {"1", "5"} and set(stored["blackout"]) == {"1"}  # blackout[5] was interrupted
    partial = project.path / "segrobust-report-partial.md"
    assert "pictures left out: the run was interrupted" in partial.read_text()


# -- the HTML page's budget for images ------------------------------------------------------------


def noise_picture(width: int, height: int, seed: int) -> Image.Image:
    """A picture PNG cannot compress (a photograph's worst case)."""
    generator = torch.Generator().manual_seed(seed)
    pixels = torch.randint(0, 256, (height, width, 3), generator=generator, dtype=torch.uint8)
    return Image.fromarray(pixels.numpy())


def test_the_page_embeds_figures_within_its_budget_and_links_the_rest(tmp_path: Path) -> None:
    models = "abcd"
    report = build_report([r for model in models for r in cells(model, 80.0, SCORES_A)], {})
    report = report.with_suite("s", worst_images={
        model: WorstEntry("gaussian_noise", 5, 0.5, 16, (ImageDrop("img/3", 81.0, 12.5, 68.5),), figure=f"worst-{model}")
        for model in models
    })
    pictures = {f"worst-{model}": noise_picture(1800, 900, seed) for seed, model in enumerate(models)}
    report = write_report(report, tmp_path / "out", pictures={"s": pictures}).report
    figures = report.suites["s"].figures
    assert sum((tmp_path / file).stat().st_size for file in figures.values()) > 15e6  # as written: ~5 MB each
    budget = 2_000_000
    page = render_html(report, tmp_path, budget=budget)
    embedded = re.findall(r'<img src="data:image/(?:png|jpeg);base64,([A-Za-z0-9+/=]+)"', page)
    assert sum(len(data) for data in embedded) <= budget and len(page) < budget + 200_000
    for data in embedded:
        assert Image.open(io.BytesIO(base64.b64decode(data))).width <= EMBEDDED_WIDTH
    links = re.findall(r'<figure class="linked"><a href="([^"]+)"', page)
    assert links and all((tmp_path / link).is_file() for link in links)
    assert len(embedded) + len(links) == len(figures)
    note = re.search(r'<p class="note">(\d+) of (\d+) figures are linked[^<]*(.*?)</p>', page)
    assert note is not None and int(note[1]) == len(links) and int(note[2]) == len(figures)
    assert all(f"<code>{link}</code>" in note[3] for link in links)


def test_a_page_within_budget_embeds_everything(tmp_path: Path) -> None:
    report = build_report(cells("a", 80.0, SCORES_A), {})
    report = write_report(report, tmp_path / "out", galleries={"s": Image.new("RGB", (30, 20), "orange")}).report
    page = render_html(report, tmp_path)
    assert "figures are linked" not in page and 'class="linked"' not in page
    assert "## Left out" not in render_markdown(report)
