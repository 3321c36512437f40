"""A session's shard of a run (``--segrobust-shard K/N``): its part of the cells, its shard file,
its verdict on its own cells, and the merge of N shard files into one session.

The file format and the assignment of cells live in :mod:`pytest_segrobust.backends.shard_plan` (which the
plugin reads without torch, and the xdist scheduler cuts with); this module connects them to a
run's session, through its public state only. A shard file's
results are the items' :class:`~pytest_segrobust.gate.outcomes.Outcome` records, with paths relative
to the rootdir.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol

from pytest_segrobust import __version__
from pytest_segrobust.backends.shard_plan import (
    ShardCell,
    ShardCoverage,
    ShardFile,
    ShardPlan,
    ShardSpec,
    assign_cells,
    digests,
)
from pytest_segrobust.core.files import WriteError, atomic_write_text, relative, remove_stale_temporaries
from pytest_segrobust.gate.outcomes import Outcome, relative_to, under
from pytest_segrobust.gate.release import ModelOutcome
from pytest_segrobust.pictures.values import RunPictures
from pytest_segrobust.report import RunVerdict, run_verdict
from pytest_segrobust.report.coverage import RunCoverage
from pytest_segrobust.run.selection import Selection
from pytest_segrobust.runtime.options import Options
from pytest_segrobust.store.baselines import CellKey
from pytest_segrobust.store.records import CellRecord
from pytest_segrobust.suite.schema import Suite


class SessionView(Protocol):
    """What a shard reads and changes of its run's session
    (:class:`~pytest_segrobust.run.session.SegRobustSession`): its public state alone."""

    options: Options
    rootpath: Path
    explicit_paths: set[Path]
    shard: ShardSpec | None
    shard_plan: ShardPlan | None
    shard_started_from: tuple[dict[str, str], dict[str, str]]
    scope: Selection
    pictures: RunPictures
    records: list[CellRecord]
    errors: dict[str, str]
    model_outcomes: dict[str, ModelOutcome]
    written: list[Path]
    problems: list[str]

    def cells(self, suite: Suite) -> Sequence[CellKey]: ...
    def suite(self, path: Path) -> Suite: ...
    def outcome(self, nodeid: str) -> Outcome | None: ...
    def ordered_records(self) -> list[CellRecord]: ...
    def run_coverage(self) -> RunCoverage: ...
    def cache_counts(self) -> Mapping[str, int]: ...
    def run_pictures(self) -> RunPictures: ...
    def absorb_outcome(self, outcome: Outcome) -> None: ...
    def absorb(self, payload: str) -> None: ...


def project_digests(session: SessionView) -> tuple[dict[str, str], dict[str, str]]:
    """The digests of every suite file (under the suites folder or named on the command line)
    and of every baseline file, by path relative to the rootdir."""
    options = session.options
    suites = [
        *options.suites_dir.rglob("*.yaml"),
        *options.suites_dir.rglob("*.yml"),
        *(path for path in session.explicit_paths if path.is_file() and path.suffix in (".yaml", ".yml")),
    ]
    return digests(suites, session.rootpath), digests(options.baselines_dir.glob("*.json"), session.rootpath)


def plan_shard(session: SessionView, cells: list[tuple[str, Suite, CellKey]]) -> set[str]:
    """Keep the shard's part of the collected cells (node id, suite, key); returns its node ids."""
    assert session.shard is not None
    suites = {suite.name: suite for _, suite, _ in cells}
    ranks = {name: {key: rank for rank, key in enumerate(session.cells(suite))} for name, suite in suites.items()}
    assignment = assign_cells(
        (
            ShardCell(nodeid, (suite.name, key.model, key.split or ""), ranks[suite.name].get(key, 0))
            for nodeid, suite, key in cells
        ),
        session.shard.count,
    )
    ours = [nodeid for nodeid, _, _ in cells if assignment[nodeid] == session.shard.index]
    session.shard_plan = ShardPlan([nodeid for nodeid, _, _ in cells], ours)
    return set(ours)


