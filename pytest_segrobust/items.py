"""Collection nodes: a suite file becomes one item per model x [split x] corruption x severity."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from pytest_segrobust.baselines import CellKey
from pytest_segrobust.errors import SegRobustError
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
        for key in session.cells(suite):
            yield SuiteItem.from_parent(self, name=key.label.removeprefix(f"{suite.name}::"), suite=suite, key=key)


class SuiteItem(pytest.Item):
    """One cell of a suite: evaluate, compare with the baseline, record."""

    def __init__(self, *, suite: Suite, key: CellKey, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.suite = suite
        self.key = key
        self.add_marker(pytest.mark.segrobust)
        self.segrobust_payload: str | None = None

    def runtest(self) -> None:
        session = self.config.stash[SESSION_KEY]
        try:
            session.run_cell(self.suite, self.key, self.nodeid)
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
