"""The decisions a run hands on, as values: one requirement decided for a cell or a model, a
requirement summarised over its decisions, one number's paired change decided against its
margin, and a model's ``aggregates`` item made of them.

The release criteria (:mod:`pytest_segrobust.suite.requirements`) and the gate
(:mod:`pytest_segrobust.gate`) make them; a cell's record and a model's aggregates item carry
them across processes as JSON; the report (:mod:`pytest_segrobust.report.model`) shows them.
Each has this one definition, so a field added to a decision is added to every reader of it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pytest_segrobust.core.formats import check_format, same_fields
from pytest_segrobust.core.statistics import Outcome
from pytest_segrobust.core.wording import shown_number
from pytest_segrobust.store.records import Status

# What a check's JSON carries besides its fields: computed from them, so that a reader of the
# JSON alone (a report, a JUnit property, a record's reader) need not know how.
CHECK_VERDICTS = ("regressed", "improved")

# Version of ModelOutcome.to_json; an outcome of another version is refused, never half-read.
MODEL_OUTCOME_FORMAT = 1


@dataclass(frozen=True)
class RequirementCheck:
    """One requirement decided for one cell, class or model.

    Attributes:
        subject: What was measured: a cell's node id, or ``<model> aggregates``.
        number: The number as shown (``gamma_r``, ``boundary_iou.gamma_r``, ``gamma_r of person``, ``mPC``).
        rule: The dotted path of the rule in the suite (``require.gamma_r``).
        line: The rule's line in the suite file.
        threshold: The threshold.
        at_least: ``True`` for a minimum, ``False`` for a maximum.
        observed: The number's value.
        low, high: Its one-sided confidence bounds (each at the suite's per-test level); ``None``
            for a point comparison.
        outcome: ``pass``, ``fail`` or ``inconclusive``.
        confirmable: The threshold the number would be confirmed against with 80% power
            (``observed -/+ (t + z_0.8) * se``); ``None`` for a point comparison.
        images: Images (clips, samples) the bootstrap resampled; 0 for a point comparison.
    """

    subject: str
    number: str
    rule: str
    line: int | None
    threshold: float
    at_least: bool
    observed: float
    low: float | None
    high: float | None
    outcome: str
    confirmable: float | None = None
    images: int = 0

    @property
    def basis(self) -> str:
        return "point" if self.low is None else "bootstrap"

    @property
    def relation(self) -> str:
        return "≥" if self.at_least else "≤"

    def describe(self) -> str:
        """``gamma_r 0.4120, bound [0.3900, 0.4300], requires ≥ 0.8000 (require.gamma_r)``."""
        interval = "" if self.low is None else f", bounds [{shown_number(self.low)}, {shown_number(self.high)}]"
        basis = "" if self.low is not None else " (point value: no statistical gate)"
        return (
            f"{self.number} {shown_number(self.observed)}{interval}, requires {self.relation} {shown_number(self.threshold)}{basis} "
            f"({self.rule}{f', line {self.line}' if self.line else ''})"
        )

    def to_json(self) -> dict[str, Any]:
        """The fields by name, in their order."""
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RequirementCheck:
        """The value of :meth:`to_json`'s output.

        Raises:
            ValueError: for other fields than this value's, naming those missing and unknown.
        """
        return cls(**same_fields(cls, data, "a requirement check"))


@dataclass(frozen=True)
class RuleSummary:
    """A requirement (one rule of the suite, for one number) over everything it was decided for.

    Attributes:
        rule, line, number, threshold, at_least: The requirement.
        outcome: ``fail`` if any decision failed, else ``inconclusive`` if any was undecided,
            else ``pass`` (from ``outcomes``, not given).
        outcomes: How many decisions ended ``pass``, ``fail``, ``inconclusive``.
        worst: The decision with the least room on the threshold's side (the furthest beyond it
            where any misses it): the one a reviewer of a failure looks at.
        confirmable: The strictest threshold every decision would confirm at 80% power (the
            loosest of theirs); ``None`` for point comparisons.
        closest: The decision nearest the threshold, on either side (``None``: the worst is).
    """

    rule: str
    line: int | None
    number: str
    threshold: float
    at_least: bool
    outcome: str = dataclasses.field(init=False)
    outcomes: Mapping[str, int]
    worst: RequirementCheck
    confirmable: float | None
    closest: RequirementCheck | None = None

    def __post_init__(self) -> None:
        counts = self.outcomes
        outcome = "fail" if counts.get("fail") else "inconclusive" if counts.get("inconclusive") else "pass"
        object.__setattr__(self, "outcome", outcome)

    @property
    def decisions(self) -> int:
        return sum(self.outcomes.values())

    @property
    def nearest(self) -> RequirementCheck:
        """The decision nearest the threshold (the worst, where no other was handed in)."""
        return self.worst if self.closest is None else self.closest

    def to_json(self) -> dict[str, Any]:
        """The fields by name, in their order (decisions as their own JSON; ``closest``: :attr:`nearest`)."""
        return dataclasses.asdict(self) | {"closest": self.nearest.to_json()}


@dataclass(frozen=True)
class PairedCheck:
    """One number's paired change from its baseline, with its interval, against the margin
    (decided by :func:`pytest_segrobust.gate.verdict.decide_paired`).

    Attributes:
        metric: The number (``score``, ``gamma_r``, ``<metric>.score``, an aggregate: ``mPC``...).
        observed, baseline: The number in this run and in the baseline.
        margin: How far it may truly fall (non-inferiority margin).
        low, high: The interval of the change (candidate - baseline) at the cell's level.
        outcome: ``fail`` (the whole interval below ``-margin``), ``pass`` (the whole
            interval above it) or ``inconclusive``; for a number where lower is better, the
            other way round about ``+margin``.
        images: Units paired: images, or clips (``unit``); several expressions of one image
            count once, since the bootstrap draws units.
        images_to_decide: About how many units would decide an inconclusive number, where the
            change lies far enough from the margin for the estimate to mean something.
        detectable: The smallest margin an unchanged model is confirmed within at 80% power,
            from the paired change's spread; ``None`` when the two runs agree on every image
            (an unchanged model), which shows no spread to judge the power by.
        higher_is_better: The number regresses by falling (else by rising: an error metric's score).
        unit: What ``images`` counts (the task's resampling unit: ``image``, ``clip``).
    """

    metric: str
    observed: float
    baseline: float
    margin: float
    low: float
    high: float
    outcome: str
    images: int
    images_to_decide: int | None = None
    detectable: float | None = None
    higher_is_better: bool = True
    unit: str = "image"

    @property
    def delta(self) -> float:
        return self.observed - self.baseline

    @property
    def regressed(self) -> bool:
        return self.outcome == Outcome.FAIL

    @property
    def improved(self) -> bool:
        return self.low > 0 if self.higher_is_better else self.high < 0

    @property
    def bound(self) -> float:
        """The change the margin allows: ``-margin``, or ``+margin`` where lower is better."""
        return -self.margin if self.higher_is_better else self.margin

    def describe(self) -> str:
        interval = f"interval [{shown_number(self.low)}, {shown_number(self.high)}]"
        if self.outcome == Outcome.INCONCLUSIVE:
            more = (
                f"about {self.images_to_decide} {self.unit}s (now {self.images}) would decide it"
                if self.images_to_decide is not None
                else f"the change lies within a standard error of the margin: more {self.unit}s may decide either way"
            )
            return f"  {self.metric}: change {shown_number(self.delta)}, {interval} straddles {shown_number(self.bound)}; {more}"
        where = "entirely below" if self.regressed is self.higher_is_better else "entirely above"
        return (
            f"  {self.metric}: observed {shown_number(self.observed)}, baseline {shown_number(self.baseline)}, "
            f"delta {shown_number(self.delta)}, {interval} {where} the margin {shown_number(self.bound)}"
        )

    def to_json(self) -> dict[str, Any]:
        """The fields by name, in their order, then :data:`CHECK_VERDICTS`."""
        return check_json(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PairedCheck:
        """The value of :meth:`to_json`'s output.

        Raises:
            ValueError: for other fields than this value's (and its verdicts), naming those missing and unknown.
        """
        return cls(**same_fields(cls, data, "a paired check", derived=CHECK_VERDICTS))


def check_json(check: Any) -> dict[str, Any]:
    """A decided check's JSON (a :class:`PairedCheck`, or the gate's tolerance check): its fields
    by name, in their order, then whether it regressed and whether it improved."""
    return dataclasses.asdict(check) | {verdict: getattr(check, verdict) for verdict in CHECK_VERDICTS}


@dataclass(frozen=True)
class ModelOutcome:
    """A model's ``aggregates`` item as the gate decided it
    (:func:`pytest_segrobust.gate.release.judge_model`): its aggregate requirements and margins.

    Attributes:
        nodeid: The item's node id.
        suite, model: Whose aggregates.
        status: A :class:`~pytest_segrobust.store.records.Status` value.
        requirements: Every aggregate requirement decided.
        checks: Every aggregate margin decided.
        notes: What was not decided, and why (no baseline to pair with, say).
        message: Why the item failed; ``None`` when it passed.
        measured_here: Cells the item measured itself (they had not run in its process).
    """

    nodeid: str
    suite: str
    model: str
    status: str
    requirements: tuple[RequirementCheck, ...] = ()
    checks: tuple[PairedCheck, ...] = ()
    notes: tuple[str, ...] = ()
    message: str | None = None
    measured_here: int = 0

    @property
    def passed(self) -> bool:
        return self.message is None

    def to_json(self) -> dict[str, Any]:
        """The format version, then the fields by name, in their order."""
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        return {
            "format": MODEL_OUTCOME_FORMAT,
            **fields,
            "requirements": [c.to_json() for c in self.requirements],
            "checks": [c.to_json() for c in self.checks],
            "notes": list(self.notes),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ModelOutcome:
        """The value of :meth:`to_json`'s output.

        Raises:
            ValueError: for another format, an unknown status, or other fields than this value's
                (its requirements' and checks' too), naming those missing and unknown.
        """
        check_format(data, MODEL_OUTCOME_FORMAT, "model outcome")
        fields = same_fields(cls, data, "a model outcome", derived=("format",))
        return cls(
            **fields
            | {
                "status": Status(fields["status"]).value,
                "requirements": tuple(RequirementCheck.from_json(c) for c in fields["requirements"]),
                "checks": tuple(PairedCheck.from_json(c) for c in fields["checks"]),
                "notes": tuple(str(note) for note in fields["notes"]),
            }
        )
