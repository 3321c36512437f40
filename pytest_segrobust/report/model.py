"""The report as a value: built once from a run's outcomes, then rendered (markdown, JSON, HTML,
the terminal).

Every number and decision the report shows is here, computed before it is rendered: the gate's
policy (:class:`GateSummary`) and the release criteria (:class:`ReleaseSummary`) are handed in
by the controller that decided them, so no renderer reaches back into the gate. The values are
frozen; a later stage of the run (pictures measured, figures drawn) makes a new value with
:func:`dataclasses.replace` instead of changing this one. :meth:`Report.to_json` is the JSON
report, key for key.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Self

from pytest_segrobust.core.formats import same_fields
from pytest_segrobust.core.wording import plural
from pytest_segrobust.report.coverage import RunCoverage
from pytest_segrobust.store.decisions import ModelOutcome, RuleSummary
from pytest_segrobust.store.records import CellRecord

if TYPE_CHECKING:  # the pictures hold tensors: the report's values are made from them, never import them
    from pytest_segrobust.pictures.values import WorstImages

REPORT_FORMAT = 1

# How the verdict names each outcome it counts, in the order it lists them.
COUNTED = {
    "regressed": "regressed",
    "unmet": "with a requirement unmet",
    "inconclusive": "inconclusive",
    "new": "new (no baseline)",
    "error": "error",
    "no result": "without a result",
    "passed": "passed",
    "improved": "improved",
    "rose-as-clean-fell": "where γr rose as the clean score fell",
    "inconclusive-allowed": "inconclusive (allowed by the suite)",
    "updated": "written to the baseline",  # every cell of an update, changed or not
    "recorded": "recorded (no baseline yet; requirements met)",
}
# The outcomes COUNTED names by a noun, which takes a plural: "1 error", "2 errors".
_NOUNS = frozenset({"error"})


def counted(count: int, status: str) -> str:
    """``3 regressed``, ``1 error``, ``2 errors``: ``count`` cells (or items) that ended ``status``."""
    word = COUNTED.get(status, status)
    return plural(count, word) if status in _NOUNS else f"{count} {word}"


@dataclass(frozen=True)
class RunVerdict:
    """The run's verdict on its cells: PASS when no cell regressed, lacked a baseline or failed.

    Attributes:
        passed: Every evaluated cell passed (improved and updated cells pass).
        counts: Cells per outcome: the gate's statuses, ``error`` (with or without a record)
            and ``no result`` (selected, but neither result nor error came back).
        models: Models' aggregates items per outcome.
    """

    passed: bool
    counts: dict[str, int]
    models: dict[str, int] = field(default_factory=dict)

    def line(self) -> str:
        """``FAIL · 62 cells: 3 regressed, 1 new (no baseline), 58 passed; 2 models' aggregates: 1 unmet, 1 passed``."""
        total = sum(self.counts.values())
        parts = [counted(count, status) for status, count in self.counts.items() if count]
        line = f"{'PASS' if self.passed else 'FAIL'} · {plural(total, 'cell')}: {', '.join(parts) or 'none'}"
        if self.models:
            models = sum(self.models.values())
            shown = ", ".join(counted(count, status) for status, count in self.models.items())
            whose = "models'" if models > 1 else "model's"
            line += f"; {models} {whose} aggregates: {shown}"
        return line

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"passed": self.passed, "counts": dict(self.counts), "line": self.line()}
        if self.models:
            data["models"] = dict(self.models)
        return data


@dataclass(frozen=True)
class GateSummary:
    """A suite's statistical gate as the report shows it: its policy, the size of the family of
    gated numbers and the level each number is tested at (decided by the gate, handed in).

    Attributes:
        margin_gamma_r: How far γr may fall before a cell regresses.
        margin_score: How many points the score may fall.
        confidence: The family's confidence.
        multiplicity: How the confidence is split over the family (``bonferroni``, ``none``).
        numbers: How many numbers the gate tests (the family's size).
        level: The level each number is tested at.
        inconclusive: What an undecided cell counts as.
        resamples: Bootstrap resamples per cell.
        unit: What the bootstrap resamples (the task's unit: ``image``, ``clip``).
    """

    margin_gamma_r: float
    margin_score: float
    confidence: float
    multiplicity: str
    numbers: int
    level: float
    inconclusive: str
    resamples: int
    unit: str = "image"

    def to_json(self) -> dict[str, Any]:
        return {
            "margin": {"gamma_r": self.margin_gamma_r, "score": self.margin_score},
            "confidence": self.confidence,
            "multiplicity": self.multiplicity,
            "numbers": self.numbers,
            "level": self.level,
            "inconclusive": self.inconclusive,
            "resamples": self.resamples,
            "unit": self.unit,
        }


