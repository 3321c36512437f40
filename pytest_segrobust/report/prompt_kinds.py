"""A promptable suite's tables: its headline per prompt kind, clean and per corruption and severity.

A promptable model is asked once per instance and prompt kind (clicks, a box); its metric keeps
each kind's score among its details (:mod:`pytest_segrobust.metrics.promptable`). One table per
kind shows that score, so that a model robust with boxes and fragile with clicks reads so at a glance.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pytest_segrobust.core.prompts import PROMPT_KINDS
from pytest_segrobust.report.tables import Table, corrupted, fmt
from pytest_segrobust.store.records import CellRecord


def prompt_kind_tables(models: Mapping[str, Sequence[CellRecord]], metric: str) -> list[Table]:
    """One table per prompt kind the records' details hold: rows model x corruption, columns clean and each severity."""
    records = [r for cells in models.values() for r in cells]
    kinds = [kind for kind in PROMPT_KINDS if any(kind in r.clean_details for r in records)]
    severities = sorted({r.severity for r in corrupted(records)})
    tables = []
    for kind in kinds:
        rows = []
        for model, cells in models.items():
            clean = next((r.clean_details.get(kind) for r in cells if kind in r.clean_details), None)
            names = list(dict.fromkeys(r.corruption for r in corrupted(cells)))
            rows.append((model, "clean", fmt(clean), *("" for _ in severities)))
            for name in names:
                by_severity = {r.severity: r.details.get(kind) for r in cells if r.corruption == name}
                rows.append((model, name, "", *(fmt(by_severity.get(s)) for s in severities)))
        tables.append(
            Table(
                f"{metric} with {kind} prompts",
                ("model", "corruption", "clean", *(f"s{s}" for s in severities)),
                tuple(rows),
                note=f"Each instance asked with its {kind} prompt alone; the other kinds' sets are left out of these numbers.",
            )
        )
    return tables
