"""The run's report: markdown for people, JSON with every number for machines."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PIL import Image

from pytest_segrobust.baselines import atomic_write_text
from pytest_segrobust.evaluation import METRIC_LABELS
from pytest_segrobust.records import CellRecord
from pytest_segrobust.report import plots, tables
from pytest_segrobust.report.tables import Table

if TYPE_CHECKING:
    from pytest_segrobust.suite import Suite

REPORT_FORMAT = 1


def build_report(
    records: Sequence[CellRecord], suites: Mapping[str, Suite], missing: Sequence[str] = (), root: Path | None = None
) -> dict[str, Any]:
    """Group records by suite and model and compute the summaries (JSON-safe).

    Args:
        records: Every cell evaluated, in report order.
        suites: The suites by name.
        missing: Node ids of selected cells that produced no result.
        root: Suite files are shown relative to this folder (the project's root) when under it.
    """
    report: dict[str, Any] = {"format": REPORT_FORMAT, "suites": {}, "missing": list(missing)}
    for suite_name in dict.fromkeys(r.suite for r in records):
        suite = suites.get(suite_name)
        suite_records = [r for r in records if r.suite == suite_name]
        models: dict[str, Any] = {}
        for model in dict.fromkeys(r.model for r in suite_records):
            model_records = [r for r in suite_records if r.model == model]
            models[model] = {
                "summary": tables.model_summary(model_records),
                "cells": [asdict(r) for r in model_records],
            }
        degradation = suite.degradation if suite else None
        report["suites"][suite_name] = {
            "task": suite.task if suite else None,
            "metric": suite.metric if suite else "score",
            "file": _shown(suite.path, root) if suite else None,
            "cd": None
            if degradation is None
            else {"reference": degradation.reference, "noise_severities": list(degradation.noise_severities)},
            "models": models,
            "figures": {},
        }
    return report


def metric_label(metric: str) -> str:
    """How a metric is named in tables: ``miou`` -> mIoU, ``map`` -> mask AP."""
    return METRIC_LABELS.get(metric, metric)


@dataclass(frozen=True)
class Figure:
    title: str
    file: str


def records_by_model(suite: Mapping[str, Any]) -> dict[str, list[CellRecord]]:
    return {model: [CellRecord(**c) for c in entry["cells"]] for model, entry in suite["models"].items()}


def suite_sections(suite: Mapping[str, Any]) -> list[Table | Figure]:
    """Every table and figure of one suite, in reading order."""
    metric = metric_label(suite["metric"])
    models = records_by_model(suite)
    figures = suite.get("figures", {})
    out: list[Table | Figure] = [tables.headline({m: v["summary"] for m, v in suite["models"].items()}, metric)]
    if tables.has_details(models):
        out.append(tables.metric_details(models, metric))
    if any(tables.corrupted(records) for records in models.values()):
        out.append(tables.grouped_by_category(models, "gamma_r", "γr per corruption (mean over severities)", 3))
        if "heatmap" in figures:
            out.append(Figure("γr heatmap", figures["heatmap"]))
        out.append(tables.grouped_by_category(models, "score", f"{metric} per corruption (mean over severities)", 2))
        out.append(tables.severity_curves(models, metric))
        if "severity" in figures:
            out.append(Figure(f"{metric} against severity (plot)", figures["severity"]))
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


def render_markdown(report: Mapping[str, Any]) -> str:
    lines = ["# Segmentation robustness report", ""]
    if report.get("missing"):
        lines += [
            f"**{len(report['missing'])} selected cells have no result** (a crashed worker or an interrupted run); "
            "the tables below leave them out:",
            "",
            *(f"- `{nodeid}`" for nodeid in report["missing"]),
            "",
        ]
    for suite_name, suite in report["suites"].items():
        lines += [f"## Suite `{suite_name}`", ""]
        if suite.get("file"):
            task = f"task: {suite['task']} · " if suite.get("task") else ""
            lines += [f"Suite file: `{suite['file']}` · {task}metric: {metric_label(suite['metric'])}", ""]
        for section in suite_sections(suite):
            if isinstance(section, Figure):
                lines += [f"### {section.title}", "", f"![{section.title}]({section.file})", ""]
                continue
            lines += [f"### {section.title}", "", *markdown_table(section), ""]
            if section.note:
                lines += [f"_{section.note}_", ""]
    return "\n".join(lines)


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
    widths = [max(len(h), *(len(r[i]) for r in table.rows)) for i, h in enumerate(table.header)]
    line = lambda cells: "  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths)))  # noqa: E731
    return [line(table.header), *(line(r) for r in table.rows)]


def terminal_summary(report: Mapping[str, Any]) -> list[str]:
    lines: list[str] = []
    if report.get("missing"):
        shown = ", ".join(report["missing"][:3]) + (", ..." if len(report["missing"]) > 3 else "")
        lines.append(f"{len(report['missing'])} cells have no result (crashed worker or interrupted run): {shown}")
    for suite_name, suite in report["suites"].items():
        table = tables.headline({m: v["summary"] for m, v in suite["models"].items()}, metric_label(suite["metric"]))
        lines += [f"suite {suite_name}:", *("  " + row for row in text_table(table))]
    return lines


def write_report(
    report: dict[str, Any], base: Path, galleries: Mapping[str, Image.Image] | None = None
) -> list[Path]:
    """Write ``base.md``, ``base.json`` and the PNG figures next to them; returns the paths.

    Figures are named ``<base>-<suite>-<kind>.png``; plots need matplotlib, and are left
    out (the tables stay) where it is not installed.
    """
    written: list[Path] = []
    base.parent.mkdir(parents=True, exist_ok=True)
    for suite_name, suite in report["suites"].items():
        models = records_by_model(suite)
        stem = f"{base.name}-{suite_name}"
        figures: dict[str, str] = {}
        if any(tables.corrupted(records) for records in models.values()):
            drawn = {
                "severity": plots.severity_plot(models, metric_label(suite["metric"]), base.parent / f"{stem}-severity.png"),
                "heatmap": plots.heatmap(models, base.parent / f"{stem}-heatmap.png"),
            }
            figures.update({kind: path.name for kind, path in drawn.items() if path is not None})
            written.extend(path for path in drawn.values() if path is not None)
        if galleries and suite_name in galleries:
            path = base.parent / f"{stem}-gallery.png"
            galleries[suite_name].save(path, format="PNG")
            figures["gallery"] = path.name
            written.append(path)
        suite["figures"] = figures
    md, js = base.with_suffix(".md"), base.with_suffix(".json")
    atomic_write_text(md, render_markdown(report))
    atomic_write_text(js, json.dumps(_json_safe(report), indent=2) + "\n")
    return [md, js, *written]


def _shown(path: Path, root: Path | None) -> str:
    if root is not None:
        try:
            return path.resolve().relative_to(root.resolve()).as_posix()
        except ValueError:
            pass
    return str(path)


def _json_safe(value: Any) -> Any:
    # Strict JSON has no NaN: an undefined score is written as null.
    if isinstance(value, float) and math.isnan(value):
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
