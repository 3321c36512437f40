"""Measure one cell, in whichever process evaluates it.

A :class:`CellRunner` holds one process's models, datasets and clean results (its
:class:`~pytest_segrobust.engine.workbench.Workbench`) and measures cells: in the project's folder,
within the cell's time limit, with the model's and the datasets' fingerprints. It returns a
:class:`Measurement` and never gates: the baselines, the verdict and the files are the
controller's (:mod:`pytest_segrobust.run.session`).

The plugin's own process measures its cells with one; so do a Ray actor and an xdist worker,
each with its own, never with a session.
"""

from __future__ import annotations

import logging
import os
import sys
import traceback
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from dataclasses import replace as dataclass_replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_segrobust.core.errors import BaselineError, SegRobustError, error_message
from pytest_segrobust.core.files import relative
from pytest_segrobust.core.formats import check_format
from pytest_segrobust.corruptions import REGISTRY, CorruptionRegistry
from pytest_segrobust.data.base import supercategories
from pytest_segrobust.engine.evaluation import CellResult, EvalResult, evaluator_version
from pytest_segrobust.engine.pieces import Piece, Split
from pytest_segrobust.engine.report_pictures import Album
from pytest_segrobust.engine.workbench import Workbench
from pytest_segrobust.engine.worst_images import ImageScores
from pytest_segrobust.models.base import model_device
from pytest_segrobust.pictures.values import RunPictures
from pytest_segrobust.provenance import reads
from pytest_segrobust.runtime.limits import time_limit
from pytest_segrobust.store.baselines import CellKey, Conditions
from pytest_segrobust.store.records import CellRecord, Status
from pytest_segrobust.suite.schema import Suite, load_suite

if TYPE_CHECKING:
    from pytest_segrobust.runtime.options import Options

logger = logging.getLogger("pytest_segrobust")

# Version of Measurement.to_json; a measurement of another version is refused, never half-read.
MEASUREMENT_FORMAT = 1


class RemoteCellError(SegRobustError):
    """A cell whose evaluation failed in another process: shown with that process's traceback.

    Args:
        message: What went wrong, as the local path records it (the report's error).
        failure: What the test's failure shows: the message, with the worker's traceback for an
            error not our own.
    """

    def __init__(self, message: str, failure: str) -> None:
        super().__init__(message)
        self.failure = failure


