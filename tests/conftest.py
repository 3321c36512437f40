"""Fixtures shared by the plugin tests (pytester projects, the three ways of running)."""

from __future__ import annotations

import pytest

from tests.fakes import FAKES_SOURCE
from tests.plugin_project import DISTRIBUTIONS, write_suite


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
