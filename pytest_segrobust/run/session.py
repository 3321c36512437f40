"""The controller's state of one robustness run: its suites, the outcomes of its items, what it
covered, and the writes left for the end.

``plugin.py`` forwards pytest's events here. A cell's item asks the session to run it: the
process's :class:`~pytest_segrobust.engine.runner.CellRunner` measures it (or a remote backend hands
over its measurement), the :class:`~pytest_segrobust.gate.gatekeeper.Gatekeeper` decides it, and
the session keeps the :class:`~pytest_segrobust.gate.outcomes.Outcome`. Under pytest-xdist each
worker's outcomes travel to the controller with their test reports. Only the controller (or the
single process without xdist, or ``segrobust merge``) writes the baselines and the report, once,
at the end, unless its backend writes its own output instead (a shard's file,
:class:`~pytest_segrobust.backends.shards.ShardBackend`).
"""

from __future__ import annotations

import json
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from pytest_segrobust.backends import Conclusion, RunResults
from pytest_segrobust.backends.local import Local
from pytest_segrobust.core.errors import InconclusiveWarning, SuiteError
from pytest_segrobust.core.files import remove_stale_temporaries
from pytest_segrobust.core.wording import plural
from pytest_segrobust.corruptions import CorruptionRegistry
from pytest_segrobust.data.sample_cache import MEBIBYTE
from pytest_segrobust.engine.evaluation import CellResult
from pytest_segrobust.engine.plan import suite_cells
from pytest_segrobust.engine.result_cache import prune
from pytest_segrobust.engine.runner import CellRunner, RemoteCellError, error_message
from pytest_segrobust.gate.gatekeeper import CellFailure, Gatekeeper
from pytest_segrobust.gate.outcomes import ModelChange, Outcome, PendingWrite
from pytest_segrobust.pictures.values import RunPictures
from pytest_segrobust.report import Report, RunVerdict, run_verdict
from pytest_segrobust.report.coverage import RunCoverage, partial_report_path
from pytest_segrobust.report.paths import report_file
from pytest_segrobust.run.baseline_writes import BaselineWriter
from pytest_segrobust.run.junit import CACHED_PROPERTY
from pytest_segrobust.run.ordering import ordered_model_outcomes, ordered_records, ordered_suites
from pytest_segrobust.run.report_writer import ReportWriter
from pytest_segrobust.run.selection import Selection
from pytest_segrobust.runtime.options import Options
from pytest_segrobust.runtime.progress import TerminalProgress
from pytest_segrobust.store.baselines import CellKey
from pytest_segrobust.store.decisions import ModelOutcome
from pytest_segrobust.store.records import CellRecord, Status
from pytest_segrobust.suite.schema import Suite, declared_name

if TYPE_CHECKING:
    from pytest_segrobust.backends import Backend

__all__ = ["CellFailure", "ModelChange", "PendingWrite", "RemoteCellError", "SegRobustSession", "error_message"]