def shard_file(session: SessionView) -> ShardFile:
    """What the shard learned, for ``segrobust merge``: paths relative to the rootdir."""
    assert session.shard is not None
    plan = session.shard_plan or ShardPlan([], [])  # no process collected: the merge refuses it
    others = set(plan.cells) - set(plan.assigned)
    nodeids = [r.nodeid for r in session.ordered_records()] + list(session.model_outcomes)
    outcomes = [session.outcome(nodeid) for nodeid in dict.fromkeys(nodeids)]
    results = [o.moved(relative_to(session.rootpath)).to_json() for o in outcomes if o is not None]
    coverage = session.run_coverage()
    suites, baselines = session.shard_started_from
    scope = session.scope
    return ShardFile(
        spec=session.shard,
        tool_version=__version__,
        update_baselines=session.options.update_baselines,
        prune=session.options.prune,
        report_html=session.options.report_html,
        report=relative(session.options.report_path, session.rootpath),
        suite_digests=suites,
        baseline_digests=baselines,
        cells=list(plan.cells),
        assigned=list(plan.assigned),
        results=results,
        errors=dict(session.errors),
        coverage=ShardCoverage(
            expected=list(scope.expected),
            deselected=[nodeid for nodeid in scope.deselected if nodeid not in others],
            not_run=dict(coverage.not_run),
            selection=list(scope.selection),
            narrowed_to=list(scope.narrowed_to),
            collection_known=scope.collection_known and session.shard_plan is not None,
        ),
        cache_counts=session.cache_counts(),
        pictures=session.run_pictures().to_json(),
        figures=session.options.figures,
    )


def shard_verdict(session: SessionView) -> RunVerdict | None:
    """A shard's verdict on its own cells (``None`` outside a shard, or for a shard that
    evaluated nothing); the run's verdict is the merge's."""
    if session.shard is None or not (session.records or session.errors or session.model_outcomes):
        return None
    statuses = [o.status for nodeid, o in session.model_outcomes.items() if nodeid not in session.errors]
    return run_verdict(session.ordered_records(), session.errors, list(session.run_coverage().not_run), statuses)


def verdict_line(session: SessionView, verdict: RunVerdict) -> str:
    """``shard 1/3: FAIL · 2 cells: 1 regressed, 1 passed (this shard's cells; ...)``."""
    assert session.shard is not None
    return (
        f"shard {session.shard}: {verdict.line()} (this shard's cells only; "
        "`segrobust merge` of every shard gives the run's verdict)"
    )


def write_shard(session: SessionView, spec: ShardSpec) -> None:
    """Write the shard's file beside the report path (a failure is one of the run's problems)."""
    path = spec.path(session.options.report_path)
    remove_stale_temporaries(path.parent)
    try:
        atomic_write_text(path, json.dumps(shard_file(session).to_json(), indent=1) + "\n")
    except WriteError as exc:
        session.problems.append(f"shard {spec} not written: {exc}")
    else:
        session.written.append(path)


def absorb_shards(session: SessionView, shards: list[ShardFile]) -> None:
    """Merge the N shards of a run (checked by :func:`~pytest_segrobust.backends.shard_plan.check_shards`)
    into a fresh session, as the xdist controller absorbs its workers' items.

    Suites load in the run's collection order, so the report lists them as one run would. The
    cells of a shard run with ``--segrobust-figures=none`` are noted as left out of the pictures
    (:attr:`RunPictures.left_out <pytest_segrobust.pictures.values.RunPictures.left_out>`): where
    other shards made theirs, the report names that shard once instead of warning of each picture.
    """
    cells = shards[0].cells
    for path in dict.fromkeys(session.rootpath / nodeid.split("::", 1)[0] for nodeid in cells):
        session.suite(path)
    for shard in shards:
        for entry in shard.results:
            session.absorb_outcome(Outcome.from_json(entry).moved(under(session.rootpath)))
        for nodeid, message in shard.errors.items():
            session.absorb_outcome(Outcome(nodeid, error=message))
        session.absorb(json.dumps({"cache": shard.cache_counts, "collection": None, "pictures": shard.pictures}))
        if not shard.figures:
            session.pictures.left_out.update(dict.fromkeys(shard.assigned, str(shard.spec)))
        session.scope.not_run_reasons.update(shard.coverage.not_run)
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
