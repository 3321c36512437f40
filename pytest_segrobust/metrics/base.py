"""What a metric is to the engine: declared states, ``update`` on a batch, pure ``compute``.

A metric accumulates sufficient statistics over a dataset. Each state is declared once,
with its default and its reduction (:meth:`Metric.add_state`, as torchmetrics does), so that
resetting, merging two partial states (workers, shards) and serialising them to JSON are
generic: a ``SUM`` state is a tensor added elementwise, a ``CONCAT`` state a list extended,
and a reset gives every state a fresh copy of its default. ``compute`` is a pure function of
the states.

The class says what the gate and the scores need to know about its numbers: the direction
(``higher_is_better``) and the scale (``bounds``): gamma_a divides by the width of the
scale, and a score outside the bounds is a bug, not a result.

A metric is registered by name with :func:`pytest_segrobust.metrics.register_metric` or
through the ``segrobust.metrics`` entry point group, and a suite names it in ``metrics:``.
"""

from __future__ import annotations

import copy
import math
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, ClassVar

import numpy as np
import torch

from pytest_segrobust.core.extras import Extra
from pytest_segrobust.core.statistics import of_sums
from pytest_segrobust.core.types import Batch, Field, SampleIndex


class Reduction(str, Enum):
    """How two partial values of a state combine."""

    SUM = "sum"  # a tensor (or number): added
    CONCAT = "concat"  # a list: extended

    def combine(self, mine: Any, theirs: Any) -> Any:
        """The state of two shards, ``mine`` then ``theirs``, as a new value (neither is changed)."""
        if self is Reduction.SUM:
            return mine + (theirs.to(mine.device) if isinstance(mine, torch.Tensor) else theirs)
        return [*mine, *theirs]

    def check_default(self, name: str, default: Any) -> None:
        """Raise when ``default`` is not a value this reduction combines.

        Raises:
            TypeError: for a ``SUM`` default that is no tensor or number, or a ``CONCAT`` one that is no list.
        """
        if self is Reduction.SUM and not isinstance(default, (torch.Tensor, int, float)):
            raise TypeError(
                f"state {name!r} sums: its default must be a tensor or a number, got {type(default).__name__}"
            )
        if self is Reduction.CONCAT and not isinstance(default, list):
            raise TypeError(f"state {name!r} concatenates: its default must be a list, got {type(default).__name__}")


@dataclass(frozen=True)
class State:
    """A declared state of a metric: its default and how two shards' values combine."""

    default: Any
    reduction: Reduction

    def fresh(self) -> Any:
        """A copy of the default that shares no mutable object with it (a tensor is cloned)."""
        if isinstance(self.default, torch.Tensor):
            return self.default.detach().clone()
        return copy.deepcopy(self.default)


@dataclass(frozen=True)
class MetricResult:
    """A metric's numbers on one (possibly corrupted) dataset.

    Attributes:
        score: The headline number, on the metric's scale (``bounds``); NaN when undefined.
        per_class: The metric per class of the dataset's ``class_names``; ``None`` where it is
            undefined for that class.
        details: Further numbers by name (e.g. AP50 for mask AP, SQ and RQ for PQ).
    """

    score: float
    per_class: tuple[float | None, ...]
    details: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"score": self.score, "per_class": list(self.per_class), "details": dict(self.details)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> MetricResult:
        return cls(float(data["score"]), tuple(data["per_class"]), {k: float(v) for k, v in data["details"].items()})


