"""A suite resolved once: the task object, the metric classes and every cell's corruption.

A :class:`~pytest_segrobust.suite.schema.Suite` is what its file says, names and all. Measuring a
cell needs objects: the task, each metric's class, the corruption a cell name stands for (an
image corruption of the preset, a text perturbation, a composition, a task's own cell such as
a dynamic mixture). :meth:`Plan.of` resolves them once per suite and process, and the
runner, the evaluations and the pictures take them from the plan instead of resolving names
again at every call site.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pytest_segrobust.core.errors import SuiteError
from pytest_segrobust.core.wording import did_you_mean
from pytest_segrobust.corruptions import REGISTRY, Corruption, CorruptionRegistry
from pytest_segrobust.engine.evaluation import EvalSettings
from pytest_segrobust.metrics import METRICS, Metric
from pytest_segrobust.suite.schema import Suite
from pytest_segrobust.tasks import Task, get_task


@dataclass(frozen=True)
class Plan:
    """What a suite's cells run with.

    Attributes:
        suite: The suite, as its file says.
        task: Its task object.
        metrics: Each metric's class by name, the headline first.
        cells: Each corrupted cell's corruption by cell name, in suite order.
    """

    suite: Suite
    task: Task
    metrics: Mapping[str, type[Metric]]
    cells: Mapping[str, Corruption[Any]]

    @classmethod
    def of(cls, suite: Suite, registry: CorruptionRegistry = REGISTRY) -> Plan:
        """The suite resolved against ``registry`` (the run's, with any corruptions a conftest registered)."""
        return cls(
            suite=suite,
            task=get_task(suite.task),
            metrics={name: METRICS.get(name) for name in suite.metrics},
            cells={name: suite.corruption(name, registry) for name in suite.corruptions},
        )

    @property
    def headline(self) -> type[Metric]:
        """The class of the headline metric."""
        return self.metrics[self.suite.metric]

    def corruption(self, name: str) -> Corruption[Any]:
        """The corruption of cell ``name``.

        Raises:
            SuiteError: naming the suite and its cells, for a name it has no cell of.
        """
        try:
            return self.cells[name]
        except KeyError:
            raise SuiteError(
                f"{self.suite.path}: no cell {name!r} (cells: {', '.join(self.cells)}){did_you_mean(name, list(self.cells))}"
            ) from None

    def settings(self, *, batch_size: int | None = None, loader_workers: int = 0) -> EvalSettings:
        """How the suite's evaluations run: its seed, limit and batch size (``batch_size`` overrides
        it), with per-sample statistics where the suite gates statistically."""
        return EvalSettings(
            task=self.task,
            metrics=tuple(self.metrics),
            seed=self.suite.seed,
            batch_size=batch_size or self.suite.batch_size,
            limit=self.suite.limit,
            statistics=self.suite.gate is not None,
            loader_workers=loader_workers,
        )
