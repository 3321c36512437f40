"""Collection nodes: a suite file becomes one item per model x corruption x severity."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from pytest_segrobust.errors import SegRobustError
from pytest_segrobust.evaluation import CLEAN
from pytest_segrobust.session import CellFailure
from pytest_segrobust.stash import SESSION_KEY
from pytest_segrobust.suite import Suite


class SuiteFile(pytest.File):
    """A suite YAML file; a malformed one is a collection error naming file and field."""

    def collect(self) -> Iterator[SuiteItem]:
        session = self.config.stash[SESSION_KEY]
        try:
            suite = session.suite(self.path)
        except SegRobustError as exc:
            raise self.CollectError(str(exc)) from None
        for model, corruption, severity in session.cells(suite):
            name = f"{model}::{CLEAN}" if severity == 0 else f"{model}::{corruption}::{severity}"
            yield SuiteItem.from_parent(
                self, name=name, suite=suite, model=model, corruption=corruption, severity=severity
            )


class SuiteItem(pytest.Item):
    """One cell of a suite: evaluate, compare with the baseline, record."""

    def __init__(self, *, suite: Suite, model: str, corruption: str, severity: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.suite = suite
        self.model = model
        self.corruption = corruption
        self.severity = severity
        self.add_marker(pytest.mark.segrobust)
        self.segrobust_payload: str | None = None

    def runtest(self) -> None:
        session = self.config.stash[SESSION_KEY]
        try:
            session.run_cell(self.suite, self.model, self.corruption, self.severity, self.nodeid)
        finally:
            # Read by the plugin into this item's report, which carries it to the xdist controller.
            self.segrobust_payload = session.cell_payload(self.nodeid)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str | Any:
        # Our own failures carry the whole story; a traceback through the harness would bury it.
        if isinstance(excinfo.value, (CellFailure, SegRobustError)):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self) -> tuple[Any, int | None, str]:
        return self.path, None, f"{self.suite.name}::{self.name}"
