"""The order a report lists suites, cells and models in: the run's collection order, whichever
process's results came back first, so a single run, ``-n 2`` and merged shards report alike."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_segrobust.core.files import relative
from pytest_segrobust.store.decisions import ModelOutcome
from pytest_segrobust.store.records import CellRecord
from pytest_segrobust.suite.schema import Suite


def ordered_suites(suites: Mapping[str, Suite], expected: Sequence[str], rootpath: Path) -> list[str]:
    """The suites' names in the order the run collected their cells (``expected`` node ids), then
    any other in the order they were loaded (an xdist controller loads a suite when its first
    result arrives)."""
    by_file = {relative(suite.path, rootpath): name for name, suite in suites.items()}
    files = dict.fromkeys(nodeid.split("::", 1)[0] for nodeid in expected)
    collected = [by_file[file] for file in files if file in by_file]
    return list(dict.fromkeys([*collected, *suites]))


def ordered_model_outcomes(
    outcomes: Iterable[ModelOutcome], suites: Mapping[str, Suite], order: Sequence[str]
) -> list[ModelOutcome]:
    """Model outcomes in suite (``order``) and model order, independent of scheduling."""

    def rank(outcome: ModelOutcome) -> tuple[Any, ...]:
        suite = suites.get(outcome.suite)
        models = [m.name for m in suite.models] if suite else []
        return (
            order.index(outcome.suite) if outcome.suite in order else len(order),
            models.index(outcome.model) if outcome.model in models else len(models),
            outcome.nodeid,
        )

    return sorted(outcomes, key=rank)


def ordered_records(
    records: Iterable[CellRecord], suites: Mapping[str, Suite], order: Sequence[str]
) -> list[CellRecord]:
    """Records in suite (``order``), model, split, corruption and severity order, independent of scheduling."""

    def rank(record: CellRecord) -> tuple[Any, ...]:
        suite = suites.get(record.suite)
        names = list(suite.corruptions) if suite else []
        models = [m.name for m in suite.models] if suite else []
        splits = list(suite.splits) if suite else []
        return (
            order.index(record.suite) if record.suite in order else len(order),
            models.index(record.model) if record.model in models else len(models),
            splits.index(record.split) if record.split in splits else len(splits),
            -1
            if record.severity == 0
            else (names.index(record.corruption) if record.corruption in names else len(names)),
            record.severity,
            record.nodeid,
        )

    return sorted(records, key=rank)
