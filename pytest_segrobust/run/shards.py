"""``segrobust merge`` in a session: the N shards of a run gated again, as one run would gate them.

:class:`~pytest_segrobust.backends.shards.MergedShards` (the files, checked) is the session's
backend: each cell a shard measured is run through :meth:`SegRobustSession.run_cell
<pytest_segrobust.run.session.SegRobustSession.run_cell>` with that measurement, so that the
gate decides it against the baselines here, with the criteria a single run uses; then each
model's aggregates item, from those cells. The cells are the suites' own, read here: a shard
names them, and its measurement must be of the cell it names. What the shards selected and left
out, their cache counts and their pictures come to the session as an xdist worker's would.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pytest_segrobust.backends.shard_plan import ShardError
from pytest_segrobust.backends.shards import MergedShards, ShardItem
from pytest_segrobust.gate.outcomes import Outcome
from pytest_segrobust.run.items import cell_nodeid, model_gate_cells
from pytest_segrobust.store.baselines import CellKey
from pytest_segrobust.store.records import Status
from pytest_segrobust.suite.requirements import MODEL_ITEM
from pytest_segrobust.suite.schema import Suite

if TYPE_CHECKING:
    from pytest_segrobust.engine.runner import Measurement
    from pytest_segrobust.run.session import SegRobustSession


@dataclass(frozen=True)
class _Cell:
    """A cell of a suite read here, by its node id."""

    suite: Suite
    key: CellKey


@dataclass(frozen=True)
class _Aggregates:
    """A model's aggregates item of a suite read here, with the cells it needs."""

    suite: Suite
    model: str
    cells: list[tuple[CellKey, str]]


def merge(session: SegRobustSession, merged: MergedShards) -> list[str]:
    """Gate the shards' cells and models' aggregates again in ``session``, a fresh session of
    the rootdir, and give it what the shards covered.

    Suites load in the run's collection order, so the report lists them as one run would.

    Returns:
        One line per item the merge decided otherwise than its shard said.

    Raises:
        ShardError: for a shard that names a cell its suite here does not have, or whose
            measurement is of another cell.
    """
    session.backend = merged
    shards = [shard for _, shard in merged.shards]
    cells = shards[0].cells
    for path in dict.fromkeys(session.rootpath / nodeid.split("::", 1)[0] for nodeid in cells):
        session.suite(path)
    here = _suite_items(session, cells)
    decided = {item.outcome.nodeid for item in [*merged.cells, *merged.aggregates]}
    for shard in shards:
        for nodeid, message in shard.errors.items():
            if nodeid not in decided:  # an error is the shard's measurement failing: nothing to gate
                session.absorb_outcome(Outcome(nodeid, error=message))
    changed: list[str] = []
    for item in merged.cells:
        cell = _cell(here, item)
        measurement = merged.measure(cell.suite, cell.key, item.outcome.nodeid)
        record = measurement.record
        assert record is not None and item.outcome.record is not None  # MergedShards keeps measured cells alone
        _check_of(measurement, cell, item)
        with contextlib.suppress(Exception):  # a failure is the cell's status, an error its error: run_cell records both
            session.run_cell(cell.suite, cell.key, item.outcome.nodeid)
        changed += _changed(item, Status(item.outcome.record.status).value, Status(record.status).value)
    for item in merged.aggregates:
        aggregates = here.get(item.outcome.nodeid)
        if not isinstance(aggregates, _Aggregates):
            raise ShardError(f"{item.shard}: {item.outcome.nodeid} is not a model's aggregates item of its suite here")
        with contextlib.suppress(Exception):  # as for a cell
            session.run_model_gate(aggregates.suite, aggregates.model, item.outcome.nodeid, aggregates.cells)
        assert item.outcome.model_gate is not None  # MergedShards keeps models' aggregates items alone
        now = session.model_outcomes.get(item.outcome.nodeid)
        changed += _changed(item, item.outcome.model_gate.status, "error" if now is None else now.status)
    for shard in shards:
        session.absorb(json.dumps({"cache": shard.cache_counts, "collection": None, "pictures": None}))
        session.scope.not_run_reasons.update(shard.coverage.not_run)
    _cover(session, merged)
    session.stop_backend()  # the shards' pictures
    return changed


