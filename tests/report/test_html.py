"""The HTML report: one self-contained page, sortable tables, embedded figures, escaped text."""

from __future__ import annotations

import base64
import dataclasses
import html
import importlib.util
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

from pytest_segrobust.core.files import WriteError
from pytest_segrobust.gate.verdict import Status
from pytest_segrobust.report import Report, build_report, render_markdown, suite_sections, write_report
from pytest_segrobust.report import html as html_report
from pytest_segrobust.report.html import render_html, write_html
from tests.plugin_project import CELLS, run, write_suite
from tests.report.test_report import SCORES_A, SCORES_B, cells

HOSTILE = "<script>alert('owned')</script>"
CHECK_SCRIPT = Path(__file__).parents[2] / "scripts" / "check_html_report.py"


@pytest.fixture
def report(tmp_path: Path) -> Report:
    """A two-model report whose figures are written in ``tmp_path``; one model has a hostile name."""
    pytest.importorskip("matplotlib")
    records = cells("a", 80.0, SCORES_A) + cells(HOSTILE, 75.0, SCORES_B)
    records[1] = dataclasses.replace(records[1], status=Status.REGRESSED)
    records[2] = dataclasses.replace(records[2], status=Status.IMPROVED)
    built = build_report(records, {}, missing=["s.yaml::<b>gone</b>"], errors={"s.yaml::x": "boom <img src=x>"})
    return write_report(built, tmp_path / "out", galleries={"s": Image.new("RGB", (30, 20), "orange")}).report


def embedded_images(page: str) -> list[Image.Image]:
    return [
        Image.open(io.BytesIO(base64.b64decode(data)))
        for data in re.findall(r'<img src="data:image/(?:png|jpeg);base64,([A-Za-z0-9+/=]+)"', page)
    ]


def markdown_tables(report: Report) -> int:
    """How many tables the markdown report has (one separator row each)."""
    return len(re.findall(r"^\|(?: *:?-+:? *\|)+$", render_markdown(report), re.MULTILINE))


def test_every_section_is_on_the_page_tables_sortable(report: Report, tmp_path: Path) -> None:
    page = render_html(report, tmp_path)
    sections = suite_sections(report.suites["s"])
    assert markdown_tables(report) >= sum(hasattr(section, "rows") for section in sections)
    assert page.count('<table class="sortable">') == markdown_tables(report) == page.count("<table")
    for section in sections:
        assert f">{html.escape(section.title)}</h3>" in page, section.title
    assert "<th scope=\"col\">noise<br>gaussian_noise</th>" in page  # the header's line break survives escaping
    assert 'aria-sort' in page and 'addEventListener("click", sort)' in page  # the inline sorter


def test_figures_are_embedded_not_linked(report: Report, tmp_path: Path) -> None:
    page = render_html(report, tmp_path)
    images = embedded_images(page)
    assert [image.size for image in images][-1] == (30, 20)  # the gallery, last
    assert len(images) == len(report.suites["s"].figures) == 3
    assert not re.search(r'src="(?!data:)', page)  # nothing fetched: no file, no CDN
    assert "http://" not in page and "https://" not in page


def test_a_missing_figure_is_named_not_fatal(report: Report, tmp_path: Path) -> None:
    (tmp_path / report.suites["s"].figures["heatmap"]).unlink()
    page = render_html(report, tmp_path)
    assert "s-heatmap.png</code> not readable" in page
    assert len(embedded_images(page)) == 2


def test_text_is_escaped(report: Report, tmp_path: Path) -> None:
    page = render_html(report, tmp_path)
    assert page.count("<script") == 1  # the sorter; the model name is text
    assert "&lt;script&gt;alert(&#x27;owned&#x27;)&lt;/script&gt;" in page
    assert "<b>gone</b>" not in page and "&lt;b&gt;gone&lt;/b&gt;" in page
    assert "<img src=x>" not in page and "boom &lt;img src=x&gt;" in page


def test_statuses_are_coloured(report: Report, tmp_path: Path) -> None:
    page = render_html(report, tmp_path)
    assert re.search(r'<tr class="row-regressed">.*?<td class="status-regressed">▼ REGRESSED</td>', page)
    assert re.search(r'<tr class="row-improved">.*?<td class="status-improved">▲ improved</td>', page)
    assert ".status-regressed, .status-error { color: var(--red)" in page