@dataclass(frozen=True)
class Measurement:
    """A cell measured and not yet gated: what a runner gives the controller.

    Either the cell's record, gated numbers and results with what the baseline is compared
    under, or the error that stopped it. Pickled by a remote backend (the results hold arrays).

    Attributes:
        nodeid: The cell's pytest node id.
        record: The cell's numbers, its status still ``passed`` (the gate decides it).
        observed: The gated numbers (:func:`observed`).
        result: The corrupted and clean results, with their per-image statistics.
        conditions: What the suite's numbers are measured under (the datasets' fingerprints).
        model_fingerprint: The model's fingerprint, ``None`` where it could not be taken.
        evaluator: What scored it (:func:`~pytest_segrobust.engine.evaluation.evaluator_version`).
        model_code: The identity of the model's code, where it was taken
            (:meth:`~pytest_segrobust.engine.workbench.Workbench.model_code`: a shard takes it).
        error: Why the cell has no result, as the report shows it.
        failure: The worker's traceback of an error not our own, shown as the test's failure.
        cache_counts: Clean results and cells computed and read from the cache, and models built, for this cell.
    """

    nodeid: str
    record: CellRecord | None = None
    observed: dict[str, float] | None = None
    result: CellResult | None = None
    conditions: Conditions | None = None
    model_fingerprint: str | None = None
    evaluator: str | None = None
    model_code: str | None = None
    error: str | None = None
    failure: str | None = None
    cache_counts: dict[str, int] = field(default_factory=dict)

    def unpack(self) -> tuple[CellRecord, dict[str, float], CellResult]:
        """The record, gated numbers and results.

        Raises:
            RemoteCellError: for a measurement that carries an error instead.
        """
        __tracebackhide__ = True
        if self.error is not None:
            raise RemoteCellError(self.error, self.failure or self.error)
        assert self.record is not None and self.observed is not None and self.result is not None
        return self.record, dict(self.observed), self.result

    def to_json(self) -> dict[str, Any]:
        """A measured cell as JSON (what a shard file keeps, so that the merge gates it again):
        its record as measured (what a gate decided of it left out), its corrupted and clean
        results with their per-image statistics, what it was measured under. Only a measurement
        with a result has one.

        Raises:
            ValueError: for a measurement that carries an error instead.
        """
        if self.record is None or self.result is None or self.conditions is None:
            raise ValueError(f"{self.nodeid}: a measurement without a result has no JSON")
        return {
            "format": MEASUREMENT_FORMAT,
            "nodeid": self.nodeid,
            "record": _ungated(self.record).to_json(),
            "corrupted": self.result.corrupted.to_json(),
            "clean": self.result.clean.to_json(),
            "conditions": self.conditions.to_json(),
            "model_fingerprint": self.model_fingerprint,
            "evaluator": self.evaluator,
            "model_code": self.model_code,
        }

    @classmethod
    def from_json(cls, data: Any) -> Measurement:
        """Parse :meth:`to_json`'s output into a measurement not yet gated.

        What a gate decided of the record (its status, baseline, checks, requirements) is
        dropped: whoever reads it gates it again. The gated numbers, and the record's, are
        those of the results, whatever the record says.

        Raises:
            ValueError: for another format, or a missing, unknown or mistyped field.
        """
        if not isinstance(data, dict):
            raise ValueError("a measurement must be a JSON object")
        check_format(data, MEASUREMENT_FORMAT, "measurement")
        known = {"format", "nodeid", "record", "corrupted", "clean", "conditions", "model_fingerprint", "evaluator", "model_code"}
        unknown, missing = sorted(set(data) - known), sorted(known - set(data))
        if unknown or missing:
            raise ValueError(f"measurement with {'unknown' if unknown else 'missing'} fields {', '.join(unknown or missing)}")
        try:
            record = CellRecord.from_json(data["record"])
            result = CellResult(EvalResult.from_json(data["corrupted"]), EvalResult.from_json(data["clean"]))
            conditions = Conditions.from_json(data["conditions"], "measurement")
        except (KeyError, TypeError, AttributeError, BaselineError) as exc:
            raise ValueError(f"malformed measurement: {type(exc).__name__}: {exc}") from None
        for name in ("model_fingerprint", "evaluator", "model_code"):
            if data[name] is not None and not isinstance(data[name], str):
                raise ValueError(f"measurement field {name!r}: expected a string or null, got {data[name]!r}")
        if record.nodeid != data["nodeid"]:
            raise ValueError(f"measurement of {data['nodeid']!r} holds the record of {record.nodeid!r}")
        if record.model_fingerprint != data["model_fingerprint"]:
            raise ValueError(
                f"measurement of {record.nodeid}: its record's model fingerprint {record.model_fingerprint!r} is not "
                f"its own {data['model_fingerprint']!r}"
            )
        numbers = observed(result, record.severity)
        measured = _numbers_of(_ungated(record), result, numbers)
        return cls(
            record.nodeid, measured, numbers, result, conditions, data["model_fingerprint"], data["evaluator"], data["model_code"]
        )


