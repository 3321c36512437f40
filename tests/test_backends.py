"""A backend is one module: a tiny one, defined in a project's conftest.py, serves a run through
``--segrobust-backend`` as the built-ins do, touching no file of the package."""

from __future__ import annotations

import pytest

from pytest_segrobust.backends import BACKENDS, Backend
from tests.plugin_project import CELLS, run
from tests.test_shards import take_report

BACKEND = '''
import json
from pathlib import Path

from pytest_segrobust.backends import Backend, register_backend


@register_backend
class Ledger(Backend):
    """Measures each cell as a remote worker would (never raising), and keeps a ledger of them."""

    name = "ledger"
    summary = "a test backend that measures in this process and writes down each cell"

    def __init__(self, runner):
        self.runner = runner
        self.submitted = {}

    @classmethod
    def create(cls, config, runner, *, under_xdist):
        return cls(runner)

    def header(self):
        return ["segrobust: cells measured by the ledger backend"]

    def start(self, cells):
        self.submitted = {nodeid: key for nodeid, _, key in cells}

    def measure(self, suite, key, nodeid):
        assert self.submitted.pop(nodeid) == key  # submitted at the start, asked for once
        with Path("ledger.jsonl").open("a") as ledger:
            ledger.write(json.dumps(nodeid) + "\\n")
        return self.runner.measure_remote(suite.path, key, nodeid)

    def close(self):
        Path("ledger-closed").write_text(str(len(self.submitted)))
'''


def test_a_backend_from_a_conftest_serves_the_run_as_the_local_one(project: pytest.Pytester) -> None:
    run(project, "--segrobust-update-baselines").assert_outcomes(passed=CELLS)
    take_report(project)
    run(project, "--segrobust").assert_outcomes(passed=CELLS)
    local = take_report(project)
    project.makeconftest(BACKEND)
    result = run(project, "--segrobust", "--segrobust-backend", "ledger")
    result.assert_outcomes(passed=CELLS)
    result.stdout.fnmatch_lines(["segrobust: cells measured by the ledger backend"])
    assert len((project.path / "ledger.jsonl").read_text().splitlines()) == CELLS
    assert (project.path / "ledger-closed").read_text() == "0"  # every cell was asked for, then it was closed
    assert take_report(project) == local


def test_an_unknown_backend_is_refused_naming_the_known_ones(project: pytest.Pytester) -> None:
    result = run(project, "--segrobust", "--segrobust-backend", "dask")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--segrobust-backend: unknown backend 'dask'; known: *local*ray*"])


def test_the_built_in_backends_are_registered_and_say_where_they_measure() -> None:
    names = {backend.name for backend in BACKENDS}
    assert {"local", "ray"} <= names
    assert all(issubclass(backend, Backend) and backend.summary for backend in BACKENDS)
