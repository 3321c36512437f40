"""The run's last line tells the truth: what was not written is not counted as written, a report
is built (or says exactly why not) whatever a baseline lacks, and Ctrl-C ends a run that waits
on a hanging model."""

from __future__ import annotations

import json

import pytest

from tests.plugin_project import SINGLE_PROCESS, run

ONE_CELL = (
    "dataset: {factory: segrobust_fakes:band_scenes}\n"
    "models: [{name: m, factory: segrobust_fakes:red_binner}]\n"
    "corruptions: [gaussian_noise]\nseverities: [5]\n"
)


def report(pytester: pytest.Pytester, name: str = "segrobust-report-partial") -> dict:
    return json.loads((pytester.path / f"{name}.json").read_text())


@SINGLE_PROCESS
def test_a_refused_update_is_an_error_of_its_cells_not_a_pass(project: pytest.Pytester, dist: list[str]) -> None:
    (project.path / "suites" / "bands.yaml").write_text(ONE_CELL)
    run(project, "--segrobust-update-baselines", *dist).assert_outcomes(passed=2)
    stored = (project.path / "baselines" / "bands.json").read_text()
    (project.path / "suites" / "bands.yaml").write_text(ONE_CELL + "seed: 7\n")
    result = run(project, "-k", "gaussian_noise", "--segrobust-update-baselines", *dist)
    assert (project.path / "baselines" / "bands.json").read_text() == stored
    result.stdout.fnmatch_lines(["*error: baselines not written, the stored ones are unchanged: *"])
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    last = result.stdout.lines[-2]  # the verdict, before pytest's own summary line
    assert last.startswith("FAIL · 1 cell: 1 error"), last
    assert "written to the baseline" not in result.stdout.str().split("error: baselines not written")[1]
    errors = report(project)["errors"]
    assert list(errors) == ["suites/bands.yaml::m::gaussian_noise[5]"]
    assert errors["suites/bands.yaml::m::gaussian_noise[5]"].startswith("its baseline was not written: ")
