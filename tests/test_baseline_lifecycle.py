"""Baselines with a lifecycle, through pytester: what an update changed, unused entries and
``--segrobust-prune``, rounding and provenance, and each cell's numbers as JUnit properties.

Each scenario runs in one process; ``-n 0`` takes the single-process path. Where the xdist
controller does the work (writing, knowing which cells a -k run left out, collecting the workers'
JUnit properties) one scenario with ``-n 2`` checks it at the end.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from pytest_segrobust import __version__
from tests.plugin_project import CELLS, SINGLE_PROCESS, baseline, recorded, run, write_suite


def add_stale_entries(project: pytest.Pytester) -> dict:
    """What the file would hold had the suite once had a model old-net and noise at severity 3."""
    document = baseline(project)
    stale = json.loads(json.dumps(document))
    stale["models"]["old-net"] = {"clean": {"score": 50.0}}
    stale["models"]["binner"]["gaussian_noise"]["3"] = {"score": 40.0, "gamma_r": 0.5, "gamma_a": 0.4}
    stale["made_with"]["models"]["old-net"] = "0" * 32
    (project.path / "baselines" / "bands.json").write_text(json.dumps(stale, indent=2))
    return document


def numbers(tree: dict) -> list[float]:
    return [n for value in tree.values() for n in (numbers(value) if isinstance(value, dict) else [value])]


def test_an_update_prints_old_to_new_per_cell_and_the_report_keeps_the_old_values(project: pytest.Pytester) -> None:
    first = run(project, "--segrobust-update-baselines")
    first.assert_outcomes(passed=CELLS)
    first.stdout.fnmatch_lines(
        ["baselines/bands.json: 0 cells changed, 5 new, 0 unchanged", "  suites/bands.yaml::binner::clean: new (score *)", "wrote *bands.json"]
    )
    before = baseline(project)["models"]["binner"]
    write_suite(project, smoothing=1)  # far less robust to noise
    second = run(project, "--segrobust-update-baselines")
    second.assert_outcomes(passed=CELLS)
    old, new = before["gaussian_noise"]["5"], baseline(project)["models"]["binner"]["gaussian_noise"]["5"]
    assert new["gamma_r"] < old["gamma_r"]
    second.stdout.fnmatch_lines(
        [
            "baselines/bands.json: * changed, 0 new, * unchanged",  # cell or cells
            (
                f"  suites/bands.yaml::binner::gaussian_noise[5]: score {old['score']:.6g} -> {new['score']:.6g}, "
                f"gamma_r {old['gamma_r']:.6g} -> {new['gamma_r']:.6g}"
            ),
        ]
    )
    report = json.loads((project.path / "segrobust-report.json").read_text())
    cells = report["suites"]["bands"]["models"]["binner"]["cells"]
    cell = next(c for c in cells if (c["corruption"], c["severity"]) == ("gaussian_noise", 5))
    assert cell["status"] == "updated" and cell["baseline"] == old  # the replaced numbers survive the update
    markdown = (project.path / "segrobust-report.md").read_text()
    assert f"{old['gamma_r']:.3f}" in markdown  # in the baseline comparison, beside the new value


def test_stored_numbers_are_rounded_and_the_file_records_what_made_them(project: pytest.Pytester) -> None:
    run(project, "--segrobust-update-baselines").assert_outcomes(passed=CELLS)
    document = baseline(project)
    values = numbers(document["models"])
    assert len(values) == 1 + 4 * 3 and all(float(f"{v:.6g}") == v for v in values)
    assert document["made_with"]["tool_version"] == __version__
    assert set(document["made_with"]["models"]) == {"binner"} and len(document["made_with"]["models"]["binner"]) == 32
    # The rounding is far below every tolerance: the next run compares and passes.
    run(project, "--segrobust").assert_outcomes(passed=CELLS)


@SINGLE_PROCESS  # under xdist: test_the_xdist_controller_reports_keeps_and_removes_unused_entries
def test_unused_entries_are_reported_and_pruned(project: pytest.Pytester, dist: list[str]) -> None:
    recorded(project)
    clean_file = add_stale_entries(project)
    stale_text = (project.path / "baselines" / "bands.json").read_text()
    result = run(project, "--segrobust", *dist)
    result.assert_outcomes(passed=CELLS)
    result.stdout.fnmatch_lines(
        [
            (
                "baselines/bands.json: 2 unused entries (no longer in suite bands): binner::gaussian_noise::3, old-net; "
                "remove them with --segrobust-prune"
            )
        ]
    )
    assert (project.path / "baselines" / "bands.json").read_text() == stale_text  # reported, not removed
    pruned = run(project, "--segrobust", "--segrobust-prune", *dist)
    pruned.assert_outcomes(passed=CELLS)
    pruned.stdout.fnmatch_lines(
        ["baselines/bands.json: removed 2 unused entries: binner::gaussian_noise::3, old-net", "wrote *bands.json"]
    )
    assert baseline(project) == clean_file  # everything else as it was, provenance included
    # The pruned file reads clean.
    assert "unused entries" not in run(project, "--segrobust").stdout.str()


@SINGLE_PROCESS  # under xdist: test_the_xdist_controller_reports_keeps_and_removes_unused_entries
def test_a_full_update_leaves_no_stale_entries_a_partial_one_keeps_them(project: pytest.Pytester, dist: list[str]) -> None:
    recorded(project)
    clean_file = add_stale_entries(project)
    partial = run(project, "--segrobust-update-baselines", "-k", "rotate", *dist)
    partial.stdout.fnmatch_lines(
        ["baselines/bands.json: 0 cells changed, 0 new, 2 unchanged", "baselines/bands.json: 2 unused entries *"]
    )
    assert "old-net" in baseline(project)["models"]
    full = run(project, "--segrobust-update-baselines", *dist)
    full.assert_outcomes(passed=CELLS)
    full.stdout.fnmatch_lines(
        ["baselines/bands.json: 0 cells changed, 0 new, 5 unchanged", "baselines/bands.json: removed 2 unused entries: *"]
    )
    assert baseline(project) == clean_file


@SINGLE_PROCESS  # the refusal is the controller's, at the end of the run: xdist changes nothing of it
def test_a_partial_update_under_changed_conditions_refuses_and_keeps_every_cell(project: pytest.Pytester, dist: list[str]) -> None:
    recorded(project)
    stored = (project.path / "baselines" / "bands.json").read_text()
    suite = project.path / "suites" / "bands.yaml"
    suite.write_text(suite.read_text() + "seed: 7\n")
    partial = run(project, "--segrobust-update-baselines", "-k", "rotate", *dist)
    assert partial.ret == pytest.ExitCode.TESTS_FAILED
    partial.stdout.fnmatch_lines(
        [
            (
                "error: baselines not written, the stored ones are unchanged: *bands.json: this update writes 2 cells of "
                "suite bands under other conditions than the file's (seed: baseline 0, this run 7) and would discard "
                "3 stored cells it did not measure (binner::clean, binner::gaussian_noise::1, binner::gaussian_noise::5); "
                "update every cell of the suite at once (without -k): pytest --segrobust --segrobust-update-baselines"
            )
        ]
    )
    assert (project.path / "baselines" / "bands.json").read_text() == stored
    full = run(project, "--segrobust-update-baselines", *dist)
    full.assert_outcomes(passed=CELLS)
    full.stdout.fnmatch_lines(["baselines/bands.json: * changed, 0 new, * unchanged"])  # the old numbers, not "new"
    document = baseline(project)
    assert document["conditions"]["seed"] == 7 and len(numbers(document["models"])) == 1 + 4 * 3


@SINGLE_PROCESS
def test_a_changed_model_is_shown_and_gated_all_the_same(project: pytest.Pytester, dist: list[str]) -> None:
    recorded(project)
    document = baseline(project)
    current = document["made_with"]["models"]["binner"]
    document["made_with"]["models"]["binner"] = "1" * 32  # as if made with other weights
    (project.path / "baselines" / "bands.json").write_text(json.dumps(document))
    shown = f"model binner differs from the one baselines/bands.json was made with (fingerprint {current[:12]}, recorded 111111111111)"
    passing = run(project, "--segrobust", *dist)
    passing.assert_outcomes(passed=CELLS)  # a new model is what the gate measures, not a failure
    passing.stdout.fnmatch_lines([shown])
    write_suite(project, smoothing=1)
    failing = run(project, "--segrobust", *dist)
    failing.stdout.fnmatch_lines(["suites/bands.yaml::binner::gaussian_noise[[]5[]] regressed:", "*baseline file: baselines/bands.json", f"*{shown}"])
    run(project, "--segrobust-update-baselines", *dist).assert_outcomes(passed=CELLS)
    assert baseline(project)["made_with"]["models"]["binner"] == current


def check_junit_properties(project: pytest.Pytester, path: Path) -> None:
    """The JUnit file of a passing run of the bands suite holds each cell's numbers."""
    cases = {
        case.get("name"): {p.get("name"): p.get("value") for p in case.iter("property")}
        for case in ET.parse(path).getroot().iter("testcase")
    }
    stored = baseline(project)["models"]["binner"]
    # Whatever the cell's name looks like once junitxml has mangled its node id.
    noise = next(properties for name, properties in cases.items() if re.fullmatch(r"gaussian_noise\W+5\W*", name))
    numbers = {"score", "gamma_r", "baseline", "delta", "baseline_gamma_r", "delta_gamma_r"}
    assert set(noise) == {"status", "metric", "tolerance_score", "tolerance_gamma_r", *numbers}
    assert noise["status"] == "passed" and float(noise["baseline"]) == stored["gaussian_noise"]["5"]["score"]
    assert (noise["metric"], noise["tolerance_score"], noise["tolerance_gamma_r"]) == ("miou", "1.0", "0.01")
    assert float(noise["delta"]) == pytest.approx(float(noise["score"]) - float(noise["baseline"]))
    assert float(noise["delta_gamma_r"]) == pytest.approx(float(noise["gamma_r"]) - float(noise["baseline_gamma_r"]))
    # gamma_r is 1 by definition
    assert set(cases["clean"]) == {"status", "metric", "score", "tolerance_score", "baseline", "delta"}
    # The classname: the suite file without .yaml (pytest's own would keep it), '/' as '.', then the model.
    assert {case.get("classname") for case in ET.parse(path).getroot().iter("testcase")} == {
        "suites.bands.binner"
    }


