"""``--segrobust-threads N|auto``: one rule for the main process, xdist workers and Ray actors."""

from __future__ import annotations

import argparse
import json

import pytest
import torch

from pytest_segrobust.runtime import threads
from tests.plugin_project import CELLS, run

PROBE = """
import os
from pathlib import Path

import torch

from pytest_segrobust.runtime import threads


def test_probe():
    where = os.environ.get("PYTEST_XDIST_WORKER", "main")
    Path(f"threads-{where}.txt").write_text(f"{torch.get_num_threads()}|{threads.current().describe()}")
"""


@pytest.mark.parametrize(("text", "parsed"), [("auto", "auto"), ("AUTO", "auto"), ("1", 1), ("12", 12)])
def test_parse_takes_auto_or_a_count(text: str, parsed: int | str) -> None:
    assert threads.parse(text) == parsed


@pytest.mark.parametrize("text", ["0", "-1", "two", "1.5", ""])
def test_parse_refuses_what_is_not_a_count(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=r"expected auto or an integer >= 1"):
        threads.parse(text)


@pytest.mark.parametrize(
    ("cores", "workers", "expected"), [(8, 0, 8), (8, 1, 8), (8, 2, 4), (8, 3, 2), (2, 2, 1), (2, 4, 1), (1, 0, 1)]
)
def test_auto_shares_the_cores_between_xdist_workers(
    monkeypatch: pytest.MonkeyPatch, cores: int, workers: int, expected: int
) -> None:
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(threads, "available_cores", lambda: cores)
    setting = threads.choose("auto", workers=workers)
    assert setting.threads == expected
    assert setting.reason.startswith("auto:") and f"{cores} core" in setting.reason


def test_auto_takes_omp_num_threads_where_the_user_set_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert threads.choose("auto", workers=2) == threads.ThreadSetting(3, "auto: OMP_NUM_THREADS=3")


@pytest.mark.parametrize(("cpus", "expected"), [(0.5, 1), (1.0, 1), (2.0, 2), (3.5, 3)])
def test_auto_gives_a_ray_actor_the_cpus_it_reserved(
    monkeypatch: pytest.MonkeyPatch, cpus: float, expected: int
) -> None:
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert threads.choose("auto", reserved_cpus=cpus).threads == expected


def test_a_count_overrides_every_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert threads.choose(5, workers=2, reserved_cpus=1.0) == threads.ThreadSetting(5, "--segrobust-threads 5")


def test_apply_sets_torch_and_is_recorded() -> None:
    before = torch.get_num_threads()
    try:
        setting = threads.apply(threads.ThreadSetting(1, "test"))
        assert torch.get_num_threads() == 1 and threads.current() == setting
        assert setting.describe() == "1 thread per process (test)"
    finally:
        torch.set_num_threads(before)


def test_a_bad_count_is_a_one_line_usage_error_naming_the_flag(project: pytest.Pytester) -> None:
    result = run(project, "--segrobust", "--segrobust-threads", "0")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*: error: argument --segrobust-threads: expected auto or an integer >= 1, got '0'"])
    assert sum("--segrobust-threads" in line for line in result.stderr.lines) == 1  # one line, no traceback


def test_a_bad_ini_value_is_a_usage_error_naming_the_ini_option(project: pytest.Pytester) -> None:
    project.makeini("[pytest]\npythonpath = .\nsegrobust_threads = many\n")
    result = run(project, "--segrobust")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*ini option segrobust_threads: expected auto or an integer >= 1, got 'many'*"])


def _probed(project: pytest.Pytester) -> dict[str, tuple[int, str]]:
    found = {}
    for path in project.path.glob("threads-*.txt"):
        count, described = path.read_text().split("|")
        found[path.stem.removeprefix("threads-")] = (int(count), described)
    return found


def test_the_count_is_applied_where_cells_run_and_shown(project: pytest.Pytester) -> None:
    # In one process; under xdist: test_auto_under_xdist_gives_each_worker_its_share_and_shows_it.
    project.makepyfile(test_probe=PROBE)
    before = torch.get_num_threads()
    # The probe runs beside the cells, in the process that evaluates them.
    result = run(project, "--segrobust-update-baselines", "suites", "test_probe.py", "--segrobust-threads", "1")
    result.assert_outcomes(passed=CELLS + 1)
    result.stdout.fnmatch_lines(["segrobust: 1 thread per process (--segrobust-threads 1)"])
    assert _probed(project) == {"main": (1, "1 thread per process (--segrobust-threads 1)")}
    _assert_reported(project, "1 thread per process (--segrobust-threads 1)")
    assert torch.get_num_threads() == before  # an in-process run leaves its host's count as it found it


def _assert_reported(project: pytest.Pytester, described: str) -> None:
    report = json.loads((project.path / "segrobust-report.json").read_text())
    assert report["environment"]["threads"] == described
    assert f"| threads | {described} |" in (project.path / "segrobust-report.md").read_text()


def test_auto_under_xdist_gives_each_worker_its_share_and_shows_it(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One run with two workers serves every check of what differs under xdist: each worker
    # computes its own share (auto: the cores over the workers) and applies it where its cells
    # run; the controller shows it and writes it in the report. A count (--segrobust-threads N)
    # reaches the workers as the same option does, and wins over every rule (test_a_count_overrides_every_rule).
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    project.makepyfile(test_probe=PROBE)
    before = torch.get_num_threads()
    cores = threads.available_cores()
    share = max(1, cores // 2)
    described = f"{share} thread{'s' if share != 1 else ''} per process (auto: {cores} core{'s' if cores != 1 else ''} / 2 xdist workers)"
    result = run(project, "--segrobust-update-baselines", "suites", "test_probe.py", "-n", "2")
    result.assert_outcomes(passed=CELLS + 1)
    result.stdout.fnmatch_lines([f"segrobust: {described}"])
    probed = _probed(project)
    assert set(probed) <= {"gw0", "gw1"} and probed  # the probe ran in a worker, not in this process
    assert set(probed.values()) == {(share, described)}
    _assert_reported(project, described)
    assert torch.get_num_threads() == before  # the controller, in this process, leaves the count as it found it
