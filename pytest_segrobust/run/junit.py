"""A cell's JUnit ``classname``: its suite file and model as dotted names, ``suites.demo.tiny-unet``.

pytest makes a test's ``classname`` from its node id with ``/`` as ``.``, dropping a ``.py``
suffix only, so a cell would read ``suites.demo.yaml.tiny-unet``, and a CI dashboard shows a
package ``suites.demo.yaml``. pytest offers no public way to set it (``record_xml_attribute``
is experimental, for test functions only, and misses the report under xdist), so the plugin
asks junitxml's own reporter of the cell's report, on the process that writes the file (the
xdist controller), before junitxml reads the report. Should a pytest lack that reporter, the
``classname`` is pytest's own.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

try:  # where junitxml keeps its writer; private to pytest, hence the fallback
    from _pytest.junitxml import xml_key
except ImportError:  # pragma: no cover - a pytest without it
    xml_key = None  # type: ignore[assignment]

SUITE_SUFFIX = re.compile(r"\.ya?ml$")

# The JUnit property (user_properties) of a cell whose numbers came from the result cache:
# xdist ships it with the test report, and the terminal marks the cell "(cached)".
CACHED_PROPERTY = "cached"


def classname(nodeid: str, prefix: str | None = None) -> str:
    """The ``classname`` of a cell (or a model's ``aggregates`` item) from its node id:
    the suite file's path without ``.yaml``, ``/`` as ``.``, then the model [and split]."""
    path, *names = nodeid.split("::")
    parts = [SUITE_SUFFIX.sub("", path).replace("/", "."), *names[:-1]]
    return ".".join([prefix, *parts] if prefix else parts)


class JunitClassnames:
    """A plugin that names the JUnit ``classname`` of each report of a suite file's item.

    Args:
        is_cell: Whether a node id is an item of a suite file.
    """

    def __init__(self, config: pytest.Config, is_cell: Any) -> None:
        self.config = config
        self.is_cell = is_cell

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        xml = None if xml_key is None else self.config.stash.get(xml_key, None)
        if xml is None or not self.is_cell(report.nodeid):
            return
        try:
            reporter = xml.node_reporter(report)
            reporter.add_attribute("classname", classname(report.nodeid, getattr(xml, "prefix", None)))
        except AttributeError:  # pragma: no cover - another pytest's junitxml: its own classname stays
            return