@SINGLE_PROCESS  # under xdist: test_the_xdist_controller_reports_keeps_and_removes_unused_entries
def test_junit_xml_has_each_cells_numbers(project: pytest.Pytester, dist: list[str]) -> None:
    recorded(project)
    run(project, "--segrobust", "--junitxml=results.xml", *dist).assert_outcomes(passed=CELLS)
    check_junit_properties(project, project.path / "results.xml")
    # The prefix is pytest's own naming, the same on either writer: one process.
    run(project, "--segrobust", "--junitxml=prefixed.xml", "--junitprefix=ci").assert_outcomes(passed=CELLS)
    cases = list(ET.parse(project.path / "prefixed.xml").getroot().iter("testcase"))
    assert {case.get("classname") for case in cases} == {"ci.suites.bands.binner"}
    assert sorted(case.get("name") for case in cases)[:2] == ["clean", "gaussian_noise[1]"]


def test_a_statistical_gate_names_its_margin_in_the_junit_properties(tmp_path) -> None:
    from types import SimpleNamespace

    from pytest_segrobust.run.session import SegRobustSession
    from pytest_segrobust.suite.schema import load_suite
    from tests.report.test_report import SCORES_A, cells
    from tests.test_statistical_gate import GATED

    path = tmp_path / "s.yaml"
    path.write_text(GATED.replace("name: g", "name: s") + "gate: {margin: {gamma_r: 0.02, score: 0.5}}\n")
    clean, corrupted = cells("a", 80.0, SCORES_A)[:2]
    session = SimpleNamespace(records=[clean, corrupted], suite_order={"s": load_suite(path)}, model_outcomes={})
    properties = dict(SegRobustSession.cell_properties(session, corrupted.nodeid))  # type: ignore[arg-type]
    assert (properties["metric"], properties["margin_score"], properties["margin_gamma_r"]) == ("miou", 0.5, 0.02)
    assert "tolerance_score" not in properties
    clean_properties = dict(SegRobustSession.cell_properties(session, clean.nodeid))  # type: ignore[arg-type]
    assert "margin_score" in clean_properties and "margin_gamma_r" not in clean_properties


