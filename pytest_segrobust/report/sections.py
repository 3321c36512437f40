"""The report's sections: each table or figure is made by a renderer registered in one of three
places, and the documents (markdown, HTML) show them in registration order.

* :data:`DECISION_SECTIONS`: right after the verdict and the models' lines (release criteria,
  the aggregate gate, the regressed cells);
* :data:`RUN_SECTIONS`: the run's provenance, before any suite (environment, what was measured);
* :data:`SUITE_SECTIONS`: each suite's tables and figures, in reading order.

A new table is a new module that registers a renderer; a renderer reads the typed report
(:mod:`pytest_segrobust.report.model`) and returns its sections::

    from pytest_segrobust.report.sections import SUITE_SECTIONS
    from pytest_segrobust.report.tables import Table

    @SUITE_SECTIONS.register("images per model", before="baseline comparison")
    def images_per_model(suite):
        rows = tuple((row, str(len(model.cells))) for row, model in suite.models.items())
        return [Table("Cells per model", ("model", "cells"), rows)]

A section shows only what the records carry: a renderer returns none where they hold nothing it
shows (per-class values, a metric's details, worst images), and a table without a row is never
shown (:meth:`SectionRegistry.render`), whoever registered it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from pytest_segrobust.core.errors import UnknownNameError
from pytest_segrobust.metrics import METRICS
from pytest_segrobust.metrics.base import DetailGroup
from pytest_segrobust.report import tables
from pytest_segrobust.report.detail_groups import detail_group_tables
from pytest_segrobust.report.model import Report, SuiteReport
from pytest_segrobust.report.r2bench import r2bench_tables
from pytest_segrobust.report.tables import Table
from pytest_segrobust.report.video import video_tables

T = TypeVar("T")


@dataclass(frozen=True)
class Figure:
    """A PNG beside the report, with what a reader needs to read it (``caption``)."""

    title: str
    file: str
    caption: str = ""


Section = Table | Figure


class SectionRegistry(Generic[T]):
    """Renderers of one place of the report, in the order the report shows their sections.

    Args:
        place: Where the sections stand, for messages (``"suite"``).
    """

    def __init__(self, place: str) -> None:
        self.place = place
        self._renderers: dict[str, Callable[[T], Sequence[Section]]] = {}

    def register(
        self, name: str, *, before: str | None = None
    ) -> Callable[[Callable[[T], Sequence[Section]]], Callable[[T], Sequence[Section]]]:
        """Register a renderer under ``name`` (a decorator): last, or just before the renderer ``before``.

        Registering a name again replaces its renderer in place (a module imported again).

        Raises:
            UnknownNameError: where ``before`` names no registered renderer.
        """
        if before is not None and before not in self._renderers:
            raise UnknownNameError(f"unknown {self.place} section {before!r}; known: {', '.join(self._renderers)}")

        def add(renderer: Callable[[T], Sequence[Section]]) -> Callable[[T], Sequence[Section]]:
            if name in self._renderers or before is None:
                self._renderers[name] = renderer
                return renderer
            entries = list(self._renderers.items())
            at = [key for key, _ in entries].index(before)
            self._renderers = dict([*entries[:at], (name, renderer), *entries[at:]])
            return renderer

        return add

    def unregister(self, name: str) -> None:
        """Remove the renderer ``name`` (a plugin replacing a built-in table)."""
        self._renderers.pop(name, None)

    def names(self) -> list[str]:
        """The registered renderers, in order."""
        return list(self._renderers)

    def render(self, value: T) -> list[Section]:
        """Every section of ``value``, in order; a table without a row is left out (it would show a header alone)."""
        return [
            section
            for renderer in self._renderers.values()
            for section in renderer(value)
            if not (isinstance(section, Table) and not section.rows)
        ]


DECISION_SECTIONS: SectionRegistry[Report] = SectionRegistry("decision")
RUN_SECTIONS: SectionRegistry[Report] = SectionRegistry("run")
SUITE_SECTIONS: SectionRegistry[SuiteReport] = SectionRegistry("suite")


def metric_label(metric: str) -> str:
    """How a metric is named in tables (its ``label``): ``miou`` -> mIoU, ``map`` -> mask AP."""
    try:
        return METRICS.get(metric).label
    except UnknownNameError:
        return metric


def detail_labels(metric: str) -> dict[str, str]:
    """How tables show a metric's further numbers (``ap50`` -> AP50, ``sq_things`` -> SQ things)."""
    try:
        return dict(METRICS.get(metric).detail_labels)
    except UnknownNameError:
        return {}


def detail_groups(metric: str) -> tuple[DetailGroup, ...]:
    """The ways a metric's details split its score (per prompt kind, per instance size); none for an unknown metric."""
    try:
        return METRICS.get(metric).detail_groups
    except UnknownNameError:
        return ()