class CellRunner:
    """Measures cells in one process: builds each model and dataset once, keeps clean results.

    Args:
        options: The run's settings (device, autocast, batch size, caches, time limit).
        rootpath: The project's rootdir: user code runs with it as the working directory, and
            its modules and those beside the suites import by name.
        registry: The run's corruptions.
        adapt_hook: pytest's ``pytest_segrobust_adapt_model`` hook caller (the plugin's process only).
    """

    def __init__(
        self,
        options: Options,
        rootpath: Path,
        registry: CorruptionRegistry = REGISTRY,
        adapt_hook: Callable[..., Any] | None = None,
    ) -> None:
        self.options = options
        self.rootpath = rootpath
        self.registry = registry
        self.bench = Workbench(options, registry, adapt_hook, shown=lambda path: relative(path, rootpath))
        if options.cache_dir is not None:  # what models read under the project keys their cached clean results
            reads.watch(rootpath)
        self._suites: dict[Path, Suite] = {}
        # Whether reading a suite imports its factories; what never measures (segrobust merge) reads without.
        self.import_factories = True
        self.album = Album()  # the report's pictures of the cells measured here
        self._fingerprints: dict[tuple[str, str], str | None] = {}
        self._import_paths: list[str] = []

    # -- suites and the project ------------------------------------------------------------

    def load(self, path: Path) -> Suite:
        """The validated suite at ``path``, read once (raises :class:`~pytest_segrobust.core.errors.SuiteError`)."""
        if path not in self._suites:
            self.import_project()
            self._suites[path] = load_suite(path, self.registry, import_factories=self.import_factories)
        return self._suites[path]

    def import_project(self) -> None:
        """Factories in modules beside the suites or in the rootdir import without ``pythonpath``.

        The folders go to the end of the path: they add modules, never shadow installed ones.
        """
        if self._import_paths:
            return
        for folder in (str(self.options.suites_dir.resolve()), str(self.rootpath.resolve())):
            if folder not in sys.path:
                sys.path.append(folder)
                self._import_paths.append(folder)

    def close(self) -> None:
        """Undo what the run changed in this process (the import path)."""
        for folder in self._import_paths:
            if folder in sys.path:
                sys.path.remove(folder)
        self._import_paths.clear()

    @contextmanager
    def in_project(self) -> Iterator[None]:
        """Run user code (factories, datasets) with the rootdir as the working directory.

        Relative paths in a suite then mean the same wherever pytest was started, as the
        baselines and the report, which also live under the rootdir.
        """
        previous = os.getcwd()
        os.chdir(self.rootpath)
        try:
            yield
        finally:
            os.chdir(previous)

    @contextmanager
    def bounds(self, suite: Suite, what: str) -> Iterator[None]:
        """Where user code runs for a cell, a piece of one or a picture: in the project's folder,
        within the cell's time limit (the command line's, else the suite's), named by ``what``."""
        with self.in_project(), time_limit(self.options.timeout or suite.timeout, what):
            yield

    # -- measuring ---------------------------------------------------------------------------

    def measure(self, suite: Suite, key: CellKey, nodeid: str, split: Split | None = None) -> Measurement:
        """Evaluate one cell within its time limit, without gating it.

        With ``split``, this process evaluates the first piece of the cell's samples and merges
        the others (:meth:`piece`, in other processes).

        Raises:
            SegRobustError: for bad input (dataset, model output, time limit); anything the
                user's code raised.
        """
        with self.bounds(suite, nodeid or key.label):
            self.bench.conditions(suite)  # fingerprints the datasets: what the baseline is compared under
            result, dataset, category = self.bench.cell(suite, key, split)
            corrupted, clean = result.corrupted, result.clean
            numbers = observed(result, key.severity)
            record = CellRecord(
                nodeid=nodeid,
                suite=suite.name,
                model=key.model,
                corruption=key.corruption,
                category=category,
                severity=key.severity,
                score=result.score,
                clean_score=result.clean_score,
                gamma_r=numbers.get("gamma_r"),
                gamma_a=numbers.get("gamma_a"),
                per_class=list(corrupted.per_class),
                class_names=list(dataset.class_names),
                num_images=corrupted.num_images,
                seconds=corrupted.seconds,
                status=Status.PASSED,
                clean_per_class=list(clean.per_class),
                supercategories=supercategories(dataset),
                details=dict(corrupted.details),
                clean_details=dict(clean.details),
                split=key.split,
                model_fingerprint=self.model_fingerprint(suite, key.model),
                dataset_fingerprint=self.bench.dataset_fingerprint(suite, key.split),
                device=str(model_device(self.bench.model(suite, key.model))),
                cached=self.bench.from_cache(suite, key),
                metrics={
                    name: {
                        "score": corrupted.metrics[name].score,
                        "clean_score": clean.metrics[name].score,
                        "gamma_r": numbers.get(f"{name}.gamma_r"),
                        "gamma_a": numbers.get(f"{name}.gamma_a"),
                        "per_class": list(corrupted.metrics[name].per_class),
                        "clean_per_class": list(clean.metrics[name].per_class),
                        "details": dict(corrupted.metrics[name].details),
                    }
                    for name in suite.metrics[1:]
                },
            )
        self.album.consider(suite, key, record, ImageScores.of(result))
        return Measurement(
            nodeid,
            record,
            numbers,
            result,
            self.bench.conditions(suite),
            self.model_fingerprint(suite, key.model),
            evaluator_version(suite.task, suite.metrics),
        )

    def measure_remote(self, suite_path: Path, key: CellKey, nodeid: str, split: Split | None = None) -> Measurement:
        """:meth:`measure` for another process: never raises for a failed evaluation.

        The measurement then carries the error, as the local path would have recorded it, and
        the controller fails the cell with it. It counts what this cell built and computed.
        """
        before = self.cache_counts()
        try:
            measurement = self.measure(self.load(suite_path), key, nodeid, split)
        except Exception as exc:  # noqa: BLE001 - the controller fails the cell with it
            # As the local path shows them: our own errors alone, others (and ours that carry the user
            # code's exception, a model that raised) with their traceback, which ends where the user's code raised.
            ours = isinstance(exc, SegRobustError) and exc.__cause__ is None
            failure = None if ours else "".join(traceback.format_exception(exc))
            measurement = Measurement(nodeid, error=error_message(exc), failure=failure)
        return dataclass_replace(measurement, cache_counts=self._counts_since(before))

    def piece(self, suite_path: Path, key: CellKey, index: int, count: int) -> Piece:
        """Evaluate piece ``index`` of ``count`` of a split cell's samples, for the process that merges them.

        Raises:
            Exception: what the cell's evaluation raises; the merging process records it as the cell's error.
        """
        before = self.cache_counts()
        suite = self.load(suite_path)
        with self.bounds(suite, key.label):
            piece = self.bench.piece(suite, key, index, count)
        return dataclass_replace(piece, cache_counts=self._counts_since(before))

    def pictures(self, only: Collection[str] | None = None) -> RunPictures:
        """The report's pictures of what this process measured (each made once, then left out):
        its suites' galleries and each model's worst cell among those measured here (or among
        ``only``, the cells the controller recorded; :mod:`pytest_segrobust.engine.report_pictures`)."""
        return self.album.develop(self.bench, self.bounds, only, figures=self.options.figures)

    # -- what a measurement is compared under ---------------------------------------------------

    def conditions(self, suite: Suite) -> Conditions:
        """What the suite's numbers are measured under (builds its datasets to fingerprint them)."""
        return self.bench.conditions(suite)

    def adopt(self, suite: Suite, measurement: Measurement) -> None:
        """Take what another process measured the cell under: the conditions and the model's
        fingerprint, so this one gates without building the model or reading the dataset."""
        if measurement.conditions is not None:
            self.bench.adopt_conditions(suite, measurement.conditions)
        if measurement.record is not None:
            self._fingerprints.setdefault((str(suite.path), measurement.record.model), measurement.model_fingerprint)

    def model_fingerprint(self, suite: Suite, model: str) -> str | None:
        """The model's fingerprint, taken once; ``None`` (with a warning) where it cannot be taken."""
        key = (str(suite.path), model)
        if key not in self._fingerprints:
            try:
                self._fingerprints[key] = str(self.bench.model(suite, model).fingerprint())
            except Exception as exc:  # noqa: BLE001 - provenance is a record, never a reason to fail a cell
                logger.warning("%s: model %s: no fingerprint for the baseline's provenance: %s", suite.path, model, exc)
                self._fingerprints[key] = None
        return self._fingerprints[key]

    def cache_counts(self) -> dict[str, int]:
        """Clean results computed and read from the disk cache (``misses``, ``hits``), corrupted
        cells alike (``cell_misses``, ``cell_hits``), models whose results are never cached, and models built."""
        cache = self.bench.cache
        counts = {"hits": 0, "misses": 0, "cell_hits": 0, "cell_misses": 0}
        if cache is not None:
            counts = {
                "hits": cache.hits["clean"],
                "misses": cache.misses["clean"],
                "cell_hits": cache.hits["cell"],
                "cell_misses": cache.misses["cell"],
            }
        return counts | {"uncached": self.bench.uncached, "builds": self.bench.builds}

    def _counts_since(self, before: dict[str, int]) -> dict[str, int]:
        """What this process built and computed since it had the counts ``before``."""
        after = self.cache_counts()
        return {name: after[name] - before.get(name, 0) for name in after}