def test_the_xdist_controller_reports_keeps_and_removes_unused_entries(project: pytest.Pytester) -> None:
    """With two workers the controller writes the baselines and the JUnit file, and knows which
    cells a -k run left out: one run each of the scenarios above whose outcome depends on that."""
    recorded(project)
    clean_file = add_stale_entries(project)
    stale_text = (project.path / "baselines" / "bands.json").read_text()
    result = run(project, "--segrobust", "--junitxml=results.xml", "-n", "2")
    result.assert_outcomes(passed=CELLS)
    result.stdout.fnmatch_lines(
        [
            (
                "baselines/bands.json: 2 unused entries (no longer in suite bands): binner::gaussian_noise::3, old-net; "
                "remove them with --segrobust-prune"
            )
        ]
    )
    assert (project.path / "baselines" / "bands.json").read_text() == stale_text  # reported, not removed
    check_junit_properties(project, project.path / "results.xml")
    partial = run(project, "--segrobust-update-baselines", "-k", "rotate", "-n", "2")
    partial.stdout.fnmatch_lines(
        ["baselines/bands.json: 0 cells changed, 0 new, 2 unchanged", "baselines/bands.json: 2 unused entries *"]
    )
    assert "old-net" in baseline(project)["models"], "a partial update removed entries it did not measure"
    full = run(project, "--segrobust-update-baselines", "-n", "2")
    full.assert_outcomes(passed=CELLS)
    full.stdout.fnmatch_lines(
        ["baselines/bands.json: 0 cells changed, 0 new, 5 unchanged", "baselines/bands.json: removed 2 unused entries: *"]
    )
    assert baseline(project) == clean_file  # everything else as it was, provenance included