# -- after the verdict -------------------------------------------------------------------------


@DECISION_SECTIONS.register("release criteria")
def release_criteria(report: Report) -> list[Section]:
    """The run's release criteria, where a suite states any."""
    if any(suite.release is not None and suite.release.requirements for suite in report.suites.values()):
        return [tables.release_criteria(report.suites)]
    return []


@DECISION_SECTIONS.register("aggregate gate")
def aggregate_gate(report: Report) -> list[Section]:
    """Each model's aggregates against its baseline, where a suite gates them."""
    releases = [suite.release for suite in report.suites.values() if suite.release is not None]
    if any(o.checks for release in releases for o in release.models):
        return [tables.model_gates(report.suites)]
    return []


@DECISION_SECTIONS.register("regressed cells")
def regressed_cells(report: Report) -> list[Section]:
    """The run's regressed cells, one row each, if any regressed."""
    labels = {
        name: {"": metric_label(suite.metric), **{m: metric_label(m) for m in suite.metrics[1:]}}
        for name, suite in report.suites.items()
    }
    return [tables.regressed_cells(report.records(), labels)]


# -- the run's provenance ----------------------------------------------------------------------


@RUN_SECTIONS.register("environment")
def environment(report: Report) -> list[Section]:
    return [] if report.environment is None else [tables.environment(report.environment)]


@RUN_SECTIONS.register("measured")
def measured(report: Report) -> list[Section]:
    return [tables.measured(report.suites)] if report.suites else []


# -- each suite, in reading order --------------------------------------------------------------

HEATMAP_CAPTION = (
    "Colour: white where the corrupted score equals the clean one (γr = 1), red below, blue above, "
    "equally strong at equal distances from 1; the scale is not capped at 1, so a model that gains under "
    "a corruption shows as gaining, not as the most robust. "
    "Models marked (near chance) have little to lose: their γr says nothing about robustness."
)

OVERLAY_CAPTION = (
    "Per row, one image: clean image | clean prediction | corrupted image | corrupted prediction | ground truth "
    "(and, for a geometric corruption, the ground truth moved with the image, which the corrupted prediction "
    "is scored against). Classes are blended over the image in the legend's colours; instances are shown "
    "from a score of 0.5."
)

PROMPTED_CAPTION = (
    "Per row, one image: clean image | a prediction per prompt kind ({panels}) | corrupted image | the same, "
    "corrupted | ground truth (and, for a geometric corruption, the ground truth moved with the image). Each "
    "prompted instance has its colour: its predicted mask is blended over the image, the outline of its true "
    "mask drawn on top, and its prompts as the model got them (moved by a geometric corruption, changed by a "
    "prompt perturbation): clicks as dots, green on the instance and red off it, the box as a rectangle."
)


def _corrupted(suite: SuiteReport) -> bool:
    return any(tables.corrupted(model.cells) for model in suite.models.values())


@SUITE_SECTIONS.register("headline")
def headline(suite: SuiteReport) -> list[Section]:
    return [tables.headline({row: model.summary for row, model in suite.models.items()}, metric_label(suite.metric))]


@SUITE_SECTIONS.register("statistical gate")
def statistical_gate(suite: SuiteReport) -> list[Section]:
    if suite.gate is None:
        return []
    out: list[Section] = [tables.statistical_gate(suite.gate, suite.all_records())[0]]
    if suite.aggregates:
        out.append(tables.aggregate_changes(suite.aggregates, suite.gate.confidence, suite.gate.unit))
    return out


@SUITE_SECTIONS.register("natural shift")
def natural_shift(suite: SuiteReport) -> list[Section]:
    if not suite.shifts:
        return []
    models, reference, splits = suite.records(), suite.shifts.reference, list(suite.shifts.splits)
    out: list[Section] = [tables.natural_shift(models, reference, splits, metric_label(suite.metric))]
    if tables.carries_per_class(models):
        out.append(tables.natural_shift_per_class(models, reference, splits))
    return out


@SUITE_SECTIONS.register("further metrics")
def further_metrics(suite: SuiteReport) -> list[Section]:
    further = suite.metrics[1:]
    return [tables.further_metrics(suite.records(), {name: metric_label(name) for name in further})] if further else []


@SUITE_SECTIONS.register("metric details")
def metric_details(suite: SuiteReport) -> list[Section]:
    models = suite.records()
    if not tables.carried_details(r for records in models.values() for r in records):
        return []
    return [tables.metric_details(models, metric_label(suite.metric), detail_labels(suite.metric))]


@SUITE_SECTIONS.register("video")
def video(suite: SuiteReport) -> list[Section]:
    return [] if suite.video is None else list(video_tables(suite.video))