class SegRobustSession:
    """State of one pytest run with ``--segrobust``.

    Args:
        runner: This process's cell runner; its settings (:attr:`options`), pytest's rootdir
            (:attr:`rootpath`: relative paths in suites mean paths under it, and messages show
            paths relative to it) and corruptions (:attr:`registry`) are the run's.
    """

    def __init__(self, runner: CellRunner) -> None:
        self.runner = runner
        self.options: Options = runner.options
        self.rootpath: Path = runner.rootpath
        self.registry: CorruptionRegistry = runner.registry
        self.gatekeeper = Gatekeeper(self.options, self.runner, self.shown)
        self.reporter = ReportWriter(self.rootpath, started=time.time())
        # The outcomes of the run's items, as they came back.
        self.records: list[CellRecord] = []
        self.errors: dict[str, str] = {}  # node id -> what went wrong, for items with no result
        self.model_outcomes: dict[str, ModelOutcome] = {}
        self.pending: list[PendingWrite] = []
        # The bootstrap's resamples by node id and the models changed since their baselines: the
        # gatekeeper's own (this process's cells), with the workers' added.
        self.resampled = self.gatekeeper.resampled
        self.model_changes = self.gatekeeper.model_changes
        self.absorbed_counts = {"hits": 0, "misses": 0, "cell_hits": 0, "cell_misses": 0, "uncached": 0}
        self.cache_notes: list[str] = []  # what pruning the result cache removed
        # The report's pictures other processes made (xdist workers, Ray actors, shards); this
        # process's own are made at the end (:meth:`finish`), while its models are still built.
        self.pictures = RunPictures()
        self.scope = Selection()
        self.coverage: RunCoverage | None = None
        self.suite_order: dict[str, Suite] = {}
        self._suites_dir = self.options.suites_dir.resolve()  # asked for every file pytest visits
        self.explicit_paths: set[Path] = set()
        self._declared_names: dict[Path, dict[Path, str | None]] = {}
        # The end of the run: files written, lines on the baselines, what failed, what the report left
        # out, and what a backend that writes in place of the report concluded.
        self.written: list[Path] = []
        self.baseline_summary: list[str] = []
        self.problems: list[str] = []
        self.warnings: list[str] = []
        self.conclusion: Conclusion | None = None
        # Ctrl-C stopped the run (the plugin says so at its end): the report's pictures are left out.
        self.interrupted = False
        # Where cells are measured (--segrobust-backend): this process's runner unless the plugin says otherwise.
        self.backend: Backend = Local(self.runner)

    @property
    def progress_bar(self) -> TerminalProgress | None:
        """Set by the plugin when a terminal shows this process's output (not under xdist)."""
        return self.runner.bench.progress_bar

    @progress_bar.setter
    def progress_bar(self, bar: TerminalProgress | None) -> None:
        self.runner.bench.progress_bar = bar

    @property
    def report(self) -> Report | None:
        return self.reporter.report

    # -- collection ---------------------------------------------------------------------

    def collect_explicitly(self, args: list[str], invocation_dir: Path) -> None:
        """Files named on the command line are suites wherever they are (``pytest --segrobust other/s.yaml``).

        Arguments that collect less than the whole suites folder (a suite file, a node id, a
        subfolder) narrow the run: it is partial.
        """
        whole, narrower = False, []
        for arg in args:
            path = Path(arg.split("::", 1)[0])
            resolved = (path if path.is_absolute() else invocation_dir / path).resolve()
            self.explicit_paths.add(resolved)
            if "::" not in arg and self._suites_dir.is_relative_to(resolved):
                whole = True
            elif resolved.is_relative_to(self._suites_dir) or resolved.suffix in (".yaml", ".yml"):
                narrower.append(arg)
        self.scope.narrowed_to = [] if whole else narrower

    def is_suite_file(self, path: Path) -> bool:
        """A YAML file anywhere under the suites folder (subfolders too), or named on the command line.

        A symbolic link in the suites folder is a suite wherever it points: it was put there on purpose.
        """
        if path.suffix not in (".yaml", ".yml"):
            return False
        return self._in_suites_folder(path) or path.resolve() in self.explicit_paths

    def _in_suites_folder(self, path: Path) -> bool:
        """Whether the file ``path``, or the link that ``path`` is, lies under the suites folder."""
        placed = path.parent.resolve() / path.name  # the link's own place, not its target's
        return placed.is_relative_to(self._suites_dir) or path.resolve().is_relative_to(self._suites_dir)

    def suite(self, path: Path) -> Suite:
        """The validated suite at ``path``, its name unique in the run (raises :class:`SuiteError`)."""
        suite = self.runner.load(path)
        if suite.name not in self.suite_order:
            self._check_unique_name(suite)
            self.suite_order[suite.name] = suite
        return suite

    def _check_unique_name(self, suite: Suite) -> None:
        """Two suite files with one name would share, and overwrite, one baseline file.

        A suite is compared with every suite the run touches wherever its file lies: all those
        under the suites folder (subfolders too, collected by this run or not), those named on
        the command line, and for a suite named from elsewhere, those beside it.
        """
        here = suite.path.resolve()
        declared = dict(self._names_in(self._suites_dir, deep=True))
        if not self._in_suites_folder(suite.path):
            declared |= self._names_in(here.parent, deep=False)
        for path in sorted(self.explicit_paths):
            if path.suffix in (".yaml", ".yml") and path.is_file():
                declared |= self._names_in(path, deep=False)
        others = sorted(other for other, name in declared.items() if other != here and name == suite.name)
        if others:
            raise SuiteError(
                f"{suite.path}: field 'name': suite name {suite.name!r} is also the name of "
                f"{', '.join(self.shown(o) for o in others)}; both would share baselines/{suite.name}.json. "
                "Give each suite its own name"
            )

    def _names_in(self, where: Path, *, deep: bool) -> dict[Path, str | None]:
        """The name each suite file at ``where`` declares: a file, a folder, or (``deep``) its subfolders too;
        read once per place, not once per suite."""
        if where not in self._declared_names:
            if where.is_file():
                files = [where]
            else:
                search = where.rglob if deep else where.glob
                files = sorted([*search("*.yaml"), *search("*.yml")])
            self._declared_names[where] = {path.resolve(): declared_name(path) for path in files}
        return self._declared_names[where]

    def close(self) -> None:
        """Undo what the run changed in this process (the import path)."""
        self.runner.close()

    cells = staticmethod(suite_cells)

    # -- running an item ----------------------------------------------------------------

    def run_cell(self, suite: Suite, key: CellKey, nodeid: str) -> CellRecord:
        """Evaluate one cell, compare it with its baseline and record the outcome.

        Raises:
            CellFailure: when the cell regressed, had no baseline or produced no finite score.
            SegRobustError: for bad input (dataset, model output, broken baseline, time limit).
        """
        __tracebackhide__ = True
        try:
            measurement = self.backend.measure(suite, key, nodeid)
            for name, count in measurement.cache_counts.items():  # what a remote worker built and computed
                self.absorbed_counts[name] = self.absorbed_counts.get(name, 0) + count
            self.runner.adopt(suite, measurement)
            record, observed, result = measurement.unpack()
        except BaseException as exc:
            if isinstance(exc, Exception):
                self.errors[nodeid] = error_message(exc)
            raise
        self.records.append(record)
        try:
            gated = self.gatekeeper.gate(suite, key, observed, record, result, sharded=self.backend.writes_later)
        except BaseException as exc:
            # The record was kept as passed until the gate spoke: an error in the gate must not leave it so.
            record.status = Status.ERROR
            if isinstance(exc, Exception):
                self.errors[nodeid] = error_message(exc)
            raise
        if gated.write is not None:
            self.pending.append(gated.write)
        if gated.warning is not None:
            warnings.warn(InconclusiveWarning(gated.warning), stacklevel=1)
        if not gated.passed:
            raise CellFailure(gated.message)
        return record

    def run_model_gate(self, suite: Suite, model: str, nodeid: str, cells: list[tuple[CellKey, str]]) -> ModelOutcome:
        """Decide a model's aggregates (its ``aggregates`` item) from its cells (node id by key).

        Cells this process evaluated are used as they are; the others (run by another worker,
        deselected, or not yet run) are measured aside, by the backend or here, within their time
        limits, and never gated (:mod:`pytest_segrobust.gate.release`).

        Raises:
            CellFailure: when an aggregate regressed or a requirement is not met.
            SegRobustError: when a cell it needs has no result.
        """
        __tracebackhide__ = True

        def measure(key: CellKey, cell: str) -> tuple[CellRecord, dict[str, float], CellResult]:
            aside = self.backend.measure_aside(suite, key, cell, nodeid)
            return (aside or self.runner.measure(suite, key, cell)).unpack()

        try:
            outcome = self.gatekeeper.model_outcome(suite, model, nodeid, cells, self.errors, measure)
        except BaseException as exc:
            if isinstance(exc, Exception):
                self.errors[nodeid] = error_message(exc)
            raise
        self.model_outcomes[nodeid] = outcome
        if outcome.status == Status.INCONCLUSIVE_ALLOWED.value and suite.gate is not None and suite.gate.inconclusive == "warn":
            warnings.warn(InconclusiveWarning("\n".join(outcome.notes)), stacklevel=1)
        if not outcome.passed:
            raise CellFailure(outcome.message)
        return outcome

    def stop_backend(self) -> None:
        """Stop the backend (its cells no item took are dropped), keeping the pictures its workers made."""
        self.backend.close()
        made = self.backend.pictures()
        if made is not None:
            self.pictures.absorb(made)

    # -- what the run says of an item ------------------------------------------------------------

    def device_notices(self) -> list[str]:
        """One line per model that ran on another kind of device than the run asked for."""
        wanted = self.options.device.type
        elsewhere = sorted({(r.suite, r.model, r.device) for r in self.records if r.device and torch.device(r.device).type != wanted})
        return [f"suite {suite}: model {model} ran on {device}, not on the run's {wanted}" for suite, model, device in elsewhere]

    def cell_properties(self, nodeid: str) -> list[tuple[str, object]]:
        """A cell's numbers as JUnit properties (what ``record_property`` adds): status, the
        headline metric's name, score, gamma_r, the suite's tolerance (or statistical gate's
        margin) of each and, where a baseline was compared, its value and the delta."""
        if nodeid in self.model_outcomes:
            return _outcome_properties(self.model_outcomes[nodeid])
        record = next((r for r in reversed(self.records) if r.nodeid == nodeid), None)
        if record is None:
            return []
        stored = record.baseline or {}
        properties: list[tuple[str, object]] = [("status", Status(record.status).value), ("score", record.score)]
        if record.cached:
            properties.append((CACHED_PROPERTY, True))
        if record.gamma_r is not None:
            properties.append(("gamma_r", record.gamma_r))
        if (suite := self.suite_order.get(record.suite)) is not None:
            kind, allowed = ("margin", suite.gate.margin) if suite.gate is not None else ("tolerance", suite.tolerance)
            properties[1:1] = [("metric", suite.metric)]
            properties += [(f"{kind}_score", allowed.score_of(suite.metric))]
            properties += [(f"{kind}_gamma_r", allowed.gamma_r_of(suite.metric))] if record.gamma_r is not None else []
        if "score" in stored:
            properties += [("baseline", stored["score"]), ("delta", record.score - stored["score"])]
        if "gamma_r" in stored and record.gamma_r is not None:
            properties += [("baseline_gamma_r", stored["gamma_r"]), ("delta_gamma_r", record.gamma_r - stored["gamma_r"])]
        return properties + _requirement_properties(record.requirements)

    def shown(self, path: Path) -> str:
        """``path`` as messages show it: relative to the rootdir where it lies under it (a
        symbolic link where the link lies: the name the user gave it)."""
        placed = path.parent.resolve() / path.name if path.is_symlink() else path.resolve()
        try:
            return str(placed.relative_to(self.rootpath.resolve()))
        except ValueError:
            return str(path)

    # -- outcomes between processes (xdist, shards) ---------------------------------------------

    def outcome(self, nodeid: str) -> Outcome | None:
        """The item's outcome as it travels to the controller, or ``None`` for an item with neither
        result nor error. Each item's travels with its own test report, so a worker that crashes
        loses only the item it was running."""
        if nodeid in self.model_outcomes:
            outcome = self.model_outcomes[nodeid]
            return Outcome(
                nodeid, str(self.suite_order[outcome.suite].path), model_gate=outcome, measurements=self.backend.kept(nodeid)
            )
        record = next((r for r in reversed(self.records) if r.nodeid == nodeid), None)
        if record is None:
            error = self.errors.get(nodeid)
            return None if error is None else Outcome(nodeid, error=error)
        key = CellKey(record.suite, record.model, record.corruption, record.severity, record.split)
        return Outcome(
            nodeid,
            str(self.suite_order[record.suite].path),
            record=record,
            pending=tuple(p for p in self.pending if p.key == key),
            resampled=self.resampled.get(nodeid),
            model_change=self.model_changes.get((record.suite, record.model)),
            measurements=self.backend.kept(nodeid),
        )

    def cell_payload(self, nodeid: str) -> str | None:
        """The item's :meth:`outcome` as JSON, for its test report."""
        outcome = self.outcome(nodeid)
        return None if outcome is None else json.dumps(outcome.to_json())

    def absorb_cell(self, payload: str) -> None:
        """Merge one item's outcome (:meth:`cell_payload`), sent by a worker, into this (controller) session."""
        self.absorb_outcome(Outcome.from_json(json.loads(payload)))

    def absorb_outcome(self, outcome: Outcome) -> None:
        """Merge one item's outcome into this (controller) session."""
        self.backend.keep(outcome.nodeid, outcome.measurements)
        if outcome.error is not None:
            self.errors[outcome.nodeid] = outcome.error
            return
        assert outcome.suite is not None
        self.suite(Path(outcome.suite))
        if outcome.model_gate is not None:
            self.model_outcomes[outcome.nodeid] = outcome.model_gate
            return
        assert outcome.record is not None
        self.records.append(outcome.record)
        if outcome.resampled is not None:
            self.resampled[outcome.nodeid] = outcome.resampled
        self.pending.extend(outcome.pending)
        if outcome.model_change is not None:
            self.model_changes.setdefault((outcome.record.suite, outcome.model_change.model), outcome.model_change)

    def payload(self) -> str:
        """What a worker sends when it finishes: its clean-cache counts, the cells it deselected, its
        pictures and what its backend tells the controller's."""
        collection = {"deselected": self.scope.deselected} if self.scope.collection_known else None
        pictures = self.own_pictures().to_json()  # a worker's models are still built: the last moment to draw them
        backend = self.backend.worker_payload()
        return json.dumps({"cache": self.cache_counts(), "collection": collection, "backend": backend, "pictures": pictures})

    def absorb(self, payload: str) -> None:
        """Merge a finished worker's payload into this (controller) session."""
        data = json.loads(payload)
        for name, count in data["cache"].items():
            self.absorbed_counts[name] = self.absorbed_counts.get(name, 0) + count
        if data.get("collection") is not None and not self.scope.collection_known:
            # Every worker collects and selects the same cells: the first to report speaks for all.
            self.scope.deselected = list(data["collection"]["deselected"])
            self.scope.collection_known = True
        if data.get("backend") is not None:
            self.backend.absorb_worker_payload(data["backend"])
        if data.get("pictures") is not None:
            self.pictures.absorb(RunPictures.from_json(data["pictures"]))

    # -- what the run covered ----------------------------------------------------------------

    def done(self) -> set[str]:
        """Node ids of every item with a result or an error."""
        return {r.nodeid for r in self.records} | set(self.errors) | set(self.model_outcomes)

    def fail_without_result(self, nodeid: str, message: str) -> None:
        """A selected cell whose test failed with neither its result nor its error (its xdist worker crashed)."""
        if nodeid in self.scope.expected and nodeid not in self.done():
            self.errors[nodeid] = message

    def run_coverage(self) -> RunCoverage:
        """Which of the collected cells this run evaluated, and why it left the others out."""
        report_md = report_file(self.options.report_path, ".md")
        full = Path(self.shown(report_md)) if report_md.exists() else None
        return self.scope.coverage(len({r.nodeid for r in self.records}), len(self.errors), self.done(), full)

    @property
    def report_base(self) -> Path:
        """Where this run's report goes: the report path, or beside it for a partial run."""
        partial = self.coverage is not None and self.coverage.partial
        return partial_report_path(self.options.report_path) if partial else self.options.report_path

    def cache_counts(self) -> dict[str, int]:
        """This process's clean-cache counts and model builds, with those its workers reported."""
        own = self.runner.cache_counts()
        return {name: own.get(name, 0) + self.absorbed_counts.get(name, 0) for name in {*own, *self.absorbed_counts}}

    def cache_summary(self) -> list[str]:
        """Lines on clean results and corrupted cells computed versus read from the cache, if there is a cache."""
        if self.options.cache_dir is None:
            return []
        counts = self.cache_counts()
        line = f"clean results: {counts['misses']} computed, {counts['hits']} from cache ({self.options.cache_dir})"
        if counts.get("uncached"):
            line += f"; {counts['uncached']} not cacheable (what the model computes cannot be identified; see the warnings)"
        if counts.get("builds"):
            line += f"; {plural(counts['builds'], 'model build')}"
        cells = f"corrupted cells: {counts.get('cell_misses', 0)} measured, {counts.get('cell_hits', 0)} from cache"
        return [line, cells, *self.cache_notes]

    def prune_cache(self) -> None:
        """Bring the result cache within its bound (``--segrobust-cache-size``) at the end of a run,
        removing the entries used longest ago first; the terminal says what went."""
        folder, size = self.options.cache_dir, self.options.cache_size_mb
        if folder is None or size is None or not folder.is_dir():
            return
        pruned = prune(folder, size * MEBIBYTE)
        if pruned.removed:
            self.cache_notes.append(
                f"result cache: removed {plural(pruned.removed, 'entry', 'entries')} used longest ago "
                f"({pruned.freed / MEBIBYTE:.1f} MiB) to stay within {size} MiB (--segrobust-cache-size)"
            )

    def last_verdict(self) -> RunVerdict | None:
        """The verdict the run's last line shows: the report's, and where the report could not be
        built (:attr:`problems` says why), the same verdict taken from the outcomes. ``None`` for a
        run that evaluated nothing (a shard's line is its :attr:`conclusion`'s)."""
        if self.report is not None:
            return self.report.verdict
        return self._outcomes_verdict(self.coverage)

    def _outcomes_verdict(self, coverage: RunCoverage | None) -> RunVerdict | None:
        """The run's verdict taken from its outcomes and ``coverage`` (its cells not run);
        ``None`` for a run that evaluated nothing."""
        if not (self.records or self.errors or self.model_outcomes):
            return None
        missing = list(coverage.not_run) if coverage is not None else []
        statuses = [o.status for o in self.ordered_model_outcomes() if o.nodeid not in self.errors]
        return run_verdict(self.ordered_records(), self.errors, missing, statuses)

    # -- the end of the run -------------------------------------------------------------

    def finish(self) -> None:
        """Write the pending baselines, then the report; the controller's job alone. A backend
        that writes the run's output in place of them (a shard's) does that instead
        (:meth:`~pytest_segrobust.backends.Backend.conclude`), and leaves both to a later command.

        The baselines come first: what the run measured is kept even when the report's
        pictures hang or are interrupted. Each step runs whatever happened to the others: an
        unwritable baseline folder or a bad report path costs only itself, is named in
        :attr:`problems`, and fails the run; a figure or a model's worst images that cannot be
        made is a warning of the report (:attr:`warnings`).
        """
        self.problems = []
        self.warnings = []
        self.conclusion = self.backend.conclude(self.results)
        if self.conclusion is not None:
            self.written += self.conclusion.written
            self.problems += self.conclusion.problems
            return
        folders = (self.options.report_path.parent, self.options.baselines_dir, self.options.cache_dir, self.options.statistics_dir)
        for folder in folders:
            if folder is not None:  # what writes killed in an earlier run left behind
                remove_stale_temporaries(folder)
        self.coverage = self.run_coverage()
        writer = BaselineWriter(
            self.suite_order,
            lambda suite: self.gatekeeper.baseline_file(suite).path,
            self.gatekeeper.statistics_store,
            self.shown,
            update=self.options.update_baselines,
            prune=self.options.prune,
        )
        writes = writer.write(self.pending, self.records, self.model_changes)
        self._not_written(writes.unwritten(self.pending))
        self.pending.clear()
        self.written += writes.written
        self.baseline_summary = writes.summary
        self.problems += writes.problems
        # A run that evaluated nothing (--co, every cell deselected) leaves every report as it was;
        # a partial one writes beside the full report (report_base).
        if self.records or self.errors or self.model_outcomes:
            records = self.ordered_records()
            built = self.reporter.build(
                records, self.suite_order, self.coverage, self.errors, self.ordered_model_outcomes(), self.resampled
            )
            if built is not None:
                self.reporter.write(
                    self.suite_order,
                    self.report_base,
                    self.options.report_html,
                    self.run_pictures(),
                    self.options.device,
                    figures=self.options.figures,
                )
            self.written += self.reporter.written
            self.problems += self.reporter.problems
            self.warnings = list(self.reporter.warnings)

    def results(self) -> RunResults:
        """What the run ends with, for a backend that writes it in place of the report."""
        coverage = self.run_coverage()
        nodeids = [r.nodeid for r in self.ordered_records()] + list(self.model_outcomes)
        outcomes = [self.outcome(nodeid) for nodeid in dict.fromkeys(nodeids)]
        scope = self.scope
        return RunResults(
            outcomes=[outcome for outcome in outcomes if outcome is not None],
            errors=dict(self.errors),
            verdict=self._outcomes_verdict(coverage),
            expected=list(scope.expected),
            deselected=list(scope.deselected),
            not_run=dict(coverage.not_run),
            selection=list(scope.selection),
            narrowed_to=list(scope.narrowed_to),
            collection_known=scope.collection_known,
            cache_counts=self.cache_counts(),
            pictures=self.run_pictures(),
        )

    def _not_written(self, unwritten: dict[CellKey, str]) -> None:
        """A cell whose baseline write was refused is an error of the run, not a cell "written to
        the baseline": its status and the report say so, and the verdict fails."""
        for record in self.records:
            why = unwritten.get(CellKey(record.suite, record.model, record.corruption, record.severity, record.split))
            if why is not None:
                record.status = Status.ERROR
                self.errors[record.nodeid] = f"its baseline was not written: {why}"

    def run_pictures(self) -> RunPictures:
        """The report's pictures: this process's own (:meth:`own_pictures`) with the others'."""
        self.pictures.absorb(self.own_pictures())
        return self.pictures

    def own_pictures(self) -> RunPictures:
        """The report's pictures of what this process measured, made now (at most once).

        They run the models again, and a model can hang: a run interrupted (Ctrl-C) makes none,
        and Ctrl-C while they are made stops them, so that the run ends at once, its baselines
        written; the report says they were left out.
        """
        if not self.interrupted:
            try:
                return self.runner.pictures()
            except KeyboardInterrupt:
                self.interrupted = True
        self.reporter.warnings.append("pictures left out: the run was interrupted")
        return RunPictures()

    # -- order ---------------------------------------------------------------------------------

    def ordered_suites(self) -> list[str]:
        """The suites' names in the order the run collected their cells (:func:`~pytest_segrobust.run.ordering.ordered_suites`)."""
        return ordered_suites(self.suite_order, self.scope.expected, self.rootpath)

    def ordered_model_outcomes(self) -> list[ModelOutcome]:
        """Model outcomes in suite and model order, independent of scheduling."""
        return ordered_model_outcomes(self.model_outcomes.values(), self.suite_order, self.ordered_suites())

    def ordered_records(self) -> list[CellRecord]:
        """Records in suite order (model, corruption, severity), independent of scheduling."""
        return ordered_records(self.records, self.suite_order, self.ordered_suites())


def _requirement_properties(checks: list[dict[str, Any]]) -> list[tuple[str, object]]:
    """``requirement <rule>``: ``met``, ``unmet`` or ``undecided``, with the value: one JUnit property per requirement."""
    words = {"pass": "met", "fail": "unmet", "inconclusive": "undecided"}
    return [
        (f"requirement {c['rule']}", f"{words[c['outcome']]}: {c['number']} {c['observed']:.6g} (threshold {c['threshold']:.6g})")
        for c in checks
    ]


def _outcome_properties(outcome: ModelOutcome) -> list[tuple[str, object]]:
    """A model's aggregates item as JUnit properties: its status, each aggregate margin and requirement."""
    properties: list[tuple[str, object]] = [("status", outcome.status)]
    for check in outcome.checks:
        properties += [(check.metric, check.observed), (f"baseline {check.metric}", check.baseline)]
        properties += [(f"margin {check.metric}", check.margin)]
    return properties + _requirement_properties([c.to_json() for c in outcome.requirements])