class _Flat:
    """A value whose JSON is its fields by name, in their order, as they are; made from that JSON
    only when it names every field and no other (:func:`~pytest_segrobust.core.formats.same_fields`)."""

    what: ClassVar[str]  # what the value is, for the message that refuses its JSON

    def to_json(self) -> dict[str, Any]:
        """The fields by name, in their order."""
        return _fields_json(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Self:
        """The value of its producer's JSON.

        Raises:
            ValueError: for other fields than this value's.
        """
        return cls(**same_fields(cls, data, cls.what))


@dataclass(frozen=True)
class ReleaseSummary:
    """A suite's release criteria as decided: one row per requirement, each model's aggregates item.

    Attributes:
        requirements: Each requirement over the decisions made of it.
        models: Each model's aggregates item decided.
        basis: ``bootstrap`` (the suite has a statistical gate) or ``point``.
        unmet: One terminal line per unmet (or undecided) requirement, naming the suite line
            to change; not part of the JSON report.
    """

    requirements: tuple[RuleSummary, ...]
    models: tuple[ModelOutcome, ...]
    basis: str
    unmet: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "requirements": [row.to_json() for row in self.requirements],
            "models": [o.to_json() for o in self.models],
            "basis": self.basis,
        }


@dataclass(frozen=True)
class ShiftSplits:
    """A natural-shift suite's splits as the report shows them.

    Attributes:
        reference: The split the others are compared with.
        splits: Every split, in the suite's order.
    """

    reference: str
    splits: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"reference": self.reference, "splits": list(self.splits)}


@dataclass(frozen=True)
class CorruptionErrorReference:
    """What a suite's corruption error (CE) is measured against.

    Attributes:
        reference: The model whose errors every other model's are divided by.
        noise_severities: The noise severities the CE table is over.
    """

    reference: str
    noise_severities: tuple[int, ...]

    def to_json(self) -> dict[str, Any]:
        return {"reference": self.reference, "noise_severities": list(self.noise_severities)}


