"""The gate around a measured cell: its baseline, its paired evidence, its requirements, its verdict.

:func:`pytest_segrobust.gate.verdict.judge` is the verdict as a pure function; the :class:`Gatekeeper`
gathers what it needs for one cell (the stored baseline under the suite's conditions, the
statistical gate's paired checks, the suite's requirements, how the model differs from the
baseline's) and turns the verdict into the cell's status and the baseline entry to write.
A model's aggregates item is decided here too, from its cells' evidence
(:func:`pytest_segrobust.gate.release.judge_model`).

It reads the baseline files and the statistics files; it writes nothing (the controller does,
:mod:`pytest_segrobust.run.baseline_writes`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_segrobust.core.errors import BaselineError, SegRobustError, SuiteError
from pytest_segrobust.core.files import WriteError
from pytest_segrobust.engine.evaluation import CellResult
from pytest_segrobust.gate.evidence import BaselineFiles, Evidence, pack_statistics
from pytest_segrobust.gate.outcomes import ModelChange, PendingWrite
from pytest_segrobust.gate.release import CellEvidence, cell_checks, judge_model
from pytest_segrobust.gate.verdict import Criteria, Observation, allowances, judge
from pytest_segrobust.store.baselines import BaselineFile, CellKey
from pytest_segrobust.store.decisions import ModelOutcome, RequirementCheck, check_json
from pytest_segrobust.store.records import CellRecord
from pytest_segrobust.suite.schema import Suite

if TYPE_CHECKING:
    from pytest_segrobust.engine.runner import CellRunner
    from pytest_segrobust.runtime.options import Options


class CellFailure(AssertionError):
    """A cell fell below its baseline or has none yet; the message says what to do."""


@dataclass(frozen=True)
class Gated:
    """What the gate decided of a cell: pass or not, the message of a failure, a warning, the entry to write."""

    passed: bool
    message: str
    warning: str | None
    write: PendingWrite | None


class Gatekeeper:
    """Gates the cells of one process against their baselines.

    Args:
        options: The run's settings (update mode, baseline and statistics folders).
        runner: The process's cell runner: the conditions and model fingerprints a cell is compared under.
        shown: How messages show a path (relative to the rootdir).
    """

    def __init__(self, options: Options, runner: CellRunner, shown: Callable[[Path], str]) -> None:
        self.options = options
        self.runner = runner
        self.shown = shown
        self.evidence = Evidence()
        # Node id -> the headline score of each bootstrap resample (statistical gates): the aggregates' intervals.
        self.resampled: dict[str, dict[str, Any]] = {}
        # Node id -> what a model's aggregates need of the cell (this process's cells only).
        self.cell_evidence: dict[str, CellEvidence] = {}
        # (suite, model) -> how the model differs from the one its baseline was made with.
        self.model_changes: dict[tuple[str, str], ModelChange] = {}
        self._baselines: dict[Path, BaselineFile] = {}

    def baseline_file(self, suite: Suite) -> BaselineFile:
        path = self.options.baselines_dir / f"{suite.name}.json"
        if path not in self._baselines:
            self._baselines[path] = BaselineFile(path)
        return self._baselines[path]

    def statistics_store(self, suite: Suite) -> Path | None:
        """The folder of the suite's statistics file when it is not beside its baseline JSON
        (``gate: {statistics: cache}``: pytest's cache folder of this machine).

        Raises:
            WriteError: for statistics kept in the cache by a run without one.
        """
        if suite.gate is None or suite.gate.statistics != "cache":
            return None
        if self.options.statistics_dir is None:
            raise WriteError(
                f"{suite.path}: gate.statistics: cache keeps the baseline's per-image statistics in pytest's cache "
                "folder, which this run has not (-p no:cacheprovider); run with pytest's cache, "
                "or set gate.statistics: baselines to keep them beside the baseline"
            )
        return self.options.statistics_dir

    # -- a cell ---------------------------------------------------------------------------------

    def gate(
        self,
        suite: Suite,
        key: CellKey,
        observed: dict[str, float],
        record: CellRecord,
        result: CellResult,
        *,
        sharded: bool,
    ) -> Gated:
        """Decide the cell: sets the record's status, baseline, checks and requirements."""
        __tracebackhide__ = True
        baseline = self.baseline_file(suite)
        try:
            stored, problem = baseline.lookup(key, self.runner.conditions(suite)), None
        except BaselineError as exc:
            stored, problem = None, str(exc)
        change = None if problem is not None else self._model_change(suite, key.model, baseline)
        observation = Observation(
            key, observed, record.clean_score, self.runner.bench.plan(suite).headline.label, record.nodeid
        )
        paired, missing = None, None
        if suite.gate is not None and stored is not None and problem is None and not self.options.update_baselines:
            try:
                store = self.statistics_store(suite)
            except WriteError as exc:
                paired, missing, resampled = None, str(exc), None
            else:
                files = BaselineFiles(baseline.path, self.shown(baseline.path), store)
                paired, missing, resampled = self.evidence.checks(suite, observation, stored, result, files)
            if resampled is not None:
                self.resampled[record.nodeid] = resampled
        tolerances, lower_is_better = allowances(suite.tolerance, suite.metrics, corrupted=key.severity > 0)
        requirements = self._requirement_checks(suite, key, record, observed, result)
        record.requirements = [c.to_json() for c in requirements or ()]
        if suite.gates_models:
            self.cell_evidence[record.nodeid] = self._cell_evidence(
                suite, key, record, result, self.resampled.get(record.nodeid)
            )
        criteria = Criteria(
            stored,
            tolerances,
            lower_is_better,
            baseline_file=self.shown(baseline.path),
            baseline_problem=problem,
            model_change=None if change is None else change.describe(),
            paired=paired,
            missing_statistics=missing,
            inconclusive=suite.gate.inconclusive if suite.gate is not None else "fail",
            requirements=None if requirements is None else tuple(requirements),
            update=self.options.update_baselines,
            sharded=sharded,
        )
        verdict = judge(observation, criteria)
        record.status = verdict.status
        if verdict.checks:  # an update's too: the report keeps the numbers it replaces
            record.baseline = dict(stored or {})
            record.checks = [check_json(c) for c in verdict.checks]
        write = None
        if verdict.write:
            write = PendingWrite(
                str(baseline.path),
                suite.name,
                self.runner.conditions(suite).to_json(),
                key,
                observed,
                verdict.replace_all,
                self.runner.model_fingerprint(suite, key.model),
                pack_statistics(suite, result),
                record.nodeid,
            )
        return Gated(verdict.passed, verdict.message, verdict.warning, write)

    def _requirement_checks(
        self, suite: Suite, key: CellKey, record: CellRecord, observed: dict[str, float], result: CellResult
    ) -> list[RequirementCheck] | None:
        """The suite's requirements of this cell, decided (by the bootstrap under a statistical gate);
        ``None`` for a suite without ``require:``."""
        if suite.requirements is None:
            return None
        runs = class_runs = None
        if suite.gate is not None:
            runs = self.evidence.own_runs(suite, key, result)
            class_runs = {name: self.evidence.class_runs(suite, key, result, name) for name in suite.metrics}
        try:
            return cell_checks(suite, record, observed, runs, class_runs)
        except ValueError as exc:
            raise SuiteError(f"{self.shown(suite.path)}: {exc}") from None

    def _model_change(self, suite: Suite, model: str, baseline: BaselineFile) -> ModelChange | None:
        """How ``model`` differs from the one its baseline was made with, if the file says and it does."""
        recorded = baseline.fingerprint(model)
        current = None if recorded is None else self.runner.model_fingerprint(suite, model)
        if current is None or current == recorded:
            return None
        change = ModelChange(self.shown(baseline.path), model, recorded, current)
        return self.model_changes.setdefault((suite.name, model), change)

    # -- a model's aggregates ---------------------------------------------------------------------

    def model_outcome(
        self,
        suite: Suite,
        model: str,
        nodeid: str,
        cells: list[tuple[CellKey, str]],
        errors: dict[str, str],
        measure: Callable[[CellKey, str], tuple[CellRecord, dict[str, float], CellResult]],
    ) -> ModelOutcome:
        """Decide a model's aggregates from its cells (node id by key).

        Cells this process gated are used as they are; the others (run by another worker,
        deselected, or not yet run) are measured with ``measure`` and never gated.

        Raises:
            SegRobustError: when a cell it needs has an error instead of a result.
        """
        by_split: dict[str | None, list[CellEvidence]] = {}
        reference: dict[str | None, list[CellRecord]] = {}
        measured = 0
        for key, cell_nodeid in cells:
            evidence = self.cell_evidence.get(cell_nodeid)
            if evidence is None:
                if cell_nodeid in errors:
                    raise SegRobustError(f"{nodeid}: cell {cell_nodeid} has no result ({errors[cell_nodeid]})")
                evidence = self._ungated_evidence(suite, key, *measure(key, cell_nodeid))
                measured += 1
            if key.model == model:
                by_split.setdefault(key.split, []).append(evidence)
            else:
                reference.setdefault(key.split, []).append(evidence.record)
        outcome = judge_model(suite, model, nodeid, by_split, reference, self.shown(suite.path))
        return replace(outcome, measured_here=measured)

    def _ungated_evidence(
        self, suite: Suite, key: CellKey, record: CellRecord, observed: dict[str, float], result: CellResult
    ) -> CellEvidence:
        """A cell measured for a model's aggregates alone: its numbers, resamples and pairing with the baseline."""
        baseline = self.baseline_file(suite)
        try:
            stored = baseline.lookup(key, self.runner.conditions(suite))
        except BaselineError:
            stored = None
        paired = None
        if suite.gate is not None and stored is not None and not self.options.update_baselines:
            record.baseline = dict(stored)
            files = BaselineFiles(baseline.path, self.shown(baseline.path), self.statistics_store(suite))
            _, _, paired = self.evidence.checks(suite, Observation(key, observed), stored, result, files)
        return self._cell_evidence(suite, key, record, result, paired)

    def _cell_evidence(
        self, suite: Suite, key: CellKey, record: CellRecord, result: CellResult, paired: dict[str, Any] | None
    ) -> CellEvidence:
        if suite.gate is None:
            return CellEvidence(record, paired=paired)
        clean, corrupted = self.evidence.own_runs(suite, key, result)[suite.metric]
        return CellEvidence(record, clean.resampled, corrupted.resampled, corrupted.images, paired)