def test_the_verdict_is_the_most_visible_element_in_colour_icon_and_word(report: Report, tmp_path: Path) -> None:
    from pytest_segrobust.report.coverage import RunCoverage

    report = dataclasses.replace(report, run=RunCoverage(evaluated=10, errors=1, deselected=["s.yaml::a::fog[3]"]))  # partial
    page = render_html(report, tmp_path)
    line = report.verdict.line()  # FAIL: a cell regressed, one has no result
    banner = re.search(r'<p class="verdict verdict-fail">(.*?)</p>', page)
    assert banner is not None, "the verdict is a banner of its own"
    # Not colour alone: an icon (hidden from screen readers) and the word, then the counts.
    assert banner[1] == (
        '<span class="verdict-icon" aria-hidden="true">✗</span><strong class="verdict-word">FAIL</strong>'
        f'<span class="verdict-counts">{html.escape(line.removeprefix("FAIL · "))}</span>'
    )
    body = page[page.index("<body>") :]
    assert body.index("</h1>") < body.index('class="verdict ') < body.index('<nav class="contents top">')
    assert body.index('class="verdict ') < body.index("<blockquote>")  # above the partial-run box
    assert page.count(html.escape(line.removeprefix("FAIL · "))) == 1  # shown once, as the banner
    assert ".verdict-fail { color: var(--red); background: var(--red-bg); border-color: var(--red); }" in page
    assert "<title>FAIL · Segmentation robustness report</title>" in page
    passing = build_report(cells("a", 80.0, SCORES_A), {})
    page = render_html(passing, tmp_path)
    assert '<p class="verdict verdict-pass"><span class="verdict-icon" aria-hidden="true">✓</span>' in page
    assert '<strong class="verdict-word">PASS</strong>' in page and ".verdict-pass { color: var(--green)" in page


