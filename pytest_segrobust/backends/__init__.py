"""Where a run's cells are measured: one protocol, one module per backend, one option.

A :class:`Backend` measures the cells a run's items ask for and hands back each
:class:`~pytest_segrobust.engine.runner.Measurement`; the controller (the session) gates, reports and
writes, whatever the backend. ``--segrobust-backend NAME`` picks one from :data:`BACKENDS`:
the built-ins ``local`` (:mod:`~pytest_segrobust.backends.local`: this process, or each xdist
worker) and ``ray`` (:mod:`~pytest_segrobust.backends.ray`), and any installed under the
``segrobust.backends`` entry point group. How a run is spread besides its backend lives
beside them: over xdist workers (:mod:`~pytest_segrobust.backends.xdist`) and over machines
as shards (:mod:`~pytest_segrobust.backends.shard_plan`: the cells' assignment and the shard
file; the controller's part, writing and merging them, is :mod:`~pytest_segrobust.run.shards`).

A backend module imports neither the session, the items nor the plugin; what it needs of the
run comes through :meth:`Backend.create` (the pytest config and the process's cell runner).
This module imports nothing heavy: the plugin reads the option with it.

Layer 8: imports the report, the gate, the engine and the layers below; never the pytest
integration (:mod:`pytest_segrobust.run`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar

import pytest

from pytest_segrobust.core.registry import NamedRegistry

if TYPE_CHECKING:
    from pytest_segrobust.engine.runner import CellRunner, Measurement
    from pytest_segrobust.pictures.values import RunPictures
    from pytest_segrobust.store.baselines import CellKey
    from pytest_segrobust.suite.schema import Suite

ENTRY_POINT_GROUP = "segrobust.backends"
DEFAULT = "local"


class Backend(ABC):
    """Measures a run's cells somewhere: in this process, or on workers it starts.

    Attributes:
        name: What ``--segrobust-backend`` calls it.
        summary: One line for ``--help``: where it measures.
    """

    name: ClassVar[str]
    summary: ClassVar[str]

    @classmethod
    def add_options(cls, group: pytest.OptionGroup) -> None:
        """The backend's own command-line options (added whether or not it is chosen)."""

    @classmethod
    @abstractmethod
    def create(cls, config: pytest.Config, runner: CellRunner, *, under_xdist: bool) -> Backend:
        """The backend of a run that chose it.

        Raises:
            pytest.UsageError: for a run it cannot serve (under xdist, sharded, not installed).
        """

    def header(self) -> list[str]:
        """Lines for pytest's header: where the cells go."""
        return []

    def start(self, cells: Sequence[tuple[str, Suite, CellKey]]) -> None:
        """The run's selected cells (node id, suite, key), in the order its items will ask for them."""

    @abstractmethod
    def measure(self, suite: Suite, key: CellKey, nodeid: str) -> Measurement:
        """The cell's measurement (waiting for it where it is measured elsewhere).

        Raises:
            SegRobustError: when it was never submitted, or its worker gave no result.
        """

    def pictures(self) -> RunPictures | None:
        """The report's pictures its workers made of their cells, asked once it is closed
        (``None``: this process makes its own)."""
        return None

    def close(self) -> None:
        """Stop whatever it started; the cells no item took are dropped (the run stopped early)."""


BACKENDS: NamedRegistry[type[Backend]] = NamedRegistry(
    "backend", ENTRY_POINT_GROUP, ("pytest_segrobust.backends.local", "pytest_segrobust.backends.ray")
)


def register_backend(backend: type[Backend]) -> type[Backend]:
    """Register a backend class under its ``name`` (a class decorator); an installed package can
    instead name it in the ``segrobust.backends`` entry point group."""
    return BACKENDS.register(backend)


def add_options(group: pytest.OptionGroup) -> None:
    """``--segrobust-backend`` and every registered backend's own options."""
    backends = list(BACKENDS)
    lines = "; ".join(f"{b.name}: {b.summary}" for b in backends)
    group.addoption(
        "--segrobust-backend",
        default=DEFAULT,
        metavar="NAME",
        help=f"where cells are measured (default {DEFAULT}); {lines}",
    )
    for backend in backends:
        backend.add_options(group)


def create(config: pytest.Config, runner: CellRunner, *, under_xdist: bool) -> Backend:
    """The run's backend, as ``--segrobust-backend`` names it.

    Raises:
        pytest.UsageError: for an unknown name, or a backend that cannot serve the run.
    """
    from pytest_segrobust.core.errors import UnknownNameError

    name = config.getoption("segrobust_backend")
    try:
        backend = BACKENDS.get(name)
    except UnknownNameError as exc:
        raise pytest.UsageError(f"--segrobust-backend: {exc}") from None
    return backend.create(config, runner, under_xdist=under_xdist)
