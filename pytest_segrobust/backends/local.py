"""The default backend: the cells are measured in the process whose item asks for them (the
pytest process, or under ``-n`` each xdist worker for the cells it was sent)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from pytest_segrobust.backends import Backend, register_backend

if TYPE_CHECKING:
    from pytest_segrobust.engine.runner import CellRunner, Measurement
    from pytest_segrobust.store.baselines import CellKey
    from pytest_segrobust.suite.schema import Suite


@register_backend
class Local(Backend):
    """Measures each cell inline, with the process's own runner (its models built once)."""

    name = "local"
    summary = "this process, or each of its xdist workers"

    def __init__(self, runner: CellRunner) -> None:
        self.runner = runner

    @classmethod
    def create(cls, config: pytest.Config, runner: CellRunner, *, under_xdist: bool) -> Local:
        return cls(runner)

    def measure(self, suite: Suite, key: CellKey, nodeid: str) -> Measurement:
        __tracebackhide__ = True
        return self.runner.measure(suite, key, nodeid)