@SUITE_SECTIONS.register("text")
def text(suite: SuiteReport) -> list[Section]:
    if suite.r2bench is None:
        return []
    out: list[Section] = list(r2bench_tables(suite.r2bench))
    if suite.worst_expressions and any(entry.images for entry in suite.worst_expressions.values()):
        metric = metric_label(suite.metric)
        title = f"Expressions whose {metric} fell most in each model's worst text cell"
        out.append(tables.worst_images(suite.worst_expressions, metric, title))
    return out


@SUITE_SECTIONS.register("detail groups")
def details_by_group(suite: SuiteReport) -> list[Section]:
    """A table per detail of each group the headline metric declares (per prompt kind, per instance size)."""
    return list(detail_group_tables(suite.records(), metric_label(suite.metric), detail_groups(suite.metric)))


@SUITE_SECTIONS.register("robustness by category")
def robustness_by_category(suite: SuiteReport) -> list[Section]:
    if not _corrupted(suite):
        return []
    out: list[Section] = [
        tables.grouped_by_category(suite.records(), "gamma_r", "γr per corruption (mean over severities)", 3)
    ]
    if "heatmap" in suite.figures:
        out.append(Figure("γr heatmap", suite.figures["heatmap"], HEATMAP_CAPTION))
    return out


@SUITE_SECTIONS.register("worst images")
def worst_images(suite: SuiteReport) -> list[Section]:
    """The table of each model's images that lost most in its worst cell, then their pictures; nothing
    where no model's worst cell has an image to show (a task whose predictions have no class view)."""
    if not _corrupted(suite) or not suite.worst_images or not any(entry.images for entry in suite.worst_images.values()):
        return []
    out: list[Section] = [tables.worst_images(suite.worst_images, metric_label(suite.metric))]
    for row, entry in suite.worst_images.items():
        kind = entry.figure
        if kind and kind in suite.figures:
            title = f"{row}: images that lost most under {entry.corruption} s{entry.severity}"
            first = not any(isinstance(section, Figure) for section in out)  # one explanation for them all
            caption = PROMPTED_CAPTION.format(panels=", ".join(entry.panels)) if entry.panels else OVERLAY_CAPTION
            out.append(Figure(title, suite.figures[kind], caption if first else ""))
    return out


@SUITE_SECTIONS.register("score by category")
def score_by_category(suite: SuiteReport) -> list[Section]:
    if not _corrupted(suite):
        return []
    title = f"{metric_label(suite.metric)} per corruption (mean over severities)"
    return [tables.grouped_by_category(suite.records(), "score", title, 2)]


@SUITE_SECTIONS.register("severity curves")
def severity_curves(suite: SuiteReport) -> list[Section]:
    if not _corrupted(suite):
        return []
    metric = metric_label(suite.metric)
    out: list[Section] = [tables.severity_curves(suite.records(), metric)]
    if "severity" in suite.figures:
        out.append(Figure(f"{metric} against severity (plot)", suite.figures["severity"]))
    return out


@SUITE_SECTIONS.register("frame kept")
def frame_kept(suite: SuiteReport) -> list[Section]:
    return [tables.frame_kept(suite.frame_kept)] if _corrupted(suite) and suite.frame_kept else []


@SUITE_SECTIONS.register("by corruption")
def by_corruption(suite: SuiteReport) -> list[Section]:
    if not _corrupted(suite):
        return []
    return [
        tables.by_corruption(records, "gamma_r", f"{row}: γr per corruption and severity", 3)
        for row, records in suite.records().items()
        if tables.corrupted(records)
    ]


@SUITE_SECTIONS.register("supercategories")
def supercategories(suite: SuiteReport) -> list[Section]:
    models = suite.records()
    if not _corrupted(suite) or not tables.has_supercategories(models):
        return []
    return [tables.supercategories(models), tables.supercategory_by_category(models)]


@SUITE_SECTIONS.register("per class")
def per_class(suite: SuiteReport) -> list[Section]:
    models = suite.records()
    if not _corrupted(suite) or not tables.carries_per_class(models):
        return []  # a metric of objects (J&F) or of prompted instances has no class to show
    return [tables.per_class(models, metric_label(suite.metric))]


@SUITE_SECTIONS.register("corruption error")
def corruption_error(suite: SuiteReport) -> list[Section]:
    models = suite.records()
    if not _corrupted(suite) or suite.cd is None or suite.cd.reference not in models:
        return []
    return [tables.degradation(models, suite.cd.reference, list(suite.cd.noise_severities))]


@SUITE_SECTIONS.register("baseline comparison")
def baseline_comparison(suite: SuiteReport) -> list[Section]:
    return [tables.baseline_comparison(suite.all_records())]


@SUITE_SECTIONS.register("gallery")
def gallery(suite: SuiteReport) -> list[Section]:
    if "gallery" not in suite.figures:
        return []
    return [Figure("One image under every corruption at severities 1, 3, 5", suite.figures["gallery"])]
