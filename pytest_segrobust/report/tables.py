"""The report's tables, one function each, computed from cell records.

A table is a :class:`Table` (title, header, rows of strings) so the same function feeds
markdown, the terminal, and anything else that renders rows.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pytest_segrobust.scores import mean

if TYPE_CHECKING:
    from pytest_segrobust.records import CellRecord

STATUS_MARK = {
    "passed": "ok",
    "improved": "▲ improved",
    "regressed": "▼ REGRESSED",
    "new": "new (no baseline)",
    "updated": "baseline updated",
    "error": "error",
}


@dataclass(frozen=True)
class Table:
    title: str
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    note: str = ""


def fmt(value: float | None, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{value:.{digits}f}"


def signed(value: float | None, digits: int = 2) -> str:
    if value is None or math.isnan(value):
        return "–"
    return f"{value:+.{digits}f}"


def corrupted(records: Iterable[CellRecord]) -> list[CellRecord]:
    return [r for r in records if r.severity > 0]


def headline(summary: dict[str, dict[str, Any]], metric: str) -> Table:
    """Per model: clean score, mean gamma_r and gamma_a over every cell, mPC and rPC."""
    rows = [
        (
            model,
            fmt(s["clean_score"]),
            fmt(s["mean_gamma_r"], 3),
            fmt(s["mean_gamma_a"], 3),
            fmt(s["mpc"]),
            fmt(s["rpc"], 3),
            str(s["cells"]),
        )
        for model, s in summary.items()
    ]
    return Table(
        "Headline",
        ("model", f"clean {metric}", "mean γr", "mean γa", "mPC", "rPC", "cells"),
        tuple(rows),
        "γr = 1 - (A_c - A_ps)/A_c, γa = 1 - (A_c - A_ps)/100; means over every corruption and severity run; "
        "mPC = mean corrupted score, rPC = mPC / clean.",
    )


def model_summary(records: Sequence[CellRecord]) -> dict[str, Any]:
    """The headline numbers of one model's records."""
    cells = corrupted(records)
    clean = records[0].clean_score if records else math.nan
    mpc = mean(r.score for r in cells)
    return {
        "clean_score": clean,
        "mean_gamma_r": mean(r.gamma_r for r in cells if r.gamma_r is not None),
        "mean_gamma_a": mean(r.gamma_a for r in cells if r.gamma_a is not None),
        "mpc": mpc,
        "rpc": mpc / clean if clean else math.nan,
        "cells": len(cells),
    }


def by_corruption(records: Sequence[CellRecord], value: str, title: str, digits: int) -> Table:
    """Corruption x severity grid of one field (``score`` or ``gamma_r``) with a mean column."""
    cells = corrupted(records)
    severities = sorted({r.severity for r in cells})
    names: list[str] = []
    for r in cells:
        if r.corruption not in names:
            names.append(r.corruption)
    rows = []
    for name in names:
        row_cells = {r.severity: getattr(r, value) for r in cells if r.corruption == name}
        category = next(r.category for r in cells if r.corruption == name)
        values = [row_cells.get(s) for s in severities]
        present = [v for v in values if v is not None]
        rows.append((name, category, *(fmt(v, digits) for v in values), fmt(mean(present), digits)))
    return Table(title, ("corruption", "category", *(f"s{s}" for s in severities), "mean"), tuple(rows))


def baseline_comparison(records: Sequence[CellRecord]) -> Table:
    """Every cell against its stored baseline, regressions and improvements marked."""
    rows = []
    for r in records:
        stored = r.baseline or {}
        rows.append(
            (
                r.model,
                r.corruption,
                str(r.severity),
                fmt(r.score),
                fmt(stored.get("score")),
                signed(r.score - stored["score"]) if "score" in stored else "–",
                fmt(r.gamma_r, 3),
                fmt(stored.get("gamma_r"), 3),
                signed(r.gamma_r - stored["gamma_r"], 3) if "gamma_r" in stored and r.gamma_r is not None else "–",
                STATUS_MARK.get(r.status, r.status),
            )
        )
    return Table(
        "Baseline comparison",
        ("model", "corruption", "sev", "score", "baseline", "Δ", "γr", "baseline γr", "Δγr", "status"),
        tuple(rows),
    )