def observed(result: CellResult, severity: int) -> dict[str, float]:
    """The gated numbers of a cell: the headline's unprefixed, every further metric's as ``<name>.<number>``."""
    numbers: dict[str, float] = {}
    for index, name in enumerate(result.corrupted.metrics):
        prefix = "" if index == 0 else f"{name}."
        numbers[f"{prefix}score"] = result.corrupted.metrics[name].score
        if severity > 0:
            numbers[f"{prefix}gamma_r"], numbers[f"{prefix}gamma_a"] = result.robustness(name)
    return numbers


def _ungated(record: CellRecord) -> CellRecord:
    """The record as measured: what a gate decides of it (status, baseline, checks, requirements) left out."""
    return dataclass_replace(record, status=Status.PASSED, baseline=None, checks=[], requirements=[])


def _numbers_of(record: CellRecord, result: CellResult, numbers: Mapping[str, float]) -> CellRecord:
    """The record with the numbers of its results (:func:`observed`'s ``numbers``), as :meth:`CellRunner.measure` sets them."""
    metrics = {
        name: {
            **values,
            "score": result.corrupted.metrics[name].score,
            "clean_score": result.clean.metrics[name].score,
            "gamma_r": numbers.get(f"{name}.gamma_r"),
            "gamma_a": numbers.get(f"{name}.gamma_a"),
        }
        for name, values in record.metrics.items()
        if name in result.corrupted.metrics and name in result.clean.metrics
    }
    return dataclass_replace(
        record,
        score=result.score,
        clean_score=result.clean_score,
        gamma_r=numbers.get("gamma_r"),
        gamma_a=numbers.get("gamma_a"),
        num_images=result.corrupted.num_images,
        metrics=metrics,
    )
