"""Fixtures shared by the plugin tests (pytester projects, the three ways of running)."""

from __future__ import annotations

import contextlib
import importlib
import os
from collections.abc import Iterator

import pytest

from tests.fakes import FAKES_SOURCE
from tests.plugin_project import DISTRIBUTIONS, write_suite

# An in-process pytester run gives sys.modules back as it found it, so whatever the run
# imported is imported again by the next one: the gate's own modules (assertion-rewritten,
# as a plugin's are) and matplotlib for the report's figures, about 0.7 s of CPU per run.
# Imported once here, before any run, they stay.
for _module in ("pytest_segrobust.run.session", "pytest_segrobust.run.items"):
    importlib.import_module(_module)
with contextlib.suppress(ImportError):  # the figures are optional, and so is matplotlib
    importlib.import_module("matplotlib").use("Agg")  # as the report draws them
    importlib.import_module("matplotlib.pyplot")
    importlib.import_module("matplotlib.backends.backend_agg")
# numba (the compiled kernels' optional extra) must never be imported twice in a process: its
# registries are process-wide, and the first compilation loads the rest of its modules
# (numba.np.polynomial...). Done inside a run, they would be dropped with it, and the next
# compilation would load them again: "KeyError: duplicate registration for PolynomialType".
with contextlib.suppress(ImportError):
    importlib.import_module("numba").njit(lambda x: x + 1)(1)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keep ``pytest -n 2 --dist loadgroup`` sending the tests of one ``xdist_group`` to one worker.

    pytest-xdist (3.8) tells its scheduler a test's groups by appending ``@group`` to the node id
    through the attribute ``_nodeid``, which pytest 9.2's structured node ids no longer read
    (pytest-dev/pytest-xdist#1386): the groups were spread over the workers like any test, and
    each worker recomputed their module fixtures. Until xdist writes it where pytest reads it,
    the suffix goes there (after xdist's own hook; nothing to do on older pytest)."""
    if not getattr(config.option, "loadgroup", False):
        return
    try:
        from _pytest.nodeid import NodeId
    except ImportError:
        return
    for item in items:
        marks = item.iter_markers("xdist_group")
        groups = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default")) for m in marks})
        suffix = "@" + "_".join(groups)
        if groups and not item.nodeid.endswith(suffix):
            item._id = NodeId.parse(item.nodeid + suffix)  # type: ignore[attr-defined]


@pytest.fixture(autouse=True, scope="session")
def _not_an_xdist_worker_to_the_projects() -> Iterator[None]:
    """Under ``pytest -n 2`` this process is an xdist worker, and xdist says so in os.environ.
    The projects the tests run (in process with pytester, or in subprocesses) are runs of their
    own: without ``-n`` they are no worker, and the outer run's worker count (the sample cache's
    share of memory) must not reach them. With ``-n`` their own workers set these again."""
    with pytest.MonkeyPatch.context() as patch:
        _share_the_cores(patch)
        for variable in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
            patch.delenv(variable, raising=False)
        yield


def _share_the_cores(patch: pytest.MonkeyPatch) -> None:
    """Under ``pytest -n N`` every worker computes on its share of the cores, as the plugin's own
    workers do (pytest_segrobust.runtime.threads): torch's default of a thread per core in each of N
    workers made the demo models' tests spend most of their CPU waiting for a core (on a loaded
    2-core machine a video clip took 4 s of CPU on 2 threads, 0.06 s on one). The projects the
    tests run see no xdist (above), so they get the share as OMP_NUM_THREADS, which their
    ``auto`` takes; a count the user set is left alone."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0") or 0)
    if workers < 2 or os.environ.get("OMP_NUM_THREADS", "").strip():
        return
    import torch

    from pytest_segrobust.runtime.threads import available_cores

    share = max(1, available_cores() // workers)
    patch.setenv("OMP_NUM_THREADS", str(share))
    torch.set_num_threads(share)  # for the worker's life: nothing after the session computes


@pytest.fixture(params=list(DISTRIBUTIONS), ids=list(DISTRIBUTIONS))
def dist(request: pytest.FixtureRequest) -> list[str]:
    """Extra arguments of a run: without xdist, with ``-n 0``, with ``-n 2``."""
    return DISTRIBUTIONS[request.param]


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    """A project with the fake dataset and model importable and a suite of 5 cells."""
    pytester.makepyfile(segrobust_fakes=FAKES_SOURCE)
    # As a user would: the project's modules are importable in every process, workers included.
    pytester.makeini("[pytest]\npythonpath = .\n")
    write_suite(pytester, smoothing=5)
    return pytester