@dataclass(frozen=True)
class MetricContext:
    """What a metric may know about the dataset it scores.

    Attributes:
        class_names: Label ``k`` is ``class_names[k]``.
        ignore_index: Semantic label of pixels that are not scored.
        categories: The dataset's COCO category dicts (``id``, ``name``, optional
            ``supercategory``, ``isthing``), or ``None``.
        device: Where states that follow the model live.
        name: The dataset's name, for messages.
    """

    class_names: tuple[str, ...]
    ignore_index: int
    categories: tuple[dict[str, Any], ...] | None = None
    device: torch.device = torch.device("cpu")  # noqa: RUF009 - a device is immutable: one shared default is safe
    name: str = "dataset"

    @classmethod
    def of(cls, dataset: Any, device: torch.device) -> MetricContext:
        categories = getattr(dataset, "categories", None)
        return cls(
            class_names=tuple(dataset.class_names),
            ignore_index=int(dataset.ignore_index),
            categories=None if categories is None else tuple(dict(c) for c in categories),
            device=device,
            name=str(dataset.name),
        )


@dataclass(frozen=True)
class DetailGroup:
    """Details of a metric that split its score one way (per prompt kind, per instance size): the
    report shows one table per detail of the group, clean and per corruption and severity.

    Attributes:
        details: The group's keys of :attr:`MetricResult.details`, in the order the report shows them.
        title: A table's title after the metric's label, ``{detail}`` standing for the key
            (``"with {detail} prompts"``).
        note: What a table's numbers are, ``{detail}`` likewise (``""``: no note).
    """

    details: tuple[str, ...]
    title: str
    note: str = ""


