"""R2-Bench's table for referring suites: mIoU, oIoU and P@50..P@90 per level, perturbation and modality.

R2-Bench reports each model at three levels, low / medium / high (severities 1 / 3 / 5), per
perturbation and per modality (visual, textual). Every referring metric carries the others in
its details (:mod:`pytest_segrobust.metrics.referring`), so one cell record holds the whole row
whatever the suite's headline metric is. :func:`r2bench_entry` is the value the report keeps
(:class:`~pytest_segrobust.report.model.R2BenchTables`); :func:`r2bench_tables` draws it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pytest_segrobust.metrics import METRICS
from pytest_segrobust.report.model import R2BenchModalityRow, R2BenchModel, R2BenchRow, R2BenchTables
from pytest_segrobust.report.tables import Table, fmt
from pytest_segrobust.store.records import CellRecord
from pytest_segrobust.text.base import LEVELS
from pytest_segrobust.text.cells import modality

LEVEL_OF_SEVERITY = {severity: name for name, severity in LEVELS.items()}
MODALITIES = ("visual", "text", "both", "mixture")


def level_name(severity: int) -> str:
    """``low`` / ``medium`` / ``high`` for severities 1 / 3 / 5, ``s2`` and ``s4`` otherwise."""
    return LEVEL_OF_SEVERITY.get(severity, f"s{severity}")


def columns(metric: str) -> dict[str, str]:
    """The numbers of a row (key -> label), in R2-Bench's order: mIoU, P@50..P@90, then oIoU."""
    labels = dict(METRICS.get(metric).detail_labels)
    ordered = [k for k in labels if k.startswith("miou")] + [k for k in labels if k.startswith("p")]
    ordered += [k for k in labels if k not in ordered]
    return {key: labels[key] for key in ordered}


def numbers(record: CellRecord, metric: str, corrupted: bool = True) -> dict[str, float | None]:
    """A record's numbers by key: the headline score under its own key, the details beside it."""
    kind = METRICS.get(metric)
    own = next((key for key, label in kind.detail_labels.items() if label == kind.label), metric)
    details = record.details if corrupted else record.clean_details
    score = record.score if corrupted else record.clean_score
    return {**{k: float(v) for k, v in details.items()}, own: float(score)}


def _mean(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


def r2bench_entry(models: Mapping[str, Sequence[CellRecord]], metric: str) -> R2BenchTables:
    """Per model: the clean row, one row per perturbation and level, and per modality and level the
    mean over its perturbations."""
    keys = list(columns(metric))
    entries: dict[str, R2BenchModel] = {}
    for model, records in models.items():
        cells = [r for r in records if r.severity > 0]
        clean = next((r for r in records if r.severity == 0), cells[0] if cells else None)
        rows = [
            R2BenchRow(
                perturbation=r.corruption,
                modality=modality(r.category),
                severity=r.severity,
                level=level_name(r.severity),
                numbers={k: numbers(r, metric).get(k) for k in keys},
            )
            for r in cells
        ]
        by_modality = []
        for name in MODALITIES:
            for severity in sorted({row.severity for row in rows if row.modality == name}):
                chosen = [row for row in rows if row.modality == name and row.severity == severity]
                by_modality.append(
                    R2BenchModalityRow(
                        modality=name,
                        severity=severity,
                        level=level_name(severity),
                        perturbations=len(chosen),
                        numbers={k: _mean([row.numbers[k] for row in chosen]) for k in keys},
                    )
                )
        entries[model] = R2BenchModel(
            clean=None
            if clean is None
            else {k: numbers(clean, metric, corrupted=clean.severity == 0).get(k) for k in keys},
            perturbations=tuple(rows),
            modalities=tuple(by_modality),
        )
    return R2BenchTables(columns=columns(metric), models=entries)


def r2bench_tables(entry: R2BenchTables) -> list[Table]:
    """Two tables: per modality and level (the paper's summary), then per perturbation and level."""
    labels = entry.columns
    keys = list(labels)
    summary, detail = [], []
    for model, data in entry.models.items():
        if data.clean is not None:
            summary.append((model, "clean", "–", *(fmt(data.clean.get(k)) for k in keys)))
        for mean_row in data.modalities:
            summary.append((model, mean_row.modality, mean_row.level, *(fmt(mean_row.numbers.get(k)) for k in keys)))
        for row in data.perturbations:
            detail.append((model, row.modality, row.perturbation, row.level, *(fmt(row.numbers.get(k)) for k in keys)))
    header = tuple(labels[k] for k in keys)
    note = (
        "R2-Bench's levels: low, medium, high are severities 1, 3, 5. Modalities: visual (image corruptions), "
        "text (text perturbations), both (one image corruption then one text perturbation), mixture (R2-Bench's "
        "per-sample draw: visual only 40%, text only 40%, both 20%). A modality's row is the mean of its "
        "perturbations' rows."
    )
    return [
        Table(
            "R2-Bench: referring segmentation per modality and level",
            ("model", "modality", "level", *header),
            tuple(summary),
            note,
        ),
        Table(
            "R2-Bench: per perturbation and level",
            ("model", "modality", "perturbation", "level", *header),
            tuple(detail),
        ),
    ]
