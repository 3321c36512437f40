"""Cells are ordinary tests to pytest: every printed node id reruns, and ``--lf``, ``--ff``,
``--sw``, ``-k`` and ``--deselect`` behave as for any test. A run that covers part of the
suites writes a partial report beside the full one; a run that evaluates nothing writes nothing."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_segrobust.core.files import atomic_write_text
from pytest_segrobust.plugin import _InterruptWatch, _why_stopped, written_lines
from pytest_segrobust.report.coverage import RunCoverage, headline, markdown_lines, partial_report_path, terminal_lines
from tests.plugin_project import CELLS, run

ROTATE = ["suites/bands.yaml::binner::rotate[1]", "suites/bands.yaml::binner::rotate[5]"]
ALL = [
    "suites/bands.yaml::binner::clean",
    "suites/bands.yaml::binner::gaussian_noise[1]",
    "suites/bands.yaml::binner::gaussian_noise[5]",
    *ROTATE,
]
XDIST = {"no-xdist": [], "n2": ["-n", "2"]}  # -n 0 is the same process as no xdist


@pytest.fixture(params=list(XDIST), ids=list(XDIST))
def xdist(request: pytest.FixtureRequest) -> list[str]:
    return XDIST[request.param]


def cached(project: pytest.Pytester, *args: str) -> pytest.RunResult:
    """A run with pytest's cache, where --lf, --ff and --sw keep their state."""
    return project.runpytest("--segrobust", *args)


def last_failed(project: pytest.Pytester) -> set[str]:
    path = project.path / ".pytest_cache" / "v" / "cache" / "lastfailed"
    return set(json.loads(path.read_text())) if path.exists() else set()


def collected(result: pytest.RunResult) -> list[str]:
    return [line for line in result.outlines if line.startswith("suites/")]


def read_report(project: pytest.Pytester, name: str = "segrobust-report") -> dict:
    return json.loads((project.path / f"{name}.json").read_text())


def fail_the_rotate_cells(project: pytest.Pytester) -> None:
    """Baselines for every cell but rotate's, then a run where the two rotate cells fail (and get theirs).

    In one process: what xdist's controller records of failed cells for --lf is
    test_xdist_scheduling's test_k_lf_and_x_select_and_stop_as_under_load."""
    run(project, "--segrobust-update-baselines", "-k", "not rotate").assert_outcomes(passed=CELLS - 2, deselected=2)
    cached(project).assert_outcomes(passed=CELLS - 2, failed=2)
    assert last_failed(project) == set(ROTATE)


# -- node ids -----------------------------------------------------------------------------


def test_every_printed_node_id_collects_itself(project: pytest.Pytester) -> None:
    shift = (project.path / "suites" / "bands.yaml").read_text().replace("name: bands", "name: shift")
    shift = shift.replace(
        "batch_size: 3",
        "shifts:\n  reference: near\n  splits:\n"
        "    near: {factory: segrobust_fakes:band_scenes}\n    far: {factory: segrobust_fakes:band_scenes, kwargs: {seed: 7}}\n",
    )
    (project.path / "suites" / "shift.yaml").write_text(shift)
    printed = collected(run(project, "--segrobust", "--co", "-q"))
    assert printed[:CELLS] == ALL
    assert printed[CELLS:][:2] == ["suites/shift.yaml::binner::near::clean", "suites/shift.yaml::binner::near::gaussian_noise[1]"]
    assert len(printed) == CELLS + 2 * CELLS
    # Pasted back, each id collects exactly itself: no "not found", no neighbours.
    assert collected(run(project, "--segrobust", "--co", "-q", *printed)) == printed
    # An id without its severity is every severity, a model's id is its cells, a split's its split's.
    assert collected(run(project, "--segrobust", "--co", "-q", "suites/bands.yaml::binner::rotate")) == ROTATE
    assert collected(run(project, "--segrobust", "--co", "-q", "suites/bands.yaml::binner")) == ALL
    far = collected(run(project, "--segrobust", "--co", "-q", "suites/shift.yaml::binner::far"))
    assert far == [p for p in printed if "::far::" in p] and len(far) == CELLS


def test_the_id_of_a_failed_cell_from_the_summary_reruns_it(project: pytest.Pytester) -> None:
    result = run(project, "--segrobust", "-k", "rotate and 5")  # no baseline yet: fails, and records it
    result.assert_outcomes(failed=1, deselected=CELLS - 1)
    (line,) = [line for line in result.outlines if line.startswith("FAILED ")]
    nodeid = re.match(r"FAILED (\S+)", line)[1]
    assert nodeid == ROTATE[1]
    run(project, "--segrobust", nodeid).assert_outcomes(passed=1)


