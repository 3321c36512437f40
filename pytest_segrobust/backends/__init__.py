"""Where a run's cells are measured: one protocol, one module per backend, one option.

A :class:`Backend` measures the cells a run's items ask for and hands back each
:class:`~pytest_segrobust.engine.runner.Measurement`; the controller (the session) gates, reports and
writes, whatever the backend. ``--segrobust-backend NAME`` picks one from :data:`BACKENDS`:
the built-ins ``local`` (:mod:`~pytest_segrobust.backends.local`: this process, or each xdist
worker) and ``ray`` (:mod:`~pytest_segrobust.backends.ray`), and any installed under the
``segrobust.backends`` entry point group. How a run is spread besides its backend lives
beside them: over xdist workers (:mod:`~pytest_segrobust.backends.xdist`). A run over machines
is a backend too: ``--segrobust-shard K/N`` wraps the chosen one in a
:class:`~pytest_segrobust.backends.shards.ShardBackend`, which selects the shard's cells, keeps
what it measured and writes the shard file instead of the report; ``segrobust merge`` gates the
shards' measurements again through a :class:`~pytest_segrobust.backends.shards.MergedShards`
(the cells' assignment and the file format: :mod:`~pytest_segrobust.backends.shard_plan`).

A backend module imports neither the session, the items nor the plugin; what it needs of the
run comes through :meth:`Backend.create` (the pytest config and the process's cell runner).
This module imports nothing heavy: the plugin reads the option with it.

Layer 8: imports the report, the gate, the engine and the layers below; never the pytest
integration (:mod:`pytest_segrobust.run`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import pytest

from pytest_segrobust.core.registry import NamedRegistry

if TYPE_CHECKING:
    from pytest_segrobust.engine.runner import CellRunner, Measurement
    from pytest_segrobust.gate.outcomes import Outcome
    from pytest_segrobust.pictures.values import RunPictures
    from pytest_segrobust.report import RunVerdict
    from pytest_segrobust.store.baselines import CellKey
    from pytest_segrobust.suite.schema import Suite

ENTRY_POINT_GROUP = "segrobust.backends"
DEFAULT = "local"


@dataclass(frozen=True)
class RunResults:
    """What a run ends with, as its session hands it to a backend that writes the run's output
    in place of the report (:meth:`Backend.conclude`).

    Attributes:
        outcomes: Each item's outcome, in report order (cells, then models' aggregates items).
        errors: Items that failed with an error instead of a result: node id -> message.
        verdict: The run's verdict on its own items (``None``: it evaluated nothing).
        expected: The selected cells, in collection order.
        deselected: Collected cells the run did not select.
        not_run: Selected cells without a result or an error: node id -> why.
        selection: The options that selected cells, as typed.
        narrowed_to: Command-line arguments that collected less than the whole suites folder.
        collection_known: Some process reported what it collected and deselected.
        cache_counts: Clean results computed and read from the cache, and models built.
        pictures: The report's pictures of the run's cells.
    """

    outcomes: list[Outcome]
    errors: dict[str, str]
    verdict: RunVerdict | None
    expected: list[str]
    deselected: list[str]
    not_run: dict[str, str]
    selection: list[str]
    narrowed_to: list[str]
    collection_known: bool
    cache_counts: dict[str, int]
    pictures: RunPictures


@dataclass(frozen=True)
class Conclusion:
    """What a backend wrote at the end in place of the report and the baselines.

    Attributes:
        written: The files it wrote.
        problems: What it could not write (each fails the run).
        verdict: The run's verdict on its own items, if it evaluated any.
        line: The terminal summary's last line, where a reviewer looks (with ``verdict``).
    """

    written: list[Path] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    verdict: RunVerdict | None = None
    line: str | None = None


class Backend(ABC):
    """Measures a run's cells somewhere: in this process, or on workers it starts.

    Besides measuring, a backend may choose the run's cells (:meth:`select`), keep what was
    measured for its own output (:meth:`kept`, :meth:`keep`, carried between xdist processes
    with the items' outcomes and :meth:`worker_payload`), and write that output in place of
    the report and the baselines (:attr:`writes_later`, :meth:`conclude`): a shard's. Every
    such step does nothing by default.

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

    @property
    def writes_later(self) -> bool:
        """The run's report and baselines are written later, by another command (a shard's, by
        ``segrobust merge``); this run writes :meth:`conclude`'s output instead."""
        return False

    def select(self, cells: Sequence[tuple[str, Suite, CellKey]]) -> list[str]:
        """The node ids this run keeps of the cells it collected and the user selected (node id,
        suite, key; models' aggregates items too): all of them by default."""
        return [nodeid for nodeid, _, _ in cells]

    def start(self, cells: Sequence[tuple[str, Suite, CellKey]]) -> None:
        """The run's selected cells (node id, suite, key), in the order its items will ask for them."""

    @abstractmethod
    def measure(self, suite: Suite, key: CellKey, nodeid: str) -> Measurement:
        """The cell's measurement (waiting for it where it is measured elsewhere).

        Raises:
            SegRobustError: when it was never submitted, or its worker gave no result.
        """

    def measure_aside(self, suite: Suite, key: CellKey, nodeid: str, item: str) -> Measurement | None:
        """A cell that the models' aggregates item ``item`` needs and no item of this process took,
        measured and never gated; ``None`` (the default): the session measures it in this process.

        Raises:
            SegRobustError: when it has no measurement of it and none can be made.
        """
        return None

    def kept(self, nodeid: str) -> tuple[Measurement, ...]:
        """What the backend keeps of an item's measurements for its own output, to travel with
        the item's outcome (none by default)."""
        return ()

    def keep(self, nodeid: str, measurements: Sequence[Measurement]) -> None:
        """An item's measurements, come with its outcome from an xdist worker (:meth:`kept` there)."""

    def worker_payload(self) -> dict[str, Any] | None:
        """What an xdist worker's backend tells the controller's when the worker finishes (JSON-safe)."""
        return None

    def absorb_worker_payload(self, payload: dict[str, Any]) -> None:
        """A finished worker's :meth:`worker_payload`."""

    def conclude(self, results: Callable[[], RunResults]) -> Conclusion | None:
        """Write the run's output in place of the report and the baselines, at the end: ``None``
        (the default) where the session writes those; ``results`` are asked for only when needed."""
        return None

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
    """The run's backend, as ``--segrobust-backend`` names it (the plugin wraps it in a
    :class:`~pytest_segrobust.backends.shards.ShardBackend` for ``--segrobust-shard K/N``).

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
