"""What a run set out to cover: the cells it selected and deselected, how the command line
narrowed it, and why it stopped; the one object the controller asks "was this run whole?".

The plugin feeds it pytest's collection and selection; xdist workers and shards report theirs
through it; :meth:`Selection.coverage` turns it, with the cells that came back, into the
report's :class:`~pytest_segrobust.report.coverage.RunCoverage`.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path

from pytest_segrobust.report.coverage import RunCoverage


@dataclass
class Selection:
    """What this run collected and selected, and why it stopped.

    Attributes:
        expected: The selected cells (node ids), in collection order.
        deselected: Collected cells the run did not select (``-k``, ``-m``, ``--lf``, ``--sw``).
        collection_known: Some process that collected reported its selection (an xdist
            controller collects nothing itself).
        selection: The options that selected cells, as typed.
        narrowed_to: Command-line arguments that collected less than the whole suites folder.
        stop_reason: Why the run stopped before its last cell (``-x``, an interrupt).
        not_run_reasons: Why a merged shard's cells have no result (each shard's own stop reason).
    """

    expected: list[str] = field(default_factory=list)
    deselected: list[str] = field(default_factory=list)
    collection_known: bool = False
    selection: list[str] = field(default_factory=list)
    narrowed_to: list[str] = field(default_factory=list)
    stop_reason: str | None = None
    not_run_reasons: dict[str, str] = field(default_factory=dict)

    def expect(self, nodeids: list[str], *, collected_here: bool = False) -> None:
        """The cells this run means to evaluate (after selection).

        Args:
            nodeids: The selected cells.
            collected_here: This process collected them (not the xdist controller, which only
                hears the selection), so :meth:`deselect` has told it every deselected cell.
        """
        if not self.expected:
            self.expected = list(nodeids)
        self.collection_known = self.collection_known or collected_here

    def deselect(self, nodeids: list[str]) -> None:
        """Cells collected but not selected (``-k``, ``-m``, ``--deselect``, ``--lf``, ``--sw``)."""
        self.deselected = list(dict.fromkeys([*self.deselected, *nodeids]))

    def missing(self, done: Collection[str]) -> list[str]:
        """Selected cells not in ``done`` (neither a result nor an error): ``-x`` or ``--sw``
        stopped the run, or it was interrupted."""
        return [nodeid for nodeid in self.expected if nodeid not in done]

    def coverage(self, evaluated: int, errors: int, done: Collection[str], full_report: Path | None) -> RunCoverage:
        """Which of the collected cells this run evaluated, and why it left the others out.

        Args:
            evaluated: Cells with a result.
            errors: Items with an error instead of a result.
            done: Node ids of every item with a result or an error.
            full_report: The full report's markdown file as messages show it, where it exists.
        """
        return RunCoverage(
            evaluated=evaluated,
            errors=errors,
            not_run={
                nodeid: self.not_run_reasons.get(nodeid)
                or self.stop_reason
                or "no result and no error came back for it"
                for nodeid in self.missing(done)
            },
            deselected=list(self.deselected),
            selection=list(self.selection) if self.deselected else [],
            narrowed_to=list(self.narrowed_to),
            collection_unknown=not self.collection_known,
            full_report=None if full_report is None else str(full_report),
        )