def test_k_and_deselect_match_cells_as_tests(project: pytest.Pytester) -> None:
    def selected(*args: str) -> list[str]:
        return collected(run(project, "--segrobust", "--co", "-q", *args))

    assert selected("-k", "rotate and 5") == ROTATE[1:]
    assert selected("-k", "binner and not clean and not rotate") == ALL[1:3]
    assert selected("-k", "rotate[1]") == ROTATE[:1]
    assert selected("--deselect", ROTATE[1], "--deselect", ALL[0]) == ALL[1:4]
    assert selected("--deselect", "suites/bands.yaml::binner::gaussian_noise") == [ALL[0], *ROTATE]


# -- --lf, --ff, --sw -----------------------------------------------------------------------


def test_lf_reruns_only_the_failed_cells_and_then_clears(project: pytest.Pytester, xdist: list[str]) -> None:
    fail_the_rotate_cells(project)
    full = (project.path / "segrobust-report.md").read_text()
    rerun = cached(project, "--lf", *xdist)
    rerun.assert_outcomes(passed=2, deselected=0 if xdist else CELLS - 2)  # xdist deselects in the workers
    assert last_failed(project) == set()  # they passed: nothing left to rerun
    partial = read_report(project, "segrobust-report-partial")["run"]
    assert partial["partial"] and partial["deselected"] == ALL[:3] and partial["selection"] == ["--lf"]
    assert (project.path / "segrobust-report.md").read_text() == full
    if not xdist:  # the same under xdist, whose controller does not print the line
        again = cached(project, "--lf")
        again.assert_outcomes(passed=CELLS)
        again.stdout.fnmatch_lines(["*run-last-failure: no previously failed tests, not deselecting items.*"])


def test_ff_runs_the_failed_cells_first(project: pytest.Pytester) -> None:
    # Without xdist only: its workers reorder alike but finish in any order, so -n 2 shows nothing more.
    fail_the_rotate_cells(project)
    result = cached(project, "--ff", "-v")
    result.assert_outcomes(passed=CELLS)
    result.stdout.fnmatch_lines(["*run-last-failure: rerun previous 2 failures first*"])
    ran = [line.split()[0] for line in result.outlines if line.startswith("suites/") and "PASSED" in line]
    assert ran == [*ROTATE, *ALL[:3]]
    assert last_failed(project) == set()
    assert not read_report(project)["run"]["partial"]  # every cell ran: the full report


SW_STOPPED = "--sw stopped the run at the first failure; the next --sw run starts from it"


def test_sw_stops_at_a_failed_cell_and_continues_from_it(project: pytest.Pytester) -> None:
    run(project, "--segrobust-update-baselines", "-k", "not rotate").assert_outcomes(passed=CELLS - 2, deselected=2)
    first = cached(project, "--sw")
    first.assert_outcomes(passed=3, failed=1)
    stopped_at = json.loads((project.path / ".pytest_cache" / "v" / "cache" / "stepwise").read_text())["last_failed"]
    assert stopped_at == ROTATE[0]
    report = read_report(project, "segrobust-report-partial")
    assert report["run"]["not_run"] == {ROTATE[1]: SW_STOPPED}
    second = cached(project, "--sw")  # the failed cell has its baseline now
    second.stdout.fnmatch_lines(["*stepwise: skipping 3 already passed items*"])
    second.assert_outcomes(passed=1, failed=1, deselected=3)
    report = read_report(project, "segrobust-report-partial")["run"]
    assert report["deselected"] == ALL[:3] and report["selection"] == ["--sw"]
    last = cached(project, "--sw")
    last.stdout.fnmatch_lines(["*stepwise: skipping 4 already passed items*"])
    last.assert_outcomes(passed=1, deselected=4)