def _suite_items(session: SegRobustSession, cells: list[str]) -> dict[str, _Cell | _Aggregates]:
    """Every item of the suites the run's cells belong to, by node id, as a collection here names them."""
    items: dict[str, _Cell | _Aggregates] = {}
    for file_nodeid in dict.fromkeys(nodeid.split("::", 1)[0] for nodeid in cells):
        suite = session.suite(session.rootpath / file_nodeid)
        keys = session.cells(suite)
        for model in dict.fromkeys(key.model for key in keys):
            model_nodeid = f"{file_nodeid}::{model}"
            own = [key for key in keys if key.model == model]
            items.update((cell_nodeid(model_nodeid, key), _Cell(suite, key)) for key in own)
            if suite.gates_models:
                gate_cells = model_gate_cells(suite, model, model_nodeid, own)
                items[f"{model_nodeid}::{MODEL_ITEM}"] = _Aggregates(suite, model, gate_cells)
    return items


def _cell(here: dict[str, _Cell | _Aggregates], item: ShardItem) -> _Cell:
    cell = here.get(item.outcome.nodeid)
    if not isinstance(cell, _Cell):
        raise ShardError(f"{item.shard}: {item.outcome.nodeid} is not a cell of its suite here")
    return cell


def _check_of(measurement: Measurement, cell: _Cell, item: ShardItem) -> None:
    """That the shard's measurement of a cell is of that cell, scored by the suite's metrics in
    the suite's order (the first is the headline, which the gate reads unprefixed).

    Raises:
        ShardError: naming the shard, the cell and what differs.
    """
    record, result = measurement.record, measurement.result
    assert record is not None and result is not None
    names = ("suite", "model", "corruption", "severity", "split")
    differ = [
        f"record {name} {getattr(record, name)!r} (the suite's: {getattr(cell.key, name)!r})"
        for name in names
        if getattr(record, name) != getattr(cell.key, name)
    ]
    differ += [
        f"{run} metrics {', '.join(run_result.metrics)} (the suite's: {', '.join(cell.suite.metrics)})"
        for run, run_result in (("corrupted", result.corrupted), ("clean", result.clean))
        if list(run_result.metrics) != list(cell.suite.metrics)
    ]
    if differ:
        raise ShardError(
            f"{item.shard}: the measurement of {item.outcome.nodeid} is not of that cell: {'; '.join(differ)}; "
            "the file was edited: run its shard again"
        )


def _changed(item: ShardItem, said: str, decided: str) -> list[str]:
    """A line where the merge decided an item otherwise than its shard said."""
    if said == decided:
        return []
    return [f"{item.outcome.nodeid}: {item.shard} said {said}; gated against the baselines here: {decided}"]


def _cover(session: SegRobustSession, merged: MergedShards) -> None:
    """What the shards selected and left out, as one run's selection."""
    shards = [shard for _, shard in merged.shards]
    cells = shards[0].cells
    order = {nodeid: index for index, nodeid in enumerate(cells)}
    expected = {nodeid for shard in shards for nodeid in shard.coverage.expected}
    scope = session.scope
    scope.expect(sorted(expected, key=lambda nodeid: order.get(nodeid, len(order))))
    # The user's own deselection (-k, -m) is every shard's; what --lf or --sw left out is each shard's.
    common = [n for n in shards[0].coverage.deselected if all(n in s.coverage.deselected for s in shards)]
    own = {n for s in shards for n in s.coverage.deselected} - set(common)
    scope.deselect([*common, *sorted(own, key=lambda nodeid: order.get(nodeid, len(order)))])
    scope.collection_known = all(shard.coverage.collection_known for shard in shards)
    scope.selection = list(shards[0].coverage.selection)
    scope.narrowed_to = list(shards[0].coverage.narrowed_to)