@dataclass(frozen=True)
class ChanceLevel:
    """A model's clean score against the score of guessing classes at random
    (:func:`~pytest_segrobust.report.tables.chance`).

    Attributes:
        classes: K, the number of classes guessed among.
        level: The chance score.
        threshold: The score below which the clean score is near chance.
        ratio: The clean score over the chance score, both measured from the scale's worst end.
        near: The clean score is below the threshold.
    """

    classes: int
    level: float
    threshold: float
    ratio: float
    near: bool

    def to_json(self) -> dict[str, Any]:
        """The fields by name, in their order."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


@dataclass(frozen=True)
class ModelSummary:
    """The headline numbers of one row's cells (means over its corrupted cells).

    Attributes:
        clean_score: The clean score.
        mean_gamma_r: Mean γr.
        mean_gamma_a: Mean γa.
        mpc: Mean corrupted score.
        rpc: mPC over the clean score.
        cells: How many corrupted cells the means are over.
        per_class_gamma_r: Mean γr per class (classes with any value).
        supercategory_gamma_r: Mean γr per supercategory.
        chance: The clean score's chance level and whether it is near it; ``None`` for a
            metric the report does not know, or without classes.
    """

    clean_score: float
    mean_gamma_r: float
    mean_gamma_a: float
    mpc: float
    rpc: float
    cells: int
    per_class_gamma_r: Mapping[str, float]
    supercategory_gamma_r: Mapping[str, float]
    chance: ChanceLevel | None

    @property
    def near_chance(self) -> bool:
        """The clean score is near chance: the row has little to lose."""
        return self.chance is not None and self.chance.near

    def to_json(self) -> dict[str, Any]:
        """The fields by name, in their order."""
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        data["chance"] = None if self.chance is None else self.chance.to_json()
        return data


@dataclass(frozen=True)
class ModelReport:
    """One row of a suite (a model, or a model on one split): its summary and its cells.

    Attributes:
        summary: The row's headline numbers.
        cells: Its cells, in report order.
    """

    summary: ModelSummary
    cells: tuple[CellRecord, ...]

    def to_json(self) -> dict[str, Any]:
        return {"summary": self.summary.to_json(), "cells": [record.to_json() for record in self.cells]}


@dataclass(frozen=True)
class R2BenchRow:
    """One perturbation at one level of a text suite's model (a row of R2-Bench's detail table).

    Attributes:
        perturbation: The cell's perturbation.
        modality: What it perturbs: ``visual``, ``text``, ``both`` or ``mixture``.
        severity: Its severity.
        level: The severity as R2-Bench names it (``low``, ``medium``, ``high``; ``s2``, ``s4``).
        numbers: The row's numbers by column key (``None``: not measured).
    """

    perturbation: str
    modality: str
    severity: int
    level: str
    numbers: Mapping[str, float | None]

    def to_json(self) -> dict[str, Any]:
        return {
            "perturbation": self.perturbation,
            "modality": self.modality,
            "severity": self.severity,
            "level": self.level,
            **self.numbers,
        }


@dataclass(frozen=True)
class R2BenchModalityRow:
    """The mean of one modality's perturbations at one level (a row of R2-Bench's summary).

    Attributes:
        modality: ``visual``, ``text``, ``both`` or ``mixture``.
        severity: The level's severity.
        level: The severity as R2-Bench names it.
        perturbations: How many perturbations the mean is over.
        numbers: The means by column key (``None``: no perturbation measured it).
    """

    modality: str
    severity: int
    level: str
    perturbations: int
    numbers: Mapping[str, float | None]

    def to_json(self) -> dict[str, Any]:
        return {
            "modality": self.modality,
            "severity": self.severity,
            "level": self.level,
            "perturbations": self.perturbations,
            **self.numbers,
        }


@dataclass(frozen=True)
class R2BenchModel:
    """One model's rows of a text suite's R2-Bench tables.

    Attributes:
        clean: The clean numbers by column key (``None``: the model has no cell).
        perturbations: One row per perturbation and level, in cell order.
        modalities: One row per modality and level.
    """

    clean: Mapping[str, float | None] | None
    perturbations: tuple[R2BenchRow, ...]
    modalities: tuple[R2BenchModalityRow, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "clean": None if self.clean is None else dict(self.clean),
            "perturbations": [row.to_json() for row in self.perturbations],
            "modalities": [row.to_json() for row in self.modalities],
        }


@dataclass(frozen=True)
class R2BenchTables:
    """A text suite's numbers as R2-Bench tabulates them (:func:`~pytest_segrobust.report.r2bench.r2bench_entry`).

    Attributes:
        columns: Each number's label by key, in the tables' order.
        models: Each model's rows, by model.
    """

    columns: Mapping[str, str]
    models: Mapping[str, R2BenchModel]

    def to_json(self) -> dict[str, Any]:
        return {"columns": dict(self.columns), "models": {name: model.to_json() for name, model in self.models.items()}}


@dataclass(frozen=True)
class VideoRow:
    """One perturbation at one level of a video suite's model (a row of R2-Bench's video detail table).

    Attributes:
        perturbation: The cell's perturbation.
        mode: How it perturbs the clips: ``static``, ``dynamic``, ``temporal``, ``audio``, ...
        severity: Its severity.
        level: The severity as R2-Bench names it (``drawn`` for a dynamic cell).
        numbers: The row's numbers by column key (``None``: not measured).
        drop: The clean headline minus the row's (``None``: either is missing).
    """

    perturbation: str
    mode: str
    severity: int
    level: str
    numbers: Mapping[str, float | None]
    drop: float | None

    def to_json(self) -> dict[str, Any]:
        return {
            "perturbation": self.perturbation,
            "mode": self.mode,
            "severity": self.severity,
            "level": self.level,
            **self.numbers,
            "drop": self.drop,
        }


@dataclass(frozen=True)
class VideoModeRow:
    """The mean of one way's perturbations at one level (a row of R2-Bench's Tables 13 and 14).

    Attributes:
        mode: The way: ``static``, ``dynamic``, ``temporal``, ``audio``, ...
        severity: The level's severity.
        level: The severity as R2-Bench names it (``drawn`` for a dynamic cell).
        perturbations: How many perturbations the mean is over.
        numbers: The means by column key (``None``: no perturbation measured it).
        drop: The clean headline minus the mean's (``None``: either is missing).
    """

    mode: str
    severity: int
    level: str
    perturbations: int
    numbers: Mapping[str, float | None]
    drop: float | None

    def to_json(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "severity": self.severity,
            "level": self.level,
            "perturbations": self.perturbations,
            **self.numbers,
            "drop": self.drop,
        }


@dataclass(frozen=True)
class VideoModel:
    """One model's rows of a video suite's R2-Bench tables.

    Attributes:
        clean: The clean numbers by column key (``None``: the model has no cell).
        perturbations: One row per perturbation and level, in cell order.
        modes: One row per way and level.
    """

    clean: Mapping[str, float | None] | None
    perturbations: tuple[VideoRow, ...]
    modes: tuple[VideoModeRow, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "clean": None if self.clean is None else dict(self.clean),
            "perturbations": [row.to_json() for row in self.perturbations],
            "modes": [row.to_json() for row in self.modes],
        }


@dataclass(frozen=True)
class VideoTables:
    """A video suite's numbers as R2-Bench tabulates them (:func:`~pytest_segrobust.report.video.video_entry`).

    Attributes:
        columns: Each number's label by key: the headline, its details, then further metrics.
        headline: The key of the column the drops are taken on.
        models: Each model's rows, by model.
    """

    columns: Mapping[str, str]
    headline: str
    models: Mapping[str, VideoModel]

    def to_json(self) -> dict[str, Any]:
        return {
            "columns": dict(self.columns),
            "headline": self.headline,
            "models": {name: model.to_json() for name, model in self.models.items()},
        }


@dataclass(frozen=True)
class AggregateChange(_Flat):
    """One aggregate of a model against its baseline, paired over the same image resamples
    (:func:`~pytest_segrobust.gate.evidence.aggregate_changes`); it describes, it does not decide.

    Attributes:
        model: The row (a model, or ``<model> @ <split>``).
        number: The aggregate (``mPC``, ``rPC``, ``mean γr``, ``mean γr (<category>)``).
        change: This run's value minus the baseline's.
        low, high: The change's interval.
        cells: How many corrupted cells the aggregate is over.
    """

    model: str
    number: str
    change: float
    low: float
    high: float
    cells: int

    what: ClassVar[str] = "an aggregate change"  # a row of aggregate_changes()


@dataclass(frozen=True)
class CorruptionFrame:
    """How much of the frame one geometric corruption keeps, per severity.

    Attributes:
        parameters: The corruption's parameters at each severity, as its table describes them.
        kept: The share of the frame that still shows the image, at the first image's size.
        kept_at_half_size: The same at half that size.
        in_pixels: The shares differ: the corruption's constants are in pixels.
    """

    parameters: tuple[str, ...]
    kept: tuple[float, ...]
    kept_at_half_size: tuple[float, ...]
    in_pixels: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "parameters": list(self.parameters),
            "kept": list(self.kept),
            "kept_at_half_size": list(self.kept_at_half_size),
            "in_pixels": self.in_pixels,
        }


@dataclass(frozen=True)
class FrameKept:
    """How much of the frame a suite's geometric corruptions keep
    (:func:`~pytest_segrobust.engine.suite_pictures.describe_frames`).

    Attributes:
        size: ``(height, width)`` of the image measured (the suite's first).
        severities: The severities measured, ascending.
        corruptions: Each geometric corruption's shares, by name.
    """

    size: tuple[int, int]
    severities: tuple[int, ...]
    corruptions: Mapping[str, CorruptionFrame]

    def to_json(self) -> dict[str, Any]:
        return {
            "size": list(self.size),
            "severities": list(self.severities),
            "corruptions": {name: frame.to_json() for name, frame in self.corruptions.items()},
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> FrameKept:
        """The value :func:`~pytest_segrobust.engine.suite_pictures.describe_frames` made.

        Raises:
            ValueError: for other fields than this value's (its corruptions' too).
        """
        same_fields(cls, data, "a frame table")
        height, width = data["size"]
        corruptions = {}
        for name, entry in data["corruptions"].items():
            fields = same_fields(CorruptionFrame, entry, f"the frame table of {name}")
            corruptions[str(name)] = CorruptionFrame(
                parameters=tuple(fields["parameters"]),
                kept=tuple(fields["kept"]),
                kept_at_half_size=tuple(fields["kept_at_half_size"]),
                in_pixels=bool(fields["in_pixels"]),
            )
        return cls((height, width), tuple(data["severities"]), corruptions)


@dataclass(frozen=True)
class ImageDrop:
    """One image of a cell's worst images: its own score clean and corrupted.

    Attributes:
        sample_id: The image.
        clean: Its headline score on its own, clean.
        corrupted: Corrupted.
        drop: How far it fell, in the metric's direction.
        clean_text: A referring sample's expression (``None``: the sample has none).
        corrupted_text: The expression as the model read it.
    """

    sample_id: str
    clean: float
    corrupted: float
    drop: float
    clean_text: str | None = None
    corrupted_text: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The numbers, and the expressions of a sample that has them."""
        texts = () if self.clean_text is not None else ("clean_text", "corrupted_text")
        return {key: value for key, value in _fields_json(self).items() if key not in texts}


