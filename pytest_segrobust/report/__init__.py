"""The run's report: markdown for people, JSON with every number for machines.

Layer 7: imports the gate's values and the layers below; never a model, a corruption, the
engine, a backend or the pytest integration: it renders values, it measures nothing.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PIL import Image

from pytest_segrobust.core.errors import SegRobustError
from pytest_segrobust.core.files import atomic_write_text, why_not_written
from pytest_segrobust.core.wording import plural
from pytest_segrobust.report import coverage, plots, tables
from pytest_segrobust.report.r2bench import r2bench_entry, r2bench_tables
from pytest_segrobust.report.tables import Table
from pytest_segrobust.report.video import video_entry, video_tables
from pytest_segrobust.store.records import CellRecord

if TYPE_CHECKING:
    from pytest_segrobust.pictures.values import GalleryTiles, WorstImages
    from pytest_segrobust.suite.schema import Suite

REPORT_FORMAT = 1


# Fields of the JSON report that say when and how long, not what was measured.
TIMING_FIELDS = frozenset({"seconds", "environment", "wall_seconds", "started"})


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
    """

    def __init__(self, written: list[Path], problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.written = written
        self.problems = problems


def build_report(
    records: Sequence[CellRecord],
    suites: Mapping[str, Suite],
    missing: Sequence[str] = (),
    root: Path | None = None,
    errors: Mapping[str, str] | None = None,
    model_outcomes: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """Group records by suite and model and compute the summaries (JSON-safe).

    Args:
        records: Every cell evaluated, in report order.
        suites: The suites by name.
        missing: Node ids of selected cells that produced no result and no error (a crashed
            worker, an interrupted run).
        root: Suite files are shown relative to this folder (the project's root) when under it.
        errors: Cells that raised instead of producing a result: node id -> message.
        model_outcomes: Each model's ``aggregates`` item decided
            (:meth:`pytest_segrobust.gate.release.ModelOutcome.to_json`), in report order.
    """
    report: dict[str, Any] = {
        "format": REPORT_FORMAT,
        "suites": {},
        "missing": list(missing),
        "errors": dict(sorted((errors or {}).items())),
    }
    for suite_name in dict.fromkeys([*(r.suite for r in records), *(o["suite"] for o in model_outcomes)]):
        suite = suites.get(suite_name)
        suite_records = [r for r in records if r.suite == suite_name]
        models: dict[str, Any] = {}
        # A natural-shift suite reports each model on each split as its own row ("model @ split").
        scale = _scale(suite.metric if suite else None)
        for model in dict.fromkeys(tables.row_name(r) for r in suite_records):
            model_records = [r for r in suite_records if tables.row_name(r) == model]
            models[model] = {
                "summary": tables.model_summary(model_records, *scale),
                "cells": [r.to_json() for r in model_records],
            }
        degradation = suite.degradation if suite else None
        report["suites"][suite_name] = {
            "task": suite.task if suite else None,
            "metric": suite.metric if suite else "score",
            "metrics": list(suite.metrics) if suite else [],
            "seed": suite.seed if suite else None,
            "shifts": None
            if suite is None or suite.shifts is None
            else {"reference": suite.shifts.reference, "splits": list(suite.shifts.splits)},
            "file": _shown(suite.path, root) if suite else None,
            "cd": None
            if degradation is None
            else {"reference": degradation.reference, "noise_severities": list(degradation.noise_severities)},
            "models": models,
            "figures": {},
            "gate": None if suite is None or suite.gate is None else _gate_entry(suite),
        }
        outcomes = [dict(o) for o in model_outcomes if o["suite"] == suite_name]
        release = release_entry(suite, suite_records, outcomes)
        if release is not None:
            report["suites"][suite_name]["release"] = release
        if suite is not None and (suite.reads_text or suite.reads_clips):
            by_model = {model: [CellRecord.from_json(c) for c in entry["cells"]] for model, entry in models.items()}
            if suite.reads_clips:
                report["suites"][suite_name]["video"] = video_entry(by_model, suite.metric, suite.metrics[1:])
            else:
                report["suites"][suite_name]["r2bench"] = r2bench_entry(by_model, suite.metric)
    report["verdict"] = run_verdict(
        records, report["errors"], report["missing"], [o["status"] for o in model_outcomes if o["nodeid"] not in report["errors"]]
    ).to_json()
    return report


def release_entry(suite: Suite | None, records: Sequence[CellRecord], outcomes: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The suite's release criteria: each requirement over the cells and models it was decided for,
    and each model's aggregates item; ``None`` for a suite that states none."""
    from pytest_segrobust.suite.requirements import RequirementCheck, summarize

    checks = [RequirementCheck.from_json(c) for r in records for c in r.requirements]
    checks += [RequirementCheck.from_json(c) for o in outcomes for c in o["requirements"]]
    if not checks and not outcomes and (suite is None or suite.requirements is None):
        return None
    rows = [
        {
            "rule": s.rule,
            "line": s.line,
            "number": s.number,
            "threshold": s.threshold,
            "at_least": s.at_least,
            "outcome": s.outcome,
            "outcomes": dict(s.outcomes),
            "worst": s.worst.to_json(),
            "confirmable": s.confirmable,
        }
        for s in summarize(checks)
    ]
    statistical = suite is not None and suite.gate is not None
    return {"requirements": rows, "models": outcomes, "basis": "bootstrap" if statistical else "point"}


def _gate_entry(suite: Suite) -> dict[str, Any]:
    from pytest_segrobust.gate.release import cell_level, family_size

    policy = suite.gate
    assert policy is not None
    return {
        "margin": {"gamma_r": policy.margin.gamma_r, "score": policy.margin.score},
        "confidence": policy.confidence,
        "multiplicity": policy.multiplicity,
        "numbers": family_size(suite),
        "level": cell_level(suite),
        "inconclusive": policy.inconclusive,
        "resamples": policy.resamples,
    }


def _scale(metric: str | None) -> tuple[tuple[float, float] | None, bool]:
    """A metric's bounds and direction, or ``(None, True)`` for an unknown metric."""
    from pytest_segrobust.core.errors import UnknownNameError
    from pytest_segrobust.metrics import METRICS

    if metric is None:
        return None, True
    try:
        kind = METRICS.get(metric)
    except UnknownNameError:
        return None, True
    return tuple(kind.bounds), kind.higher_is_better  # type: ignore[return-value]


# -- the verdict: the first thing the report says ----------------------------------------------

_COUNTED = {
    "regressed": "regressed",
    "unmet": "with a requirement unmet",
    "inconclusive": "inconclusive",
    "new": "new (no baseline)",
    "error": "error",
    "no result": "without a result",
    "passed": "passed",
    "improved": "improved",
    "inconclusive-allowed": "inconclusive (allowed by the suite)",
    "updated": "written to the baseline",  # every cell of an update, changed or not
    "recorded": "recorded (no baseline yet; requirements met)",
}


@dataclass(frozen=True)
class RunVerdict:
    """The run's verdict on its cells: PASS when no cell regressed, lacked a baseline or failed.

    Attributes:
        passed: Every evaluated cell passed (improved and updated cells pass).
        counts: Cells per outcome: the gate's statuses, ``error`` (with or without a record)
            and ``no result`` (selected, but neither result nor error came back).
    """

    passed: bool
    counts: dict[str, int]
    models: dict[str, int] = field(default_factory=dict)

    def line(self) -> str:
        """``FAIL · 62 cells: 3 regressed, 1 new (no baseline), 58 passed; 2 models' aggregates: 1 unmet, 1 passed``."""
        total = sum(self.counts.values())
        parts = [f"{count} {_COUNTED.get(status, status)}" for status, count in self.counts.items() if count]
        line = f"{'PASS' if self.passed else 'FAIL'} · {plural(total, 'cell')}: {', '.join(parts) or 'none'}"
        if self.models:
            models = sum(self.models.values())
            shown = ", ".join(f"{count} {_COUNTED.get(status, status)}" for status, count in self.models.items())
            whose = "models'" if models > 1 else "model's"
            line += f"; {models} {whose} aggregates: {shown}"
        return line

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"passed": self.passed, "counts": dict(self.counts), "line": self.line()}
        if self.models:
            data["models"] = dict(self.models)
        return data


def run_verdict(
    records: Sequence[CellRecord], errors: Mapping[str, str], missing: Sequence[str], models: Sequence[str] = ()
) -> RunVerdict:
    """PASS or FAIL, and how many cells (and models' aggregates items) ended how (failing outcomes first)."""
    counts = tables.status_counts(records)
    recorded = {r.nodeid for r in records}
    counts["error"] = counts.get("error", 0) + sum(1 for nodeid in errors if nodeid not in recorded)
    counts["no result"] = len(missing)
    ordered = {status: counts[status] for status in (*_COUNTED, *counts) if counts.get(status)}
    model_counts: dict[str, int] = {}
    for status in models:
        model_counts[status] = model_counts.get(status, 0) + 1
    model_counts = {status: model_counts[status] for status in (*_COUNTED, *model_counts) if model_counts.get(status)}
    failing = any(counts.get(status) for counts in (ordered, model_counts) for status in (*tables.FAILING, "no result"))
    return RunVerdict(passed=not failing, counts=ordered, models=model_counts)


def metric_label(metric: str) -> str:
    """How a metric is named in tables (its ``label``): ``miou`` -> mIoU, ``map`` -> mask AP."""
    from pytest_segrobust.core.errors import UnknownNameError
    from pytest_segrobust.metrics import METRICS

    try:
        return METRICS.get(metric).label
    except UnknownNameError:
        return metric


def detail_labels(metric: str) -> dict[str, str]:
    """How tables show a metric's further numbers (``ap50`` -> AP50, ``sq_things`` -> SQ things)."""
    from pytest_segrobust.core.errors import UnknownNameError
    from pytest_segrobust.metrics import METRICS

    try:
        return dict(METRICS.get(metric).detail_labels)
    except UnknownNameError:
        return {}


@dataclass(frozen=True)
class Figure:
    """A PNG beside the report, with what a reader needs to read it (``caption``)."""

    title: str
    file: str
    caption: str = ""


def records_by_model(suite: Mapping[str, Any]) -> dict[str, list[CellRecord]]:
    return {model: [CellRecord.from_json(c) for c in entry["cells"]] for model, entry in suite["models"].items()}


def suite_sections(suite: Mapping[str, Any]) -> list[Table | Figure]:
    """Every table and figure of one suite, in reading order."""
    metric = metric_label(suite["metric"])
    models = records_by_model(suite)
    figures = suite.get("figures", {})
    out: list[Table | Figure] = [tables.headline({m: v["summary"] for m, v in suite["models"].items()}, metric)]
    if suite.get("gate"):
        out.append(tables.statistical_gate(suite["gate"], [r for rs in models.values() for r in rs])[0])
        if suite.get("aggregates"):
            out.append(tables.aggregate_changes(suite["aggregates"], suite["gate"]["confidence"]))
    if suite.get("shifts"):
        shifts = suite["shifts"]
        out.append(tables.natural_shift(models, shifts["reference"], shifts["splits"], metric))
        out.append(tables.natural_shift_per_class(models, shifts["reference"], shifts["splits"]))
    further = suite.get("metrics", [])[1:]
    if further:
        out.append(tables.further_metrics(models, {name: metric_label(name) for name in further}))
    if tables.has_details(models):
        out.append(tables.metric_details(models, metric, detail_labels(suite["metric"])))
    if suite.get("video"):
        out += video_tables(suite["video"])
    if suite.get("r2bench"):
        out += r2bench_tables(suite["r2bench"])
        if suite.get("worst_expressions"):
            title = f"Expressions whose {metric} fell most in each model's worst text cell"
            out.append(tables.worst_images(suite["worst_expressions"], metric, title))
    if any(tables.corrupted(records) for records in models.values()):
        out.append(tables.grouped_by_category(models, "gamma_r", "γr per corruption (mean over severities)", 3))
        if "heatmap" in figures:
            out.append(Figure("γr heatmap", figures["heatmap"], HEATMAP_CAPTION))
        out += worst_image_sections(suite, metric)
        out.append(tables.grouped_by_category(models, "score", f"{metric} per corruption (mean over severities)", 2))
        out.append(tables.severity_curves(models, metric))
        if "severity" in figures:
            out.append(Figure(f"{metric} against severity (plot)", figures["severity"]))
        if suite.get("frame_kept"):
            out.append(tables.frame_kept(suite["frame_kept"]))
        for model, records in models.items():
            if tables.corrupted(records):
                out.append(tables.by_corruption(records, "gamma_r", f"{model}: γr per corruption and severity", 3))
        if tables.has_supercategories(models):
            out.append(tables.supercategories(models))
            out.append(tables.supercategory_by_category(models))
        out.append(tables.per_class(models, metric))
        if suite.get("cd") and suite["cd"]["reference"] in models:
            out.append(tables.degradation(models, suite["cd"]["reference"], suite["cd"]["noise_severities"]))
    out.append(tables.baseline_comparison([r for records in models.values() for r in records]))
    if "gallery" in figures:
        out.append(Figure("One image under every corruption at severities 1, 3, 5", figures["gallery"]))
    return out


HEATMAP_CAPTION = (
    "Colour: white where the corrupted score equals the clean one (γr = 1), red below, blue above, "
    "equally strong at equal distances from 1; the scale is not capped at 1, so a model that gains under "
    "a corruption shows as gaining, not as the most robust. "
    "Models marked (near chance) have little to lose: their γr says nothing about robustness."
)


def worst_image_sections(suite: Mapping[str, Any], metric: str) -> list[Table | Figure]:
    """The table of each model's images that lost most in its worst cell, then their pictures."""
    worst = suite.get("worst_images") or {}
    if not worst:
        return []
    out: list[Table | Figure] = [tables.worst_images(worst, metric)]
    figures = suite.get("figures", {})
    for row, entry in worst.items():
        kind = entry.get("figure")
        if kind and kind in figures:
            title = f"{row}: images that lost most under {entry['corruption']} s{entry['severity']}"
            first = not any(isinstance(section, Figure) for section in out)  # one explanation for them all
            out.append(Figure(title, figures[kind], OVERLAY_CAPTION if first else ""))
    return out


OVERLAY_CAPTION = (
    "Per row, one image: clean image | clean prediction | corrupted image | corrupted prediction | ground truth "
    "(and, for a geometric corruption, the ground truth moved with the image, which the corrupted prediction "
    "is scored against). Classes are blended over the image in the legend's colours; instances are shown "
    "from a score of 0.5."
)


def verdict(report: Mapping[str, Any]) -> RunVerdict:
    """The report's verdict (recomputed from its cells for a report without one)."""
    if report.get("verdict"):
        return RunVerdict(
            bool(report["verdict"]["passed"]), dict(report["verdict"]["counts"]), dict(report["verdict"].get("models", {}))
        )
    return run_verdict(_records(report), report.get("errors") or {}, report.get("missing") or [])


def release_sections(report: Mapping[str, Any]) -> list[Table]:
    """The run's release criteria and aggregate gate, where a suite states any: right after the verdict."""
    suites = report["suites"]
    out = []
    if any((suite.get("release") or {}).get("requirements") for suite in suites.values()):
        out.append(tables.release_criteria(suites))
    if any(o["checks"] for suite in suites.values() for o in (suite.get("release") or {}).get("models", [])):
        out.append(tables.model_gates(suites))
    return out


def release_lines(report: Mapping[str, Any]) -> list[str]:
    """One terminal line per unmet (or undecided) requirement, naming the suite line to change."""
    from pytest_segrobust.suite.requirements import RequirementCheck, unmet_lines

    lines = []
    for suite in report["suites"].values():
        release = suite.get("release")
        if not release:
            continue
        checks = [RequirementCheck.from_json(c) for r in records_by_model(suite).values() for rec in r for c in rec.requirements]
        checks += [RequirementCheck.from_json(c) for o in release["models"] for c in o["requirements"]]
        lines += unmet_lines(checks, suite.get("file") or "")
    return lines


def regression_sections(report: Mapping[str, Any]) -> list[Table]:
    """What follows the verdict and the models' lines: the run's regressed cells, one row each, if any regressed."""
    labels = {
        name: {"": metric_label(suite["metric"]), **{m: metric_label(m) for m in suite.get("metrics", [])[1:]}}
        for name, suite in report["suites"].items()
    }
    regressed = tables.regressed_cells(_records(report), labels)
    return [regressed] if regressed.rows else []


def model_lines(report: Mapping[str, Any]) -> list[str]:
    """One line per model (per model and split in a natural-shift suite), the first thing after the
    verdict: its clean score against its baseline, then how its cells ended (failing outcomes first).

    ``tiny-unet`` in ``demo``: clean mIoU -8.30 (92.53 -> 84.23); 22 of 31 cells regressed, 9 passed``;
    a model whose cells all passed and whose numbers all equal their baselines is ``unchanged``.
    """
    lines = []
    errors = dict(report.get("errors") or {})
    outcomes = {
        (name, str(o["model"])): str(o["status"])
        for name, suite in report["suites"].items()
        for o in (suite.get("release") or {}).get("models", [])
    }
    for name, suite in report["suites"].items():
        label = metric_label(suite["metric"])
        for row, records in records_by_model(suite).items():
            # The cell's collector: its suite file, model and (natural-shift suites) split.
            prefix = "::".join(records[0].nodeid.split("::")[: 3 if records[0].split else 2]) + "::"
            failed = [nodeid for nodeid in errors if nodeid.startswith(prefix)]
            for nodeid in failed:
                del errors[nodeid]
            line = f"- **{row}** in `{name}`: {_model_line(records, failed, label)}"
            model = records[0].model if records else row
            if (name, model) in outcomes and row == model:
                line += f"; aggregates {_COUNTED.get(outcomes[name, model], outcomes[name, model])}"
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
    ended = ", ".join(f"{count} {_COUNTED.get(status, status)}" for status, count in counts.items())
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
    parts.append(f"{'1 cell' if total == 1 else f'{total} cells'}: {ended}" if total else "no cells")
    return "; ".join(parts)


def _moved(check: Mapping[str, Any]) -> bool:
    """Whether a number differs from its baseline as the baseline stores it (rounded)."""
    from pytest_segrobust.store.baselines import round_value

    observed, stored = float(check["observed"]), float(check["baseline"])
    if not (math.isfinite(observed) and math.isfinite(stored)):
        return not (observed == stored or (math.isnan(observed) and math.isnan(stored)))
    return round_value(observed) != round_value(stored)


def run_sections(report: Mapping[str, Any]) -> list[Table]:
    """The run's provenance, before any suite: environment, then what was measured."""
    out: list[Table] = []
    if report.get("environment"):
        out.append(tables.environment(report["environment"]))
    if report["suites"]:
        out.append(tables.measured(report["suites"]))
    return out


def _records(report: Mapping[str, Any]) -> list[CellRecord]:
    return [r for suite in report["suites"].values() for rs in records_by_model(suite).values() for r in rs]


def render_markdown(report: Mapping[str, Any]) -> str:
    lines = ["# Segmentation robustness report", "", f"**{verdict(report).line()}**", ""]
    # A partial run's notice qualifies the verdict: it stays right under it, before the models' lines;
    # the cells the run left out follow them.
    covered = coverage.markdown_lines(report)
    notice = covered[:2] if covered and covered[0].startswith("> ") else []
    lines += [*notice, *model_lines(report), *covered[len(notice) :]]
    if report.get("figures_left_out"):
        lines += [f"_{report['figures_left_out']}_", ""]
    for section in [*release_sections(report), *regression_sections(report)]:
        lines += _markdown_section(section)
    if report.get("errors"):
        have = "has" if len(report["errors"]) == 1 else "have"
        lines += [
            f"**{plural(len(report['errors']), 'cell')} failed with an error and {have} no result**; the tables below leave them out:",
            "",
            *(f"- `{nodeid}`: {_one_line(message)}" for nodeid, message in report["errors"].items()),
            "",
        ]
    for section in run_sections(report):
        lines += _markdown_section(section)
    for suite_name, suite in report["suites"].items():
        lines += [f"## Suite `{suite_name}`", ""]
        if suite.get("file"):
            task = f"task: {suite['task']} · " if suite.get("task") else ""
            lines += [f"Suite file: `{suite['file']}` · {task}metric: {metric_label(suite['metric'])}", ""]
        for section in suite_sections(suite):
            lines += _markdown_section(section)
    lines += warning_lines(report)
    return "\n".join(lines)


def warning_lines(report: Mapping[str, Any]) -> list[str]:
    """The report's last section: the figures and tables it could not make, and why (none: no section)."""
    warnings = report.get("warnings") or []
    if not warnings:
        return []
    return [
        "## Left out of this report",
        "",
        "What follows could not be drawn or described; the cells' numbers and the verdict do not depend on it:",
        "",
        *(f"- {_one_line(warning)}" for warning in warnings),
        "",
    ]


def _markdown_section(section: Table | Figure) -> list[str]:
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
    line = lambda cells: "  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths)))  # noqa: E731
    return [line(table.header), *(line(r) for r in table.rows)]


def terminal_summary(report: Mapping[str, Any], *, brief: bool = False) -> list[str]:
    """What the run left out, its unmet requirements, its errors and, unless ``brief``, each suite's
    headline table: what the terminal shows before the run's last line, the verdict (:func:`verdict`)."""
    lines: list[str] = [*coverage.terminal_lines(report), *release_lines(report)]
    if report.get("errors"):
        shown = ", ".join(list(report["errors"])[:3]) + (", ..." if len(report["errors"]) > 3 else "")
        lines.append(f"{plural(len(report['errors']), 'cell')} failed with an error (no result): {shown}")
    for suite in report["suites"].values():
        if suite.get("gate"):
            lines += tables.statistical_gate(suite["gate"], [r for rs in records_by_model(suite).values() for r in rs])[1]
    if brief:
        return lines
    for suite_name, suite in report["suites"].items():
        table = tables.headline({m: v["summary"] for m, v in suite["models"].items()}, metric_label(suite["metric"]))
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
    return base.with_name(f"{base.name}-figures")


def write_report(
    report: dict[str, Any],
    base: Path,
    galleries: Mapping[str, GalleryTiles | Image.Image] | None = None,
    pictures: Mapping[str, Mapping[str, WorstImages | Image.Image]] | None = None,
    wall_seconds: Callable[[], float] | None = None,
    *,
    figures: bool = True,
    left_out: str | None = None,
) -> list[Path]:
    """Write ``base.md``, ``base.json`` and the PNG figures in :func:`figures_folder`; returns the paths.

    Figures are named ``<suite>-<kind>.png`` in the folder, which keeps only this report's:
    files of figures it no longer has (a suite left out, a figure that failed) are removed, so
    reruns and partial runs replace figures instead of adding to them. Plots need matplotlib,
    and are left out (the tables stay) where it is not installed. A figure that cannot be drawn
    or written is a warning of the report (``report["warnings"]``, shown at its end), never
    a reason to fail the run; the documents are attempted whatever happened to each other.

    Args:
        report: :func:`build_report`'s dict; each suite's ``figures`` is filled in here.
        base: The report's path without suffix.
        galleries: Per suite, its gallery of corruptions: its tiles, drawn here (or a drawn picture).
        pictures: Per suite, further images by kind: ``worst-<model>``, a model's worst images,
            drawn here with the title of the row whose ``worst_images`` entry names the kind as
            its ``figure`` (or a drawn picture).
        wall_seconds: The run's time so far; asked once the figures are drawn, just before the
            documents are rendered, so the report's wall time covers the figures too.
        figures: ``False`` (``--segrobust-figures=none``): nothing drawn and no figures folder
            made (an earlier report's is removed); the report says how to get them
            (``report["figures_left_out"]``).
        left_out: Where figures are drawn but some pictures were left out on purpose (the
            shards of a merge that ran with ``--segrobust-figures=none``,
            :func:`pictures_left_out_by`): the report says so in its place, as one line.

    Raises:
        ReportIncomplete: naming the documents that could not be written, and listing what was.
    """
    documents: list[Path] = []
    figures_written: list[Path] = []
    problems: list[str] = []
    warnings: list[str] = report.setdefault("warnings", [])
    folder = figures_folder(base)
    drawing = figures  # the name ``figures`` is each suite's below
    if drawing:
        report.pop("figures_left_out", None)
        if left_out:
            report["figures_left_out"] = left_out
    else:
        report["figures_left_out"] = FIGURES_LEFT_OUT
    for where in (base.parent, folder) if drawing else (base.parent,):
        try:
            where.mkdir(parents=True, exist_ok=True)
        except OSError:
            pass  # each write below fails then, and says why
    for suite_name, suite in report["suites"].items():
        models = records_by_model(suite)
        figures: dict[str, str] = {}
        drawers: dict[str, Callable[[Path], Path | None]] = {}
        if drawing and any(tables.corrupted(records) for records in models.values()):
            drawers["severity"] = lambda path: plots.severity_plot(models, metric_label(suite["metric"]), path)
            near = [m for m, v in suite["models"].items() if (v["summary"].get("chance") or {}).get("near")]
            drawers["heatmap"] = lambda path: plots.heatmap(models, path, near_chance=near)
        if drawing and galleries and suite_name in galleries:
            drawers["gallery"] = lambda path: _save_png(_drawn(galleries[suite_name], suite, "gallery"), path)
        for kind, picture in (pictures or {}).get(suite_name, {}).items() if drawing else ():
            drawers[kind] = lambda path, picture=picture, kind=kind: _save_png(_drawn(picture, suite, kind), path)
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
        suite["figures"] = figures
    kept = {path.name for path in figures_written}
    for stale in sorted(folder.glob("*.png")) if folder.is_dir() else ():
        if stale.name not in kept:
            _remove(stale)
    if not drawing:
        try:
            folder.rmdir()  # an earlier report's, emptied; a folder holding anything else stays
        except OSError:
            pass
    if not warnings:
        del report["warnings"]
    if wall_seconds is not None and report.get("environment") is not None:
        report["environment"]["wall_seconds"] = wall_seconds()
    for path, render in (
        (base.with_suffix(".md"), lambda: render_markdown(report)),
        (base.with_suffix(".json"), lambda: json.dumps(_json_safe(report), indent=2) + "\n"),
    ):
        try:
            atomic_write_text(path, render())
        except Exception as exc:  # noqa: BLE001 - the other file must still be written
            problems.append(str(exc) if isinstance(exc, SegRobustError) else f"{path} not written: {_reason(path, exc)}")
        else:
            documents.append(path)
    if problems:
        raise ReportIncomplete(documents + figures_written, problems)
    return documents + figures_written


def _remove(path: Path) -> None:
    try:
        path.unlink(missing_ok=True)
    except OSError:
        pass  # a figure the report no longer links: left, not a reason to fail


def _drawn(picture: GalleryTiles | WorstImages | Image.Image, suite: Mapping[str, Any], kind: str) -> Image.Image | None:
    """The picture of a measured value (``None``: it has nothing to show)."""
    from pytest_segrobust.pictures.values import GalleryTiles, WorstImages
    from pytest_segrobust.report.gallery import render_gallery
    from pytest_segrobust.report.overlays import render_worst

    if isinstance(picture, GalleryTiles):
        return render_gallery(picture)
    if isinstance(picture, WorstImages):
        rows = [row for row, entry in (suite.get("worst_images") or {}).items() if entry.get("figure") == kind]
        return render_worst(picture, rows[0] if rows else kind)
    return picture


def _save_png(image: Image.Image | None, path: Path) -> Path | None:
    if image is None:
        return None
    image.save(path, format="PNG")
    return path


def _reason(path: Path, exc: BaseException) -> str:
    return why_not_written(path, exc) if isinstance(exc, OSError) else f"{type(exc).__name__}: {exc}"


def _shown(path: Path, root: Path | None) -> str:
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