def test_sw_under_xdist_stops_in_a_worker_and_the_next_run_continues_from_it(project: pytest.Pytester) -> None:
    # What differs with two workers is how the run stops: the worker that ran the failed cell
    # stops, and xdist interrupts the run with --sw's words, which the report must give the cells
    # that never ran. What the next --sw run skips is deselected in each worker and sent to the
    # controller as --lf's is (test_lf_reruns_only_the_failed_cells_and_then_clears[n2]): one process here.
    run(project, "--segrobust-update-baselines", "-k", "not rotate").assert_outcomes(passed=CELLS - 2, deselected=2)
    cached(project, "--sw", "-n", "2")
    stopped_at = json.loads((project.path / ".pytest_cache" / "v" / "cache" / "stepwise").read_text())["last_failed"]
    # A model's cells go to a worker in runs of consecutive cells: rotate[1] fails before rotate[5] can start.
    assert stopped_at == ROTATE[0]
    not_run = read_report(project, "segrobust-report-partial")["run"]["not_run"]
    assert not_run.get(ROTATE[1]) == SW_STOPPED and set(not_run.values()) == {SW_STOPPED}, not_run
    second = cached(project, "--sw")  # the failed cell has its baseline now, written by the controller
    second.stdout.fnmatch_lines(["*stepwise: skipping 3 already passed items*"])
    second.assert_outcomes(passed=1, failed=1, deselected=3)
    report = read_report(project, "segrobust-report-partial")["run"]
    assert report["deselected"] == ALL[:3] and report["selection"] == ["--sw"]


# -- partial runs ------------------------------------------------------------------------------


def test_a_subset_writes_a_partial_report_and_keeps_the_full_one(project: pytest.Pytester) -> None:
    # In one process: -k and --deselect deselect in each xdist worker as --lf does, and the
    # controller learns the cells the same way (test_lf_reruns_only_the_failed_cells_and_then_clears[n2];
    # test_xdist_scheduling's -n 2 -k run checks its partial report).
    run(project, "--segrobust-update-baselines").assert_outcomes(passed=CELLS)
    full = {suffix: (project.path / f"segrobust-report.{suffix}").read_bytes() for suffix in ("md", "json")}
    result = run(project, "--segrobust", "-k", "rotate and 5")
    result.assert_outcomes(passed=1, deselected=CELLS - 1)
    result.stdout.fnmatch_lines(
        [
            "Partial run: this report covers 1 of the 5 cells it collected; the full report, segrobust-report.md, is left as it was.",
            "4 cells deselected (-k 'rotate and 5'): suites/bands.yaml::binner::clean, *",
            "wrote *segrobust-report-partial.md",
        ]
    )
    assert {suffix: (project.path / f"segrobust-report.{suffix}").read_bytes() for suffix in ("md", "json")} == full
    markdown = (project.path / "segrobust-report-partial.md").read_text()
    top = markdown.splitlines()[:6]  # under the title and the verdict line
    assert any(line.startswith("> **Partial run: this report covers 1 of the 5 cells") for line in top), top
    assert f"- `{ALL[0]}`" in markdown
    report = read_report(project, "segrobust-report-partial")
    assert [c["nodeid"] for c in report["suites"]["bands"]["models"]["binner"]["cells"]] == ROTATE[1:]
    assert report["run"]["deselected"] == [*ALL[:3], ROTATE[0]] and report["missing"] == []

    pasted = run(project, "--segrobust", "--deselect", ROTATE[1])
    pasted.assert_outcomes(passed=CELLS - 1, deselected=1)
    assert read_report(project, "segrobust-report-partial")["run"]["deselected"] == ROTATE[1:]
    assert (project.path / "segrobust-report.md").read_bytes() == full["md"]

    run(project, "--segrobust").assert_outcomes(passed=CELLS)  # the whole gate again: the full report
    assert not read_report(project)["run"]["partial"]


def test_one_suite_file_named_on_the_command_line_is_partial(project: pytest.Pytester) -> None:
    run(project, "--segrobust-update-baselines", "suites/").assert_outcomes(passed=CELLS)
    assert not read_report(project)["run"]["partial"]  # the suites folder itself is the whole gate
    run(project, "--segrobust", "suites/bands.yaml").assert_outcomes(passed=CELLS)
    report = read_report(project, "segrobust-report-partial")["run"]
    assert report["partial"] and report["narrowed_to"] == ["suites/bands.yaml"] and report["deselected"] == []


def test_a_run_that_evaluates_nothing_writes_nothing(project: pytest.Pytester) -> None:
    run(project, "--segrobust", "--co").assert_outcomes()
    assert not list(project.path.glob("segrobust-report*"))
    result = run(project, "--segrobust", "-k", "no_such_cell")
    result.stdout.fnmatch_lines(["no cell was evaluated: no report written, the last one is left as it was"])
    assert not list(project.path.glob("segrobust-report*"))


# -- pieces, without pytester ------------------------------------------------------------------