def test_the_page_follows_the_markdown(report: Report, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # What the markdown gains (a verdict at the top, a table, a figure) appears on the page
    # without the renderer knowing it; the suite's typed sections are still rendered as typed.
    original = html_report.render_markdown

    def with_verdict(report: Report) -> str:
        title, rest = original(report).split("\n", 1)
        verdict = [
            "## Verdict", "", "**2 cells regressed**, see `baselines/s.json`:", "",
            "| cell | Δ | status |", "|---|---:|---|",
            "| a::rotate::5 | -1.5 | ▼ REGRESSED |", "| b::<i>x</i> | +0.25 | ok |", "",
            "![gallery again](out-figures/s-gallery.png)", "", "_Gated on γr._", "",
            "> **Partial run**: 2 of 9", "> cells.", "",
        ]
        return "\n".join([title, *verdict, rest])

    monkeypatch.setattr(html_report, "render_markdown", with_verdict)
    page = render_html(report, tmp_path)
    verdict, suite = page.index('<h2 id="verdict">Verdict</h2>'), page.index("Suite <code>s</code>")
    assert verdict < suite
    assert page.index('<a href="#verdict">Verdict</a>') < verdict  # the contents at the top list it
    assert "<p><strong>2 cells regressed</strong>, see <code>baselines/s.json</code>:</p>" in page
    assert '<tr class="row-regressed"><td>a::rotate::5</td><td class="num">-1.5</td>' in page
    assert "<td>b::&lt;i&gt;x&lt;/i&gt;</td>" in page
    assert '<p class="note">Gated on γr.</p>' in page
    assert "<blockquote><p><strong>Partial run</strong>: 2 of 9 cells.</p></blockquote>" in page
    assert len(embedded_images(page)) == 4
    assert page.count('<table class="sortable">') == 1 + markdown_tables(report)


def test_errors_and_cells_without_result_are_listed(report: Report, tmp_path: Path) -> None:
    page = render_html(report, tmp_path)
    assert page.index("s.yaml::x</code>: boom &lt;img src=x&gt;") < page.index("Suite <code>s</code>")
    assert page.index("s.yaml::&lt;b&gt;gone&lt;/b&gt;") < page.index("Suite <code>s</code>")


def test_a_suite_the_markdown_does_not_head_is_still_shown(
    report: Report, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(html_report, "render_markdown", lambda report: "# Report\n\nnothing else")
    page = render_html(report, tmp_path)
    assert "<title>Report</title>" in page and "<p>nothing else</p>" in page
    assert 'Suite <code>s</code></h2>' in page and page.count('<table class="sortable">') > 1


def test_written_atomically_beside_the_markdown(report: Report, tmp_path: Path) -> None:
    path = write_html(report, tmp_path / "out")
    assert path == tmp_path / "out.html"
    assert path.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert not list(tmp_path.glob(".*.tmp"))


def test_unwritable_target_names_the_path(report: Report, tmp_path: Path) -> None:
    (tmp_path / "out.html").mkdir()
    with pytest.raises(WriteError, match=r"out\.html: it is a directory"):
        write_html(report, tmp_path / "out")


def test_flag_writes_the_html_report(project: pytest.Pytester) -> None:
    # Only the controller writes the page, from the merged report: no -n 2 variant needed.
    run(project, "--segrobust-update-baselines", figures=True).assert_outcomes(passed=CELLS)
    assert not (project.path / "segrobust-report.html").exists()  # only when asked
    write_suite(project, smoothing=1)  # far less robust to noise: some cells regress
    result = run(project, "--segrobust", "--segrobust-report-html", figures=True)
    written = [Path(line.removeprefix("wrote ")) for line in result.outlines if line.startswith("wrote ")]
    pages = [path for path in written if path.suffix == ".html"]
    assert len(pages) == 1 and pages[0].with_suffix(".md") in written, written  # beside the markdown
    page = pages[0].read_text(encoding="utf-8")
    assert "Suite <code>bands</code>" in page and '<table class="sortable">' in page
    assert '<td class="status-regressed">▼ REGRESSED</td>' in page
    figures = json.loads(pages[0].with_suffix(".json").read_text())["suites"]["bands"]["figures"]
    assert len(embedded_images(page)) == len(figures) >= 1


# -- in a real browser -------------------------------------------------------------------


def check_in_browser(page: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(CHECK_SCRIPT), str(page), *args], capture_output=True, text=True, env=env, timeout=300, check=False
    )


def browser() -> str | None:
    """The browser the check script would use (it is a script, not a module of the package)."""
    spec = importlib.util.spec_from_file_location("check_html_report", CHECK_SCRIPT)
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    return script.find_browser()


def test_page_renders_in_headless_chromium(report: Report, tmp_path: Path) -> None:
    if browser() is None:
        pytest.skip("no Chromium or Chrome on PATH (apt-get install chromium, or set SEGROBUST_BROWSER)")
    page = write_html(report, tmp_path / "out")
    shot = tmp_path / "shot.png"
    done = check_in_browser(page, "--screenshot", str(shot), "--window-size", "1000,1400", "--min-images", "3")
    assert done.returncode == 0, done.stdout + done.stderr
    summary = json.loads(done.stdout)
    rendered = summary["rendered"]
    assert rendered["tables"] == rendered["sortable_tables"] == markdown_tables(report)
    assert rendered["images"] == rendered["images_decoded"] == rendered["images_embedded"] == 3
    assert rendered["image_sizes"][-1] == [30, 20]
    assert rendered["sorting"]["ascending"] and rendered["sorting"]["descending"]
    assert rendered["errors"] == [] and rendered["external_resources"] == []
    with Image.open(shot) as image:
        assert image.size == (1000, 1400)
    assert summary["screenshot"]["inked_fraction"] > 0.01


def test_browser_check_skips_cleanly_without_a_browser(report: Report, tmp_path: Path) -> None:
    page = write_html(report, tmp_path / "out")
    env = {key: value for key, value in os.environ.items() if key != "SEGROBUST_BROWSER"}
    done = check_in_browser(page, env={**env, "PATH": str(tmp_path)})
    assert done.returncode == 77, done.stdout + done.stderr
    assert "skipped: no browser found" in done.stderr and "apt-get install chromium" in done.stderr
    assert not (tmp_path / "out-screenshot.png").exists()
