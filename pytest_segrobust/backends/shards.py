"""Shards as a backend: a shard's run, and the merge of N shards' files.

``--segrobust-shard K/N`` wraps the run's backend in a :class:`ShardBackend`. It keeps the
shard's part of the collected cells (:meth:`ShardBackend.select`, by
:func:`~pytest_segrobust.backends.shard_plan.assign_cells`), measures them with the backend it
wraps, keeps every measurement, and at the end writes the shard file in place of the report and
the baselines (:meth:`ShardBackend.conclude`).

``segrobust merge`` reads the files into a :class:`MergedShards`: it refuses files that are not
the N shards of one run (:func:`~pytest_segrobust.backends.shard_plan.check_shards`), names that
the suite loader would refuse, and cells of one model measured with different model code, data
or evaluator; then it is the merge's backend, which hands each cell's measurement to the
session as a worker would, so that the merge gates every cell again against the baselines it
reads. A shard's own verdicts are its word: the merge shows where it decides otherwise.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_segrobust import __version__
from pytest_segrobust.backends import Backend, Conclusion, RunResults
from pytest_segrobust.backends.shard_plan import (
    ShardCell,
    ShardCoverage,
    ShardError,
    ShardFile,
    ShardPlan,
    ShardSpec,
    assign_cells,
    check_shards,
    content_digest,
    digests,
)
from pytest_segrobust.core.errors import SegRobustError
from pytest_segrobust.core.files import WriteError, atomic_write_text, relative, remove_stale_temporaries
from pytest_segrobust.engine.plan import suite_cells
from pytest_segrobust.gate.outcomes import Outcome, relative_to
from pytest_segrobust.pictures.values import RunPictures
from pytest_segrobust.store.baselines import CellKey
from pytest_segrobust.store.sidecar import sidecar_path
from pytest_segrobust.suite.schema import Suite, name_problem

if TYPE_CHECKING:
    from pytest_segrobust.engine.runner import CellRunner, Measurement
    from pytest_segrobust.runtime.options import Options


def project_digests(options: Options, rootpath: Path, explicit: Iterable[Path] = ()) -> tuple[dict[str, str], dict[str, str]]:
    """The digests of every suite file (under the suites folder, or among ``explicit``) and of
    every baseline file with its statistics file, by path relative to the rootdir."""
    suites = [
        *options.suites_dir.rglob("*.yaml"),
        *options.suites_dir.rglob("*.yml"),
        *(path for path in explicit if path.is_file() and path.suffix in (".yaml", ".yml")),
    ]
    baselines = sorted(options.baselines_dir.glob("*.json"))
    baselines += [sidecar_path(path) for path in baselines if sidecar_path(path).is_file()]
    return digests(suites, rootpath), digests(baselines, rootpath)


class ShardBackend(Backend):
    """Shard K of N of a run: its part of the cells, measured by the backend it wraps, and its file.

    Args:
        spec: Which shard.
        inner: The backend that measures (``local``).
        runner: The process's cell runner: its settings, its rootdir, and the cells a model's
            aggregates item measures aside.
        started_from: The suite and baseline files' digests as the run started (:func:`project_digests`).
    """

    name = "shard"
    summary = "a shard of a run (--segrobust-shard K/N): its part of the cells, written for `segrobust merge`"

    def __init__(self, spec: ShardSpec, inner: Backend, runner: CellRunner, started_from: tuple[dict[str, str], dict[str, str]]) -> None:
        self.spec = spec
        self.inner = inner
        self.runner = runner
        self.started_from = started_from
        self.plan: ShardPlan | None = None  # set where the cells are collected (or by a worker's payload)
        self._kept: dict[str, tuple[Measurement, ...]] = {}

    @classmethod
    def create(cls, config: pytest.Config, runner: CellRunner, *, under_xdist: bool) -> ShardBackend:
        from pytest_segrobust.backends.local import Local

        spec = config.getoption("segrobust_shard")
        if spec is None:
            raise pytest.UsageError("the shard backend runs one shard of a run: give --segrobust-shard K/N")
        return cls.around(Local.create(config, runner, under_xdist=under_xdist), spec, config, runner)

    @classmethod
    def around(cls, inner: Backend, spec: ShardSpec, config: pytest.Config, runner: CellRunner) -> ShardBackend:
        """Shard ``spec`` of the run, measured by ``inner``; notes the files it starts from."""
        named = (Path(arg.split("::", 1)[0]) for arg in config.args)  # suite files named on the command line
        explicit = [(path if path.is_absolute() else config.invocation_params.dir / path).resolve() for path in named]
        return cls(spec, inner, runner, project_digests(runner.options, runner.rootpath, explicit))

    @property
    def writes_later(self) -> bool:
        return True

    def header(self) -> list[str]:
        return [f"segrobust: shard {self.spec.described()}: report and baselines are written by `segrobust merge`", *self.inner.header()]

    def select(self, cells: Sequence[tuple[str, Suite, CellKey]]) -> list[str]:
        """The shard's part of the cells, a pure function of the cells and their suites."""
        suites = {suite.name: suite for _, suite, _ in cells}
        ranks = {name: {key: rank for rank, key in enumerate(suite_cells(suite))} for name, suite in suites.items()}
        assignment = assign_cells(
            (
                ShardCell(nodeid, (suite.name, key.model, key.split or ""), ranks[suite.name].get(key, 0))
                for nodeid, suite, key in cells
            ),
            self.spec.count,
        )
        ours = [nodeid for nodeid, _, _ in cells if assignment[nodeid] == self.spec.index]
        self.plan = ShardPlan([nodeid for nodeid, _, _ in cells], ours)
        return ours

    def start(self, cells: Sequence[tuple[str, Suite, CellKey]]) -> None:
        self.inner.start(cells)

    def measure(self, suite: Suite, key: CellKey, nodeid: str) -> Measurement:
        __tracebackhide__ = True
        measurement = self.inner.measure(suite, key, nodeid)
        if measurement.error is None:
            measurement = self._identified(suite, measurement)
            self._kept[nodeid] = (measurement,)
        return measurement

    def measure_aside(self, suite: Suite, key: CellKey, nodeid: str, item: str) -> Measurement:
        measurement = self._identified(suite, self.runner.measure(suite, key, nodeid))
        self._kept[item] = (*self._kept.get(item, ()), measurement)
        return measurement

    def _identified(self, suite: Suite, measurement: Measurement) -> Measurement:
        """The measurement with its model's code identity, which the merge compares across shards."""
        assert measurement.record is not None
        return replace(measurement, model_code=self.runner.bench.model_code(suite, measurement.record.model))

    def kept(self, nodeid: str) -> tuple[Measurement, ...]:
        return self._kept.get(nodeid, ())

    def keep(self, nodeid: str, measurements: Sequence[Measurement]) -> None:
        if measurements:
            self._kept[nodeid] = tuple(measurements)

    def worker_payload(self) -> dict[str, Any] | None:
        return None if self.plan is None else {"plan": self.plan.to_json()}

    def absorb_worker_payload(self, payload: dict[str, Any]) -> None:
        if self.plan is None:  # every worker plans the same
            self.plan = ShardPlan.from_json(payload["plan"])

    def pictures(self) -> RunPictures | None:
        return self.inner.pictures()

    def close(self) -> None:
        self.inner.close()

    def conclude(self, results: Callable[[], RunResults]) -> Conclusion:
        """Write the shard file beside the report path (a failure is one of the run's problems)."""
        ended = results()
        path = self.spec.path(self.runner.options.report_path)
        remove_stale_temporaries(path.parent)
        line = None
        if ended.verdict is not None:
            line = (
                f"shard {self.spec}: {ended.verdict.line()} (this shard's cells only; "
                "`segrobust merge` of every shard gives the run's verdict)"
            )
        try:
            atomic_write_text(path, json.dumps(self.shard_file(ended).to_json(), indent=1) + "\n")
        except WriteError as exc:
            return Conclusion(problems=[f"shard {self.spec} not written: {exc}"], verdict=ended.verdict, line=line)
        return Conclusion(written=[path], verdict=ended.verdict, line=line)

    def shard_file(self, ended: RunResults) -> ShardFile:
        """What the shard learned, for ``segrobust merge``: paths relative to the rootdir."""
        options, root = self.runner.options, self.runner.rootpath
        plan = self.plan or ShardPlan([], [])  # no process collected: the merge refuses it
        others = set(plan.cells) - set(plan.assigned)
        suites, baselines = self.started_from
        return ShardFile(
            spec=self.spec,
            tool_version=__version__,
            update_baselines=options.update_baselines,
            prune=options.prune,
            report_html=options.report_html,
            report=relative(options.report_path, root),
            suite_digests=suites,
            baseline_digests=baselines,
            cells=list(plan.cells),
            assigned=list(plan.assigned),
            results=[outcome.moved(relative_to(root)).to_json() for outcome in ended.outcomes],
            errors=dict(ended.errors),
            coverage=ShardCoverage(
                expected=list(ended.expected),
                deselected=[nodeid for nodeid in ended.deselected if nodeid not in others],
                not_run=dict(ended.not_run),
                selection=list(ended.selection),
                narrowed_to=list(ended.narrowed_to),
                collection_known=ended.collection_known and self.plan is not None,
            ),
            cache_counts=dict(ended.cache_counts),
            pictures=ended.pictures.to_json(),
            figures=options.figures,
        )