@dataclass(frozen=True)
class WorstEntry:
    """A row's worst cell and its images whose own score fell most, as the report lists them.

    Attributes:
        corruption: The cell's corruption.
        severity: Its severity.
        gamma_r: Its relative robustness.
        considered: How many of the first images were looked at.
        images: The images that fell most, worst first.
        note: Why there are no pictures, when there are none.
        figure: The figure kind that draws them (``None``: no figure).
        panels: The prediction panels its pictures show (a promptable task's prompt kinds; ``()``:
            one prediction per picture).
    """

    corruption: str
    severity: int
    gamma_r: float | None
    considered: int
    images: tuple[ImageDrop, ...] = ()
    note: str | None = None
    figure: str | None = None
    panels: tuple[str, ...] = ()

    @classmethod
    def of(cls, found: WorstImages, figure: str | None = None) -> WorstEntry:
        """The report's entry of a cell's measured worst images."""
        images = tuple(
            ImageDrop(
                loss.sample_id, loss.clean_score, loss.corrupted_score, loss.drop, loss.clean_text, loss.corrupted_text
            )
            for loss in found.images
        )
        panels = found.images[0].panels if found.images else ()
        return cls(found.corruption, found.severity, found.gamma_r, found.considered, images, found.note, figure, panels)

    def to_json(self) -> dict[str, Any]:
        """``suites.<name>.worst_images.<row>``: the note, the figure and the panels where there are any."""
        out = _fields_json(self) | {"images": [image.to_json() for image in self.images], "panels": list(self.panels)}
        left_out = {"note": None, "figure": None, "panels": []}
        return {key: value for key, value in out.items() if key not in left_out or value != left_out[key]}


