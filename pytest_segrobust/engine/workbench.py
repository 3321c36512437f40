"""Builds and memoises what evaluations need: models, datasets, clean results.

Both the suite items and the ``segrobust`` fixture evaluate through one :class:`Workbench`,
so both honour the run's device, autocast, batch size, loader workers and clean-result disk
cache. A model is adapted to its suite's task once (registered adapters, then the
``pytest_segrobust_adapt_model`` hook); a dataset is built once per suite and split; a clean
result is computed once per model x dataset, and each corrupted cell's result once, and both
are kept on disk when the model's code can be identified
(:mod:`~pytest_segrobust.engine.result_cache`). Decoded samples of a suite's dataset are kept in memory across its cells, within
the run's budget (:class:`~pytest_segrobust.data.sample_cache.SampleCache`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_segrobust.core.errors import DatasetError, ModelError, ModelOutputError, SegRobustError
from pytest_segrobust.corruptions import DEFAULT_PRESET, REGISTRY, Corruption, CorruptionRegistry
from pytest_segrobust.data.base import SegmentationDataset, check_dataset
from pytest_segrobust.data.sample_cache import MEBIBYTE, SampleCache, default_budget
from pytest_segrobust.engine.evaluation import (
    CLEAN,
    CellResult,
    EvalHooks,
    EvalResult,
    EvalSettings,
    evaluate,
    sample_count,
)
from pytest_segrobust.engine.pieces import Piece, Split, evaluate_piece, merge_pieces
from pytest_segrobust.engine.plan import Plan
from pytest_segrobust.engine.result_cache import ResultCache
from pytest_segrobust.engine.worst_images import CONSIDERED
from pytest_segrobust.metrics import MetricContext
from pytest_segrobust.models.adapters import adapt_model
from pytest_segrobust.models.arrays import ArrayModel
from pytest_segrobust.models.base import model_device
from pytest_segrobust.provenance import reads
from pytest_segrobust.provenance.identity import UnknownIdentity, code_identity
from pytest_segrobust.store.baselines import CellKey, Conditions
from pytest_segrobust.suite.model_sources import ModelRequest
from pytest_segrobust.suite.schema import Suite
from pytest_segrobust.tasks import get_task
from pytest_segrobust.tasks.base import Task
from pytest_segrobust.text.cells import resolve_cell
from pytest_segrobust.text.registry import TEXT_PERTURBATIONS

if TYPE_CHECKING:
    from pytest_segrobust.runtime.options import Options
    from pytest_segrobust.runtime.progress import TerminalProgress

logger = logging.getLogger("pytest_segrobust")


class Workbench:
    """Models, datasets and clean results of one process, built under one run's options.

    Args:
        options: The run's settings (device, amp, batch size, loader workers, cache folder).
        registry: The run's corruptions (the built-ins and what plugins registered).
        adapt_hook: pytest's ``pytest_segrobust_adapt_model`` hook caller, asked before the
            registered adapters.
        shown: How errors show a suite file's path (relative to the rootdir, as pytest's node ids do).
    """

    def __init__(
        self,
        options: Options,
        registry: CorruptionRegistry = REGISTRY,
        adapt_hook: Callable[..., Any] | None = None,
        shown: Callable[[Path], str] = str,
    ) -> None:
        self.options = options
        self.registry = registry
        self.adapt_hook = adapt_hook
        self.shown = shown
        self.cache = ResultCache(options.cache_dir) if options.cache_dir is not None else None
        self.uncached = 0  # models whose results are not cached across runs (their code is unknown)
        # Suite datasets are built once per process, so their decoded samples can serve every cell.
        mebibytes = options.sample_cache_mb
        budget = default_budget() if mebibytes is None else mebibytes * MEBIBYTE
        self.samples: SampleCache | None = SampleCache(budget) if budget > 0 else None
        self.builds = 0  # models built (and adapted) by this process
        # Set by the plugin when a terminal shows this process's output (not under xdist).
        self.progress_bar: TerminalProgress | None = None
        self._models: dict[tuple[str, str], Any] = {}
        self._reads: dict[tuple[str, str], reads.Reads] = {}  # what each model's build read (with the disk cache)
        self._datasets: dict[tuple[str, str | None], SegmentationDataset] = {}
        self._dataset_fingerprints: dict[tuple[str, str | None], str] = {}
        self._model_codes: dict[tuple[str, str], str | None] = {}
        self._conditions: dict[str, Conditions] = {}
        self._clean: dict[tuple[str, ...], EvalResult] = {}
        self._clean_keys: dict[tuple[str, str, str], str | None] = {}  # a clean result's cache key, taken once
        self._clean_read: set[tuple[str, ...]] = set()  # clean results this process read from the disk cache
        self._cells_read: set[tuple[str, CellKey]] = set()  # corrupted cells whose last result came from it
        self._corruption_codes: dict[type, str | None] = {}
        self._plans: dict[str, Plan] = {}

    def plan(self, suite: Suite) -> Plan:
        """The suite resolved against the run's registry, once per suite object."""
        plan = self._plans.get(str(suite.path))
        if plan is None or plan.suite is not suite:
            plan = self._plans[str(suite.path)] = Plan.of(suite, self.registry)
        return plan

    # -- a suite's parts ------------------------------------------------------------------

    def model(self, suite: Suite, name: str) -> Any:
        """The suite's model ``name``, adapted to the suite's task and placed on the run's device."""
        key = (str(suite.path), name)
        if key not in self._models:
            planned = self.plan(suite).model(name)
            # A checkpoint's labels are matched to the dataset's classes; other models never read them.
            names = tuple(self.dataset(suite, suite.splits[0]).class_names) if planned.source.needs_class_names else ()
            request = ModelRequest(self.options.device, suite.task, names)
            build = lambda: self.adapt(planned.build(request), self.plan(suite).task)
            if self.cache is None:
                self._models[key] = _build(self.shown(suite.path), planned.described, planned.field, build)
            else:  # what the build reads keys the model's cached clean result
                with reads.recording() as self._reads[key]:
                    self._models[key] = _build(self.shown(suite.path), planned.described, planned.field, build)
            self.builds += 1
        return self._models[key]

    def model_code(self, suite: Suite, name: str) -> str | None:
        """The identity of the code that builds and runs the suite's model ``name``
        (:func:`~pytest_segrobust.provenance.identity.code_identity` of its factory and classes),
        taken once; ``None`` where it cannot be established. Its weights are in its fingerprint."""
        key = (str(suite.path), name)
        if key not in self._model_codes:
            try:
                self._model_codes[key] = code_identity(*self.plan(suite).model(name).code_objects(self.model(suite, name)))
            except UnknownIdentity:
                self._model_codes[key] = None
        return self._model_codes[key]

    def adapt(self, obj: Any, task: str | Task) -> Any:
        """``obj`` as a model of ``task`` (a registry name, or a suite's task as its keys bound it)."""
        chosen = get_task(task) if isinstance(task, str) else task
        return adapt_model(obj, chosen, device=self.options.device, amp=self.options.amp, hook=self.adapt_hook)

    def dataset(self, suite: Suite, split: str | None = None) -> SegmentationDataset:
        """The suite's dataset (of ``split``, for a natural-shift suite)."""
        key = (str(suite.path), split)
        if key not in self._datasets:
            spec = self.plan(suite).dataset(split)
            source = f"factory {spec.target}"
            build = lambda: check_dataset(spec.build(), source)
            self._datasets[key] = _build(self.shown(suite.path), source, _dataset_field(split), build)
        return self._datasets[key]

    def dataset_fingerprint(self, suite: Suite, split: str | None = None) -> str:
        """The fingerprint of the suite's dataset (of ``split``), taken once: it may read every file."""
        key = (str(suite.path), split)
        if key not in self._dataset_fingerprints:
            self._dataset_fingerprints[key] = str(self.dataset(suite, split).fingerprint())
        return self._dataset_fingerprints[key]

    def conditions(self, suite: Suite) -> Conditions:
        """What the suite's numbers are measured under (builds its datasets to fingerprint them)."""
        key = str(suite.path)
        if key not in self._conditions:
            prints = [(split, self.dataset_fingerprint(suite, split)) for split in suite.splits]
            dataset = prints[0][1] if suite.shifts is None else "; ".join(f"{s}={p}" for s, p in prints)
            self._conditions[key] = Conditions(
                task=suite.task,
                metric=suite.metric,
                metrics=suite.metrics[1:],
                splits=tuple(s for s in suite.splits if s is not None),
                preset=suite.preset,
                seed=suite.seed,
                limit=suite.limit,
                dataset=dataset,
                task_setting=self.plan(suite).task.recorded_setting,
                severity_tables={
                    name: tuple(corruption.table.describe()) for name, corruption in self.plan(suite).cells.items()
                },
            )
        return self._conditions[key]

    def adopt_conditions(self, suite: Suite, conditions: Conditions) -> None:
        """Take the suite's conditions as another process measured them (a remote worker's)."""
        self._conditions.setdefault(str(suite.path), conditions)

    # -- evaluations ----------------------------------------------------------------------

    def cell(self, suite: Suite, key: CellKey, split: Split | None = None) -> tuple[CellResult, SegmentationDataset, str]:
        """The cell's corrupted and clean results, the dataset they ran on and the corruption's category.

        Each result is read from the disk cache where it holds the cell's (:meth:`from_cache`
        says whether it did), else measured and stored. With ``split``, this process evaluates
        the first piece of the corrupted samples, and merges it with the others it is handed
        (the clean result is never split).
        """
        model = self.model(suite, key.model)
        dataset = self.dataset(suite, key.split)
        clean = self.clean(suite, key.model, key.split)
        if key.severity == 0:
            return CellResult(corrupted=clean, clean=clean), dataset, CLEAN
        corruption = self.plan(suite).corruption(key.corruption)
        measure = lambda: self._corrupted(suite, model, dataset, corruption, key, split)
        cell_key = None if self.cache is None else self._cell_key(suite, key, corruption)
        if self.cache is None or cell_key is None:
            corrupted, read = measure(), False
        else:
            corrupted, read = self.cache.lookup_or_compute(cell_key, measure, "cell")
        cell = (str(suite.path), key)
        self._cells_read.add(cell) if read else self._cells_read.discard(cell)
        return CellResult(corrupted=corrupted, clean=clean), dataset, corruption.category.value

    def from_cache(self, suite: Suite, key: CellKey) -> bool:
        """Whether this process's last result of the cell (its clean result, for a clean cell) was read from the disk cache."""
        if key.severity == 0:
            return (str(suite.path), key.model, str(key.split)) in self._clean_read
        return (str(suite.path), key) in self._cells_read

    def _corrupted(
        self,
        suite: Suite,
        model: Any,
        dataset: SegmentationDataset,
        corruption: Corruption,
        key: CellKey,
        split: Split | None,
    ) -> EvalResult:
        """The corrupted result of a cell, measured here (with ``split``: its first piece here, the others handed in)."""
        if split is None:
            return self._evaluate(suite, model, dataset, corruption, key)
        start = time.perf_counter()
        pieces = [self.piece(suite, key, 0, split.count), *split.others()]
        context = MetricContext.of(dataset, model_device(model))
        return merge_pieces(
            pieces,
            sample_count(dataset, suite.limit),
            context,
            statistics=suite.gate is not None,
            seconds=time.perf_counter() - start,
        )

    def piece(self, suite: Suite, key: CellKey, index: int, count: int) -> Piece:
        """Piece ``index`` of ``count`` of a corrupted cell's evaluation (:mod:`pytest_segrobust.engine.pieces`)."""
        model, dataset = self.model(suite, key.model), self.dataset(suite, key.split)
        with _blame(self.plan(suite), key, self.shown(suite.path)):
            return evaluate_piece(
                model,
                dataset,
                self.plan(suite).corruption(key.corruption),
                key.severity,
                index,
                count,
                self.settings(suite),
                EvalHooks(
                    progress=_ProgressLog(f"{key.label} (piece {index + 1} of {count})"), sample_cache=self.samples
                ),
            )

    def clean(self, suite: Suite, model_name: str, split: str | None = None) -> EvalResult:
        """The clean result of a suite's model, computed once (and cached on disk when possible)."""
        key = (str(suite.path), model_name, str(split))
        if key not in self._clean:
            model, dataset = self.model(suite, model_name), self.dataset(suite, split)
            clean_key = CellKey(suite.name, model_name, CLEAN, 0, split)
            compute = lambda: self._evaluate(suite, model, dataset, None, clean_key)
            fingerprint = None if self.cache is None else self._clean_key(suite, model_name, split)
            if self.cache is None or fingerprint is None:
                self._clean[key] = compute()
            else:
                self._clean[key], read = self.cache.lookup_or_compute(fingerprint, compute, "clean")
                if read:
                    self._clean_read.add(key)
        return self._clean[key]

    def _clean_key(self, suite: Suite, model_name: str, split: str | None) -> str | None:
        """The cache key of a clean evaluation, taken once (the model's code identity reads its
        source); ``None`` where the model's code cannot be identified."""
        memo = (str(suite.path), model_name, str(split))
        if memo not in self._clean_keys:
            self._clean_keys[memo] = self._fingerprint(suite, model_name, self.model(suite, model_name), split)
        return self._clean_keys[memo]

    def _fingerprint(self, suite: Suite, model_name: str, model: Any, split: str | None) -> str | None:
        """The identity of a clean evaluation, or ``None`` where the model's code cannot be identified."""
        planned = self.plan(suite).model(model_name)
        try:
            if isinstance(model, ArrayModel) and model.identity is None:
                raise UnknownIdentity(
                    f"model {model_name} is a function of arrays without a fingerprint() saying what it computes"
                )
            # An ONNX model's identity is its file's digest (in its fingerprint); a factory's is its code.
            # Either way, what the build read under the project and imported by name counts.
            seen = self._reads.get((str(suite.path), model_name), reads.Reads())
            code = code_identity(*planned.code_objects(model), modules=seen.modules, files=seen.files)
        except UnknownIdentity as exc:
            self.uncached += 1
            logger.warning("%s: model %s: its results are not cached across runs: %s", suite.path, model_name, exc)
            return None
        # The factory call is part of the identity: constructor arguments need not be weights.
        return ResultCache.key(
            suite.task,
            suite.metrics,
            # A promptable suite's prompt protocol (no part at all for a task without a setting,
            # so that other tasks' cached results keep their keys).
            *filter(None, [self.plan(suite).task.setting]),
            repr(planned.spec),
            model.fingerprint(),
            code,
            repr(self.plan(suite).dataset(split)),
            self.dataset(suite, split).fingerprint(),
            str(suite.limit),
            model_device(model).type,
            # A statistically gated suite needs the per-image statistics, which others leave out.
            "statistics" if suite.gate is not None else "scores",
            # The report's worst images are picked from the first images' own scores.
            f"scored images {self.settings(suite).scored_images}",
        )

    def _cell_key(self, suite: Suite, key: CellKey, corruption: Corruption) -> str | None:
        """The cache key of a corrupted cell: its clean evaluation's (every input of the model and
        the dataset), then the corruption with its parameters, the severity and the seed.
        ``None`` where the model's code or a plugin's corruption's cannot be identified."""
        clean_key = self._clean_key(suite, key.model, key.split)
        perturbation = self._perturbation_code(corruption)
        if clean_key is None or perturbation is None:
            return None
        return ResultCache.cell_key(
            clean_key,
            key.corruption,
            repr(corruption),
            f"{type(corruption).__module__}.{type(corruption).__qualname__}",
            "\n".join(corruption.table.describe()),
            f"draws {getattr(corruption, 'frame_draws', None)}",
            f"severity {key.severity}",
            f"seed {suite.seed}",
            perturbation,
        )

    def _perturbation_code(self, corruption: Corruption) -> str | None:
        """The identity of a corruption's code: this package's own are its version's (in every
        key); a plugin's or a conftest's class is identified by its source as a model's code is."""
        kind = type(corruption)
        if kind.__module__.split(".")[0] == "pytest_segrobust":
            return "built-in"
        if kind not in self._corruption_codes:
            try:
                self._corruption_codes[kind] = code_identity(kind)
            except UnknownIdentity as exc:
                logger.warning("corruption %s: its cells are not cached across runs: %s", corruption.name, exc)
                self._corruption_codes[kind] = None
        return self._corruption_codes[kind]

    def settings(self, suite: Suite) -> EvalSettings:
        """How the suite's evaluations run in this process: the plan's settings, with the run's
        batch size (``--segrobust-batch-size``) and loader workers, and the first images scored
        on their own (the report's worst images pick among them). They are scored whether or
        not this run draws figures (about 1% of a demo cell's time), so that a clean result
        cached by a run without figures serves one with them."""
        return self.plan(suite).settings(
            batch_size=self.options.batch_size,
            loader_workers=self.options.loader_workers,
            scored_images=CONSIDERED,
        )

    def _evaluate(
        self, suite: Suite, model: Any, dataset: SegmentationDataset, corruption: Corruption | None, key: CellKey
    ) -> EvalResult:
        with _blame(self.plan(suite), key, self.shown(suite.path)):
            settings = self.settings(suite)
            return self.run(
                model, dataset, corruption, key.severity, settings, cell=key.label, sample_cache=self.samples
            )

    def run(
        self,
        model: Any,
        dataset: SegmentationDataset,
        corruption: Corruption | None,
        severity: int,
        settings: EvalSettings,
        *,
        cell: str,
        sample_cache: SampleCache | None = None,
    ) -> EvalResult:
        """One evaluation under ``settings``, with its progress logged and shown.

        ``sample_cache`` keeps the dataset's decoded samples for its next evaluation; only
        datasets the workbench built (and so holds for the whole run) are given one.
        """
        log, bar = _ProgressLog(cell), self.progress_bar

        def progress(done: int, total: int) -> None:
            log(done, total)
            if bar is not None:
                bar.update(done, total)

        if bar is not None:
            bar.begin(cell)
        try:
            return evaluate(model, dataset, corruption, severity, settings, EvalHooks(progress, sample_cache))
        finally:
            if bar is not None:
                bar.close()

    # -- the fixture ------------------------------------------------------------------------

    def evaluate_object(
        self,
        obj: Any,
        dataset: SegmentationDataset,
        corruption: str,
        severity: int,
        *,
        task: str,
        metrics: tuple[str, ...] | None,
        preset: str = DEFAULT_PRESET,
        seed: int = 0,
        batch_size: int = 16,
        limit: int | None = None,
    ) -> CellResult:
        """A user's model on a user's dataset; its clean result is computed once per process."""
        model = self.adapt(obj, task)
        chosen = resolve_cell(corruption, registry=self.registry, preset=preset, text=TEXT_PERTURBATIONS, seed=seed)
        settings = EvalSettings.of(
            task,
            metrics,
            seed=seed,
            batch_size=self.options.batch_size or batch_size,
            limit=limit,
            loader_workers=self.options.loader_workers,
        )
        names = ",".join(settings.metrics)
        key = ("fixture", task, names, model.fingerprint(), dataset.fingerprint(), str(limit), str(seed))
        if key not in self._clean:
            self._clean[key] = self.run(model, dataset, None, 0, settings, cell=f"{dataset.name}::clean")
        corrupted = self.run(
            model, dataset, chosen, severity, settings, cell=f"{dataset.name}::{chosen.name}::{severity}"
        )
        return CellResult(corrupted=corrupted, clean=self._clean[key])