@dataclass(frozen=True)
class ShardItem:
    """An item of a shard's results, as the merge decides it again.

    Attributes:
        shard: The shard file, as messages name it (``<path> (shard 2/3)``).
        outcome: What the shard said of the item (its word, never taken).
    """

    shard: str
    outcome: Outcome


class MergedShards(Backend):
    """The N shards of a run as the merge's backend: each cell's measurement, handed to the
    session to gate, and the pictures the shards made.

    Build it with :meth:`read`, which checks the files.

    Attributes:
        shards: The shard files, 1 to N.
        cells: The items a shard measured, in the order the shards list them.
        aggregates: The models' aggregates items the shards decided.
    """

    name = "merge"
    summary = "the shard files of a run (segrobust merge)"

    def __init__(self, shards: Sequence[tuple[Path, ShardFile]]) -> None:
        self.shards = list(shards)
        self.cells: list[ShardItem] = []
        self.aggregates: list[ShardItem] = []
        self._measured: dict[str, Measurement] = {}  # each cell's, by the shard whose item took it
        self._aside: dict[str, Measurement] = {}  # those a models' aggregates item took aside
        everything: list[tuple[str, Measurement]] = []
        for path, shard in self.shards:
            label = f"{path} (shard {shard.spec})"
            for index, entry in enumerate(shard.results):
                outcome = Outcome.from_json(entry)
                _check_names(outcome, f"{path}: results[{index}]")
                everything += [(label, m) for m in outcome.measurements]
                if outcome.record is not None:
                    own = [m for m in outcome.measurements if m.nodeid == outcome.nodeid]
                    if not own:
                        raise ShardError(f"{path}: results[{index}]: cell {outcome.nodeid} has no measurement to gate it by")
                    self._measured[outcome.nodeid] = own[0]
                    self.cells.append(ShardItem(label, outcome))
                elif outcome.model_gate is not None:
                    self._aside.update((m.nodeid, m) for m in outcome.measurements)
                    self.aggregates.append(ShardItem(label, outcome))
        _check_one_measure(everything)

    @classmethod
    def read(cls, paths: Sequence[Path]) -> MergedShards:
        """The shard files at ``paths``, checked to be the N shards of one run made by this
        segrobust from the same files, with names the suites accept and one model, dataset and
        evaluator per model.

        Raises:
            ShardError: naming the files and what is wrong.
        """
        return cls(check_shards([(path, ShardFile.read(path)) for path in paths], __version__))

    @classmethod
    def create(cls, config: pytest.Config, runner: CellRunner, *, under_xdist: bool) -> MergedShards:
        raise pytest.UsageError("the shards of a run are merged by `segrobust merge SHARD...`, not chosen by --segrobust-backend")

    def measure(self, suite: Suite, key: CellKey, nodeid: str) -> Measurement:
        """The cell's measurement, as the shard that ran it took it."""
        if nodeid not in self._measured:
            raise SegRobustError(f"{nodeid}: no shard measured it")
        return self._measured[nodeid]

    def measure_aside(self, suite: Suite, key: CellKey, nodeid: str, item: str) -> Measurement:
        """A cell no shard's item took, as a shard's aggregates item measured it aside."""
        measurement = self._measured.get(nodeid) or self._aside.get(nodeid)
        if measurement is None:
            raise SegRobustError(f"{item}: cell {nodeid} was measured by no shard, and a merge measures nothing")
        return measurement

    def pictures(self) -> RunPictures:
        """The pictures the shards made; the cells of a shard run with ``--segrobust-figures=none``
        are noted as left out, so that the report names that shard once."""
        pictures = RunPictures()
        for _, shard in self.shards:
            if shard.pictures is not None:
                pictures.absorb(RunPictures.from_json(shard.pictures))
            if not shard.figures:
                pictures.left_out.update(dict.fromkeys(shard.assigned, str(shard.spec)))
        return pictures


