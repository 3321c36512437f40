"""One object owns a robustness run: suites, models, clean results, records, pending writes.

``plugin.py`` forwards pytest's events here. Items ask the session to run their cell; the
session evaluates (sharing the clean result of each model x dataset), compares with the
baseline and records the outcome. Under pytest-xdist each worker sends its records and
pending baseline writes to the controller as a JSON payload; only the controller (or the
single process without xdist) writes baselines and the report, once, at the end.

A shard of a run (``--segrobust-shard K/N``, see :mod:`pytest_segrobust.shards`) writes one
shard file instead; ``segrobust merge`` feeds the N files to a fresh session through the same
path the xdist controller takes (:meth:`SegRobustSession.absorb_shards`), then :meth:`finish`.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
import traceback
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from dataclasses import replace as dataclass_replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from PIL import Image

from pytest_segrobust import __version__, reads
from pytest_segrobust.baselines import (
    PRUNE_FLAG,
    BaselineFile,
    BaselineUpdate,
    CellKey,
    Conditions,
    prune_baseline,
    read_baseline,
    unused_entries,
    write_baseline,
)
from pytest_segrobust.corruptions import REGISTRY, Corruption, CorruptionRegistry
from pytest_segrobust.data.base import supercategories
from pytest_segrobust.errors import BaselineError, InconclusiveWarning, SegRobustError, SuiteError
from pytest_segrobust.evaluation import CLEAN, CellResult
from pytest_segrobust.evidence import Evidence, aggregate_changes, pack_statistics, sidecar_entries
from pytest_segrobust.files import WriteError, atomic_write_text, remove_stale_temporaries
from pytest_segrobust.gate import Status, allowances, judge
from pytest_segrobust.limits import time_limit
from pytest_segrobust.metrics import METRICS
from pytest_segrobust.models.base import model_device
from pytest_segrobust.pieces import Piece, Split
from pytest_segrobust.progress import TerminalProgress
from pytest_segrobust.records import CellRecord
from pytest_segrobust.release import CellEvidence, ModelOutcome, cell_checks, judge_model
from pytest_segrobust.report import ReportIncomplete, RunVerdict, build_report, run_verdict, write_report
from pytest_segrobust.report.coverage import RunCoverage, partial_report_path
from pytest_segrobust.report.environment import run_environment
from pytest_segrobust.report.frame import describe_frames
from pytest_segrobust.report.gallery import REPORT_TILE, render_gallery
from pytest_segrobust.report.html import write_html
from pytest_segrobust.report.overlays import describe_worst
from pytest_segrobust.report.tables import worst_cell
from pytest_segrobust.requirements import RequirementCheck
from pytest_segrobust.shards import (
    ShardCell,
    ShardCoverage,
    ShardFile,
    ShardPlan,
    ShardSpec,
    assign_cells,
    digests,
    relative,
)
from pytest_segrobust.sidecar import SidecarWriter, sidecar_path
from pytest_segrobust.suite import Suite, declared_name, load_suite
from pytest_segrobust.text.cells import is_visual, modality
from pytest_segrobust.wording import abbreviations, plural
from pytest_segrobust.workbench import Workbench

if TYPE_CHECKING:
    from pytest_segrobust.ray_backend import RayBackend, RaySettings

logger = logging.getLogger("pytest_segrobust")


class CellFailure(AssertionError):
    """A cell fell below its baseline or has none yet; the message says what to do."""


class RemoteCellError(SegRobustError):
    """A cell whose evaluation failed in a remote worker: shown with the worker's traceback.

    Args:
        message: What went wrong, as the local path records it (the report's error).
        failure: What the test's failure shows: the message, with the worker's traceback for an
            error not our own.
    """

    def __init__(self, message: str, failure: str) -> None:
        super().__init__(message)
        self.failure = failure


def error_message(exc: BaseException) -> str:
    """How a cell's error is recorded: our own errors say everything, others are named by type."""
    return str(exc) if isinstance(exc, SegRobustError) else f"{type(exc).__name__}: {exc}"


@dataclass(frozen=True)
class Measurement:
    """A cell evaluated by a remote worker, not yet gated: what the worker sends the controller.

    Either the cell's record, gated numbers and results with what the baseline is compared
    under, or the error that stopped it. Pickled by the backend (the results hold arrays).

    Attributes:
        nodeid: The cell's pytest node id.
        conditions: What the suite's numbers are measured under (the datasets' fingerprints).
        model_fingerprint: The model's fingerprint, ``None`` where it could not be taken.
        error: Why the cell has no result, as the report shows it.
        failure: The worker's traceback of an error not our own, shown as the test's failure.
        cache_counts: Clean results computed and read from the cache, and models built, for this cell.
    """

    nodeid: str
    record: CellRecord | None = None
    observed: dict[str, float] | None = None
    result: CellResult | None = None
    conditions: Conditions | None = None
    model_fingerprint: str | None = None
    error: str | None = None
    failure: str | None = None
    cache_counts: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Options:
    """The command-line and ini settings of a run, parsed once.

    Attributes:
        device: Where models, corruptions and metrics run in this process.
        cache_dir: Folder of cached clean results; ``None`` disables the disk cache.
        statistics_dir: Folder of the statistics files of suites with ``gate: {statistics:
            cache}`` (in pytest's cache, kept with ``--segrobust-no-cache`` too); ``None``
            without pytest's cache.
        amp: Run ``nn.Module`` models under autocast.
        batch_size: Overrides every suite's batch size when set.
        loader_workers: Processes reading samples ahead of the model.
        sample_cache_mb: MiB of decoded samples each process keeps across a dataset's cells
            (0: every cell reads and decodes its dataset again; None: sized from the machine's
            memory and the worker count, :func:`~pytest_segrobust.data.sample_cache.default_budget`).
        timeout: Seconds a cell may take; overrides every suite's ``timeout`` when set.
        prune: Remove the baseline entries the suites no longer have (``--segrobust-prune``).
        report_html: Also write the report as one self-contained HTML page beside the markdown.
        malloc: What the processes that evaluate cells do to glibc's ``malloc``
            (:mod:`pytest_segrobust.allocator`): the plugin applies it in its own process,
            a Ray actor in its own.
        threads: ``--segrobust-threads``: ``auto`` or the count each process that evaluates
            cells computes on (:mod:`pytest_segrobust.threads`).
    """

    enabled: bool
    update_baselines: bool
    suites_dir: Path
    baselines_dir: Path
    report_path: Path
    report_html: bool = False
    device: torch.device = torch.device("cpu")
    cache_dir: Path | None = None
    statistics_dir: Path | None = None
    amp: bool = False
    batch_size: int | None = None
    loader_workers: int = 0
    sample_cache_mb: int | None = None
    timeout: float | None = None
    prune: bool = False
    malloc: str = "system"
    threads: int | str = "auto"


@dataclass(frozen=True)
class PendingWrite:
    """A baseline cell to write at the end of the run, with the conditions it was measured under
    and the fingerprint of the model that produced it (``None`` where it could not be taken)."""

    path: str
    suite: str
    conditions: dict[str, Any]
    key: CellKey
    values: dict[str, float]
    replace_all: bool
    model_fingerprint: str | None = None
    # Per metric, the cell's packed per-image statistics (corrupted and clean) and their image count for the sidecar
    # of a suite with a statistical gate; empty otherwise.
    statistics: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass(frozen=True)
class ModelChange:
    """A model whose fingerprint differs from the one its baseline was made with: shown, never gated."""

    baseline_file: str
    model: str
    recorded: str
    current: str

    def describe(self) -> str:
        shown = abbreviations((self.current, self.recorded), length=12, whole_up_to=12)
        return (
            f"model {self.model} differs from the one {self.baseline_file} was made with "
            f"(fingerprint {shown[self.current].removesuffix('…')}, recorded {shown[self.recorded].removesuffix('…')})"
        )


class SegRobustSession:
    """State of one pytest run with ``--segrobust``.

    Args:
        options: Parsed settings.
        rootpath: pytest's rootdir: relative paths in suites mean paths under it, its modules
            and those beside the suites are importable, and messages show paths relative to it.
        registry: The run's corruptions; the built-ins by default.
        adapt_hook: pytest's ``pytest_segrobust_adapt_model`` hook caller.
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
        self.records: list[CellRecord] = []
        self.started = time.time()  # the report's wall time counts from here
        # Cells that raised instead of producing a result: node id -> what went wrong.
        self.errors: dict[str, str] = {}
        self._suites_dir = options.suites_dir.resolve()  # asked for every file pytest visits
        self._explicit: set[Path] = set()
        self.pending: list[PendingWrite] = []
        self.suite_order: dict[str, Suite] = {}
        self._suites: dict[Path, Suite] = {}
        # Models, datasets and clean results, shared with the segrobust fixture.
        self.registry = registry
        self.bench = Workbench(options, registry, adapt_hook)
        if options.cache_dir is not None:  # what models read under the project keys their cached clean results
            reads.watch(rootpath)
        self._baselines: dict[Path, BaselineFile] = {}
        self.evidence = Evidence()
        # Node id -> the headline score of each bootstrap resample (statistical gates): the aggregates' intervals.
        self.resampled: dict[str, dict[str, Any]] = {}
        # Node id -> what a model's aggregates need of the cell (this process's cells only).
        self.cell_evidence: dict[str, CellEvidence] = {}
        # Node id of a model's aggregates item -> its outcome.
        self.model_outcomes: dict[str, ModelOutcome] = {}
        self.report: dict[str, Any] | None = None
        self.written: list[Path] = []
        # What went wrong while writing at the end of the run; each fails the run.
        self.problems: list[str] = []
        # What the report could not show (a figure, a model's worst images): said in it, never failing the run.
        self.warnings: list[str] = []
        # Worst cells described for the report, by (model row, cell node id): each evaluated once.
        self._described: dict[tuple[str, str], tuple[dict[str, Any], Image.Image | None]] = {}
        self.cache_counts = {"hits": 0, "misses": 0, "uncached": 0}
        # What this run collected and selected, and why it stopped: see :meth:`run_coverage`.
        self.expected: list[str] = []
        self.deselected: list[str] = []
        self.collection_known = False
        self.selection: list[str] = []
        self.narrowed_to: list[str] = []
        self.stop_reason: str | None = None
        # Why a merged shard's cells have no result (each shard's own stop reason).
        self.not_run_reasons: dict[str, str] = {}
        self.coverage: RunCoverage | None = None
        # A shard of a run: which, the files it started from, and its part of the cells.
        self.shard: ShardSpec | None = None
        self.shard_started_from: tuple[dict[str, str], dict[str, str]] = ({}, {})
        self.shard_plan: ShardPlan | None = None
        # The end of the run's word on the baselines: what an update changed, unused entries.
        self.baseline_summary: list[str] = []
        # (suite, model) -> how the model differs from the one its baseline was made with.
        self.model_changes: dict[tuple[str, str], ModelChange] = {}
        self._fingerprints: dict[tuple[str, str], str | None] = {}
        self._import_paths: list[str] = []
        self._declared_names: dict[Path, dict[Path, str | None]] = {}
        # Where cells are evaluated when not in this process (--segrobust-backend ray); set
        # by the plugin once the run's cells are known.
        self.backend: RayBackend | None = None

    @property
    def progress_bar(self) -> TerminalProgress | None:
        """Set by the plugin when a terminal shows this process's output (not under xdist)."""
        return self.bench.progress_bar

    @progress_bar.setter
    def progress_bar(self, bar: TerminalProgress | None) -> None:
        self.bench.progress_bar = bar

    # -- collection ---------------------------------------------------------------------

    def collect_explicitly(self, args: list[str], invocation_dir: Path) -> None:
        """Files named on the command line are suites wherever they are (``pytest --segrobust other/s.yaml``).

        Arguments that collect less than the whole suites folder (a suite file, a node id, a
        subfolder) are kept in :attr:`narrowed_to`: such a run is partial.
        """
        whole, narrower = False, []
        for arg in args:
            path = Path(arg.split("::", 1)[0])
            resolved = (path if path.is_absolute() else invocation_dir / path).resolve()
            self._explicit.add(resolved)
            if "::" not in arg and self._suites_dir.is_relative_to(resolved):
                whole = True
            elif resolved.is_relative_to(self._suites_dir) or resolved.suffix in (".yaml", ".yml"):
                narrower.append(arg)
        self.narrowed_to = [] if whole else narrower

    def is_suite_file(self, path: Path) -> bool:
        """A YAML file anywhere under the suites folder (subfolders too), or named on the command line."""
        if path.suffix not in (".yaml", ".yml"):
            return False
        resolved = path.resolve()
        return resolved.is_relative_to(self._suites_dir) or resolved in self._explicit

    def suite(self, path: Path) -> Suite:
        """The validated suite at ``path`` (raises :class:`SuiteError`)."""
        if path not in self._suites:
            self._make_project_importable()
            suite = load_suite(path, self.registry)
            self._check_unique_name(suite)
            self._suites[path] = suite
            self.suite_order[suite.name] = suite
        return self._suites[path]

    def _make_project_importable(self) -> None:
        """Factories in modules beside the suites or in the rootdir import without ``pythonpath``.

        The folders go to the end of the path: they add modules, never shadow installed ones.
        """
        if self._import_paths:
            return
        for folder in (str(self._suites_dir), str(self.rootpath.resolve())):
            if folder not in sys.path:
                sys.path.append(folder)
                self._import_paths.append(folder)

    def _check_unique_name(self, suite: Suite) -> None:
        """Two suite files with one name would share, and overwrite, one baseline file.

        A suite is compared with every suite the run touches wherever its file lies: all those
        under the suites folder (subfolders too, collected by this run or not), those named on
        the command line, and for a suite named from elsewhere, those beside it.
        """
        here = suite.path.resolve()
        declared = dict(self._names_in(self._suites_dir, deep=True))
        if not here.is_relative_to(self._suites_dir):
            declared |= self._names_in(here.parent, deep=False)
        for path in sorted(self._explicit):
            if path.suffix in (".yaml", ".yml") and path.is_file():
                declared |= self._names_in(path, deep=False)
        others = sorted(other for other, name in declared.items() if other != here and name == suite.name)
        if others:
            raise SuiteError(
                f"{suite.path}: field 'name': suite name {suite.name!r} is also the name of "
                f"{', '.join(self._shown(o) for o in others)}; both would share baselines/{suite.name}.json. "
                "Give each suite its own name"
            )

    def _names_in(self, where: Path, *, deep: bool) -> dict[Path, str | None]:
        """The name each suite file at ``where`` declares: a file, a folder, or (``deep``) its subfolders too;
        read once per place, not once per suite."""
        if where not in self._declared_names:
            if where.is_file():
                files = [where]
            else:
                search = where.rglob if deep else where.glob
                files = sorted([*search("*.yaml"), *search("*.yml")])
            self._declared_names[where] = {path.resolve(): declared_name(path) for path in files}
        return self._declared_names[where]

    def close(self) -> None:
        """Undo what the run changed in this process (the import path)."""
        for folder in self._import_paths:
            if folder in sys.path:
                sys.path.remove(folder)
        self._import_paths.clear()

    @staticmethod
    def cells(suite: Suite) -> list[CellKey]:
        """Every cell of a suite: per model (and split), clean first, then corruption x severity."""
        cells: list[CellKey] = []
        for model in suite.models:
            for split in suite.splits:
                cells.append(CellKey(suite.name, model.name, CLEAN, 0, split))
                cells.extend(
                    CellKey(suite.name, model.name, c, s, split) for c in suite.corruptions for s in suite.severities
                )
        return cells

    # -- running a cell -----------------------------------------------------------------

    def run_cell(self, suite: Suite, key: CellKey, nodeid: str) -> CellRecord:
        """Evaluate one cell, compare it with its baseline and record the outcome.

        Raises:
            CellFailure: when the cell regressed, had no baseline or produced no finite score.
            SegRobustError: for bad input (dataset, model output, broken baseline, time limit).
        """
        __tracebackhide__ = True
        try:
            if self.backend is not None:
                record, observed, result = self._adopt(suite, key, self.backend.measurement(nodeid))
            else:
                record, observed, result = self._measure_limited(suite, key, nodeid)
        except BaseException as exc:
            if isinstance(exc, Exception):
                self.errors[nodeid] = error_message(exc)
            raise
        self.records.append(record)
        try:
            self._gate(suite, key, observed, record, result)
        except CellFailure:
            raise
        except BaseException as exc:
            # The record was kept as passed until the gate spoke: an error in the gate must not leave it so.
            record.status = Status.ERROR
            if isinstance(exc, Exception):
                self.errors[nodeid] = error_message(exc)
            raise
        return record

    def run_model_gate(self, suite: Suite, model: str, nodeid: str, cells: list[tuple[CellKey, str]]) -> ModelOutcome:
        """Decide a model's aggregates (its ``aggregates`` item) from its cells (node id by key).

        Cells this process evaluated are used as they are; the others (run by another worker,
        deselected, or not yet run) are measured here, within their time limits, and never gated
        (:mod:`pytest_segrobust.release`).

        Raises:
            CellFailure: when an aggregate regressed or a requirement is not met.
            SegRobustError: when a cell it needs has no result.
        """
        __tracebackhide__ = True
        try:
            outcome = self._model_outcome(suite, model, nodeid, cells)
        except BaseException as exc:
            if isinstance(exc, Exception):
                self.errors[nodeid] = error_message(exc)
            raise
        self.model_outcomes[nodeid] = outcome
        if outcome.status == Status.INCONCLUSIVE_ALLOWED.value and suite.gate is not None and suite.gate.inconclusive == "warn":
            warnings.warn(InconclusiveWarning("\n".join(outcome.notes)), stacklevel=1)
        if not outcome.passed:
            raise CellFailure(outcome.message)
        return outcome

    def _model_outcome(self, suite: Suite, model: str, nodeid: str, cells: list[tuple[CellKey, str]]) -> ModelOutcome:
        by_split: dict[str | None, list[CellEvidence]] = {}
        reference: dict[str | None, list[CellRecord]] = {}
        measured = 0
        for key, cell_nodeid in cells:
            evidence = self.cell_evidence.get(cell_nodeid)
            if evidence is None:
                if cell_nodeid in self.errors:
                    raise SegRobustError(f"{nodeid}: cell {cell_nodeid} has no result ({self.errors[cell_nodeid]})")
                evidence = self._measure_evidence(suite, key, cell_nodeid)
                measured += 1
            if key.model == model:
                by_split.setdefault(key.split, []).append(evidence)
            else:
                reference.setdefault(key.split, []).append(evidence.record)
        outcome = judge_model(suite, model, nodeid, by_split, reference, self._shown(suite.path))
        outcome.measured_here = measured
        return outcome

    def _measure_evidence(self, suite: Suite, key: CellKey, nodeid: str) -> CellEvidence:
        """Measure a cell for a model's aggregates alone: its numbers, resamples and pairing with the baseline."""
        record, observed, result = self._measure_limited(suite, key, nodeid)
        baseline = self._baseline_file(suite)
        try:
            stored = baseline.lookup(key, self.bench.conditions(suite))
        except BaselineError:
            stored = None
        paired = None
        if suite.gate is not None and stored is not None and not self.options.update_baselines:
            record.baseline = dict(stored)
            _, _, paired = self.evidence.checks(
                suite, key, observed, stored, result, baseline.path, self._shown(baseline.path), self.statistics_store(suite)
            )
        return self._cell_evidence(suite, key, record, result, paired)

    def _cell_evidence(
        self, suite: Suite, key: CellKey, record: CellRecord, result: CellResult, paired: dict[str, Any] | None
    ) -> CellEvidence:
        if suite.gate is None:
            return CellEvidence(record, paired=paired)
        clean, corrupted = self.evidence.own_runs(suite, key, result)[suite.metric]
        return CellEvidence(record, clean.resampled, corrupted.resampled, corrupted.images, paired)

    def start_backend(self, cells: list[tuple[str, Suite, CellKey]], settings: RaySettings) -> None:
        """Send the run's cells (node id, suite, key; in run order) to Ray actors; items then wait for them."""
        from pytest_segrobust.ray_backend import RayBackend

        self.backend = RayBackend.start(self, cells, settings)

    def stop_backend(self) -> None:
        """Kill the actors and drop the cells no item took (the run stopped early)."""
        if self.backend is not None:
            self.backend.close()
            self.backend = None

    def measure_cell(self, suite_path: Path, key: CellKey, nodeid: str, split: Split | None = None) -> Measurement:
        """Evaluate one cell without gating it: what a remote worker sends the controller.

        Never raises for a failed evaluation: the measurement then carries the error, as the
        local path would have recorded it, and the controller fails the cell with it. With
        ``split``, this worker evaluates the first piece of the cell's samples and merges the
        others (:meth:`measure_piece`, in other workers).
        """
        before = self._cache_counts()
        try:
            suite = self.suite(suite_path)
            record, observed, result = self._measure_limited(suite, key, nodeid, split)
            conditions, fingerprint = self.bench.conditions(suite), self._model_fingerprint(suite, key.model)
        except Exception as exc:  # noqa: BLE001 - the controller fails the cell with it
            # As the local path shows them: our own errors alone, others with their traceback.
            failure = None if isinstance(exc, SegRobustError) else "".join(traceback.format_exception(exc))
            measurement = Measurement(nodeid, error=error_message(exc), failure=failure)
        else:
            measurement = Measurement(nodeid, record, observed, result, conditions, fingerprint)
        return dataclass_replace(measurement, cache_counts=self._counts_since(before))

    def measure_piece(self, suite_path: Path, key: CellKey, index: int, count: int) -> Piece:
        """Evaluate piece ``index`` of ``count`` of a split cell's samples, for the worker that merges them.

        Raises:
            Exception: what the cell's evaluation raises; the merging worker records it as the cell's error.
        """
        before = self._cache_counts()
        suite = self.suite(suite_path)
        with self._cell_bounds(suite, key):
            piece = self.bench.piece(suite, key, index, count)
        return dataclass_replace(piece, cache_counts=self._counts_since(before))

    def _counts_since(self, before: dict[str, int]) -> dict[str, int]:
        """What this process built and computed since it had the counts ``before``."""
        after = self._cache_counts()
        return {name: after[name] - before.get(name, 0) for name in after}

    def _measure_limited(
        self, suite: Suite, key: CellKey, nodeid: str, split: Split | None = None
    ) -> tuple[CellRecord, dict[str, float], CellResult]:
        with self._cell_bounds(suite, key, nodeid):
            return self._measure(suite, key, nodeid, split)

    @contextmanager
    def _cell_bounds(self, suite: Suite, key: CellKey, nodeid: str | None = None) -> Iterator[None]:
        """Where a cell's evaluation, or a piece of it, runs: in the project's folder, within the
        cell's time limit (the command line's, else the suite's), named by its node id where known."""
        with self.in_project(), time_limit(self.options.timeout or suite.timeout, nodeid or key.label):
            yield

    def _adopt(self, suite: Suite, key: CellKey, measured: Measurement) -> tuple[CellRecord, dict[str, float], CellResult]:
        """A remote worker's measurement of a cell, ready to gate here as if measured here.

        The conditions and the model's fingerprint come with it, so the controller compares
        with the baseline without building the model or reading the dataset itself.
        """
        __tracebackhide__ = True
        for name, count in measured.cache_counts.items():
            self.cache_counts[name] = self.cache_counts.get(name, 0) + count
        if measured.error is not None:
            raise RemoteCellError(measured.error, measured.failure or measured.error)
        assert measured.record is not None and measured.observed is not None and measured.result is not None
        assert measured.conditions is not None
        self.bench.adopt_conditions(suite, measured.conditions)
        self._fingerprints.setdefault((str(suite.path), key.model), measured.model_fingerprint)
        return measured.record, dict(measured.observed), measured.result

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

    def _measure(
        self, suite: Suite, key: CellKey, nodeid: str, split: Split | None = None
    ) -> tuple[CellRecord, dict[str, float], CellResult]:
        self.bench.conditions(suite)  # fingerprints the datasets: what the baseline is compared under
        result, dataset, category = self.bench.cell(suite, key, split)
        corrupted, clean = result.corrupted, result.clean
        observed = _observed(result, key.severity)
        record = CellRecord(
            nodeid=nodeid,
            suite=suite.name,
            model=key.model,
            corruption=key.corruption,
            category=category,
            severity=key.severity,
            score=result.score,
            clean_score=result.clean_score,
            gamma_r=observed.get("gamma_r"),
            gamma_a=observed.get("gamma_a"),
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
            model_fingerprint=self._model_fingerprint(suite, key.model),
            dataset_fingerprint=self.bench.dataset_fingerprint(suite, key.split),
            device=str(model_device(self.bench.model(suite, key.model))),
            metrics={
                name: {
                    "score": corrupted.metrics[name].score,
                    "clean_score": clean.metrics[name].score,
                    "gamma_r": observed.get(f"{name}.gamma_r"),
                    "gamma_a": observed.get(f"{name}.gamma_a"),
                    "per_class": list(corrupted.metrics[name].per_class),
                    "clean_per_class": list(clean.metrics[name].per_class),
                    "details": dict(corrupted.metrics[name].details),
                }
                for name in suite.metrics[1:]
            },
        )
        return record, observed, result

    def _gate(self, suite: Suite, key: CellKey, observed: dict[str, float], record: CellRecord, result: CellResult) -> None:
        __tracebackhide__ = True
        baseline = self._baseline_file(suite)
        try:
            stored, problem = baseline.lookup(key, self.bench.conditions(suite)), None
        except BaselineError as exc:
            stored, problem = None, str(exc)
        change = None if problem is not None else self._model_change(suite, key.model, baseline)
        paired, missing = None, None
        if suite.gate is not None and stored is not None and problem is None and not self.options.update_baselines:
            try:
                store = self.statistics_store(suite)
            except WriteError as exc:
                paired, missing, resampled = None, str(exc), None
            else:
                paired, missing, resampled = self.evidence.checks(
                    suite, key, observed, stored, result, baseline.path, self._shown(baseline.path), store, record.nodeid
                )
            if resampled is not None:
                self.resampled[record.nodeid] = resampled
        tolerances, lower_is_better = allowances(suite.tolerance, suite.metrics, corrupted=key.severity > 0)
        requirements = self._requirement_checks(suite, key, record, observed, result)
        record.requirements = [c.to_json() for c in requirements or ()]
        if suite.gates_models:
            self.cell_evidence[record.nodeid] = self._cell_evidence(suite, key, record, result, self.resampled.get(record.nodeid))
        verdict = judge(
            key,
            observed,
            stored,
            tolerances,
            update=self.options.update_baselines,
            baseline_problem=problem,
            baseline_file=self._shown(baseline.path),
            metric_label=METRICS.get(suite.metric).label,
            clean_score=record.clean_score,
            lower_is_better=lower_is_better,
            model_change=None if change is None else change.describe(),
            paired=paired,
            inconclusive=suite.gate.inconclusive if suite.gate is not None else "fail",
            missing_statistics=missing,
            requirements=requirements,
            nodeid=record.nodeid,
            sharded=self.shard is not None,
        )
        record.status = verdict.status
        if verdict.checks:  # an update's too: the report keeps the numbers it replaces
            record.baseline = dict(stored or {})
            record.checks = [asdict(c) | {"regressed": c.regressed, "improved": c.improved} for c in verdict.checks]
        if verdict.write:
            self._queue(suite, baseline.path, key, observed, verdict.replace_all, pack_statistics(suite, result))
        if verdict.warning is not None:
            warnings.warn(InconclusiveWarning(verdict.warning), stacklevel=1)
        if not verdict.passed:
            raise CellFailure(verdict.message)

    def _requirement_checks(
        self, suite: Suite, key: CellKey, record: CellRecord, observed: dict[str, float], result: CellResult
    ) -> list[RequirementCheck] | None:
        """The suite's requirements of this cell, decided (by the bootstrap under a statistical gate);
        ``None`` for a suite without ``require:``."""
        if suite.requirements is None:
            return None
        runs = class_runs = None
        if suite.gate is not None:
            runs = self.evidence.own_runs(suite, key, result)
            class_runs = {name: self.evidence.class_runs(suite, key, result, name) for name in suite.metrics}
        try:
            return cell_checks(suite, record, observed, runs, class_runs)
        except ValueError as exc:
            raise SuiteError(f"{self._shown(suite.path)}: {exc}") from None

    def _queue(
        self,
        suite: Suite,
        path: Path,
        key: CellKey,
        values: dict[str, float],
        replace_all: bool,
        statistics: dict[str, dict[str, Any]],
    ) -> None:
        conditions = self.bench.conditions(suite).to_json()
        fingerprint = self._model_fingerprint(suite, key.model)
        self.pending.append(
            PendingWrite(str(path), suite.name, conditions, key, values, replace_all, fingerprint, statistics)
        )

    def _model_change(self, suite: Suite, model: str, baseline: BaselineFile) -> ModelChange | None:
        """How ``model`` differs from the one its baseline was made with, if the file says and it does."""
        recorded = baseline.fingerprint(model)
        current = None if recorded is None else self._model_fingerprint(suite, model)
        if current is None or current == recorded:
            return None
        change = ModelChange(self._shown(baseline.path), model, recorded, current)
        return self.model_changes.setdefault((suite.name, model), change)

    def _model_fingerprint(self, suite: Suite, model: str) -> str | None:
        key = (str(suite.path), model)
        if key not in self._fingerprints:
            try:
                self._fingerprints[key] = str(self.bench.model(suite, model).fingerprint())
            except Exception as exc:  # noqa: BLE001 - provenance is a record, never a reason to fail a cell
                logger.warning("%s: model %s: no fingerprint for the baseline's provenance: %s", suite.path, model, exc)
                self._fingerprints[key] = None
        return self._fingerprints[key]

    def device_notices(self) -> list[str]:
        """One line per model that ran on another kind of device than the run asked for."""
        wanted = self.options.device.type
        elsewhere = sorted({(r.suite, r.model, r.device) for r in self.records if r.device and torch.device(r.device).type != wanted})
        return [f"suite {suite}: model {model} ran on {device}, not on the run's {wanted}" for suite, model, device in elsewhere]

    def cell_properties(self, nodeid: str) -> list[tuple[str, object]]:
        """A cell's numbers as JUnit properties (what ``record_property`` adds): status, the
        headline metric's name, score, gamma_r, the suite's tolerance (or statistical gate's
        margin) of each and, where a baseline was compared, its value and the delta."""
        if nodeid in self.model_outcomes:
            return _outcome_properties(self.model_outcomes[nodeid])
        record = next((r for r in reversed(self.records) if r.nodeid == nodeid), None)
        if record is None:
            return []
        stored = record.baseline or {}
        properties: list[tuple[str, object]] = [("status", Status(record.status).value), ("score", record.score)]
        if record.gamma_r is not None:
            properties.append(("gamma_r", record.gamma_r))
        if (suite := self.suite_order.get(record.suite)) is not None:
            kind, allowed = ("margin", suite.gate.margin) if suite.gate is not None else ("tolerance", suite.tolerance)
            properties[1:1] = [("metric", suite.metric)]
            properties += [(f"{kind}_score", allowed.score)]
            properties += [(f"{kind}_gamma_r", allowed.gamma_r)] if record.gamma_r is not None else []
        if "score" in stored:
            properties += [("baseline", stored["score"]), ("delta", record.score - stored["score"])]
        if "gamma_r" in stored and record.gamma_r is not None:
            properties += [("baseline_gamma_r", stored["gamma_r"]), ("delta_gamma_r", record.gamma_r - stored["gamma_r"])]
        return properties + _requirement_properties(record.requirements)

    # -- shared state -----------------------------------------------------------------------

    def _baseline_file(self, suite: Suite) -> BaselineFile:
        path = self.options.baselines_dir / f"{suite.name}.json"
        if path not in self._baselines:
            self._baselines[path] = BaselineFile(path)
        return self._baselines[path]

    def _shown(self, path: Path) -> str:
        try:
            return str(path.resolve().relative_to(self.rootpath.resolve()))
        except ValueError:
            return str(path)

    # -- xdist ----------------------------------------------------------------------------

    def cell_payload(self, nodeid: str) -> str | None:
        """The record (and pending baseline writes) of one cell, or its error, as JSON for its test report.

        Each cell's payload travels with its own report, so a worker that crashes loses
        only the cell it was running.
        """
        if nodeid in self.model_outcomes:
            return json.dumps(self._model_entry(self.model_outcomes[nodeid]))
        record = next((r for r in reversed(self.records) if r.nodeid == nodeid), None)
        if record is None:
            error = self.errors.get(nodeid)
            return None if error is None else json.dumps({"error": {"nodeid": nodeid, "message": error}})
        return json.dumps(self._cell_entry(record))

    def _cell_entry(self, record: CellRecord) -> dict[str, Any]:
        """A cell's record, its pending baseline writes, its suite file and its model's change."""
        suite = self.suite_order[record.suite]
        key = CellKey(record.suite, record.model, record.corruption, record.severity, record.split)
        pending = [asdict(p) for p in self.pending if p.key == key]
        change = self.model_changes.get((record.suite, record.model))
        return {
            "record": record.to_json(),
            "pending": pending,
            "suite": str(suite.path),
            "model_change": None if change is None else asdict(change),
            "resampled": self.resampled.get(record.nodeid),
        }

    def _model_entry(self, outcome: ModelOutcome) -> dict[str, Any]:
        """A model's aggregates outcome, as :meth:`absorb_cell` reads it (a shard file keeps it among the results)."""
        return {"model_gate": outcome.to_json(), "suite": str(self.suite_order[outcome.suite].path), "pending": []}

    def absorb_cell(self, payload: str) -> None:
        """Merge one cell's payload, sent by a worker, into this (controller) session."""
        data: dict[str, Any] = json.loads(payload)
        if "error" in data:
            self.errors[data["error"]["nodeid"]] = data["error"]["message"]
            return
        if "model_gate" in data:
            self.suite(Path(data["suite"]))
            outcome = ModelOutcome.from_json(data["model_gate"])
            self.model_outcomes[outcome.nodeid] = outcome
            return
        self.suite(Path(data["suite"]))
        self.records.append(CellRecord.from_json(data["record"]))
        if data.get("resampled") is not None:
            self.resampled[data["record"]["nodeid"]] = data["resampled"]
        for p in data["pending"]:
            self.pending.append(PendingWrite(**(p | {"key": CellKey(**p["key"])})))
        if data.get("model_change") is not None:
            change = ModelChange(**data["model_change"])
            self.model_changes.setdefault((data["record"]["suite"], change.model), change)

    def payload(self) -> str:
        """What a worker sends when it finishes: its clean-cache counts and the cells it deselected."""
        collection = {"deselected": self.deselected} if self.collection_known else None
        shard = None if self.shard_plan is None else self.shard_plan.to_json()
        return json.dumps({"cache": self._cache_counts(), "collection": collection, "shard": shard})

    def absorb(self, payload: str) -> None:
        """Merge a finished worker's payload into this (controller) session."""
        data = json.loads(payload)
        for name, count in data["cache"].items():
            self.cache_counts[name] = self.cache_counts.get(name, 0) + count
        if data.get("collection") is not None and not self.collection_known:
            # Every worker collects and selects the same cells: the first to report speaks for all.
            self.deselected = list(data["collection"]["deselected"])
            self.collection_known = True
        if data.get("shard") is not None and self.shard_plan is None:  # every worker plans the same
            self.shard_plan = ShardPlan.from_json(data["shard"])

    def expect(self, nodeids: list[str], *, collected_here: bool = False) -> None:
        """The cells this run means to evaluate (after selection).

        Args:
            nodeids: The selected cells.
            collected_here: This process collected them (not the xdist controller, which only
                hears the selection), so :meth:`deselect` has told it every deselected cell.
        """
        if not self.expected:
            self.expected = list(nodeids)
        self.collection_known = self.collection_known or collected_here

    def deselect(self, nodeids: list[str]) -> None:
        """Cells collected but not selected (``-k``, ``-m``, ``--deselect``, ``--lf``, ``--sw``)."""
        self.deselected = list(dict.fromkeys([*self.deselected, *nodeids]))

    def missing(self) -> list[str]:
        """Selected cells with neither a record nor an error: ``-x`` or ``--sw`` stopped the run, or it was interrupted."""
        done = {r.nodeid for r in self.records} | set(self.errors) | set(self.model_outcomes)
        return [nodeid for nodeid in self.expected if nodeid not in done]

    def fail_without_result(self, nodeid: str, message: str) -> None:
        """A selected cell whose test failed with neither its result nor its error (its xdist worker crashed)."""
        known = nodeid in self.errors or nodeid in self.model_outcomes
        if nodeid in self.expected and not known and all(r.nodeid != nodeid for r in self.records):
            self.errors[nodeid] = message

    def run_coverage(self) -> RunCoverage:
        """Which of the collected cells this run evaluated, and why it left the others out."""
        report_md = self.options.report_path.with_suffix(".md")
        return RunCoverage(
            evaluated=len({r.nodeid for r in self.records}),
            errors=len(self.errors),
            not_run={
                nodeid: self.not_run_reasons.get(nodeid) or self.stop_reason or "no result and no error came back for it"
                for nodeid in self.missing()
            },
            deselected=list(self.deselected),
            selection=list(self.selection) if self.deselected else [],
            narrowed_to=list(self.narrowed_to),
            collection_unknown=not self.collection_known,
            full_report=self._shown(report_md) if report_md.exists() else None,
        )

    @property
    def report_base(self) -> Path:
        """Where this run's report goes: the report path, or beside it for a partial run."""
        partial = self.coverage is not None and self.coverage.partial
        return partial_report_path(self.options.report_path) if partial else self.options.report_path

    def _cache_counts(self) -> dict[str, int]:
        counts = dict(self.cache_counts)
        counts["uncached"] = counts.get("uncached", 0) + self.bench.uncached
        counts["builds"] = counts.get("builds", 0) + self.bench.builds
        if self.bench.cache is not None:
            counts["hits"] += self.bench.cache.hits
            counts["misses"] += self.bench.cache.misses
        return counts

    def cache_summary(self) -> str | None:
        """One line on clean results computed versus read from the cache, if there is a cache."""
        if self.options.cache_dir is None:
            return None
        counts = self._cache_counts()
        line = f"clean results: {counts['misses']} computed, {counts['hits']} from cache ({self.options.cache_dir})"
        if counts.get("uncached"):
            line += f"; {counts['uncached']} not cacheable (what the model computes cannot be identified; see the warnings)"
        if counts.get("builds"):
            line += f"; {plural(counts['builds'], 'model build')}"
        return line

    # -- shards -------------------------------------------------------------------------------

    def begin_shard(self, spec: ShardSpec) -> None:
        """Make this run shard ``spec`` and note the suite and baseline files it starts from."""
        self.shard = spec
        self.shard_started_from = self.project_digests()

    def project_digests(self) -> tuple[dict[str, str], dict[str, str]]:
        """The digests of every suite file (under the suites folder or named on the command line)
        and of every baseline file, by path relative to the rootdir."""
        suites = [
            *self.options.suites_dir.rglob("*.yaml"),
            *self.options.suites_dir.rglob("*.yml"),
            *(path for path in self._explicit if path.is_file() and path.suffix in (".yaml", ".yml")),
        ]
        return digests(suites, self.rootpath), digests(self.options.baselines_dir.glob("*.json"), self.rootpath)

    def plan_shard(self, cells: list[tuple[str, Suite, CellKey]]) -> set[str]:
        """Keep this shard's part of the collected cells (node id, suite, key); returns its node ids."""
        assert self.shard is not None
        suites = {suite.name: suite for _, suite, _ in cells}
        ranks = {name: {key: rank for rank, key in enumerate(self.cells(suite))} for name, suite in suites.items()}
        assignment = assign_cells(
            (
                ShardCell(nodeid, (suite.name, key.model, key.split or ""), ranks[suite.name].get(key, 0))
                for nodeid, suite, key in cells
            ),
            self.shard.count,
        )
        ours = [nodeid for nodeid, _, _ in cells if assignment[nodeid] == self.shard.index]
        self.shard_plan = ShardPlan([nodeid for nodeid, _, _ in cells], ours)
        return set(ours)

    def shard_file(self) -> ShardFile:
        """What this shard learned, for ``segrobust merge``: paths relative to the rootdir."""
        assert self.shard is not None
        plan = self.shard_plan or ShardPlan([], [])  # no process collected: the merge refuses it
        others = set(plan.cells) - set(plan.assigned)
        results = []
        entries = [self._cell_entry(record) for record in self.ordered_records()]
        entries += [self._model_entry(outcome) for outcome in self.model_outcomes.values()]
        for entry in entries:
            entry["suite"] = relative(Path(entry["suite"]), self.rootpath)
            entry["pending"] = [p | {"path": relative(Path(p["path"]), self.rootpath)} for p in entry["pending"]]
            results.append(entry)
        coverage = self.run_coverage()
        suites, baselines = self.shard_started_from
        return ShardFile(
            spec=self.shard,
            tool_version=__version__,
            update_baselines=self.options.update_baselines,
            prune=self.options.prune,
            report_html=self.options.report_html,
            report=relative(self.options.report_path, self.rootpath),
            suite_digests=suites,
            baseline_digests=baselines,
            cells=list(plan.cells),
            assigned=list(plan.assigned),
            results=results,
            errors=dict(self.errors),
            coverage=ShardCoverage(
                expected=list(self.expected),
                deselected=[nodeid for nodeid in self.deselected if nodeid not in others],
                not_run=dict(coverage.not_run),
                selection=list(self.selection),
                narrowed_to=list(self.narrowed_to),
                collection_known=self.collection_known and self.shard_plan is not None,
            ),
            cache_counts=self._cache_counts(),
        )

    def shard_verdict(self) -> RunVerdict | None:
        """A shard's verdict on its own cells (``None`` outside a shard, or for a shard that
        evaluated nothing); the run's verdict is the merge's."""
        if self.shard is None or not (self.records or self.errors or self.model_outcomes):
            return None
        statuses = [o.status for nodeid, o in self.model_outcomes.items() if nodeid not in self.errors]
        return run_verdict(self.ordered_records(), self.errors, list(self.run_coverage().not_run), statuses)

    def shard_verdict_line(self, verdict: RunVerdict) -> str:
        """``shard 1/3: FAIL · 2 cells: 1 regressed, 1 passed (this shard's cells; ...)``."""
        assert self.shard is not None
        return (
            f"shard {self.shard}: {verdict.line()} (this shard's cells only; "
            "`segrobust merge` of every shard gives the run's verdict)"
        )

    def _write_shard(self, spec: ShardSpec) -> None:
        path = spec.path(self.options.report_path)
        remove_stale_temporaries(path.parent)
        try:
            atomic_write_text(path, json.dumps(self.shard_file().to_json(), indent=1) + "\n")
        except WriteError as exc:
            self.problems.append(f"shard {spec} not written: {exc}")
        else:
            self.written.append(path)

    def absorb_shards(self, shards: list[ShardFile]) -> None:
        """Merge the N shards of a run (checked by :func:`~pytest_segrobust.shards.check_shards`)
        into this session, as the xdist controller absorbs its workers' cells.

        Suites load in the run's collection order, so the report lists them as one run would.
        """
        cells = shards[0].cells
        for path in dict.fromkeys(self.rootpath / nodeid.split("::", 1)[0] for nodeid in cells):
            self.suite(path)
        for shard in shards:
            for entry in shard.results:
                local = entry | {
                    "suite": str(self.rootpath / entry["suite"]),
                    "pending": [p | {"path": str(self.rootpath / p["path"])} for p in entry["pending"]],
                }
                self.absorb_cell(json.dumps(local))
            for nodeid, message in shard.errors.items():
                self.absorb_cell(json.dumps({"error": {"nodeid": nodeid, "message": message}}))
            self.absorb(json.dumps({"cache": shard.cache_counts, "collection": None}))
            self.not_run_reasons.update(shard.coverage.not_run)
        order = {nodeid: index for index, nodeid in enumerate(cells)}
        expected = {nodeid for shard in shards for nodeid in shard.coverage.expected}
        self.expect(sorted(expected, key=lambda nodeid: order.get(nodeid, len(order))))
        # The user's own deselection (-k, -m) is every shard's; what --lf or --sw left out is each shard's.
        common = [n for n in shards[0].coverage.deselected if all(n in s.coverage.deselected for s in shards)]
        own = {n for s in shards for n in s.coverage.deselected} - set(common)
        self.deselect([*common, *sorted(own, key=lambda nodeid: order.get(nodeid, len(order)))])
        self.collection_known = all(shard.coverage.collection_known for shard in shards)
        self.selection = list(shards[0].coverage.selection)
        self.narrowed_to = list(shards[0].coverage.narrowed_to)

    # -- the end of the run -------------------------------------------------------------

    def finish(self) -> None:
        """Write the pending baselines, then the report; the controller's job alone. A shard
        writes its shard file instead, and leaves both to ``segrobust merge``.

        The baselines come first: what the run measured is kept even when the report's
        pictures, which run the models again, hang or are interrupted. Each step runs whatever
        happened to the others: an unwritable baseline folder or a bad report path costs only
        itself, is named in :attr:`problems`, and fails the run; a figure or a model's worst
        images that cannot be made is a warning of the report (:attr:`warnings`).
        """
        self.problems = []
        self.warnings = []
        if self.shard is not None:
            self._write_shard(self.shard)
            return
        folders = (self.options.report_path.parent, self.options.baselines_dir, self.options.cache_dir, self.options.statistics_dir)
        for folder in folders:
            if folder is not None:  # what writes killed in an earlier run left behind
                remove_stale_temporaries(folder)
        self.coverage = self.run_coverage()
        self._flush_baselines()
        # A run that evaluated nothing (--co, every cell deselected) leaves every report as it was;
        # a partial one writes beside the full report (report_base).
        if self.records or self.errors or self.model_outcomes:
            try:
                self.report = build_report(
                    self.ordered_records(),
                    self.suite_order,
                    list(self.coverage.not_run),
                    self.rootpath,
                    errors=self.errors,
                    model_outcomes=[o.to_json() for o in self.ordered_model_outcomes()],
                )
                self.report["run"] = self.coverage.to_json()
                self._aggregate_changes()
            except Exception as exc:  # noqa: BLE001 - the baselines must still be written
                self.problems.append(f"the report could not be built: {type(exc).__name__}: {exc}")
            else:
                self._write_report()

    def _aggregate_changes(self) -> None:
        """Each statistical gate's aggregate changes (mPC, rPC, mean gamma_r), into the report."""
        assert self.report is not None
        for name, entry in self.report["suites"].items():
            suite = self.suite_order.get(name)
            if suite is None or suite.gate is None:
                continue
            # In suite order, not in the order cells finished (xdist's workers' order): the means'
            # rounding and the categories' order must not depend on scheduling.
            records = [r for r in self.ordered_records() if r.suite == name]
            entry["aggregates"] = aggregate_changes(records, self.resampled, suite.gate.confidence)

    def _write_report(self) -> None:
        assert self.report is not None
        galleries: dict[str, Image.Image] = {}
        pictures: dict[str, dict[str, Image.Image]] = {}
        try:
            galleries = self._galleries()
            pictures = self._describe_run()
        except KeyboardInterrupt:
            # Ctrl-C while the models run again for their pictures: the report is written without them.
            self.warnings.append("pictures left out: the run was interrupted while the report's pictures were made")
        self.report["environment"] = run_environment(self.rootpath, self.options.device, self.started)
        self.report["warnings"] = list(self.warnings)
        try:
            self.written.extend(
                write_report(
                    self.report,
                    self.report_base,
                    galleries,
                    pictures,
                    wall_seconds=lambda: time.time() - self.started,
                )
            )
        except ReportIncomplete as exc:
            self.written.extend(exc.written)
            self.problems.extend(exc.problems)
        self.warnings = list(self.report.get("warnings", []))
        if self.options.report_html:  # after the figures, which it embeds
            try:
                self.written.append(write_html(self.report, self.report_base))
            except Exception as exc:  # noqa: BLE001 - the report's other files are already written
                self.problems.append(
                    str(exc) if isinstance(exc, SegRobustError) else f"HTML report not written: {type(exc).__name__}: {exc}"
                )

    def _first_sample(self, suite: Suite) -> tuple[Any, list[Corruption[Any]]]:
        """The first image of a suite's reference data, and the suite's corruptions in order."""
        with self._picture_bounds(suite, f"the first image of suite {suite.name}"):
            sample = self.bench.dataset(suite, suite.shifts.reference if suite.shifts else None)[0]
        # Text cells leave the image alone: pictures of images show the image corruptions.
        return sample, [c for c in (suite.corruption(name, self.registry) for name in suite.corruptions) if is_visual(c)]

    def _galleries(self) -> dict[str, Image.Image]:
        """The first image of each reported suite under its corruptions at severities 1, 3, 5."""
        galleries = {}
        for name in self.report["suites"] if self.report else ():
            suite = self.suite_order.get(name)
            if suite is None:
                continue
            try:
                sample, corruptions = self._first_sample(suite)
                with self._picture_bounds(suite, f"the gallery of suite {name}"):
                    galleries[name] = render_gallery(
                        sample.image, corruptions, seed=suite.seed, sample_id=sample.sample_id, tile=REPORT_TILE
                    )
            except Exception as exc:  # noqa: BLE001 - a figure must never cost the report
                self.warnings.append(f"no gallery for suite {name}: {error_message(exc)}")
        return galleries

    @contextmanager
    def _picture_bounds(self, suite: Suite, what: str) -> Iterator[None]:
        """Where the report runs user code again (a dataset, a model for its worst images): in the
        project's folder, within the suite's time limit for one cell, so a hang there costs a picture,
        not the run."""
        with self.in_project(), time_limit(self.options.timeout or suite.timeout, what):
            yield

    # -- what the report shows besides the cells' numbers -------------------------------------

    def _describe_run(self) -> dict[str, dict[str, Image.Image]]:
        """Add each suite's frame kept by geometric corruptions and each model's worst images to
        the report; return those images, by suite and figure kind.

        Each part that fails or runs past the suite's time limit costs only itself and is named
        in :attr:`warnings`, as a figure is.
        """
        assert self.report is not None
        pictures: dict[str, dict[str, Image.Image]] = {}
        for name, entry in self.report["suites"].items():
            suite = self.suite_order.get(name)
            if suite is None:
                continue
            try:
                sample, corruptions = self._first_sample(suite)
                height, width = sample.image.shape[-2:]
                entry["frame_kept"] = describe_frames(
                    corruptions, int(height), int(width), suite.severities, suite.seed, sample.sample_id
                )
            except Exception as exc:  # noqa: BLE001 - a table of the report must never cost the report
                self.warnings.append(f"no frame table for suite {name}: {error_message(exc)}")
            pictures[name] = self._worst_images(suite, entry)
            if "r2bench" in entry:
                entry["worst_expressions"] = self._worst_expressions(suite, entry)
        return pictures

    def _describe_worst(self, suite: Suite, cell: CellRecord, row: str) -> tuple[dict[str, Any], Image.Image | None]:
        """The images (or expressions) of ``cell`` that lost most, re-evaluated in the project within
        the suite's time limit for one cell."""
        with self._picture_bounds(suite, f"the worst images of {row} in {cell.nodeid}"):
            return describe_worst(
                self.bench.model(suite, cell.model),
                self.bench.dataset(suite, cell.split),
                suite.corruption(cell.corruption, self.registry),
                cell.severity,
                task=suite.task,
                metric=suite.metric,
                label=METRICS.get(suite.metric).label,
                seed=suite.seed,
                limit=suite.limit,
                row=row,
                gamma_r=cell.gamma_r,
            )

    def _worst_expressions(self, suite: Suite, entry: dict[str, Any]) -> dict[str, Any]:
        """For each model of a referring suite: in its worst cell that perturbs text (lowest γr), the
        samples whose score fell most, with their clean and perturbed expressions."""
        def text(records: list[CellRecord]) -> list[CellRecord]:
            return [r for r in records if modality(r.category) != "visual"]

        return {row: info for row, info, _ in self._worst_per_model(suite, entry, text, "worst expressions")}

    def _worst_images(self, suite: Suite, entry: dict[str, Any]) -> dict[str, Image.Image]:
        """For each model (row) of a reported suite: its worst cell's images that lost most."""
        worst: dict[str, Any] = {}
        pictures: dict[str, Image.Image] = {}
        for row, info, picture in self._worst_per_model(suite, entry, list, "worst images"):
            if picture is not None:
                kind = "worst-" + ("".join(c if c.isalnum() or c in "._-" else "-" for c in row).strip("-") or "model")
                info["figure"] = kind if kind not in pictures else f"{kind}-{len(pictures)}"
                pictures[info["figure"]] = picture
            worst[row] = info
        entry["worst_images"] = worst
        return pictures

    def _worst_per_model(
        self,
        suite: Suite,
        entry: dict[str, Any],
        candidates: Callable[[list[CellRecord]], list[CellRecord]],
        what: str,
    ) -> Iterator[tuple[str, dict[str, Any], Image.Image | None]]:
        """Each model's worst cell among ``candidates`` of its cells, described
        (:meth:`_describe_worst`, once per cell and model even when asked twice); a cell that
        cannot be described is a problem of the report, named with ``what``, never its failure."""
        for row, model_entry in entry["models"].items():
            cell = worst_cell(candidates([CellRecord.from_json(c) for c in model_entry["cells"]]))
            if cell is None:
                continue
            key = (row, cell.nodeid)
            try:
                if key not in self._described:
                    self._described[key] = self._describe_worst(suite, cell, row)
                info, picture = self._described[key]
            except Exception as exc:  # noqa: BLE001 - a table or figure must never cost the report
                self.warnings.append(f"no {what} for {suite.name} {row}: {error_message(exc)}")
                continue
            yield row, dict(info), picture

    def _flush_baselines(self) -> None:
        """Write each suite's pending cells into its file, and say what changed and what is unused.

        An update that evaluated every cell of a suite, or ``--segrobust-prune``, also removes
        the entries the suite no longer has; otherwise they are listed, naming the flag.
        """
        self.baseline_summary = [change.describe() for _, change in sorted(self.model_changes.items())]
        by_suite: dict[str, list[PendingWrite]] = {}
        for write in self.pending:
            by_suite.setdefault(write.suite, []).append(write)
        evaluated: dict[str, set[CellKey]] = {}
        for r in self.records:
            evaluated.setdefault(r.suite, set()).add(CellKey(r.suite, r.model, r.corruption, r.severity, r.split))
        for name in sorted(set(by_suite) | set(evaluated)):
            suite, writes = self.suite_order.get(name), by_suite.get(name, [])
            if suite is None and not writes:
                continue
            path = Path(writes[0].path) if writes else self._baseline_file(suite).path
            cells = self.cells(suite) if suite is not None else []
            whole = self.options.update_baselines and evaluated.get(name, set()) >= set(cells)
            tidy = bool(cells) and (self.options.prune or whole)
            try:
                update, notes = self._write_suite_baseline(path, name, writes, cells if tidy else None)
            except SegRobustError as exc:
                self.problems.append(f"baselines not written, the stored ones are unchanged: {exc}")
                continue
            if writes or update.removed:
                self.written.append(path)
            self.baseline_summary += update.summary(self._shown(path)) + notes
            if not tidy:
                self._report_unused(path, name, cells)
        self.pending.clear()

    def _write_suite_baseline(
        self, path: Path, suite: str, writes: list[PendingWrite], keep_only: list[CellKey] | None
    ) -> tuple[BaselineUpdate, list[str]]:
        """Write the suite's baseline file and, in step with it, its statistics file; what it did,
        and lines about a statistics file the write had to replace."""
        suite_obj = self.suite_order.get(suite)
        ordered = sorted(writes, key=lambda w: (w.key.model, str(w.key.split), w.key.corruption, w.key.severity))
        replace_all = any(w.replace_all for w in writes)
        statistics = self._sidecar_writer(path, suite_obj, suite, ordered, replace_all)
        if not writes:
            update = BaselineUpdate(path) if keep_only is None else prune_baseline(path, keep_only, statistics)
        else:
            update = write_baseline(
                path,
                suite,
                Conditions.from_json(writes[0].conditions, str(path)),
                [(w.key, w.values) for w in ordered],
                replace_all=replace_all,
                keep_only=keep_only,
                fingerprints={w.key.model: w.model_fingerprint for w in writes if w.model_fingerprint is not None},
                tool_version=__version__,
                statistics=statistics,
            )
        return update, [] if statistics is None else self._replaced_sidecar(statistics)

    def statistics_store(self, suite: Suite) -> Path | None:
        """The folder of the suite's statistics file when it is not beside its baseline JSON
        (``gate: {statistics: cache}``: pytest's cache folder of this machine).

        Raises:
            WriteError: for statistics kept in the cache by a run without one.
        """
        if suite.gate is None or suite.gate.statistics != "cache":
            return None
        if self.options.statistics_dir is None:
            raise WriteError(
                f"{suite.path}: gate.statistics: cache keeps the baseline's per-image statistics in pytest's cache "
                "folder, which this run has not (-p no:cacheprovider); run with pytest's cache, "
                "or set gate.statistics: baselines to keep them beside the baseline"
            )
        return self.options.statistics_dir

    def _sidecar_writer(
        self, path: Path, suite_obj: Suite | None, suite: str, writes: list[PendingWrite], replace_all: bool
    ) -> SidecarWriter | None:
        """The statistics file of the baseline ``path`` (beside it, or in the suite's statistics
        store) with this run's statistics, where the suite has one; an update starts a broken one afresh.

        Raises:
            WriteError: for statistics kept in the cache by a run without one.
        """
        store = None if suite_obj is None else self.statistics_store(suite_obj)
        target = sidecar_path(path, store)
        entries = [entry for w in writes for entry in sidecar_entries(w.key, w.statistics)]
        if not (suite_obj is not None and suite_obj.gate is not None) and not entries and not target.exists():
            return None
        shown = self._shown(target)
        return SidecarWriter(
            target, suite, entries, replace_all=replace_all, shown=shown, repair=self.options.update_baselines
        )

    def _replaced_sidecar(self, statistics: SidecarWriter) -> list[str]:
        """Terminal lines for a statistics file an update could not read and wrote afresh."""
        if statistics.unreadable is None:
            return []
        lost = sorted(statistics.cells - statistics.measured)
        lines = [
            (
                f"{statistics.shown}: could not be read ({statistics.unreadable}); written afresh with the "
                f"statistics of the {plural(len(statistics.measured), 'cell')} this update measured"
            )
        ]
        if lost:
            lines.append(
                f"{statistics.shown}: {plural(len(lost), 'cell')} not measured by this update "
                f"{'has' if len(lost) == 1 else 'have'} no statistics now, and their "
                f"statistical gate fails until an update measures them: {', '.join(lost)}"
            )
        return lines

    def _report_unused(self, path: Path, suite: str, cells: list[CellKey]) -> None:
        try:
            unused = unused_entries(read_baseline(path), cells)
        except BaselineError:
            return  # a broken file fails its cells already, naming it
        if unused:
            self.baseline_summary.append(
                f"{self._shown(path)}: {plural(len(unused), 'unused entry', 'unused entries')} "
                f"(no longer in suite {suite}): "
                f"{', '.join(unused)}; remove them with {PRUNE_FLAG}"
            )

    def ordered_suites(self) -> list[str]:
        """The suites' names in the order the run collected their cells, whichever process's
        results came back first (an xdist controller loads a suite when its first result
        arrives): a single run, ``-n 2`` and merged shards report the suites alike."""
        by_file = {relative(suite.path, self.rootpath): name for name, suite in self.suite_order.items()}
        files = dict.fromkeys(nodeid.split("::", 1)[0] for nodeid in self.expected)
        collected = [by_file[file] for file in files if file in by_file]
        return list(dict.fromkeys([*collected, *self.suite_order]))

    def ordered_model_outcomes(self) -> list[ModelOutcome]:
        """Model outcomes in suite and model order, independent of scheduling."""
        suites = self.ordered_suites()

        def rank(outcome: ModelOutcome) -> tuple[Any, ...]:
            suite = self.suite_order.get(outcome.suite)
            models = [m.name for m in suite.models] if suite else []
            return (
                suites.index(outcome.suite) if outcome.suite in suites else len(suites),
                models.index(outcome.model) if outcome.model in models else len(models),
                outcome.nodeid,
            )

        return sorted(self.model_outcomes.values(), key=rank)

    def ordered_records(self) -> list[CellRecord]:
        """Records in suite order (model, corruption, severity), independent of scheduling."""
        suites = self.ordered_suites()

        def rank(record: CellRecord) -> tuple[Any, ...]:
            suite = self.suite_order.get(record.suite)
            names = list(suite.corruptions) if suite else []
            models = [m.name for m in suite.models] if suite else []
            splits = list(suite.splits) if suite else []
            return (
                suites.index(record.suite) if record.suite in suites else len(suites),
                models.index(record.model) if record.model in models else len(models),
                splits.index(record.split) if record.split in splits else len(splits),
                -1 if record.severity == 0 else (names.index(record.corruption) if record.corruption in names else len(names)),
                record.severity,
                record.nodeid,
            )

        return sorted(self.records, key=rank)


def _requirement_properties(checks: list[dict[str, Any]]) -> list[tuple[str, object]]:
    """``requirement <rule>``: ``met``, ``unmet`` or ``undecided``, with the value: one JUnit property per requirement."""
    words = {"pass": "met", "fail": "unmet", "inconclusive": "undecided"}
    return [
        (f"requirement {c['rule']}", f"{words[c['outcome']]}: {c['number']} {c['observed']:.6g} (threshold {c['threshold']:.6g})")
        for c in checks
    ]


def _outcome_properties(outcome: ModelOutcome) -> list[tuple[str, object]]:
    """A model's aggregates item as JUnit properties: its status, each aggregate margin and requirement."""
    properties: list[tuple[str, object]] = [("status", outcome.status)]
    for check in outcome.checks:
        properties += [(str(check["metric"]), check["observed"]), (f"baseline {check['metric']}", check["baseline"])]
        properties += [(f"margin {check['metric']}", check["margin"])]
    return properties + _requirement_properties([c.to_json() for c in outcome.requirements])


def _observed(result: CellResult, severity: int) -> dict[str, float]:
    """The gated numbers of a cell: the headline's unprefixed, every further metric's as ``<name>.<number>``."""
    observed: dict[str, float] = {}
    for index, name in enumerate(result.corrupted.metrics):
        prefix = "" if index == 0 else f"{name}."
        observed[f"{prefix}score"] = result.corrupted.metrics[name].score
        if severity > 0:
            observed[f"{prefix}gamma_r"], observed[f"{prefix}gamma_a"] = result.robustness(name)
    return observed