@dataclass(frozen=True)
class SuiteReport:
    """Everything the report says of one suite.

    Attributes:
        name: The suite's name.
        task: Its task (``None`` for a suite the run did not load).
        metric: Its headline metric.
        metrics: Every metric it measures, the headline first.
        seed: Its seed.
        shifts: A natural-shift suite's reference split and splits.
        file: Its file, relative to the project's root where under it.
        cd: Corruption error's reference model and noise severities.
        models: Its rows by name, in report order.
        figures: The figures drawn of it, by kind: file names relative to the report's folder.
        gate: Its statistical gate, where it has one.
        release: Its release criteria, where it states any (or a model was decided).
        video: A video suite's numbers by mode.
        r2bench: A text suite's numbers by level.
        aggregates: The statistical gate's aggregate changes, per model and number.
        frame_kept: How much of each frame the geometric corruptions keep.
        worst_images: Each row's images that lost most in its worst cell.
        worst_expressions: Each row's expressions that lost most in its worst text cell.
    """

    name: str
    task: str | None = None
    metric: str = "score"
    metrics: tuple[str, ...] = ()
    seed: int | None = None
    shifts: ShiftSplits | None = None
    file: str | None = None
    cd: CorruptionErrorReference | None = None
    models: Mapping[str, ModelReport] = field(default_factory=dict)
    figures: Mapping[str, str] = field(default_factory=dict)
    gate: GateSummary | None = None
    release: ReleaseSummary | None = None
    video: VideoTables | None = None
    r2bench: R2BenchTables | None = None
    aggregates: tuple[AggregateChange, ...] | None = None
    frame_kept: FrameKept | None = None
    worst_images: Mapping[str, WorstEntry] | None = None
    worst_expressions: Mapping[str, WorstEntry] | None = None

    def records(self) -> dict[str, list[CellRecord]]:
        """Its cells by row."""
        return {row: list(model.cells) for row, model in self.models.items()}

    def all_records(self) -> list[CellRecord]:
        """Every cell of every row, in report order."""
        return [record for model in self.models.values() for record in model.cells]

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "task": self.task,
            "metric": self.metric,
            "metrics": list(self.metrics),
            "seed": self.seed,
            "shifts": None if self.shifts is None else self.shifts.to_json(),
            "file": self.file,
            "cd": None if self.cd is None else self.cd.to_json(),
            "models": {row: model.to_json() for row, model in self.models.items()},
            "figures": dict(self.figures),
            "gate": None if self.gate is None else self.gate.to_json(),
        }
        # The further entries appear only where the suite has them, as the run learns them.
        optional: tuple[tuple[str, Any], ...] = (
            ("release", None if self.release is None else self.release.to_json()),
            ("video", None if self.video is None else self.video.to_json()),
            ("r2bench", None if self.r2bench is None else self.r2bench.to_json()),
            ("aggregates", None if self.aggregates is None else [row.to_json() for row in self.aggregates]),
            ("frame_kept", None if self.frame_kept is None else self.frame_kept.to_json()),
            ("worst_images", _entries_json(self.worst_images)),
            ("worst_expressions", _entries_json(self.worst_expressions)),
        )
        data.update((key, value) for key, value in optional if value is not None)
        return data


