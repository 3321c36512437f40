"""The run's report: markdown for people, JSON with every number for machines.

Layer 7: renders values and imports the layers below the gate's (the suite, the metrics, the
stored records); never the gate, a model, a corruption, the engine, a backend or the pytest
integration: it renders values, it measures and decides nothing. The report is a typed value
(:mod:`pytest_segrobust.report.model`) built once by :func:`build_report` from the outcomes and
the decisions the controller hands in; its documents are drawn from it by section renderers
(:mod:`pytest_segrobust.report.sections`), which a plugin can add to.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PIL import Image

from pytest_segrobust.core.errors import SegRobustError
from pytest_segrobust.core.files import atomic_write_text, why_not_written
from pytest_segrobust.core.wording import plural
from pytest_segrobust.report import coverage, plots, tables
from pytest_segrobust.report.coverage import RunCoverage
from pytest_segrobust.report.model import (
    COUNTED,
    REPORT_FORMAT,
    AggregateChange,
    ChanceLevel,
    CorruptionErrorReference,
    CorruptionFrame,
    FrameKept,
    GateSummary,
    ImageDrop,
    ModelReport,
    ModelSummary,
    ReleaseSummary,
    Report,
    RunVerdict,
    ShiftSplits,
    SuiteReport,
    WorstEntry,
    counted,
)
from pytest_segrobust.report.paths import report_file
from pytest_segrobust.report.r2bench import r2bench_entry
from pytest_segrobust.report.sections import (
    DECISION_SECTIONS,
    HEATMAP_CAPTION,
    OVERLAY_CAPTION,
    RUN_SECTIONS,
    SUITE_SECTIONS,
    Figure,
    Section,
    detail_labels,
    metric_label,
)
from pytest_segrobust.report.tables import Table
from pytest_segrobust.report.video import video_entry
from pytest_segrobust.store.records import CellRecord

if TYPE_CHECKING:
    from pytest_segrobust.pictures.values import GalleryTiles, WorstImages
    from pytest_segrobust.suite.schema import Suite

__all__ = [
    "DECISION_SECTIONS",
    "HEATMAP_CAPTION",
    "OVERLAY_CAPTION",
    "REPORT_FORMAT",
    "RUN_SECTIONS",
    "SUITE_SECTIONS",
    "AggregateChange",
    "ChanceLevel",
    "CorruptionErrorReference",
    "CorruptionFrame",
    "Figure",
    "FrameKept",
    "GateSummary",
    "ImageDrop",
    "ModelReport",
    "ModelSummary",
    "ReleaseSummary",
    "Report",
    "ReportIncomplete",
    "RunVerdict",
    "ShiftSplits",
    "SuiteReport",
    "WorstEntry",
    "WrittenReport",
    "build_report",
    "detail_labels",
    "metric_label",
    "render_markdown",
    "run_verdict",
    "suite_sections",
    "terminal_summary",
    "verdict",
    "without_timing",
    "write_report",
]


# Fields of the JSON report that say when and how long, not what was measured (``cached``: a
# cell's numbers were read from the result cache, with the seconds of the run that measured them).
TIMING_FIELDS = frozenset({"seconds", "environment", "wall_seconds", "started", "cached"})


def without_timing(data: Any) -> Any:
    """The JSON report (or any part of it) less its :data:`TIMING_FIELDS`, at any depth: what two
    runs of the same cells must agree on, whichever way they ran (xdist, shards, Ray)."""
    if isinstance(data, dict):
        return {key: without_timing(value) for key, value in data.items() if key not in TIMING_FIELDS}
    if isinstance(data, list):
        return [without_timing(value) for value in data]
    return data


class ReportIncomplete(SegRobustError):
    """Some files of the report could not be written; the others were.

    Attributes:
        written: The files that were written.
        problems: One line per file or figure that was not.
        report: The report as written (its figures and warnings), where it got that far.
    """

    def __init__(self, written: list[Path], problems: list[str], report: Report | None = None) -> None:
        super().__init__("; ".join(problems))
        self.written = written
        self.problems = problems
        self.report = report


def build_report(
    records: Sequence[CellRecord],
    suites: Mapping[str, Suite],
    missing: Sequence[str] = (),
    root: Path | None = None,
    errors: Mapping[str, str] | None = None,
    model_outcomes: Sequence[Mapping[str, Any]] = (),
    *,
    gates: Mapping[str, GateSummary] | None = None,
    releases: Mapping[str, ReleaseSummary] | None = None,
    aggregates: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
    run: RunCoverage | None = None,
) -> Report:
    """The report of ``records``: grouped by suite and model, with each model's summary.

    The decisions it shows are handed in, made by the gate before: the report decides nothing.

    Args:
        records: Every cell evaluated, in report order.
        suites: The suites by name.
        missing: Node ids of selected cells that produced no result and no error (a crashed
            worker, an interrupted run).
        root: Suite files are shown relative to this folder (the project's root) when under it.
        errors: Cells that raised instead of producing a result: node id -> message.
        model_outcomes: Each model's ``aggregates`` item decided
            (:meth:`pytest_segrobust.store.decisions.ModelOutcome.to_json`), in report order.
        gates: Each statistically gated suite's gate, by suite name.
        releases: Each suite's release criteria as decided, by suite name (suites that state
            none and decided nothing have none).
        aggregates: Each statistically gated suite's aggregate changes, by suite name.
        run: Which cells the run covered and which it left out.
    """
    errors = dict(sorted((errors or {}).items()))
    # A copy of each record, so that the report does not change with the caller's records.
    records = [CellRecord.from_json(r.to_json()) for r in records]
    parts: dict[str, SuiteReport] = {}
    for suite_name in dict.fromkeys([*(r.suite for r in records), *(o["suite"] for o in model_outcomes)]):
        suite = suites.get(suite_name)
        suite_records = [r for r in records if r.suite == suite_name]
        # A natural-shift suite reports each model on each split as its own row ("model @ split").
        scale = _scale(suite.metric if suite else None)
        models: dict[str, ModelReport] = {}
        for row in dict.fromkeys(tables.row_name(r) for r in suite_records):
            row_records = [r for r in suite_records if tables.row_name(r) == row]
            models[row] = ModelReport(tables.model_summary(row_records, *scale), tuple(row_records))
        degradation = suite.degradation if suite else None
        part = SuiteReport(
            name=suite_name,
            task=suite.task if suite else None,
            metric=suite.metric if suite else "score",
            metrics=tuple(suite.metrics) if suite else (),
            seed=suite.seed if suite else None,
            shifts=None
            if suite is None or suite.shifts is None
            else ShiftSplits(suite.shifts.reference, tuple(suite.shifts.splits)),
            file=shown_path(suite.path, root) if suite else None,
            cd=None
            if degradation is None
            else CorruptionErrorReference(degradation.reference, tuple(degradation.noise_severities)),
            models=models,
            gate=(gates or {}).get(suite_name),
            release=(releases or {}).get(suite_name),
            aggregates=None
            if aggregates is None or suite_name not in aggregates
            else tuple(AggregateChange.from_json(row) for row in aggregates[suite_name]),
        )
        if suite is not None and (suite.reads_text or suite.reads_clips):
            by_model = part.records()
            if suite.reads_clips:
                part = dataclasses.replace(part, video=video_entry(by_model, suite.metric, suite.metrics[1:]))
            else:
                part = dataclasses.replace(part, r2bench=r2bench_entry(by_model, suite.metric))
        parts[suite_name] = part
    statuses = [o["status"] for o in model_outcomes if o["nodeid"] not in errors]
    return Report(
        suites=parts,
        verdict=run_verdict(records, errors, list(missing), statuses),
        missing=tuple(missing),
        errors=errors,
        run=None if run is None else RunCoverage.from_json(run.to_json()),
    )


def _scale(metric: str | None) -> tuple[tuple[float, float] | None, bool]:
    """A metric's bounds and direction, which a model's chance level is measured on, or ``(None, True)``
    for an unknown metric and one without a chance level (:attr:`~pytest_segrobust.metrics.base.Metric.chance_by_classes`)."""
    from pytest_segrobust.core.errors import UnknownNameError
    from pytest_segrobust.metrics import METRICS

    if metric is None:
        return None, True
    try:
        kind = METRICS.get(metric)
    except UnknownNameError:
        return None, True
    if not kind.chance_by_classes:
        return None, kind.higher_is_better
    return tuple(kind.bounds), kind.higher_is_better  # type: ignore[return-value]


# -- the verdict: the first thing the report says ----------------------------------------------


def run_verdict(
    records: Sequence[CellRecord], errors: Mapping[str, str], missing: Sequence[str], models: Sequence[str] = ()
) -> RunVerdict:
    """PASS or FAIL, and how many cells (and models' aggregates items) ended how (failing outcomes first)."""
    counts = tables.status_counts(records)
    recorded = {r.nodeid for r in records}
    counts["error"] = counts.get("error", 0) + sum(1 for nodeid in errors if nodeid not in recorded)
    counts["no result"] = len(missing)
    ordered = {status: counts[status] for status in (*COUNTED, *counts) if counts.get(status)}
    model_counts: dict[str, int] = {}
    for status in models:
        model_counts[status] = model_counts.get(status, 0) + 1
    model_counts = {status: model_counts[status] for status in (*COUNTED, *model_counts) if model_counts.get(status)}
    failing = any(counts.get(status) for counts in (ordered, model_counts) for status in (*tables.FAILING, "no result"))
    return RunVerdict(passed=not failing, counts=ordered, models=model_counts)


def suite_sections(suite: SuiteReport) -> list[Section]:
    """Every table and figure of one suite, in reading order (:data:`SUITE_SECTIONS`)."""
    return SUITE_SECTIONS.render(suite)


def verdict(report: Report) -> RunVerdict:
    """The report's verdict."""
    return report.verdict


def release_sections(report: Report) -> list[Section]:
    """What follows the verdict and the models' lines (:data:`DECISION_SECTIONS`): the release
    criteria and aggregate gate, where a suite states any, and the regressed cells."""
    return DECISION_SECTIONS.render(report)


def release_lines(report: Report) -> list[str]:
    """One terminal line per unmet (or undecided) requirement, naming the suite line to change, and
    one per suite whose every requirement held (a passing ``require:`` says so, once)."""
    lines = []
    for name, suite in report.suites.items():
        rows = suite.release.requirements if suite.release is not None else ()
        if suite.release is not None and suite.release.unmet:
            lines += suite.release.unmet
        elif rows and all(row.outcome == "pass" for row in rows):
            decisions = sum(sum(row.outcomes.values()) for row in rows)
            where = suite.file or f"suite {name}"
            lines.append(
                f"{where}: require: held: {plural(len(rows), 'requirement')} met ({plural(decisions, 'decision')})"
            )
    return lines


def model_lines(report: Report) -> list[str]:
    """One line per model (per model and split in a natural-shift suite), the first thing after the
    verdict: its clean score against its baseline, then how its cells ended (failing outcomes first).

    ``tiny-unet`` in ``demo``: clean mIoU -8.30 (92.53 -> 84.23); 22 of 31 cells regressed, 9 passed``;
    a model whose cells all passed and whose numbers all equal their baselines is ``unchanged``.
    """
    lines = []
    errors = dict(report.errors)
    outcomes = {
        (name, o.model): o.status
        for name, suite in report.suites.items()
        for o in (suite.release.models if suite.release is not None else ())
    }
    for name, suite in report.suites.items():
        label = metric_label(suite.metric)
        for row, records in suite.records().items():
            # The cell's collector: its suite file, model and (natural-shift suites) split.
            prefix = "::".join(records[0].nodeid.split("::")[: 3 if records[0].split else 2]) + "::"
            failed = [nodeid for nodeid in errors if nodeid.startswith(prefix)]
            for nodeid in failed:
                del errors[nodeid]
            line = f"- **{row}** in `{name}`: {_model_line(records, failed, label)}"
            model = records[0].model if records else row
            if (name, model) in outcomes and row == model:
                line += f"; aggregates {COUNTED.get(outcomes[name, model], outcomes[name, model])}"
            chance = suite.models[row].summary.chance if row in suite.models else None
            if chance is not None and chance.near:  # the verdict above may be green: say it where it is read
                line += f"; {tables.chance_mark(chance)}, so its γr says little about robustness"
            lines.append(line)
    # Models none of whose cells came back (a model that cannot be built errs in every cell).
    by_model: dict[str, int] = {}
    for nodeid in errors:
        where = nodeid.rsplit("::", 1)[0]
        by_model[where] = by_model.get(where, 0) + 1
    for where, count in by_model.items():
        lines.append(f"- `{where}`: {plural(count, 'cell')} failed with an error, none with a result")
    return [*lines, ""] if lines else []


def _model_line(records: Sequence[CellRecord], errors: Sequence[str], label: str) -> str:
    counts = run_verdict(records, dict.fromkeys(errors, ""), []).counts
    total = sum(counts.values())
    ended = ", ".join(counted(count, status) for status, count in counts.items())
    changed = [r for r in records if any(_moved(c) for c in r.checks)]
    if "updated" in counts:  # an update writes every cell: say how many it changed
        ended += f" ({len(changed)} changed)"
    if records and not changed and all(r.checks for r in records) and set(counts) <= {"passed", "updated"}:
        return f"unchanged (every number as its baseline; {plural(total, 'cell')}: {ended})"
    clean = next((r for r in records if r.severity == 0), None)
    parts = []
    if clean is not None:
        before = (clean.baseline or {}).get("score")
        if before is None:
            unknown = " (no baseline)" if clean.status in ("new", "recorded") else ""
            parts.append(f"clean {label} {tables.fmt(clean.score)}{unknown}")
        else:
            change = tables.signed(clean.score - before)
            parts.append(f"clean {label} {change} ({tables.fmt(before)} → {tables.fmt(clean.score)})")
    parts.append(f"{plural(total, 'cell')}: {ended}" if total else "no cells")
    return "; ".join(parts)


def _moved(check: Mapping[str, Any]) -> bool:
    """Whether a number differs from its baseline as the baseline stores it (rounded)."""
    from pytest_segrobust.store.baselines import round_value

    observed, stored = float(check["observed"]), float(check["baseline"])
    if not (math.isfinite(observed) and math.isfinite(stored)):
        return not (observed == stored or (math.isnan(observed) and math.isnan(stored)))
    return round_value(observed) != round_value(stored)


def run_sections(report: Report) -> list[Section]:
    """The run's provenance, before any suite (:data:`RUN_SECTIONS`): environment, then what was measured."""
    return RUN_SECTIONS.render(report)


def render_markdown(report: Report) -> str:
    lines = ["# Segmentation robustness report", "", f"**{verdict(report).line()}**", ""]
    # A partial run's notice qualifies the verdict: it stays right under it, before the models' lines;
    # the cells the run left out follow them.
    covered = coverage.markdown_lines(report.run, report.missing)
    notice = covered[:2] if covered and covered[0].startswith("> ") else []
    lines += [*notice, *model_lines(report), *covered[len(notice) :]]
    if report.figures_left_out:
        lines += [f"_{report.figures_left_out}_", ""]
    for section in release_sections(report):
        lines += _markdown_section(section)
    if report.errors:
        have = "has" if len(report.errors) == 1 else "have"
        lines += [
            f"**{plural(len(report.errors), 'cell')} failed with an error and {have} no result**; the tables below leave them out:",
            "",
            *(f"- `{nodeid}`: {_one_line(message)}" for nodeid, message in report.errors.items()),
            "",
        ]
    for section in run_sections(report):
        lines += _markdown_section(section)
    for suite_name, suite in report.suites.items():
        lines += [f"## Suite `{suite_name}`", ""]
        if suite.file:
            task = f"task: {suite.task} · " if suite.task else ""
            lines += [f"Suite file: `{suite.file}` · {task}metric: {metric_label(suite.metric)}", ""]
        for section in suite_sections(suite):
            lines += _markdown_section(section)
    lines += warning_lines(report)
    return "\n".join(lines)


def warning_lines(report: Report) -> list[str]:
    """The report's last section: the figures and tables it could not make, and why (none: no section)."""
    if not report.warnings:
        return []
    return [
        "## Left out of this report",
        "",
        "What follows could not be drawn or described; the cells' numbers and the verdict do not depend on it:",
        "",
        *(f"- {_one_line(warning)}" for warning in report.warnings),
        "",
    ]


def _markdown_section(section: Section) -> list[str]:
    if isinstance(section, Figure):
        lines = [f"### {section.title}", "", f"![{section.title}]({section.file})", ""]
        return lines + ([f"_{section.caption}_", ""] if section.caption else [])
    lines = [f"### {section.title}", "", *markdown_table(section), ""]
    return lines + ([f"_{section.note}_", ""] if section.note else [])


def markdown_table(table: Table) -> list[str]:
    numeric = [all(_numeric(row[i]) for row in table.rows) for i in range(len(table.header))]
    align = ["---:" if n and table.rows else "---" for n in numeric]
    return [
        "| " + " | ".join(table.header) + " |",
        "| " + " | ".join(align) + " |",
        *("| " + " | ".join(row) + " |" for row in table.rows),
    ]


def text_table(table: Table) -> list[str]:
    """A plain aligned table for the terminal."""
    widths = [max([len(h), *(len(r[i]) for r in table.rows)]) for i, h in enumerate(table.header)]
    line = lambda cells: "  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths)))
    return [line(table.header), *(line(r) for r in table.rows)]


def terminal_summary(report: Report, *, brief: bool = False) -> list[str]:
    """What the run left out, its unmet requirements, its errors and, unless ``brief``, each suite's
    headline table: what the terminal shows before the run's last line, the verdict (:func:`verdict`)."""
    lines: list[str] = [*coverage.terminal_lines(report.run, report.missing), *release_lines(report)]
    if report.errors:
        shown = ", ".join(list(report.errors)[:3]) + (", ..." if len(report.errors) > 3 else "")
        lines.append(f"{plural(len(report.errors), 'cell')} failed with an error (no result): {shown}")
    for suite in report.suites.values():
        if suite.gate is not None:
            lines += tables.statistical_gate(suite.gate, suite.all_records())[1]
    if brief:
        return lines
    for suite_name, suite in report.suites.items():
        table = tables.headline({m: v.summary for m, v in suite.models.items()}, metric_label(suite.metric))
        lines += [f"suite {suite_name}:", *("  " + row for row in text_table(table))]
    return lines


# What the report says where ``--segrobust-figures=none`` left its figures out.
FIGURES_LEFT_OUT = (
    "Figures left out (`--segrobust-figures=none`): no plot, gallery or worst images were drawn or measured. "
    "Run again without the option (or with `--segrobust-figures=all`) to get them."
)


def pictures_left_out_by(shards: Sequence[str]) -> str:
    """What a merged report says where some of its shards (``shard 2/3``) ran with
    ``--segrobust-figures=none``: the pictures the others made are kept; the plots, drawn from
    the numbers, cover every cell."""
    which, them = (f"shard {shards[0]}", "it") if len(shards) == 1 else (f"shards {', '.join(shards)}", "them")
    return (
        f"Pictures left out for the cells of {which} (run with `--segrobust-figures=none`): no gallery or "
        f"worst images were measured of them; the plots cover every cell. Run {them} again without the "
        "option, then merge, to get them."
    )


def figures_folder(base: Path) -> Path:
    """The one folder beside the report ``base`` that holds its figures: ``<base>-figures/``.

    A partial report (``<report>-partial``) has its own, so it never replaces the full
    report's pictures; each report's rewrite replaces its folder's files by their stable names.
    """
    return report_file(base, "-figures")


@dataclass(frozen=True)
class WrittenReport:
    """What :func:`write_report` wrote: the report as its documents show it, and its files.

    Attributes:
        report: The report completed with its figures and the warnings of the figures not drawn.
        files: The documents, then the figures.
    """

    report: Report
    files: list[Path]


def write_report(
    report: Report,
    base: Path,
    galleries: Mapping[str, GalleryTiles | Image.Image] | None = None,
    pictures: Mapping[str, Mapping[str, WorstImages | Image.Image]] | None = None,
    wall_seconds: Callable[[], float] | None = None,
    *,
    figures: bool = True,
    left_out: str | None = None,
) -> WrittenReport:
    """Write ``base.md``, ``base.json`` and the PNG figures in :func:`figures_folder`.

    Figures are named ``<suite>-<kind>.png`` in the folder, which keeps only this report's:
    files of figures it no longer has (a suite left out, a figure that failed) are removed, so
    reruns and partial runs replace figures instead of adding to them. Plots need matplotlib,
    and are left out (the tables stay) where it is not installed. A figure that cannot be drawn
    or written is a warning of the report (:attr:`Report.warnings`, shown at its end), never
    a reason to fail the run; the documents are attempted whatever happened to each other.

    Args:
        report: :func:`build_report`'s value; the one written names each suite's figures.
        base: The report's path without suffix.
        galleries: Per suite, its gallery of corruptions: its tiles, drawn here (or a drawn picture).
        pictures: Per suite, further images by kind: ``worst-<model>``, a model's worst images,
            drawn here with the title of the row whose ``worst_images`` entry names the kind as
            its ``figure`` (or a drawn picture).
        wall_seconds: The run's time so far; asked once the figures are drawn, just before the
            documents are rendered, so the report's wall time covers the figures too.
        figures: ``False`` (``--segrobust-figures=none``): nothing drawn and no figures folder
            made (an earlier report's is removed); the report says how to get them
            (:attr:`Report.figures_left_out`).
        left_out: Where figures are drawn but some pictures were left out on purpose (the
            shards of a merge that ran with ``--segrobust-figures=none``,
            :func:`pictures_left_out_by`): the report says so in its place, as one line.

    Returns:
        The report as written (its figures named) and the files.

    Raises:
        ReportIncomplete: naming the documents that could not be written, and listing what was.
    """
    documents: list[Path] = []
    figures_written: list[Path] = []
    problems: list[str] = []
    warnings: list[str] = list(report.warnings)
    folder = figures_folder(base)
    drawing = figures  # the name ``figures`` is each suite's below
    for where in (base.parent, folder) if drawing else (base.parent,):
        try:
            where.mkdir(parents=True, exist_ok=True)
        except OSError:
            pass  # each write below fails then, and says why
    suites: dict[str, SuiteReport] = {}
    for suite_name, suite in report.suites.items():
        models = suite.records()
        figures: dict[str, str] = {}
        drawers: dict[str, Callable[[Path], Path | None]] = {}
        if drawing and any(tables.corrupted(records) for records in models.values()):
            drawers["severity"] = lambda path, models=models, suite=suite: plots.severity_plot(models, metric_label(suite.metric), path)
            near = [m for m, v in suite.models.items() if v.summary.near_chance]
            drawers["heatmap"] = lambda path, models=models, near=near: plots.heatmap(models, path, near_chance=near)
        if drawing and galleries and suite_name in galleries:
            drawers["gallery"] = lambda path, name=suite_name, suite=suite: _save_png(_drawn(galleries[name], suite, "gallery"), path)
        for kind, picture in (pictures or {}).get(suite_name, {}).items() if drawing else ():
            drawers[kind] = lambda path, picture=picture, kind=kind, suite=suite: _save_png(_drawn(picture, suite, kind), path)
        for kind, draw in drawers.items():
            path = folder / f"{suite_name}-{kind}.png"
            try:
                drawn = draw(path)
            except Exception as exc:  # noqa: BLE001 - a figure must never cost the report
                warnings.append(f"figure {kind} of suite {suite_name} not drawn: {_reason(path, exc)}")
                continue
            if drawn is not None:
                figures[kind] = drawn.relative_to(base.parent).as_posix()
                figures_written.append(drawn)
                _remove(base.parent / f"{base.name}-{suite_name}-{kind}.png")  # where earlier versions put it
        suites[suite_name] = dataclasses.replace(suite, figures=figures)
    kept = {path.name for path in figures_written}
    for stale in sorted(folder.glob("*.png")) if folder.is_dir() else ():
        if stale.name not in kept:
            _remove(stale)
    if not drawing:
        try:
            folder.rmdir()  # an earlier report's, emptied; a folder holding anything else stays
        except OSError:
            pass
    environment = report.environment
    if wall_seconds is not None and environment is not None:
        environment = dataclasses.replace(environment, wall_seconds=wall_seconds())
    report = dataclasses.replace(
        report,
        suites=suites,
        warnings=tuple(warnings),
        environment=environment,
        figures_left_out=(left_out or None) if drawing else FIGURES_LEFT_OUT,
    )
    for path, render in (
        (report_file(base, ".md"), lambda: render_markdown(report)),
        (report_file(base, ".json"), lambda: json.dumps(_json_safe(report.to_json()), indent=2) + "\n"),
    ):
        try:
            atomic_write_text(path, render())
        except Exception as exc:  # noqa: BLE001 - the other file must still be written
            problems.append(str(exc) if isinstance(exc, SegRobustError) else f"{path} not written: {_reason(path, exc)}")
        else:
            documents.append(path)
    if problems:
        raise ReportIncomplete(documents + figures_written, problems, report)
    return WrittenReport(report, documents + figures_written)


def _remove(path: Path) -> None:
    try:
        path.unlink(missing_ok=True)
    except OSError:
        pass  # a figure the report no longer links: left, not a reason to fail


def _drawn(picture: GalleryTiles | WorstImages | Image.Image, suite: SuiteReport, kind: str) -> Image.Image | None:
    """The picture of a measured value (``None``: it has nothing to show)."""
    from pytest_segrobust.pictures.values import GalleryTiles, WorstImages
    from pytest_segrobust.report.gallery import render_gallery
    from pytest_segrobust.report.overlays import render_worst

    if isinstance(picture, GalleryTiles):
        return render_gallery(picture)
    if isinstance(picture, WorstImages):
        rows = [row for row, entry in (suite.worst_images or {}).items() if entry.figure == kind]
        return render_worst(picture, rows[0] if rows else kind)
    return picture


def _save_png(image: Image.Image | None, path: Path) -> Path | None:
    if image is None:
        return None
    image.save(path, format="PNG")
    return path


def _reason(path: Path, exc: BaseException) -> str:
    return why_not_written(path, exc) if isinstance(exc, OSError) else f"{type(exc).__name__}: {exc}"


def shown_path(path: Path, root: Path | None) -> str:
    """``path`` as the report shows it: relative to ``root`` (the project's root) where under it."""
    if root is not None:
        try:
            return path.resolve().relative_to(root.resolve()).as_posix()
        except ValueError:
            pass
    return str(path)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _json_safe(value: Any) -> Any:
    # Strict JSON has no NaN or infinity: an undefined score is written as null.
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


def _numeric(text: str) -> bool:
    try:
        float(text.replace("–", "nan"))
    except ValueError:
        return False
    return True