def _build(suite_file: str, source: str, where: str, build: Callable[[], Any]) -> Any:
    """Build a suite's model or dataset; any failure but our own becomes an error naming file (as
    ``suite_file`` shows it), field and source."""
    try:
        return build()
    except SegRobustError as exc:
        if str(exc).startswith(suite_file):
            raise
        raise type(exc)(f"{suite_file}: {where}: {exc}") from exc  # say which suite's entry it was
    except Exception as exc:
        raise SegRobustError(f"{suite_file}: {where}: {source} failed: {type(exc).__name__}: {exc}") from exc


def _dataset_field(split: str | None) -> str:
    """The suite's entry of the dataset of ``split``."""
    return "field 'dataset'" if split is None else f"field 'shifts.splits.{split}'"


@contextmanager
def _blame(plan: Plan, key: CellKey, suite_file: str) -> Iterator[None]:
    """An evaluation of ``key``'s model and dataset, whose errors name the suite (its file as
    ``suite_file`` shows it), the field at fault and the cell.

    Any error of the dataset is the dataset entry's; any error of a prediction, the model entry's.
    """
    evaluated = ("" if key.split is None else f"{key.split}::") + (
        CLEAN if key.severity == 0 else f"{key.corruption}[{key.severity}]"
    )
    try:
        yield
    except DatasetError as exc:
        if str(exc).startswith(suite_file):
            raise
        raise type(exc)(f"{suite_file}: {_dataset_field(key.split)}: evaluating {evaluated}: {exc}") from exc
    except (ModelError, ModelOutputError) as exc:
        raise type(exc)(f"{suite_file}: {plan.model(key.model).field}: evaluating {evaluated}: {exc}") from exc


class _ProgressLog:
    """Logs a long evaluation's progress every few seconds (shown by pytest's live logging)."""

    interval = 5.0

    def __init__(self, cell: str) -> None:
        self.cell = cell
        self.start = self.last = time.perf_counter()

    def __call__(self, done: int, total: int) -> None:
        now = time.perf_counter()
        if now - self.last >= self.interval or (done == total and now - self.start >= self.interval):
            self.last = now
            rate = done / max(now - self.start, 1e-9)
            logger.info("%s: %d/%d images (%.1f images/s)", self.cell, done, total, rate)
