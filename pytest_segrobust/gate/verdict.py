"""The verdict on one cell: a pure function of what was observed and what is stored.

:func:`judge` knows nothing of pytest, files or processes: the session looks the stored
numbers up, asks for the verdict, and carries it out (queues the baseline write, raises the
failure). It reads two values: what this run observed of the cell (:class:`Observation`) and
what the cell is judged against (:class:`Criteria`: its baseline, the suite's rules for it, the
run's mode). Every rule of the gate lives here:

* a NaN or infinite observation is never compared and never stored;
* a baseline that cannot be used (broken, recorded under other conditions) fails the cell,
  unless the run updates baselines, which then rewrites the file;
* without a stored value the cell fails and its numbers are recorded for the next run;
* a stored cell without a number the suite gates (removed by hand) fails, naming it; an
  update rewrites the cell;
* otherwise each toleranced number is checked, and any regression fails the cell;
* a suite with a statistical gate (``gate:`` in the suite) decides each number by its paired
  interval against the margin instead (:func:`paired_checks`): failed when the drop is
  significantly beyond the margin, passed when significantly within, and inconclusive
  otherwise, which the suite's policy turns into a failure, a warning or a pass;
* an update compares too, for the record, but accepts whatever it finds;
* a suite's requirements (``require:``, :mod:`pytest_segrobust.suite.requirements`) are absolute
  thresholds, decided whatever the baseline says: an unmet one fails the cell (an update's
  too, which still writes); an undecided one follows the ``inconclusive`` policy; a cell
  without a baseline whose requirements are all met passes (``recorded``): a first release
  is gated by its requirements;
* a model that differs from the one the baseline was made with is gated all the same (that
  change is what the gate measures); a failure says so.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from pytest_segrobust.core.statistics import (
    Change,
    Outcome,
    RunScores,
    non_inferiority,
    paired_change,
    paired_gamma_r_change,
)
from pytest_segrobust.core.wording import decimals
from pytest_segrobust.metrics import METRICS
from pytest_segrobust.store.baselines import CellKey, key_path, update_command
from pytest_segrobust.store.decisions import PairedCheck, RequirementCheck
from pytest_segrobust.store.records import Status

if TYPE_CHECKING:
    from pytest_segrobust.suite.schema import Tolerance


class Check(Protocol):
    """One gated number against its baseline: what a verdict, its messages and the report read.

    :class:`ToleranceCheck` compares point values, :class:`PairedCheck` decides by a paired
    interval; the gate and its messages know nothing else of either.
    """

    @property
    def metric(self) -> str:
        """The number (``score``, ``gamma_r``, ``<metric>.score``...)."""

    @property
    def observed(self) -> float: ...

    @property
    def baseline(self) -> float: ...

    @property
    def higher_is_better(self) -> bool: ...

    @property
    def outcome(self) -> str:
        """An :class:`~pytest_segrobust.core.statistics.Outcome` value: ``pass``, ``fail`` or ``inconclusive``."""

    @property
    def delta(self) -> float:
        """``observed - baseline``."""

    @property
    def regressed(self) -> bool:
        """The number fails the cell (``outcome`` is ``fail``)."""

    @property
    def improved(self) -> bool:
        """The number is better than its baseline by more than the gate allows it to fall."""

    def describe(self) -> str:
        """The check as a failure or a warning shows it: one line, indented, without a newline at the end."""


@dataclass(frozen=True)
class Verdict:
    """The gate's decision on one cell.

    Attributes:
        status: What became of the cell.
        checks: Each gated number against its baseline (:class:`Check`: by tolerance, or by
            paired interval under a statistical gate; empty when none was compared; an update
            compares for the record, and passes whatever they say).
        write: Store the observed numbers as the cell's baseline at the end of the run.
        replace_all: Rewrite the baseline file from scratch (the stored one is unusable).
        message: Why the cell fails; ``None`` when it passes.
        warning: Why a passing cell deserves a look (an inconclusive cell under ``warn``).
    """

    status: Status
    checks: tuple[Check, ...] = ()
    write: bool = False
    replace_all: bool = False
    message: str | None = None
    warning: str | None = None

    @property
    def passed(self) -> bool:
        return self.message is None


@dataclass(frozen=True)
class ToleranceCheck:
    """One number's point value against its baseline, with the tolerance it may fall by.

    Attributes:
        metric: The number (``score``, ``gamma_r``, ``<metric>.score``...).
        observed, baseline: The number in this run and in the baseline.
        tolerance: How far it may fall (rise, for a number where lower is better).
        higher_is_better: The number regresses by falling (else by rising).
    """

    metric: str
    observed: float
    baseline: float
    tolerance: float
    higher_is_better: bool = True

    @property
    def delta(self) -> float:
        return self.observed - self.baseline

    @property
    def problem(self) -> str | None:
        """Why the comparison cannot be made: a NaN or infinite value on either side."""
        if not math.isfinite(self.observed):
            return f"observed {self.metric} is {self.observed}, not a finite number"
        if not math.isfinite(self.baseline):
            return f"stored {self.metric} is {self.baseline}, not a finite number"
        return None

    @property
    def outcome(self) -> str:
        # A point value is never undecided; a NaN compares false with everything: it must
        # fail, never pass as "not below". Falling by exactly the tolerance passes (0: unchanged).
        return Outcome.FAIL.value if self.problem is not None or self._gain < -self.tolerance else Outcome.PASS.value

    @property
    def regressed(self) -> bool:
        return self.outcome == Outcome.FAIL

    @property
    def improved(self) -> bool:
        return self.problem is None and self._gain > self.tolerance

    def describe(self) -> str:
        line = (
            f"  {self.metric}: observed {_number(self.observed)}, baseline {_number(self.baseline)}, "
            f"delta {_number(self.delta)}, tolerance {_number(self.tolerance)}"
        )
        return line if self.problem is None else f"{line}\n    ({self.problem})"

    @property
    def _gain(self) -> float:
        """How much better than its baseline the observation is (negative: worse)."""
        return self.delta if self.higher_is_better else -self.delta


def tolerance_checks(
    observed: Mapping[str, float],
    stored: Mapping[str, float],
    tolerances: Mapping[str, float],
    lower_is_better: Iterable[str] = (),
) -> list[ToleranceCheck]:
    """Checks of every toleranced number present in both ``observed`` and ``stored``.

    ``lower_is_better`` names the numbers that regress by rising (the score of an error metric).
    """
    falling = set(lower_is_better)
    return [
        ToleranceCheck(name, float(observed[name]), float(stored[name]), tolerance, higher_is_better=name not in falling)
        for name, tolerance in tolerances.items()
        if name in observed and name in stored
    ]


@dataclass(frozen=True)
class GatedNumber:
    """One gated number of a cell, in this run and in the baseline: what a check is made of,
    before it is decided.

    Attributes:
        metric: The number (``score``, ``gamma_r``, ``<metric>.score``...).
        observed, baseline: The number in this run and in the baseline.
        higher_is_better: The number regresses by falling (else by rising: an error metric's score).
    """

    metric: str
    observed: float
    baseline: float
    higher_is_better: bool = True


def decide_paired(
    number: GatedNumber, change: Change, margin: float, confidence: float, unit: str = "image"
) -> PairedCheck:
    """Non-inferiority of ``change`` (candidate - baseline) at ``margin``, from its interval at
    ``confidence``; a number where lower is better regresses by rising, so its gain is the
    change reversed. ``unit`` names what the change's ``images`` count."""
    low, high = change.interval(confidence)
    gain = change if number.higher_is_better else Change(-change.observed, -change.resampled, change.images)
    outcome = non_inferiority(*gain.interval(confidence), margin)
    return PairedCheck(
        number.metric,
        float(number.observed),
        float(number.baseline),
        margin,
        low,
        high,
        outcome.value,
        change.images,
        gain.images_to_decide(margin, confidence) if outcome is Outcome.INCONCLUSIVE else None,
        change.detectable(confidence) if change.standard_error > 0 else None,
        number.higher_is_better,
        unit,
    )


def allowances(
    allowed: Tolerance, metrics: Sequence[str], *, corrupted: bool
) -> tuple[dict[str, float], tuple[str, ...]]:
    """How far each number of a cell may move the wrong way, and the numbers that regress by rising.

    Args:
        allowed: The suite's ``tolerance`` (or its statistical gate's ``margin``).
        metrics: The suite's metrics, the headline first.
        corrupted: The cell is corrupted (its gamma_r is gated too).

    Returns:
        Per number (``score``, ``gamma_r``, ``<metric>.score``...), its tolerance or margin in
        its metric's units (:meth:`~pytest_segrobust.suite.schema.Tolerance.score_of`); and the scores
        of the metrics where lower is better, read from each metric (gamma_r always rises
        with robustness).
    """
    numbers: dict[str, float] = {}
    rising: list[str] = []
    for index, name in enumerate(metrics):
        prefix = "" if index == 0 else f"{name}."
        numbers[f"{prefix}score"] = allowed.score_of(name)
        if corrupted:
            numbers[f"{prefix}gamma_r"] = allowed.gamma_r_of(name)
        if not METRICS.get(name).higher_is_better:
            rising.append(f"{prefix}score")
    return numbers, tuple(rising)


@dataclass(frozen=True)
class PairedRuns:
    """One metric's four runs that its paired checks compare, each scored as it is and in every
    resample (the same resamples for all four).

    Attributes:
        baseline_clean, baseline_corrupted: The baseline's clean and corrupted runs.
        clean, corrupted: This run's clean and corrupted runs.
        worst: The worst end of the metric's scale, which gamma_r measures from (0: a
            percentage where higher is better).
        unit: What the runs' bootstrap drew (the task's resampling unit: ``image``, ``clip``).
    """

    baseline_clean: RunScores
    baseline_corrupted: RunScores
    clean: RunScores
    corrupted: RunScores
    worst: float = 0.0
    unit: str = "image"


def paired_checks(
    observed: Mapping[str, float],
    stored: Mapping[str, float],
    runs: Mapping[str, PairedRuns],
    margins: Mapping[str, float],
    confidence: float,
    *,
    lower_is_better: Iterable[str] = (),
) -> tuple[PairedCheck, ...]:
    """The paired check of every margined number.

    Args:
        observed, stored: This run's and the baseline's numbers (``score``, ``gamma_r``, and
            ``<metric>.``-prefixed ones for further metrics).
        runs: Per metric prefix (``""`` for the headline, ``"<metric>."`` otherwise): the
            metric's runs in the baseline and in this run, and the worst end of its scale.
        margins: Per number, how far it may fall; numbers without one are not checked.
        confidence: The level of each number's interval (already split over the family).
        lower_is_better: The numbers that regress by rising (the score of an error metric).

    Raises:
        ValueError: for runs of different image or resample counts (they cannot be paired).
    """
    rising = set(lower_is_better)
    checks = []
    for prefix, run in runs.items():
        for number in ("score", "gamma_r"):
            name = f"{prefix}{number}"
            if name not in margins or name not in observed or name not in stored:
                continue
            change: Change = (
                paired_change(run.baseline_corrupted, run.corrupted)
                if number == "score"
                else paired_gamma_r_change(
                    run.baseline_clean, run.baseline_corrupted, run.clean, run.corrupted, run.worst
                )
            )
            gated = GatedNumber(name, observed[name], stored[name], higher_is_better=name not in rising)
            checks.append(decide_paired(gated, change, margins[name], confidence, run.unit))
    return tuple(checks)


@dataclass(frozen=True)
class Observation:
    """What this run measured of one cell, and how messages name the cell.

    Attributes:
        key: The cell.
        numbers: This run's numbers (``score``, and ``gamma_r``/``gamma_a`` when corrupted;
            ``<metric>.``-prefixed ones for further metrics).
        clean_score: The model's clean score, to explain an undefined gamma_r.
        metric_label: How the score is named in messages (mIoU, mask AP).
        nodeid: The cell's pytest node id, which messages name it by (it pastes back into a
            command line), and the narrowest command to update it selects; without one, the
            cell is named by its key and the command updates every suite.
    """

    key: CellKey
    numbers: Mapping[str, float]
    clean_score: float | None = None
    metric_label: str = "score"
    nodeid: str | None = None


@dataclass(frozen=True)
class Criteria:
    """What a cell is judged against: its baseline, the suite's rules for it, and what the run
    does with the verdict.

    Attributes:
        stored: The baseline's numbers of the cell, ``None`` if it has none.
        tolerances: How far below its baseline each checked number may fall.
        lower_is_better: The observed numbers that regress by rising (an error metric's score);
            every other number regresses by falling.
        baseline_file: The baseline file, as shown in messages.
        baseline_problem: Why the baseline file cannot be used, if it cannot.
        model_change: How the model differs from the one the baseline was made with, if it
            does; named in a regression's message, never a reason to fail.
        paired: The statistical gate's checks (:func:`paired_checks`); when given, they
            decide instead of ``tolerances``.
        missing_statistics: Why the statistical gate cannot pair this cell with its stored
            value (the baseline has no per-image statistics for it): the cell fails.
        inconclusive: The suite's policy for an inconclusive number: ``fail``, ``warn`` or ``pass``.
        requirements: The suite's requirements decided for this cell
            (:func:`pytest_segrobust.suite.requirements.decide`); ``None`` for a suite without
            ``require:``, whose cells without a baseline fail as new (with it, they are recorded).
        update: The run accepts the current numbers as the new baselines. It is off unless
            asked for: a caller that forgets it gets a comparison, never a rewritten baseline.
        sharded: The run is a shard of a run, whose baselines ``segrobust merge`` writes.
    """

    stored: Mapping[str, float] | None
    tolerances: Mapping[str, float]
    lower_is_better: tuple[str, ...] = ()
    baseline_file: str = ""
    baseline_problem: str | None = None
    model_change: str | None = None
    paired: tuple[PairedCheck, ...] | None = None
    missing_statistics: str | None = None
    inconclusive: str = "fail"
    requirements: tuple[RequirementCheck, ...] | None = None
    update: bool = False
    sharded: bool = False


def judge(observation: Observation, criteria: Criteria) -> Verdict:
    """Decide one cell: what this run observed of it against what it is judged by."""
    nodeid = observation.nodeid
    cell = _Cell(observation.key.label if nodeid is None else nodeid, update_command(nodeid))
    verdict = _against_baseline(observation, criteria, cell)
    return with_requirements(verdict, cell.name, criteria.requirements, criteria.inconclusive)


def with_requirements(
    verdict: Verdict, label: str, requirements: Sequence[RequirementCheck] | None, inconclusive: str
) -> Verdict:
    """``verdict`` (against the baseline) with the requirements' outcomes added.

    An unmet requirement fails whatever the baseline said (an update still writes); an
    undecided one fails, warns or passes by the ``inconclusive`` policy; a cell that only
    lacked a baseline passes as ``recorded`` when every requirement is met.
    """
    if requirements is None or verdict.status is Status.ERROR:
        return verdict
    unmet = [c for c in requirements if c.outcome == "fail"]
    undecided = [c for c in requirements if c.outcome == "inconclusive"]
    lines: list[str] = []
    if unmet:
        lines += [f"{label}: {len(unmet)} requirement{'s' if len(unmet) > 1 else ''} not met:"]
        lines += [f"  {c.describe()}" for c in unmet]
    undecided_text = None
    if undecided:
        undecided_text = "\n".join(
            [
                (
                    f"{label}: {len(undecided)} requirement{'s' if len(undecided) > 1 else ''} undecided "
                    f"(suite policy: inconclusive: {inconclusive}); more images would decide:"
                ),
                *(f"  {c.describe()}" for c in undecided),
            ]
        )
        if inconclusive == "fail":
            lines.append(undecided_text)
    first = verdict.status is Status.NEW
    if first:
        if not lines:
            warning = undecided_text if undecided and inconclusive == "warn" else verdict.warning
            return Verdict(
                Status.RECORDED, verdict.checks, write=verdict.write, replace_all=verdict.replace_all, warning=warning
            )
        lines.append(f"  (no baseline yet: the numbers are recorded all the same; {verdict.message})")
    if not lines:
        warning = "\n".join(w for w in (verdict.warning, undecided_text if inconclusive == "warn" else None) if w)
        return Verdict(
            verdict.status, verdict.checks, verdict.write, verdict.replace_all, verdict.message, warning or None
        )
    failed_before = verdict.message is not None and not first
    status = verdict.status if failed_before else Status.UNMET if unmet else Status.INCONCLUSIVE
    message = "\n".join([*((verdict.message,) if failed_before else ()), *lines])
    return Verdict(status, verdict.checks, verdict.write, verdict.replace_all, message, verdict.warning)


@dataclass(frozen=True)
class _Cell:
    """How messages name a cell, and the command that updates its baseline."""

    name: str
    update: str


def _against_baseline(observation: Observation, criteria: Criteria, cell: _Cell) -> Verdict:
    observed, stored, tolerances = observation.numbers, criteria.stored, criteria.tolerances
    baseline_file = criteria.baseline_file
    invalid = _non_finite(observed, observation.metric_label, observation.clean_score)
    if invalid:
        return Verdict(
            Status.ERROR,
            message=f"{cell.name}: {invalid}; the cell has no valid result, and nothing is written to the baseline",
        )
    if criteria.baseline_problem is not None:
        if criteria.update:
            return Verdict(Status.UPDATED, write=True, replace_all=True)
        return Verdict(Status.ERROR, message=criteria.baseline_problem)
    if criteria.update:
        checks = (
            () if stored is None else tuple(tolerance_checks(observed, stored, tolerances, criteria.lower_is_better))
        )
        return Verdict(Status.UPDATED, checks, write=True)
    if stored is None:
        written = "`segrobust merge` writes it" if criteria.sharded else "it is written at the end of the run"
        return Verdict(
            Status.NEW,
            write=True,
            message=f"{cell.name}: no baseline yet in {baseline_file}; recorded {_format(observed)}; {written}: re-run to compare",
        )
    unstored = [name for name in tolerances if name in observed and name not in stored]
    if unstored:
        at = "models." + key_path(observation.key).replace("::", ".")
        return Verdict(
            Status.ERROR,
            message=(
                f"{cell.name}: {baseline_file}: {at} has no {' or '.join(unstored)}, which the suite gates, so the "
                f"cell cannot be compared (was the file edited by hand?); restore it, or rewrite the cell with "
                f"{cell.update}"
            ),
        )
    if criteria.missing_statistics is not None:
        return Verdict(Status.ERROR, message=f"{cell.name}: {criteria.missing_statistics}")
    checks: tuple[Check, ...] = (
        tuple(criteria.paired)
        if criteria.paired is not None
        else tuple(tolerance_checks(observed, stored, tolerances, criteria.lower_is_better))
    )
    regressions = [c for c in checks if c.regressed]
    if regressions:
        message = _regression_message(cell, regressions, baseline_file, criteria.model_change)
        return Verdict(Status.REGRESSED, checks, message=message)
    undecided = [c for c in checks if c.outcome == Outcome.INCONCLUSIVE]
    if undecided:
        inconclusive = criteria.inconclusive
        why = _inconclusive_message(cell.name, undecided, inconclusive)
        return Verdict(
            Status.INCONCLUSIVE if inconclusive == "fail" else Status.INCONCLUSIVE_ALLOWED,
            checks,
            message=why if inconclusive == "fail" else None,
            warning=why if inconclusive == "warn" else None,
        )
    return Verdict(_passing_status(checks), checks)


def _passing_status(checks: Sequence[Check]) -> Status:
    """How a cell that passes ended: improved only where a number got better and the corrupted
    score did not fall; a gamma_r that rose while the score fell rose only as the clean score fell
    further, which is no improvement."""
    if not any(c.improved for c in checks):
        return Status.PASSED
    score_fell = any(
        c.metric.rsplit(".", 1)[-1] == "score" and (c.delta < 0 if c.higher_is_better else c.delta > 0) for c in checks
    )
    return Status.ROSE_AS_CLEAN_FELL if score_fell else Status.IMPROVED


def _non_finite(observed: Mapping[str, float], label: str, clean_score: float | None) -> str | None:
    """Why the observed numbers cannot be gated, if any of them is NaN or infinite."""
    bad = {name: value for name, value in observed.items() if not math.isfinite(value)}
    if not bad:
        return None
    shown = ", ".join(f"{f'score ({label})' if name == 'score' else name} is {value}" for name, value in bad.items())
    if "score" not in bad and clean_score == 0:
        shown += f" (the clean {label} is 0, so relative robustness is undefined)"
    elif "score" not in bad and clean_score is not None and not math.isfinite(clean_score):
        shown += f" (the clean {label} is {clean_score})"
    return shown


def _format(values: Mapping[str, float]) -> str:
    return ", ".join(f"{k}={_number(v)}" for k, v in values.items())


def _number(value: float) -> str:
    return decimals(value, 4)


def _inconclusive_message(name: str, undecided: Sequence[Check], policy: str) -> str:
    return "\n".join([f"{name} is inconclusive (suite policy: inconclusive: {policy}):", *(c.describe() for c in undecided)])


def _regression_message(cell: _Cell, regressions: Sequence[Check], baseline_file: str, model_change: str | None) -> str:
    lines = [f"{cell.name} regressed:", *(c.describe() for c in regressions)]
    lines.append(f"  baseline file: {baseline_file}")
    if model_change is not None:
        lines.append(f"  {model_change}")
    lines.append(f"  if the new numbers are intended: {cell.update}")
    return "\n".join(lines)