def test_why_a_run_stopped_is_said_in_the_users_terms() -> None:
    def why(shouldfail: object = False, shouldstop: object = False, interrupt: str | None = None, **options: object) -> str | None:
        config = SimpleNamespace(getoption=lambda name, default=None: options.get(name, default))
        exitstatus = pytest.ExitCode.INTERRUPTED if interrupt is not None else pytest.ExitCode.TESTS_FAILED
        session = SimpleNamespace(config=config, shouldfail=shouldfail, shouldstop=shouldstop, exitstatus=exitstatus)
        watch = _InterruptWatch()
        watch.message = interrupt
        return _why_stopped(session, watch)  # type: ignore[arg-type]

    assert why() is None
    assert why(shouldfail="stopping after 1 failures", maxfail=1) == "the run stopped after 1 failure (-x)"
    # xdist stops the run by raising its Interrupted with pytest's words.
    assert why(interrupt="stopping after 3 failures", maxfail=3) == "the run stopped after 3 failures (--maxfail=3)"
    stepwise = "--sw stopped the run at the first failure; the next --sw run starts from it"
    assert why(shouldstop="Test failed, continuing from this test next run.", stepwise=True) == stepwise
    assert why(interrupt="Test failed, continuing from this test next run.", stepwise=True) == stepwise
    assert why(interrupt="") == "the run was interrupted"


def test_what_a_run_left_out_is_counted_in_the_singular_for_one_cell() -> None:
    one = RunCoverage(evaluated=0, errors=0, not_run={"s.yaml::m::clean": "the run was interrupted"})
    assert headline(one) == "Partial run: this report covers 0 of the 1 cell it collected."
    # A report that does not know what the run covered lists its missing cells only.
    assert terminal_lines(None, ["s.yaml::m::clean"]) == ["1 cell has no result: s.yaml::m::clean"]
    assert terminal_lines(None, ["a", "b"]) == ["2 cells have no result: a, b"]
    assert markdown_lines(None, ["a"])[0] == "**1 cell selected has no result**:"
    figures = Path("out", "r-figures")
    written = [Path("r.md"), figures / "s-heatmap.png", Path("r.json"), figures / "s-gallery.png"]
    assert written_lines(written) == ["wrote r.md", "wrote r.json", f"wrote 2 figures to {figures}{os.sep}"]
    assert written_lines([figures / "s-heatmap.png"]) == [f"wrote 1 figure to {figures}{os.sep}"]


def test_run_coverage_round_trips_and_names_what_it_left_out() -> None:
    coverage = RunCoverage(
        evaluated=1, errors=1, not_run={"s.yaml::m::rotate[5]": "the run was interrupted"},
        deselected=["s.yaml::m::clean"], selection=["-k rotate"], full_report="segrobust-report.md",
    )
    assert coverage.partial and coverage.collected == 4
    assert RunCoverage.from_json(json.loads(json.dumps(coverage.to_json()))) == coverage
    lines = markdown_lines(coverage)
    assert lines[0] == (
        "> **Partial run: this report covers 2 of the 4 cells it collected, 1 of them with an error; "
        "the full report, segrobust-report.md, is left as it was.**"
    )
    assert "**1 cell not run: the run was interrupted**:" in lines and "**1 cell deselected (-k rotate)**:" in lines
    assert not RunCoverage(evaluated=3, errors=0).partial and markdown_lines(RunCoverage(3, 0)) == []
    with pytest.raises(ValueError, match="format"):
        RunCoverage.from_json({"format": 0})
    assert partial_report_path(Path("out/robust")) == Path("out/robust-partial")
    assert partial_report_path(Path("out/robust.v2")) == Path("out/robust.v2-partial")  # the report is out/robust.v2


@pytest.mark.parametrize("umask", [0o022, 0o027, 0o002])
def test_written_files_get_the_umasks_mode_not_the_temporarys(tmp_path: Path, umask: int) -> None:
    target = tmp_path / "report.md"
    target.write_text("old")
    os.chmod(target, 0o600)  # a replaced file takes the umask's mode too, as a fresh write would
    old = os.umask(umask)
    try:
        atomic_write_text(target, "new")
        atomic_write_text(tmp_path / "fresh.json", "{}")
    finally:
        os.umask(old)
    for path in (target, tmp_path / "fresh.json"):
        assert path.stat().st_mode & 0o777 == 0o666 & ~umask, path
    assert target.read_text() == "new" and not list(tmp_path.glob(".*.tmp"))
