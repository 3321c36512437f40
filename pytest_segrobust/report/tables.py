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


def _columns_by_category(records: Sequence[CellRecord]) -> list[tuple[str, str]]:
    """``(category, corruption)`` in report order: categories by first appearance, then corruptions."""
    order: dict[str, list[str]] = {}
    for r in corrupted(records):
        names = order.setdefault(r.category, [])
        if r.corruption not in names:
            names.append(r.corruption)
    return [(category, name) for category, names in order.items() for name in names]


def grouped_by_category(models: dict[str, list[CellRecord]], value: str, title: str, digits: int) -> Table:
    """Model x corruption (columns grouped by category), each averaged over severities."""
    columns = _columns_by_category([r for records in models.values() for r in records])
    rows = []
    for model, records in models.items():
        cells = corrupted(records)
        means = [mean(getattr(r, value) for r in cells if r.corruption == name) for _, name in columns]
        rows.append((model, *(fmt(m, digits) for m in means), fmt(mean(getattr(r, value) for r in cells), digits)))
    header = ("model", *(f"{category}<br>{name}" for category, name in columns), "mean")
    return Table(title, header, tuple(rows), "Each cell is the mean over severities; columns are grouped by category.")


def severity_curves(models: dict[str, list[CellRecord]], metric: str) -> Table:
    """Score against severity 0 (clean) .. 5 for every model and corruption."""
    severities = sorted({r.severity for records in models.values() for r in corrupted(records)})
    rows = []
    for model, records in models.items():
        clean = records[0].clean_score if records else math.nan
        for _, name in _columns_by_category(records):
            by_severity = {r.severity: r.score for r in corrupted(records) if r.corruption == name}
            rows.append((model, name, fmt(clean), *(fmt(by_severity.get(s)) for s in severities)))
    return Table(f"{metric} against severity", ("model", "corruption", "s0 (clean)", *(f"s{s}" for s in severities)), tuple(rows))


def degradation(models: dict[str, list[CellRecord]], reference: str, noise_severities: Sequence[int]) -> Table:
    """CD and rCD per corruption against the reference model (Kamann & Rother), in percent."""
    from pytest_segrobust.scores import corruption_degradation, error, relative_corruption_degradation

    ref = models.get(reference, [])
    columns = _columns_by_category(ref)
    rows = []
    for model, records in models.items():
        cds, rcds = [], []
        for category, name in columns:
            allowed = set(noise_severities) if category == "noise" else None

            def errors(rs: list[CellRecord], name: str = name, allowed: set[int] | None = allowed) -> dict[int, float]:
                return {r.severity: error(r.score) for r in corrupted(rs) if r.corruption == name and (allowed is None or r.severity in allowed)}

            mine, theirs = errors(records), errors(ref)
            shared = sorted(set(mine) & set(theirs))
            cds.append(100 * corruption_degradation([mine[s] for s in shared], [theirs[s] for s in shared]))
            rcds.append(
                100
                * relative_corruption_degradation(
                    [mine[s] for s in shared], error(records[0].clean_score), [theirs[s] for s in shared], error(ref[0].clean_score)
                )
            )
        rows.append((model, *(fmt(c, 1) for c in cds), fmt(mean(cds), 1), fmt(mean(rcds), 1)))
    note = (
        f"CD_c = Σ_s D_f / Σ_s D_ref and rCD_c = Σ_s (D_f - D_f,clean) / Σ_s (D_ref - D_ref,clean), D = 1 - mIoU, "
        f"in percent against `{reference}`; noise summed over severities {', '.join(map(str, noise_severities))}."
    )
    header = ("model", *(f"{category}<br>{name}" for category, name in columns), "mCD", "rCD")
    return Table(f"Corruption degradation against {reference}", header, tuple(rows), note)
