"""The verdict on one cell: a pure function of what was observed and what is stored.

:func:`judge` knows nothing of pytest, files or processes: the session looks the stored
numbers up, asks for the verdict, and carries it out (queues the baseline write, raises the
failure). Every rule of the gate lives here:

* a NaN or infinite observation is never compared and never stored;
* a baseline that cannot be used (broken, recorded under other conditions) fails the cell,
  unless the run updates baselines, which then rewrites the file;
* without a stored value the cell fails and its numbers are recorded for the next run;
* otherwise each toleranced number is checked, and any regression fails the cell;
* an update compares too, for the record, but accepts whatever it finds;
* a model that differs from the one the baseline was made with is gated all the same (that
  change is what the gate measures); a failure says so.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum

from pytest_segrobust.baselines import UPDATE_FLAG, CellKey, Check, compare


class Status(str, Enum):
    """What became of a cell; the value is what records and reports show."""

    PASSED = "passed"
    IMPROVED = "improved"
    REGRESSED = "regressed"
    NEW = "new"
    UPDATED = "updated"
    ERROR = "error"


@dataclass(frozen=True)
class Verdict:
    """The gate's decision on one cell.

    Attributes:
        status: What became of the cell.
        checks: Each toleranced number against its baseline (empty when none was compared;
            an update compares for the record, and passes whatever they say).
        write: Store the observed numbers as the cell's baseline at the end of the run.
        replace_all: Rewrite the baseline file from scratch (the stored one is unusable).
        message: Why the cell fails; ``None`` when it passes.
    """

    status: Status
    checks: tuple[Check, ...] = ()
    write: bool = False
    replace_all: bool = False
    message: str | None = None

    @property
    def passed(self) -> bool:
        return self.message is None


def judge(
    key: CellKey,
    observed: Mapping[str, float],
    stored: Mapping[str, float] | None,
    tolerances: Mapping[str, float],
    *,
    update: bool,
    baseline_problem: str | None = None,
    baseline_file: str = "",
    metric_label: str = "score",
    clean_score: float | None = None,
    lower_is_better: Iterable[str] = (),
    model_change: str | None = None,
) -> Verdict:
    """Decide one cell.

    Args:
        key: The cell, named in messages.
        observed: This run's numbers (``score``, and ``gamma_r``/``gamma_a`` when corrupted).
        stored: The baseline's numbers of the cell, ``None`` if it has none.
        tolerances: How far below its baseline each checked number may fall.
        update: The run accepts the current numbers as the new baselines.
        baseline_problem: Why the baseline file cannot be used, if it cannot.
        baseline_file: The file, as shown in messages.
        metric_label: How the score is named in messages (mIoU, mask AP).
        clean_score: The model's clean score, to explain an undefined gamma_r.
        lower_is_better: The observed numbers that regress by rising (an error metric's score);
            every other number regresses by falling.
        model_change: How the model differs from the one the baseline was made with, if it
            does; named in a regression's message, never a reason to fail.
    """
    invalid = _non_finite(observed, metric_label, clean_score)
    if invalid:
        return Verdict(
            Status.ERROR,
            message=f"{key.label}: {invalid}; the cell has no valid result, and nothing is written to the baseline",
        )
    if baseline_problem is not None:
        if update:
            return Verdict(Status.UPDATED, write=True, replace_all=True)
        return Verdict(Status.ERROR, message=baseline_problem)
    if update:
        checks = () if stored is None else tuple(compare(observed, stored, tolerances, lower_is_better))
        return Verdict(Status.UPDATED, checks, write=True)
    if stored is None:
        return Verdict(
            Status.NEW,
            write=True,
            message=(
                f"{key.label}: no baseline yet in {baseline_file}; recorded {_format(observed)}; "
                f"it is written at the end of the run (by `segrobust merge` for a sharded run), re-run to compare "
                f"(or accept all current numbers with pytest --segrobust {UPDATE_FLAG})"
            ),
        )
    checks = tuple(compare(observed, stored, tolerances, lower_is_better))
    regressions = [c for c in checks if c.regressed]
    if regressions:
        message = _regression_message(key, regressions, baseline_file, model_change)
        return Verdict(Status.REGRESSED, checks, message=message)
    return Verdict(Status.IMPROVED if any(c.improved for c in checks) else Status.PASSED, checks)


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
    return "nan" if math.isnan(value) else f"{value:.4f}"


def _regression_message(key: CellKey, regressions: list[Check], baseline_file: str, model_change: str | None) -> str:
    lines = [f"{key.label} regressed:"]
    for c in regressions:
        lines.append(
            f"  {c.metric}: observed {_number(c.observed)}, baseline {_number(c.baseline)}, "
            f"delta {_number(c.delta)}, tolerance {_number(c.tolerance)}"
        )
        if c.problem:
            lines.append(f"    ({c.problem})")
    lines.append(f"  baseline file: {baseline_file}")
    if model_change is not None:
        lines.append(f"  {model_change}")
    lines.append(f"  if the new numbers are intended: pytest --segrobust {UPDATE_FLAG}")
    return "\n".join(lines)