class Metric(ABC):
    """A dataset-level metric built from sufficient statistics.

    Subclasses set the class attributes, declare every state once in ``__init__`` with
    :meth:`add_state` (a tensor for ``SUM``, a list for ``CONCAT``), add a batch in
    :meth:`update` and derive the numbers in :meth:`compute` without changing the states.
    :meth:`reset`, :meth:`merge`, :meth:`state_dict` and :meth:`load_state_dict` follow the
    declarations.

    Attributes:
        name: Registry name, as written in suites (``"miou"``).
        label: How tables show it (``"mIoU"``).
        higher_is_better: Direction of the score; the gate and the robustness scores follow it.
        bounds: ``(worst, best)`` ends of the scale for ``higher_is_better`` metrics,
            ``(best, worst)`` otherwise; percent metrics use ``(0, 100)``.
        accepts: The ground-truth field types :meth:`update` reads from a batch.
        detail_labels: How tables show the keys of :attr:`MetricResult.details`.
        detail_groups: The ways its details split the score (:class:`DetailGroup`): a report table per detail.
        requires: The extras whose packages ``__init__`` imports; a suite naming the metric is
            refused when they are not installed.
        chance_by_classes: Whether the score has a chance level of ``1/K`` of its scale over its
            ``K`` classes (about what one constant class or random labels reach under mIoU, AP or
            PQ); false for a score of objects or referred masks (J&F, referring and audio-visual
            IoU and F), where predicting background everywhere scores the worst end: the report
            then marks no model near chance.
        version: Bumped when a change of the metric can change its numbers: it invalidates the
            cached clean results it scored (:func:`~pytest_segrobust.engine.evaluation.evaluator_version`).
    """

    name: ClassVar[str]
    label: ClassVar[str]
    higher_is_better: ClassVar[bool] = True
    bounds: ClassVar[tuple[float, float]] = (0.0, 100.0)
    accepts: ClassVar[tuple[type[Field], ...]] = ()
    detail_labels: ClassVar[dict[str, str]] = {}
    detail_groups: ClassVar[tuple[DetailGroup, ...]] = ()
    requires: ClassVar[tuple[Extra, ...]] = ()
    chance_by_classes: ClassVar[bool] = True
    version: ClassVar[str] = "1"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # A class-level ``states`` table (the former declaration) would be shadowed by the
        # instance's and its states never merged: refused at once instead of merged wrong.
        if "states" in vars(cls):
            raise TypeError(f"{cls.__name__}: declare states with self.add_state(...) in __init__, not a states table")

    def __init__(self, context: MetricContext) -> None:
        self.context = context
        self._states: dict[str, State] = {}

    @property
    def states(self) -> dict[str, Reduction]:
        """Name and reduction of every declared state, in the order they were declared."""
        return {name: state.reduction for name, state in self._states.items()}

    def add_state(self, name: str, default: Any, reduction: Reduction) -> None:
        """Declare the state ``name`` and set it to a fresh copy of ``default``.

        Args:
            name: The attribute that holds the state.
            default: Its empty value: a tensor (or number) for ``SUM``, a list for ``CONCAT``;
                every reset gives a copy of it, so it is never changed.
            reduction: How two shards' values of the state combine.

        Raises:
            ValueError: when ``name`` is declared already.
            TypeError: when ``default`` does not fit ``reduction``.
        """
        if name in self._states:
            raise ValueError(f"{type(self).__name__}: state {name!r} is declared twice")
        reduction.check_default(name, default)
        self._states[name] = State(default, reduction)
        setattr(self, name, self._states[name].fresh())

    def reset(self) -> None:
        """Give every declared state a fresh copy of its default."""
        for name, state in self._states.items():
            setattr(self, name, state.fresh())

    @abstractmethod
    def update(self, predictions: Any, batch: Batch) -> None:
        """Add a batch: the model's (checked) predictions and the batch's typed ground truth."""

    @abstractmethod
    def compute(self) -> MetricResult:
        """The numbers of everything added so far; the states are left as they are."""

    def image_statistics(self) -> np.ndarray | None:
        """Per-image sufficient statistics of everything added, or ``None`` for a metric that
        keeps none.

        Most metrics give ``(N, ...)``, one row per image in the order the images were added,
        which add up: summed over any multiset of the images (a bootstrap resample), they give
        that multiset's score through :meth:`score_of`. A metric whose statistics do not add
        up chooses its own layout (a numeric array, stored as it is) and scores a multiset in
        :meth:`resampled_scores`. The paired statistics of :mod:`pytest_segrobust.core.statistics` need
        nothing else.
        """
        return None

    def keep_row_units(self) -> None:
        """Declare the ``row_unit_ids`` state, for a metric whose statistics have one row per
        sample: :meth:`add_row_units` fills it and :meth:`row_units` reads it. Call it in
        ``__init__``; without it a metric keeps no units, and a task that groups samples
        (referring, R-VOS) cannot be gated statistically with it."""
        self.add_state("row_unit_ids", [], Reduction.CONCAT)

    def add_row_units(self, batch: Batch) -> None:
        """Keep the unit of each sample of ``batch`` (its :class:`~pytest_segrobust.core.types.SampleIndex`'s
        ``units``), where its task groups samples; call it with each batch's rows."""
        if "row_unit_ids" not in self._states:
            raise TypeError(f"{type(self).__name__}: call self.keep_row_units() in __init__ first")
        index = next((f for f in batch.values() if isinstance(f, SampleIndex)), None)
        if index is not None and index.units is not None:
            self.row_unit_ids.extend(index.units)  # type: ignore[attr-defined]

    def row_units(self) -> np.ndarray | None:
        """The unit (image, clip) of each row of :meth:`image_statistics`, ``(N,)`` str, where the
        task groups samples; ``None`` where it does not (each row is its own unit) or the metric
        keeps no units. What the gate sums rows by (:func:`~pytest_segrobust.core.statistics.unit_sums`)."""
        if "row_unit_ids" not in self._states or not self.row_unit_ids:  # type: ignore[attr-defined]
            return None
        return np.asarray([str(unit) for unit in self.row_unit_ids], dtype=np.str_)  # type: ignore[attr-defined]

    @classmethod
    def score_of(cls, summed: np.ndarray) -> np.ndarray:
        """The score of summed per-image statistics ``(..., *S)`` -> ``(...)`` (vectorised over resamples)."""
        raise NotImplementedError(f"metric {cls.name} keeps no per-image statistics")

    @classmethod
    def resampled_scores(cls, statistics: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """The score of each weighted multiset of the images: ``weights[r, i]`` copies of image ``i``.

        The default scores the weighted sums of statistics that add up (:meth:`score_of`).

        Args:
            statistics: :meth:`image_statistics` of a run of ``N`` images.
            weights: How often each image is drawn in each resample, ``(R, N)`` whole counts.

        Shape:
            return: ``(R,)``, float64.

        Raises:
            ValueError: when ``statistics`` do not describe ``N`` images.
        """
        return of_sums(cls.score_of)(statistics, weights)

    @classmethod
    def resampled_class_scores(cls, statistics: np.ndarray, weights: np.ndarray) -> np.ndarray | None:
        """Each class's score in each weighted multiset of the images, ``(R, K)`` (NaN where a
        class is absent from a resample), or ``None`` for a metric that cannot say: per-class
        requirements are then compared by their point value."""
        return None

    @classmethod
    def keeps_image_statistics(cls) -> bool:
        """Whether the metric gives per-image statistics (it defines :meth:`score_of` or
        :meth:`resampled_scores`)."""
        return any(
            getattr(cls, name).__func__ is not getattr(Metric, name).__func__  # type: ignore[attr-defined]
            for name in ("score_of", "resampled_scores")
        )

    @classmethod
    def statistics_add_up(cls) -> bool:
        """Whether a multiset's score is the score of its rows' sums (:meth:`resampled_scores` is
        the default's): only then can rows be summed per unit (several expressions of one image)."""
        return (
            cls.resampled_scores.__func__ is Metric.resampled_scores.__func__  # type: ignore[attr-defined]
            and cls.keeps_image_statistics()
        )

    @classmethod
    def scale(cls) -> float:
        """Width of the metric's scale (100 for a percentage)."""
        return abs(cls.bounds[1] - cls.bounds[0])

    @classmethod
    def worst(cls) -> float:
        """The worst end of the scale (0 for a percentage where higher is better)."""
        return cls.bounds[0] if cls.higher_is_better else cls.bounds[1]

    def merge(self, other: Metric) -> None:
        """Add ``other``'s states (e.g. a worker's share of the dataset) to this metric's."""
        if type(other) is not type(self):
            raise TypeError(f"cannot merge {type(other).__name__} into {type(self).__name__}")
        for name, state in self._states.items():
            setattr(self, name, state.reduction.combine(getattr(self, name), getattr(other, name)))

    def state_dict(self) -> dict[str, Any]:
        """JSON-safe states (tensors as nested lists with their dtype)."""
        out: dict[str, Any] = {}
        for name in self._states:
            value = getattr(self, name)
            out[name] = [_tensor_json(v) for v in value] if isinstance(value, list) else _tensor_json(value)
        return out

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Replace the states by ``state`` (from :meth:`state_dict`)."""
        missing = sorted(set(self._states) - set(state))
        if missing:
            raise ValueError(f"{self.name}: state lacks {', '.join(missing)}")
        for name in self._states:
            value = state[name]
            if isinstance(value, list):
                value = [self._tensor_of(v) for v in value]
            setattr(self, name, self._tensor_of(value))

    def _tensor_of(self, value: Any) -> Any:
        if isinstance(value, dict) and set(value) == {"dtype", "values"}:
            return torch.tensor(value["values"], dtype=getattr(torch, value["dtype"]), device=self.context.device)
        return value


def _tensor_json(value: Any) -> Any:
    """A tensor as ``{dtype, values}``; anything else as it is."""
    if isinstance(value, torch.Tensor):
        return {"dtype": str(value.dtype).removeprefix("torch."), "values": value.cpu().tolist()}
    return value


def check_score(metric: type[Metric], score: float) -> None:
    """Raise when a finite score lies outside the metric's scale (a metric bug, never a result)."""
    low, high = sorted(metric.bounds)
    if math.isfinite(score) and not low - 1e-9 <= score <= high + 1e-9:
        raise ValueError(f"metric {metric.name} computed {score}, outside its scale {low}..{high}")
