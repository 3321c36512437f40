"""The run's last line tells the truth: what was not written is not counted as written, a report
is built (or says exactly why not) whatever a baseline lacks, and Ctrl-C ends a run that waits
on a hanging model."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.plugin_project import ONE_CELL, SINGLE_PROCESS, run


def last_line(result: pytest.RunResult) -> str:
    """The segrobust section's last line: where the run's verdict goes."""
    lines = result.stdout.lines
    start = next(i for i, line in enumerate(lines) if "= segrobust =" in line)
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("="))
    return lines[end - 1]


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
    assert last_line(result) == "FAIL · 1 cell: 1 error"
    assert "written to the baseline" not in result.stdout.str().split("error: baselines not written")[1]
    errors = report(project)["errors"]
    assert list(errors) == ["suites/bands.yaml::m::gaussian_noise[5]"]
    assert errors["suites/bands.yaml::m::gaussian_noise[5]"].startswith("its baseline was not written: ")


GATED = ONE_CELL + "gate: {margin: {gamma_r: 0.01, score: 1.0}, confidence: 0.95}\n"


@SINGLE_PROCESS
def test_a_gated_baseline_cell_without_gamma_r_fails_its_cell_and_the_report_is_still_built(
    project: pytest.Pytester, dist: list[str]
) -> None:
    (project.path / "suites" / "bands.yaml").write_text(GATED)
    run(project, "--segrobust-update-baselines", *dist).assert_outcomes(passed=2)
    path = project.path / "baselines" / "bands.json"
    document = json.loads(path.read_text())
    del document["models"]["m"]["gaussian_noise"]["5"]["gamma_r"]
    path.write_text(json.dumps(document))
    result = run(project, "--segrobust", *dist)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*models.m.gaussian_noise.5 has no gamma_r, which the suite gates*"])
    assert "could not be built" not in result.stdout.str() and "could not be computed" not in result.stdout.str()
    assert last_line(result) == "FAIL · 2 cells: 1 error, 1 passed"
    written = report(project, "segrobust-report")
    cells = written["suites"]["bands"]["models"]["m"]["cells"]
    assert [(c["corruption"], c["status"]) for c in cells] == [("clean", "passed"), ("gaussian_noise", "error")]
    assert written["verdict"]["line"] == last_line(result)


# A report that cannot be built at all (here a conftest breaks it): the run says why, and its
# last line is still the verdict, taken from the cells' outcomes.
# (Patched for this run only: pytester runs in this process, and later tests build reports too.)
BROKEN_REPORT = """
import pytest_segrobust.run.report_writer as writer

ORIGINAL = writer.build_report

def broken(*args, **kwargs):
    raise RuntimeError("the report is broken on purpose")

def pytest_configure(config):
    writer.build_report = broken

def pytest_unconfigure(config):
    writer.build_report = ORIGINAL
"""


@SINGLE_PROCESS
def test_the_verdict_line_prints_when_the_report_cannot_be_built(project: pytest.Pytester, dist: list[str]) -> None:
    (project.path / "suites" / "bands.yaml").write_text(ONE_CELL)
    project.makeconftest(BROKEN_REPORT)
    result = run(project, "--segrobust-update-baselines", *dist)
    result.stdout.fnmatch_lines(["*error: the report could not be built: RuntimeError: the report is broken on purpose"])
    assert last_line(result) == "PASS · 2 cells: 2 written to the baseline"
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # what was not written does not go unnoticed
    assert (project.path / "baselines" / "bands.json").exists()


# -- Ctrl-C at the end of a run ---------------------------------------------------------------------------

# Measures two cells (two batches each), then hangs on every call, with no time limit: in the
# third cell, where Ctrl-C comes, and again in the report's pictures at the end of the run.
HANGING_MODEL = """
import time
from pathlib import Path

from segrobust_fakes import RedBinner

class HangsAfterTwoCells(RedBinner):
    calls = 0

    def forward(self, images):
        type(self).calls += 1
        if type(self).calls > 4:
            Path("hanging").touch()
            time.sleep(120)  # far past the test's patience, and still finite
        return super().forward(images)

def hangs_after_two_cells():
    return HangsAfterTwoCells()
"""
PATIENCE = 60.0  # seconds (a loaded 2-core machine needs more than 30) from Ctrl-C to the end of the run before the test gives up (and kills it)


# Run in the child before the command itself, as a shell starts a foreground job: Ctrl-C's default
# action, unblocked, then exec. (A preexec_fn would do it between fork and exec, which is unsafe in a
# process with threads, as an xdist worker is: the child can deadlock on a lock another thread held.)
AS_A_FOREGROUND_JOB = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT]); os.execv(sys.argv[1], sys.argv[1:])"
)


def test_ctrl_c_ends_a_run_whose_end_would_wait_on_a_hanging_model(project: pytest.Pytester) -> None:
    project.makepyfile(hanging_model=HANGING_MODEL)
    (project.path / "suites" / "bands.yaml").write_text(
        ONE_CELL.replace("segrobust_fakes:red_binner", "hanging_model:hangs_after_two_cells").replace(
            "[gaussian_noise]", "[gaussian_noise, rotate]"
        )
        + "batch_size: 4\n"
    )
    # With the report's figures: its worst images are what runs the model at the end of the run.
    command = [
        sys.executable, "-c", AS_A_FOREGROUND_JOB,
        sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--segrobust-update-baselines",
    ]
    # Its own process group, as a terminal's foreground job: Ctrl-C reaches every process in it.
    # What this process would hand down (a CI run failed here after other tests had run in the same
    # xdist worker, never alone): said if the run does not end. The child starts as a shell starts a
    # foreground job, with Ctrl-C's default action and unblocked, whatever this process inherited.
    handed_down = f"SIGINT here: {signal.getsignal(signal.SIGINT)}, blocked: {signal.pthread_sigmask(signal.SIG_BLOCK, [])}"
    with subprocess.Popen(
        command, cwd=project.path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},  # all it printed, if it hangs
    ) as child:
        try:
            deadline = time.monotonic() + 120
            while not (project.path / "hanging").exists():
                assert child.poll() is None and time.monotonic() < deadline, "the model never started to hang"
                time.sleep(0.1)
            os.killpg(child.pid, signal.SIGINT)
            interrupted = time.monotonic()
            try:
                output, _ = child.communicate(timeout=PATIENCE)
            except subprocess.TimeoutExpired:
                os.killpg(child.pid, signal.SIGKILL)
                output, _ = child.communicate()
                pytest.fail(f"the run did not end {PATIENCE:.0f} s after Ctrl-C ({handed_down}):\n{output.decode()}")
        finally:
            if child.poll() is None:
                os.killpg(child.pid, signal.SIGKILL)
                child.communicate()
    assert time.monotonic() - interrupted < PATIENCE
    text = output.decode()
    assert child.returncode == pytest.ExitCode.INTERRUPTED, text
    # The cells it finished are kept; their pictures, which would run the model again, are left out.
    stored = json.loads((project.path / "baselines" / "bands.json").read_text())["models"]["m"]
    assert set(stored) == {"clean", "gaussian_noise"}
    assert "warning: pictures left out: the run was interrupted" in text
    assert "FAIL · 3 cells: 1 without a result, 2 written to the baseline" in text
