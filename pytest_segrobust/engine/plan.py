"""A suite resolved once: the task object, the metric classes, every cell's corruption, and
each model's and dataset's spec.

A :class:`~pytest_segrobust.suite.schema.Suite` is what its file says, names and all. Measuring a
cell needs objects: the task, each metric's class, the corruption a cell name stands for (an
image corruption of the preset, a text perturbation, a composition, a task's own cell such as
a dynamic mixture), each model's spec with the source that builds it, and the dataset spec of
each split. :meth:`Plan.of` resolves them once per suite and process, and the runner, the
workbench, the evaluations and the pictures take them from the plan instead of resolving names
again at every call site.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pytest_segrobust.core.errors import SuiteError
from pytest_segrobust.core.wording import did_you_mean
from pytest_segrobust.corruptions import REGISTRY, Corruption, CorruptionRegistry
from pytest_segrobust.engine.evaluation import CLEAN, EvalSettings
from pytest_segrobust.metrics import METRICS, Metric
from pytest_segrobust.store.baselines import CellKey
from pytest_segrobust.suite.factories import FactorySpec
from pytest_segrobust.suite.model_sources import MODEL_SOURCES, ModelRequest, ModelSource, ModelSpec
from pytest_segrobust.suite.schema import Suite
from pytest_segrobust.tasks import Task, get_task


@dataclass(frozen=True)
class PlannedModel:
    """A suite's model spec with the source that builds it, looked up once.

    Attributes:
        spec: The model as the suite gives it.
        source: The model source its entry's key names.
        index: Its place in the suite's ``models`` list, which messages name.
    """

    spec: ModelSpec
    source: ModelSource
    index: int

    @property
    def field(self) -> str:
        """``field 'models[1]' (segformer)``: the suite's entry of the model, as collection errors name it."""
        return f"field 'models[{self.index}]' ({self.spec.name})"

    @property
    def described(self) -> str:
        """What builds the model, for messages (``factory package.module:callable``)."""
        return self.source.describe(self.spec.settings)

    def build(self, request: ModelRequest) -> Any:
        """The model, before it is adapted to the suite's task."""
        return self.source.build(self.spec.settings, request)

    def code_objects(self, model: Any) -> tuple[Any, ...]:
        """The objects whose code says what the built ``model`` computes (besides what its build read)."""
        return self.source.code_objects(self.spec.settings, model)


@dataclass(frozen=True)
class Plan:
    """What a suite's cells run with.

    Attributes:
        suite: The suite, as its file says.
        task: Its task object.
        metrics: Each metric's class by name, the headline first.
        cells: Each corrupted cell's corruption by cell name, in suite order.
        models: Each model by name, with its source, in suite order.
        datasets: The dataset spec of each split (``None``: the suite's one dataset), in suite order.
    """

    suite: Suite
    task: Task
    metrics: Mapping[str, type[Metric]]
    cells: Mapping[str, Corruption[Any]]
    models: Mapping[str, PlannedModel]
    datasets: Mapping[str | None, FactorySpec]

    @classmethod
    def of(cls, suite: Suite, registry: CorruptionRegistry = REGISTRY) -> Plan:
        """The suite resolved against ``registry`` (the run's, with any corruptions a conftest registered)."""
        return cls(
            suite=suite,
            task=get_task(suite.task).for_suite(suite.task_cells, suite.seed),
            metrics={name: METRICS.get(name) for name in suite.metrics},
            cells={name: suite.corruption(name, registry) for name in suite.corruptions},
            models={
                spec.name: PlannedModel(spec, MODEL_SOURCES.get(spec.kind), index)
                for index, spec in enumerate(suite.models)
            },
            datasets={split: suite.dataset_spec(split) for split in suite.splits},
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

    def model(self, name: str) -> PlannedModel:
        """The model called ``name``.

        Raises:
            SuiteError: naming the suite, the model and the models it has, when it has none of that name.
        """
        planned = self.models.get(name)
        if planned is None:
            self.suite.model(name)  # raises, in the suite's words
            raise AssertionError(f"the suite has model {name!r}, its plan does not")
        return planned

    def dataset(self, split: str | None = None) -> FactorySpec:
        """The dataset spec of ``split`` (``None``: the suite's one dataset).

        Raises:
            SuiteError: naming the suite and its splits, for a split it does not have.
        """
        try:
            return self.datasets[split]
        except KeyError:
            splits = ", ".join(str(s) for s in self.datasets)
            raise SuiteError(f"{self.suite.path}: no split {split!r} (splits: {splits})") from None

    def settings(
        self, *, batch_size: int | None = None, loader_workers: int = 0, scored_images: int = 0
    ) -> EvalSettings:
        """How the suite's evaluations run: its seed, limit and batch size (``batch_size`` overrides
        it), with per-sample statistics where the suite gates statistically, and the first
        ``scored_images`` samples scored on their own."""
        return EvalSettings(
            task=self.task,
            metrics=tuple(self.metrics),
            seed=self.suite.seed,
            batch_size=batch_size or self.suite.batch_size,
            limit=self.suite.limit,
            statistics=self.suite.gate is not None,
            loader_workers=loader_workers,
            scored_images=scored_images,
        )


def suite_cells(suite: Suite) -> list[CellKey]:
    """Every cell of a suite: per model (and split), clean first, then corruption x severity."""
    cells: list[CellKey] = []
    for model in suite.models:
        for split in suite.splits:
            cells.append(CellKey(suite.name, model.name, CLEAN, 0, split))
            cells.extend(
                CellKey(suite.name, model.name, c, s, split)
                for c in suite.corruptions
                for s in suite.cell_severities(c)
            )
    return cells
