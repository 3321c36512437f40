"""A metric's details, group by group: one table per detail, clean and per corruption and severity.

A metric may keep its score split one way or another among its details: the promptable metric
per prompt kind (clicks, a box) and per instance size (:mod:`pytest_segrobust.metrics.promptable`).
It declares each split as a :class:`~pytest_segrobust.metrics.base.DetailGroup`, and each detail
of a group that the records hold a value of gets a table, so that a model robust with boxes and
fragile with clicks, or on large instances and not on small ones, reads so at a glance.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pytest_segrobust.metrics.base import DetailGroup
from pytest_segrobust.report.tables import Table, carried_details, corrupted, fmt
from pytest_segrobust.store.records import CellRecord


def detail_group_tables(
    models: Mapping[str, Sequence[CellRecord]], metric: str, groups: Sequence[DetailGroup]
) -> list[Table]:
    """One table per detail of each group that the records hold a value of, in the groups' order.

    Args:
        models: Each row's (model's) records.
        metric: The headline metric's label.
        groups: The headline metric's detail groups.

    Returns:
        Per detail: rows model x corruption (a ``clean`` row first), columns clean and each severity.
    """
    records = [r for cells in models.values() for r in cells]
    carried = set(carried_details(records))
    severities = sorted({r.severity for r in corrupted(records)})
    tables = []
    for group in groups:
        for detail in (d for d in group.details if d in carried):
            rows = []
            for model, cells in models.items():
                clean = next((r.clean_details.get(detail) for r in cells if detail in r.clean_details), None)
                names = list(dict.fromkeys(r.corruption for r in corrupted(cells)))
                rows.append((model, "clean", fmt(clean), *("" for _ in severities)))
                for name in names:
                    by_severity = {r.severity: r.details.get(detail) for r in cells if r.corruption == name}
                    rows.append((model, name, "", *(fmt(by_severity.get(s)) for s in severities)))
            tables.append(
                Table(
                    f"{metric} {group.title.format(detail=detail)}",
                    ("model", "corruption", "clean", *(f"s{s}" for s in severities)),
                    tuple(rows),
                    note=group.note.format(detail=detail),
                )
            )
    return tables