@dataclass(frozen=True)
class RunEnvironment:
    """Where and with what a run was made (:func:`~pytest_segrobust.report.environment.run_environment`);
    what could not be found is ``None``.

    Attributes:
        git_commit: The project's git commit.
        git_dirty: The checkout had uncommitted changes to tracked files.
        started: When the run began, ISO 8601 in UTC, whole seconds.
        wall_seconds: How long the run took until its report was written.
        device: The device it evaluated on, described.
        platform: The Python version and the operating system.
        versions: The installed version of each distribution that can change a number, by name.
        malloc: The allocator setting, described.
        threads: The thread setting, described.
    """

    git_commit: str | None = None
    git_dirty: bool | None = None
    started: str | None = None
    wall_seconds: float | None = None
    device: str | None = None
    platform: str | None = None
    versions: Mapping[str, str] = field(default_factory=dict)
    malloc: str | None = None
    threads: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The fields by name, in their order."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)} | {"versions": dict(self.versions)}


@dataclass(frozen=True)
class Report:
    """One run's report.

    Attributes:
        suites: Each suite's part, in report order.
        verdict: PASS or FAIL and how the cells ended.
        missing: Node ids of selected cells that produced neither a result nor an error.
        errors: Cells that raised instead of producing a result: node id -> message.
        run: Which cells the run covered and which it left out (``None``: not known).
        environment: Where and when it ran (versions, device, commit, wall time).
        warnings: The figures and tables the report could not make, and why.
        figures_left_out: Where figures or pictures were left out on purpose, the line saying so.
    """

    suites: Mapping[str, SuiteReport]
    verdict: RunVerdict
    missing: tuple[str, ...] = ()
    errors: Mapping[str, str] = field(default_factory=dict)
    run: RunCoverage | None = None
    environment: RunEnvironment | None = None
    warnings: tuple[str, ...] = ()
    figures_left_out: str | None = None

    def records(self) -> list[CellRecord]:
        """Every cell of every suite, in report order."""
        return [record for suite in self.suites.values() for record in suite.all_records()]

    def with_suite(self, name: str, **changes: Any) -> Report:
        """This report with suite ``name``'s fields ``changes`` replaced."""
        suites = dict(self.suites)
        suites[name] = dataclasses.replace(suites[name], **changes)
        return dataclasses.replace(self, suites=suites)

    def to_json(self) -> dict[str, Any]:
        """The JSON report (before strict-JSON cleaning of NaN and infinities)."""
        data: dict[str, Any] = {
            "format": REPORT_FORMAT,
            "suites": {name: suite.to_json() for name, suite in self.suites.items()},
            "missing": list(self.missing),
            "errors": dict(self.errors),
            "verdict": self.verdict.to_json(),
        }
        if self.run is not None:
            data["run"] = self.run.to_json()
        if self.environment is not None:
            data["environment"] = self.environment.to_json()
        if self.warnings:
            data["warnings"] = list(self.warnings)
        if self.figures_left_out:
            data["figures_left_out"] = self.figures_left_out
        return data


def _fields_json(value: Any) -> dict[str, Any]:
    """A dataclass's fields by name, in their order, as they are."""
    return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}


def _entries_json(entries: Mapping[str, WorstEntry] | None) -> dict[str, Any] | None:
    return None if entries is None else {row: entry.to_json() for row, entry in entries.items()}