def _check_names(outcome: Outcome, where: str) -> None:
    """Every suite, model and split name an outcome gives, checked by the suite loader's rule.

    Raises:
        ShardError: naming the file, the field and the name.
    """
    named: list[tuple[str, str | None]] = []
    records = [("record", outcome.record)] + [(f"measurements[{i}].record", m.record) for i, m in enumerate(outcome.measurements)]
    for field_name, record in records:
        if record is not None:
            named += [(f"{field_name}.suite", record.suite), (f"{field_name}.model", record.model), (f"{field_name}.split", record.split)]
    if outcome.model_gate is not None:
        named += [("model_gate.suite", outcome.model_gate.suite), ("model_gate.model", outcome.model_gate.model)]
    if outcome.model_change is not None:
        named.append(("model_change.model", outcome.model_change.model))
    for index, write in enumerate(outcome.pending):
        named += [(f"pending[{index}].key.{part}", getattr(write.key, part)) for part in ("suite", "model", "split")]
    for field_name, name in named:
        problem = None if name is None else name_problem(str(name))
        if problem is not None:
            raise ShardError(f"{where}.{field_name}: {problem}, which no suite accepts: the file was edited; run its shard again")


def _check_one_measure(measurements: Sequence[tuple[str, Measurement]]) -> None:
    """That the cells of one model were measured with one model, one dataset and one evaluator,
    whichever shard measured them (``measurements``: each with its shard's label), and each
    suite's under one set of conditions.

    Raises:
        ShardError: naming the model, the values that differ and the shards of each.
    """
    seen: dict[tuple[str, str], dict[str, list[str]]] = {}
    for label, measurement in measurements:
        record, conditions = measurement.record, measurement.conditions
        assert record is not None and conditions is not None
        model = f"model {record.model} of suite {record.suite}"
        split = "" if record.split is None else f" on split {record.split}"
        for whose, what, value in (
            (model, "model fingerprints", measurement.model_fingerprint),
            (model, "model code", measurement.model_code),
            (model + split, "dataset fingerprints", record.dataset_fingerprint),
            (model, "evaluator versions", measurement.evaluator),
            (f"suite {record.suite}", "conditions", content_digest(conditions.to_json())),
        ):
            shards = seen.setdefault((whose, what), {}).setdefault(str(value), [])
            if label not in shards:
                shards.append(label)
    for (whose, what), values in seen.items():
        if len(values) > 1:
            listed = "; ".join(f"{_shown(value)} in {', '.join(labels)}" for value, labels in values.items())
            raise ShardError(
                f"the cells of {whose} were measured with different {what} ({listed}): "
                "run every shard from the same checkout, environment and data"
            )


def _shown(value: str) -> str:
    return value if len(value) <= 24 else value[:19] + "…"
