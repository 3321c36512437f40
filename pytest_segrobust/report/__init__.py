"""The run's report: markdown for people, JSON with every number for machines."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_segrobust.baselines import atomic_write_text
from pytest_segrobust.records import CellRecord
from pytest_segrobust.report import tables
from pytest_segrobust.report.tables import Table

if TYPE_CHECKING:
    from pytest_segrobust.suite import Suite

REPORT_FORMAT = 1


def build_report(
    records: Sequence[CellRecord], suites: Mapping[str, Suite], missing: Sequence[str] = ()
) -> dict[str, Any]:
    """Group records by suite and model and compute the summaries (JSON-safe).

    Args:
        records: Every cell evaluated, in report order.
        suites: The suites by name.
        missing: Node ids of selected cells that produced no result.
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
        report["suites"][suite_name] = {
            "metric": suite.metric if suite else "score",
            "file": str(suite.path) if suite else None,
            "models": models,
        }
    return report


def suite_tables(suite_name: str, suite: Mapping[str, Any]) -> list[Table]:
    """Every table of one suite, in reading order."""
    metric = suite["metric"]
    out = [tables.headline({m: v["summary"] for m, v in suite["models"].items()}, metric)]
    all_records = []
    for model, entry in suite["models"].items():
        records = [CellRecord(**c) for c in entry["cells"]]
        all_records.extend(records)
        if tables.corrupted(records):
            out.append(tables.by_corruption(records, "score", f"{model}: {metric} per corruption and severity", 2))
            out.append(tables.by_corruption(records, "gamma_r", f"{model}: γr per corruption and severity", 3))
    out.append(tables.baseline_comparison(all_records))
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
            lines += [f"Suite file: `{suite['file']}` · metric: {suite['metric']}", ""]
        for table in suite_tables(suite_name, suite):
            lines += [f"### {table.title}", "", *markdown_table(table), ""]
            if table.note:
                lines += [f"_{table.note}_", ""]
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
        table = tables.headline({m: v["summary"] for m, v in suite["models"].items()}, suite["metric"])
        lines += [f"suite {suite_name}:", *("  " + row for row in text_table(table))]
    return lines


def write_report(report: Mapping[str, Any], base: Path) -> list[Path]:
    """Write ``base.md`` and ``base.json``; returns both paths."""
    md, js = base.with_suffix(".md"), base.with_suffix(".json")
    atomic_write_text(md, render_markdown(report))
    atomic_write_text(js, json.dumps(_json_safe(report), indent=2) + "\n")
    return [md, js]


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
