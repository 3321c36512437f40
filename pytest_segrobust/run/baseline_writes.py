"""The end of a run's word on the baselines: each suite's pending entries written, in step with its
statistics file, and what changed or is no longer used said in one line each.

Only the controller (or the single process without xdist, or ``segrobust merge``) writes, once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pytest_segrobust import __version__
from pytest_segrobust.core.errors import BaselineError, SegRobustError
from pytest_segrobust.core.wording import plural
from pytest_segrobust.engine.plan import suite_cells
from pytest_segrobust.gate.evidence import sidecar_entries
from pytest_segrobust.gate.outcomes import ModelChange, PendingWrite
from pytest_segrobust.store.baselines import (
    PRUNE_FLAG,
    BaselineUpdate,
    CellKey,
    Conditions,
    prune_baseline,
    read_baseline,
    unused_entries,
    write_baseline,
)
from pytest_segrobust.store.records import CellRecord
from pytest_segrobust.store.sidecar import SidecarWriter, sidecar_path
from pytest_segrobust.suite.schema import Suite


@dataclass
class BaselineWrites:
    """What writing the baselines did: the files written, the lines to show, what failed.

    Attributes:
        refused: Why each suite's file was not written, by suite name: its cells that were to
            be written are not in it.
    """

    written: list[Path] = field(default_factory=list)
    summary: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)

    def unwritten(self, pending: Sequence[PendingWrite]) -> dict[CellKey, str]:
        """The cells of ``pending`` whose suite's file was not written, and why."""
        return {w.key: self.refused[w.suite] for w in pending if w.suite in self.refused}


class BaselineWriter:
    """Writes a run's pending baseline entries.

    Args:
        suites: The run's suites by name.
        baseline_file: The baseline JSON of a suite.
        statistics_store: The folder of a suite's statistics file when it is not beside its JSON
            (raises :class:`~pytest_segrobust.core.files.WriteError` when the run has none).
        shown: How lines show a path.
        update: The run updates baselines (``--segrobust-update-baselines``).
        prune: The run removes the entries suites no longer have (``--segrobust-prune``).
    """

    def __init__(
        self,
        suites: Mapping[str, Suite],
        baseline_file: Callable[[Suite], Path],
        statistics_store: Callable[[Suite], Path | None],
        shown: Callable[[Path], str],
        *,
        update: bool,
        prune: bool,
    ) -> None:
        self.suites = suites
        self.baseline_file = baseline_file
        self.statistics_store = statistics_store
        self.shown = shown
        self.update = update
        self.prune = prune

    def write(
        self,
        pending: Sequence[PendingWrite],
        records: Sequence[CellRecord],
        changes: Mapping[tuple[str, str], ModelChange],
    ) -> BaselineWrites:
        """Write each suite's pending cells into its file, and say what changed and what is unused.

        An update that evaluated every cell of a suite, or ``--segrobust-prune``, also removes
        the entries the suite no longer has; otherwise they are listed, naming the flag.
        """
        done = BaselineWrites(summary=[change.describe() for _, change in sorted(changes.items())])
        by_suite: dict[str, list[PendingWrite]] = {}
        for write in pending:
            by_suite.setdefault(write.suite, []).append(write)
        evaluated: dict[str, set[CellKey]] = {}
        for r in records:
            evaluated.setdefault(r.suite, set()).add(CellKey(r.suite, r.model, r.corruption, r.severity, r.split))
        for name in sorted(set(by_suite) | set(evaluated)):
            suite, writes = self.suites.get(name), by_suite.get(name, [])
            if suite is None and not writes:
                continue
            path = Path(writes[0].path) if writes else self.baseline_file(suite)  # type: ignore[arg-type]
            cells = suite_cells(suite) if suite is not None else []
            whole = self.update and evaluated.get(name, set()) >= set(cells)
            tidy = bool(cells) and (self.prune or whole)
            try:
                update, notes = self._write_suite(path, name, writes, cells if tidy else None)
            except SegRobustError as exc:
                done.problems.append(f"baselines not written, the stored ones are unchanged: {exc}")
                done.refused[name] = str(exc)
                continue
            if writes or update.removed:
                done.written.append(path)
            names = {w.key: w.nodeid for w in writes if w.nodeid is not None}
            done.summary += update.summary(self.shown(path), names) + notes
            if not tidy:
                done.summary += self._unused(path, name, cells)
        return done

    def _write_suite(
        self, path: Path, suite: str, writes: list[PendingWrite], keep_only: list[CellKey] | None
    ) -> tuple[BaselineUpdate, list[str]]:
        """Write the suite's baseline file and, in step with it, its statistics file; what it did,
        and lines about a statistics file the write had to replace."""
        ordered = sorted(writes, key=lambda w: (w.key.model, str(w.key.split), w.key.corruption, w.key.severity))
        replace_all = any(w.replace_all for w in writes)
        statistics = self._sidecar(path, self.suites.get(suite), suite, ordered, replace_all)
        if not writes:
            update = BaselineUpdate(path) if keep_only is None else prune_baseline(path, keep_only, statistics)
        else:
            update = write_baseline(
                path,
                suite,
                Conditions.from_json(writes[0].conditions, str(path)),
                [(w.key, w.values) for w in ordered],
                replace_all=replace_all,
                keep_only=keep_only,
                fingerprints={w.key.model: w.model_fingerprint for w in writes if w.model_fingerprint is not None},
                tool_version=__version__,
                statistics=statistics,
            )
        return update, [] if statistics is None else replaced_sidecar(statistics)

    def _sidecar(
        self, path: Path, suite_obj: Suite | None, suite: str, writes: list[PendingWrite], replace_all: bool
    ) -> SidecarWriter | None:
        """The statistics file of the baseline ``path`` (beside it, or in the suite's statistics
        store) with this run's statistics, where the suite has one; an update starts a broken one afresh.

        Raises:
            WriteError: for statistics kept in the cache by a run without one.
        """
        store = None if suite_obj is None else self.statistics_store(suite_obj)
        target = sidecar_path(path, store)
        entries = [entry for w in writes for entry in sidecar_entries(w.key, w.statistics)]
        if not (suite_obj is not None and suite_obj.gate is not None) and not entries and not target.exists():
            return None
        return SidecarWriter(
            target, suite, entries, replace_all=replace_all, shown=self.shown(target), repair=self.update
        )

    def _unused(self, path: Path, suite: str, cells: list[CellKey]) -> list[str]:
        try:
            unused = unused_entries(read_baseline(path), cells)
        except BaselineError:
            return []  # a broken file fails its cells already, naming it
        if not unused:
            return []
        return [
            (
                f"{self.shown(path)}: {plural(len(unused), 'unused entry', 'unused entries')} "
                f"(no longer in suite {suite}): "
                f"{', '.join(unused)}; remove them with {PRUNE_FLAG}"
            )
        ]


def replaced_sidecar(statistics: SidecarWriter) -> list[str]:
    """Terminal lines for a statistics file an update could not read and wrote afresh."""
    if statistics.unreadable is None:
        return []
    lost = sorted(statistics.cells - statistics.measured)
    lines = [
        (
            f"{statistics.shown}: could not be read ({statistics.unreadable}); written afresh with the "
            f"statistics of the {plural(len(statistics.measured), 'cell')} this update measured"
        )
    ]
    if lost:
        lines.append(
            f"{statistics.shown}: {plural(len(lost), 'cell')} not measured by this update "
            f"{'has' if len(lost) == 1 else 'have'} no statistics now, and their "
            f"statistical gate fails until an update measures them: {', '.join(lost)}"
        )
    return lines
