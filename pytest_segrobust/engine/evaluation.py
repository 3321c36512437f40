"""Run a model over a (corrupted) dataset and feed every metric of the suite.

Samples stream from the dataset into batches of equal image size. The task turns each batch
into typed fields on the model's device (:meth:`Task.collate`); the corruption, seeded per
sample, changes the image and moves every annotation with it; the model predicts once; the
task checks the predictions in one place; and every metric adds the batch to its sufficient
statistics. Nothing here knows which task or metric it runs: both are looked up by name.

The same pass scores the first few samples each on its own with the headline metric
(:attr:`EvalSettings.scored_images`): the report's worst images are picked among them
(:mod:`pytest_segrobust.engine.worst_images`), so no second pass runs the model over the data.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import torch

from pytest_segrobust import __version__
from pytest_segrobust.core.errors import (
    DatasetError,
    DuplicateSampleError,
    ModelError,
    ModelOutputError,
    SegRobustError,
)
from pytest_segrobust.core.types import Batch, Field
from pytest_segrobust.corruptions import Corruption
from pytest_segrobust.data.base import Sample, SegmentationDataset, check_sample
from pytest_segrobust.data.sample_cache import SampleCache
from pytest_segrobust.metrics import METRICS, Metric, MetricContext, MetricResult
from pytest_segrobust.metrics.base import check_score
from pytest_segrobust.metrics.robustness import absolute_robustness, relative_robustness
from pytest_segrobust.models.base import model_device
from pytest_segrobust.randomness.seeding import sample_seed
from pytest_segrobust.store.sidecar import pack, unpack
from pytest_segrobust.tasks import Task, get_task

CLEAN = "clean"
# Version of EvalResult.to_json; a cached result of another version is recomputed.
RESULT_FORMAT = 4

Progress = Callable[[int, int], None]


def evaluator_version(task: str, metrics: Sequence[str]) -> str:
    """What a clean result of ``task`` scored by ``metrics`` is computed with, as it keys cached
    results (:mod:`pytest_segrobust.engine.result_cache`): this package's version, and the declared ``version``
    of the task and of each metric.

    A release invalidates every cached result; between releases, a task or metric whose change
    can change a result bumps its own ``version`` (:attr:`~pytest_segrobust.tasks.base.Task.version`,
    :attr:`~pytest_segrobust.metrics.base.Metric.version`), which invalidates the results it
    took part in and no others.
    """
    parts = [f"pytest-segrobust {__version__}", f"task {task} {get_task(task).version}"]
    parts += [f"metric {name} {METRICS.get(name).version}" for name in metrics]
    return "; ".join(parts)


@dataclass(frozen=True)
class EvalResult:
    """Every metric of one model on one (possibly corrupted) dataset.

    Attributes:
        metrics: Each metric's numbers by name, in the suite's order; the first is the headline.
        num_images: Images evaluated.
        seconds: Wall time of the evaluation.
        statistics: Per-image sufficient statistics of each metric that keeps them
            (:meth:`~pytest_segrobust.metrics.base.Metric.image_statistics`: ``(num_images, ...)``
            for most, one row per detection for COCO mAP), in dataset order: what the
            statistical gate pairs with a baseline's. ``num_images`` is their image count.
        units: Where the task groups samples (referring, R-VOS), the unit (image, clip) of each
            row of a metric's statistics, ``(N,)`` str (:meth:`~pytest_segrobust.metrics.base.Metric.row_units`);
            absent where each row is its own unit.
        image_scores: The headline score of each of the first
            :attr:`~EvalSettings.scored_images` samples on its own, in dataset order (NaN where
            undefined): what the report's worst images are picked from.
    """

    metrics: Mapping[str, MetricResult]
    num_images: int
    seconds: float
    statistics: Mapping[str, np.ndarray] = field(default_factory=dict, compare=False, repr=False)
    units: Mapping[str, np.ndarray] = field(default_factory=dict, compare=False, repr=False)
    image_scores: tuple[float, ...] = field(default=(), compare=False, repr=False)

    @property
    def headline(self) -> str:
        return next(iter(self.metrics))

    @property
    def score(self) -> float:
        """The headline metric's score."""
        return self.metrics[self.headline].score

    @property
    def per_class(self) -> tuple[float | None, ...]:
        return self.metrics[self.headline].per_class

    @property
    def details(self) -> dict[str, float]:
        return self.metrics[self.headline].details

    def to_json(self) -> dict[str, Any]:
        return {
            "format": RESULT_FORMAT,
            "metrics": {name: result.to_json() for name, result in self.metrics.items()},
            "num_images": self.num_images,
            "seconds": self.seconds,
            "statistics": {name: pack(array) for name, array in self.statistics.items()},
            "units": {name: pack(array) for name, array in self.units.items()},
            "image_scores": list(self.image_scores),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> EvalResult:
        """Parse :meth:`to_json`'s output.

        Raises:
            ValueError: for another format version or a missing field.
        """
        if data.get("format") != RESULT_FORMAT:
            raise ValueError(f"result format {data.get('format')!r}, expected {RESULT_FORMAT}")
        metrics = {str(name): MetricResult.from_json(result) for name, result in data["metrics"].items()}
        if not metrics:
            raise ValueError("a result without metrics")
        statistics = {str(name): unpack(text) for name, text in data.get("statistics", {}).items()}
        units = {str(name): unpack(text) for name, text in data.get("units", {}).items()}
        image_scores = tuple(float(score) for score in data["image_scores"])
        return cls(metrics, int(data["num_images"]), float(data["seconds"]), statistics, units, image_scores)


@dataclass(frozen=True)
class CellResult:
    """A corrupted result next to its clean reference, with the robustness scores of each metric."""

    corrupted: EvalResult
    clean: EvalResult

    @property
    def score(self) -> float:
        return self.corrupted.score

    @property
    def clean_score(self) -> float:
        return self.clean.score

    @property
    def gamma_r(self) -> float:
        return self.robustness(self.corrupted.headline)[0]

    @property
    def gamma_a(self) -> float:
        return self.robustness(self.corrupted.headline)[1]

    def robustness(self, metric: str) -> tuple[float, float]:
        """``(gamma_r, gamma_a)`` of ``metric``, in the direction and on the scale the metric declares."""
        kind: type[Metric] = METRICS.get(metric)
        clean, corrupted = self.clean.metrics[metric].score, self.corrupted.metrics[metric].score
        return (
            relative_robustness(clean, corrupted, higher_is_better=kind.higher_is_better, worst=kind.worst()),
            absolute_robustness(clean, corrupted, higher_is_better=kind.higher_is_better, scale=kind.scale()),
        )


class Phases:
    """Seconds :func:`evaluate` spends in each phase, summed over every call it is given to.

    What a benchmark reads to say where the harness's time goes next to the model's own
    (``predict``). On a GPU each phase waits for the device's queued work before it ends,
    so kernels are charged to the phase that launched them; that wait is why timing is
    asked for, never on by default.

    Attributes:
        seconds: Wall seconds by phase, in :data:`NAMES` order.
        images: Images evaluated.
    """

    NAMES = ("setup", "read", "collate", "corrupt", "predict", "check", "metrics", "results")

    def __init__(self) -> None:
        self.seconds = dict.fromkeys(self.NAMES, 0.0)
        self.images = 0

    @contextlib.contextmanager
    def timing(self, name: str, device: torch.device) -> Iterator[None]:
        """Add the time spent inside (and the queued ``device`` work it launched) to phase ``name``."""
        _synchronize(device)
        start = time.perf_counter()
        try:
            yield
        finally:
            _synchronize(device)
            self.seconds[name] += time.perf_counter() - start

    def iterate(self, name: str, items: Iterable[Any], device: torch.device) -> Iterator[Any]:
        """``items`` one by one, the time taken to produce each added to phase ``name``."""
        iterator = iter(items)
        while True:
            with self.timing(name, device):
                item = next(iterator, _END)
            if item is _END:
                return
            yield item


_END = object()


def _untimed(name: str, device: torch.device) -> contextlib.AbstractContextManager[None]:
    """What :func:`evaluate` times its phases with unless given :class:`Phases`: nothing, no device wait."""
    return contextlib.nullcontext()


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@dataclass(frozen=True)
class EvalSettings:
    """How an evaluation runs: one value that every layer passes on, instead of its keywords.

    Attributes:
        task: The task object.
        metrics: Metric names; the first is the headline (the task's defaults when none were named).
        seed: Global seed; with the sample id it fixes every random draw.
        batch_size: Samples per forward pass; results do not depend on it.
        limit: Evaluate only the first ``limit`` samples (``None``: all).
        statistics: Keep each metric's per-sample statistics in the result (what the statistical
            gate pairs); without them only the scores are kept. COCO's per-image matches are a
            second pass over the detections, so suites that do not gate statistically leave them out.
        loader_workers: Processes that read samples ahead of the model (0: read inline).
        scored_images: Score each of the first ``scored_images`` samples on its own with the
            headline metric, from the predictions the pass makes anyway
            (:attr:`EvalResult.image_scores`; 0: none).
    """

    task: Task
    metrics: tuple[str, ...]
    seed: int = 0
    batch_size: int = 16
    limit: int | None = None
    statistics: bool = True
    loader_workers: int = 0
    scored_images: int = 0

    @classmethod
    def of(cls, task: str | Task = "semantic", metrics: Sequence[str] | None = None, **options: Any) -> EvalSettings:
        """Settings for ``task`` (an object or its registry name) scored by ``metrics`` (its defaults when ``None``)."""
        chosen = get_task(task) if isinstance(task, str) else task
        return cls(chosen, tuple(metrics or chosen.default_metrics), **options)


@dataclass(frozen=True)
class EvalHooks:
    """What an evaluation reports to and reads through, beside its settings; none changes a number.

    Attributes:
        progress: Called with ``(images done, total)`` after each batch.
        sample_cache: Where decoded samples are kept for the next evaluation of the dataset
            (``None``: every sample is read from the dataset).
        phases: Where to add the time of each phase (``None``: nothing is timed).
    """

    progress: Progress | None = None
    sample_cache: SampleCache | None = None
    phases: Phases | None = None


NO_HOOKS = EvalHooks()


def evaluate(
    model: Any,
    dataset: SegmentationDataset,
    corruption: Corruption | None = None,
    severity: int = 0,
    settings: EvalSettings | None = None,
    hooks: EvalHooks = NO_HOOKS,
) -> EvalResult:
    """Evaluate ``model`` on ``dataset`` under ``corruption`` at ``severity``.

    Args:
        model: A model of the settings' task (see :func:`pytest_segrobust.models.adapt_model`);
            its ``device`` decides where all the work happens.
        dataset: The samples, streamed one at a time, with the targets the task needs.
        corruption: ``None`` (or severity 0) evaluates clean images.
        severity: 0 to 5.
        settings: Task, metrics, seed, batch size, limit... (``None``: the semantic task's
            defaults; :meth:`EvalSettings.of` takes a task's registry name). One forward pass
            per batch feeds every metric.
        hooks: Progress, the sample cache and the phases' timer.

    Raises:
        DatasetError: for a sample whose annotation does not match its image, or two samples
            with one ``sample_id``.
        ModelOutputError: for predictions of the wrong type, shape, dtype or class range.
    """
    chosen = EvalSettings.of() if settings is None else settings
    start = time.perf_counter()
    total = sample_count(dataset, chosen.limit)
    scorers, image_scores = accumulate(model, dataset, corruption, severity, range(total), chosen, hooks)
    result = result_of(
        scorers, total, 0.0, statistics=chosen.statistics, phases=hooks.phases, image_scores=image_scores
    )
    return replace(result, seconds=time.perf_counter() - start)  # computing the metrics included


def sample_count(dataset: SegmentationDataset, limit: int | None) -> int:
    """How many of the dataset's samples an evaluation with ``limit`` takes (the first ones).

    Raises:
        DatasetError: when that is none.
    """
    total = len(dataset) if limit is None else min(limit, len(dataset))
    if total == 0:
        raise DatasetError(f"{dataset.name}: the dataset has no samples; there is nothing to evaluate")
    return total


def accumulate(
    model: Any,
    dataset: SegmentationDataset,
    corruption: Corruption | None,
    severity: int,
    positions: range,
    settings: EvalSettings,
    hooks: EvalHooks = NO_HOOKS,
) -> tuple[list[Metric], tuple[float, ...]]:
    """Feed the samples at ``positions`` (consecutive) to every metric: :func:`evaluate`'s loop.

    A sample's corruption depends only on the seed, its id, the corruption and the severity,
    and its metric records are numbered by its position in the dataset, so the metrics of
    consecutive ranges, merged in order, are those of the whole (:mod:`pytest_segrobust.engine.pieces`).
    The arguments are :func:`evaluate`'s; ``hooks.progress`` counts the range's samples.

    Returns:
        The metrics of ``settings``, in order, with the range added; and the headline score of
        each sample of the range, on its own, among the first ``settings.scored_images``.
    """
    task, seed, phases = settings.task, settings.seed, hooks.phases
    device = model_device(model)
    timing = phases.timing if phases is not None else _untimed
    with timing("setup", device):
        context = MetricContext.of(dataset, device)
        scorers = [METRICS.get(name)(context) for name in settings.metrics]
    corrupting = corruption is not None and severity > 0
    done = 0
    image_scores: list[float] = []
    positions_of: dict[str, int] = {}
    if hooks.sample_cache is None:
        stream = _read(dataset, positions, settings.loader_workers)
    else:
        read = lambda indices: _read(dataset, indices, settings.loader_workers)
        stream = hooks.sample_cache.samples(dataset, positions.stop, read, start=positions.start)
    batches = _batches(stream, settings.batch_size, task.batch_key)
    for samples in batches if phases is None else phases.iterate("read", batches, device):
        first = positions.start + done
        _check_unique_ids(samples, first, positions_of, dataset)
        with timing("collate", device):
            batch = task.collate(samples, range(first, first + len(samples)), dataset, device)
        if corrupting:
            assert corruption is not None
            with timing("corrupt", device):
                seeds = [sample_seed(seed, s.sample_id, corruption.name, severity) for s in samples]
                batch = corruption(batch, severity, seeds)
        try:
            with timing("predict", device):
                predictions = task.predict(model, batch)
            with timing("check", device):
                predictions = task.check_predictions(predictions, batch)
        except ModelOutputError as exc:
            raise ModelOutputError(f"{exc} (batch starting at sample {samples[0].sample_id})") from None
        except SegRobustError:
            raise  # a cell's time limit, an adapter's own message
        except Exception as exc:  # the model's own code: whatever it raises fails the cell in one line
            raise ModelError(
                f"the model raised on the batch of {_sample_ids(samples)}: {type(exc).__name__}: {exc}"
            ) from exc
        with timing("metrics", device):
            for scorer in scorers:
                scorer.update(predictions, batch)
            alone = range(min(len(samples), max(settings.scored_images - first, 0)))
            image_scores += [_score_alone(scorers[0], predictions, batch, index) for index in alone]
        done += len(samples)
        if hooks.progress is not None:
            hooks.progress(done, len(positions))
    if phases is not None:
        phases.images += done
    return scorers, tuple(image_scores)


def result_of(
    scorers: Sequence[Metric],
    num_images: int,
    seconds: float,
    *,
    statistics: bool,
    phases: Phases | None = None,
    image_scores: tuple[float, ...] = (),
) -> EvalResult:
    """The result of metrics that saw ``num_images`` images: each one's numbers, checked against
    its scale, and (``statistics``) its per-image statistics with the unit of each row where
    it keeps them; ``seconds`` is the time to report, ``image_scores`` the first images' scores
    on their own (:func:`accumulate`).

    Raises:
        ValueError: for units that are not one per row of the metric's statistics (a row without one).
    """
    device = scorers[0].context.device if scorers else torch.device("cpu")
    timing = phases.timing if phases is not None else _untimed
    results, kept, units = {}, {}, {}
    with timing("results", device):
        for scorer in scorers:
            result = scorer.compute()
            check_score(type(scorer), result.score)
            results[scorer.name] = result
            per_image = scorer.image_statistics() if statistics else None
            if per_image is not None:
                kept[scorer.name] = per_image
                row_units = scorer.row_units()
                if row_units is not None:
                    if row_units.shape != per_image.shape[:1]:
                        raise ValueError(
                            f"metric {scorer.name} kept {row_units.shape[0]} unit ids for {per_image.shape[0]} rows of "
                            "statistics: every row needs the unit (image, clip) the gate resamples it by"
                        )
                    units[scorer.name] = row_units
    return EvalResult(
        results, num_images=num_images, seconds=seconds, statistics=kept, units=units, image_scores=image_scores
    )


def _score_alone(headline: Metric, predictions: Any, batch: Batch, index: int) -> float:
    """The headline metric of the batch's sample ``index`` on its own: a fresh metric fed that
    sample's fields and predictions, as if it had been a batch of one (NaN where undefined, and
    for predictions of a type that cannot be cut per sample: the cell's numbers never depend on it)."""
    one = range(index, index + 1)
    if not isinstance(predictions, (Field, torch.Tensor, list, tuple)):
        return math.nan
    alone = predictions.take(one) if isinstance(predictions, Field) else predictions[one.start : one.stop]
    scorer = type(headline)(headline.context)
    scorer.update(alone, {name: value.take(one) for name, value in batch.items()})
    return float(scorer.compute().score)


def is_finite(result: EvalResult) -> bool:
    """Whether every metric's score is a number (a NaN result is never cached nor stored)."""
    return all(math.isfinite(r.score) for r in result.metrics.values())


def _sample_ids(samples: Sequence[Sample], shown: int = 4) -> str:
    """``samples a/1, a/2 and 3 more``: which images a batch held, for a message."""
    ids = [str(s.sample_id) for s in samples]
    more = f" and {len(ids) - shown} more" if len(ids) > shown else ""
    return f"{'sample' if len(ids) == 1 else 'samples'} {', '.join(ids[:shown])}{more}"


def _read(dataset: SegmentationDataset, indices: Sequence[int], workers: int) -> Iterator[Sample]:
    """The samples at ``indices`` in order, read inline or by ``workers`` loader processes, each
    checked to be a :class:`Sample` before anything reads its fields."""
    if workers == 0:
        return (check_sample(dataset, index, dataset[index]) for index in indices)
    loader = torch.utils.data.DataLoader(
        torch.utils.data.Subset(dataset, indices),  # type: ignore[arg-type]
        batch_size=None,
        num_workers=workers,
        collate_fn=_as_is,
        prefetch_factor=4,
    )
    return (check_sample(dataset, index, sample) for index, sample in zip(indices, loader, strict=True))


def _check_unique_ids(
    samples: Sequence[Sample], first: int, positions_of: dict[str, int], dataset: SegmentationDataset
) -> None:
    """Record the ids of ``samples`` (at positions from ``first`` on) in ``positions_of``.

    Raises:
        DuplicateSampleError: for an id seen before: an id seeds its image's corruption and pairs
            its per-image statistics, so two images with one id would be confused.
    """
    for position, sample in enumerate(samples, start=first):
        earlier = positions_of.setdefault(sample.sample_id, position)
        if earlier != position:
            raise DuplicateSampleError(
                f"{dataset.name}: sample_id {sample.sample_id!r} is used twice, by the samples at index {earlier} and "
                f"{position}; sample ids must be unique (each seeds its image's corruption, and per-image statistics "
                "pair images by id)"
            )


def _as_is(sample: Sample) -> Sample:
    return sample


def _batches(samples: Iterator[Sample], batch_size: int, key: Callable[[Sample], Hashable]) -> Iterator[list[Sample]]:
    """Consecutive samples grouped into batches of one ``key`` (the task's: by default one image size)."""
    batch: list[Sample] = []
    batch_key: Hashable = None
    for sample in samples:
        sample_key = key(sample)
        if batch and (len(batch) == batch_size or batch_key != sample_key):
            yield batch
            batch = []
        if not batch:
            batch_key = sample_key
        batch.append(sample)
    if batch:
        yield batch
