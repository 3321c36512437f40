"""The report's tables, one function each, computed from cell records.

A table is a :class:`Table` (title, header, rows of strings) so the same function feeds
markdown, the terminal, and anything else that renders rows.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pytest_segrobust.core.wording import abbreviations, decimals, plural
from pytest_segrobust.metrics.robustness import mean, per_class_relative_robustness
from pytest_segrobust.report.model import (
    AggregateChange,
    ChanceLevel,
    FrameKept,
    GateSummary,
    ModelSummary,
    RunEnvironment,
    SuiteReport,
    WorstEntry,
)

if TYPE_CHECKING:
    from pytest_segrobust.store.records import CellRecord

STATUS_MARK = {
    "passed": "ok",
    "improved": "▲ improved",
    "rose-as-clean-fell": "γr rose as the clean score fell",
    "regressed": "▼ REGRESSED",
    "unmet": "✗ REQUIREMENT UNMET",
    "inconclusive": "? INCONCLUSIVE",
    "inconclusive-allowed": "? inconclusive (allowed)",
    "new": "new (no baseline)",
    "recorded": "recorded (no baseline; requirements met)",
    "updated": "baseline updated",
    "error": "error",
}


@dataclass(frozen=True)
class Table:
    title: str
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    note: str = ""


def fmt(value: float | None, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return decimals(value, digits)


def signed(value: float | None, digits: int = 2) -> str:
    """``+0.12``, ``-0.12``; ``0.00`` for a change that rounds to none."""
    if value is None or math.isnan(value):
        return "–"
    return decimals(value, digits, sign=True)


def corrupted(records: Iterable[CellRecord]) -> list[CellRecord]:
    return [r for r in records if r.severity > 0]


def headline(summary: Mapping[str, ModelSummary], metric: str) -> Table:
    """Per model: clean score, mean gamma_r and gamma_a over every cell, mPC and rPC, and against
    chance where the metric has a chance level (the column is left out where no model has one)."""
    against = any(s.chance is not None for s in summary.values())
    rows = [
        (
            model,
            fmt(s.clean_score),
            fmt(s.mean_gamma_r, 3),
            fmt(s.mean_gamma_a, 3),
            fmt(s.mpc),
            fmt(s.rpc, 3),
            str(s.cells),
            *((chance_mark(s.chance),) if against else ()),
        )
        for model, s in summary.items()
    ]
    note = (
        "γr = 1 - (A_c - A_ps)/A_c, γa = 1 - (A_c - A_ps)/100; means over every corruption and severity run; "
        "mPC = mean corrupted score, rPC = mPC / clean."
    )
    return Table(
        "Headline",
        ("model", f"clean {metric}", "mean γr", "mean γa", "mPC", "rPC", "cells", *(("clean vs chance",) if against else ())),
        tuple(rows),
        f"{note} {CHANCE_NOTE}" if against else note,
    )


# A clean score below this many times the chance level (measured from the worst end of the
# scale) is near chance, capped at chance + NEAR_CHANCE_MARGIN of the scale for few classes.
NEAR_CHANCE_FACTOR = 1.5
NEAR_CHANCE_MARGIN = 0.10
CHANCE_NOTE = (
    "Chance level = 1/K of the metric's scale above its worst end, K = the classes the clean evaluation scored: "
    "about what one constant class or uniformly random labels reach under mIoU (≤ 100/K), and what correct "
    "masks with random class labels reach under AP or PQ. ⚠ near chance: the clean score is below "
    f"{NEAR_CHANCE_FACTOR:g}× chance (at most chance + {NEAR_CHANCE_MARGIN:.0%} of the scale); such a model "
    "has little to lose, so its γr is near 1 (or above) whatever its robustness, and should not be read as robust."
)


def chance(
    records: Sequence[CellRecord], bounds: tuple[float, float], higher_is_better: bool
) -> ChanceLevel | None:
    """The chance level of a model's clean score, and whether the score is near it.

    K is the number of classes with a clean per-class value (those the metric scored), or
    every class name where the metric reports none per class.

    Args:
        records: One model's records (the clean numbers are read from the first).
        bounds: The metric's ``(worst, best)`` for a higher-is-better metric, ``(best, worst)`` otherwise.
        higher_is_better: The metric's direction.

    Returns:
        K, the chance score, the threshold below which the clean score is near it, the ratio of
        clean over chance (both from the worst end) and whether it is near; ``None`` without
        classes or a clean score.
    """
    first = next(iter(records), None)
    if first is None or not math.isfinite(first.clean_score):
        return None
    scored = [v for v in first.clean_per_class if v is not None]
    classes = len(scored) if scored else len(first.class_names)
    if classes == 0:
        return None
    worst, best = bounds if higher_is_better else (bounds[1], bounds[0])
    span = best - worst  # negative for a lower-is-better metric: every step below works the same
    share = 1.0 / classes
    threshold_share = min(NEAR_CHANCE_FACTOR * share, share + NEAR_CHANCE_MARGIN)
    progress = (first.clean_score - worst) / span if span else math.nan
    return ChanceLevel(
        classes=classes,
        level=worst + share * span,
        threshold=worst + threshold_share * span,
        ratio=progress / share,
        near=bool(progress < threshold_share),
    )


def chance_mark(info: ChanceLevel | None) -> str:
    """How the headline shows a model's clean score against chance."""
    if info is None:
        return "–"
    ratio = f"{info.ratio:.1f}× chance ({fmt(info.level, 1)}, K={info.classes})"
    return f"⚠ near chance: {ratio}" if info.near else ratio


def model_summary(
    records: Sequence[CellRecord], bounds: tuple[float, float] | None = None, higher_is_better: bool = True
) -> ModelSummary:
    """The headline numbers of one model's records (and its chance level when ``bounds`` are given)."""
    cells = corrupted(records)
    clean = records[0].clean_score if records else math.nan
    mpc = mean(r.score for r in cells)
    return ModelSummary(
        clean_score=clean,
        mean_gamma_r=mean(r.gamma_r for r in cells if r.gamma_r is not None),
        mean_gamma_a=mean(r.gamma_a for r in cells if r.gamma_a is not None),
        mpc=mpc,
        rpc=mpc / clean if clean else math.nan,
        cells=len(cells),
        per_class_gamma_r=class_gamma_r(cells),
        supercategory_gamma_r=supercategory_gamma_r(cells),
        chance=None if bounds is None else chance(records, bounds, higher_is_better),
    )


def class_gamma_r(records: Iterable[CellRecord]) -> dict[str, float]:
    """Mean per-class gamma_r over the given corrupted cells, by class (classes with any value)."""
    values: dict[str, list[float]] = {}
    for r in records:
        for name, g in zip(r.class_names, per_class_relative_robustness(r.clean_per_class, r.per_class)):
            if g is not None:
                values.setdefault(name, []).append(g)
    return {name: mean(v) for name, v in values.items()}


def _cell_supercategories(record: CellRecord) -> dict[str, float]:
    """One cell's gamma_r per supercategory: the mean over its classes that have a gamma_r."""
    groups: dict[str, list[float]] = {}
    gammas = per_class_relative_robustness(record.clean_per_class, record.per_class)
    for supercategory, g in zip(record.supercategories, gammas):
        if supercategory is not None and g is not None:
            groups.setdefault(supercategory, []).append(g)
    return {name: mean(v) for name, v in groups.items()}


def supercategory_gamma_r(records: Iterable[CellRecord]) -> dict[str, float]:
    """Mean over cells of each cell's per-supercategory gamma_r (Schiappa et al., Table 4)."""
    values: dict[str, list[float]] = {}
    for r in records:
        for name, g in _cell_supercategories(r).items():
            values.setdefault(name, []).append(g)
    return {name: mean(v) for name, v in values.items()}


def by_corruption(records: Sequence[CellRecord], value: str, title: str, digits: int) -> Table:
    """Corruption x severity grid of one field (``score`` or ``gamma_r``) with a mean column."""
    cells = corrupted(records)
    severities = sorted({r.severity for r in cells})
    names: list[str] = []
    for r in cells:
        if r.corruption not in names:
            names.append(r.corruption)
    rows = []
    for name in names:
        row_cells = {r.severity: getattr(r, value) for r in cells if r.corruption == name}
        category = next(r.category for r in cells if r.corruption == name)
        values = [row_cells.get(s) for s in severities]
        present = [v for v in values if v is not None]
        rows.append((name, category, *(fmt(v, digits) for v in values), fmt(mean(present), digits)))
    return Table(title, ("corruption", "category", *(f"s{s}" for s in severities), "mean"), tuple(rows))


def baseline_comparison(records: Sequence[CellRecord]) -> Table:
    """Every cell against its stored baseline, regressions and improvements marked; under a
    statistical gate, each change with its interval."""
    paired = any("low" in check for r in records for check in r.checks)
    rows = []
    for r in records:
        stored = r.baseline or {}
        intervals = {str(c["metric"]): _interval(c) for c in r.checks if "low" in c}
        row = [
            r.model,
            r.corruption,
            str(r.severity),
            fmt(r.score),
            fmt(stored.get("score")),
            signed(r.score - stored["score"]) if "score" in stored else "–",
        ]
        row += [intervals.get("score", "–")] if paired else []
        row += [
            fmt(r.gamma_r, 3),
            fmt(stored.get("gamma_r"), 3),
            signed(r.gamma_r - stored["gamma_r"], 3) if "gamma_r" in stored and r.gamma_r is not None else "–",
        ]
        row += [intervals.get("gamma_r", "–")] if paired else []
        rows.append((*row, STATUS_MARK.get(r.status, r.status)))
    header = ("model", "corruption", "sev", "score", "baseline", "Δ", *(("Δ interval",) if paired else ()))
    header += ("γr", "baseline γr", "Δγr", *(("Δγr interval",) if paired else ()), "status")
    return Table("Baseline comparison", header, tuple(rows))


def _interval(check: dict[str, Any]) -> str:
    digits = 3 if str(check["metric"]).endswith("gamma_r") else 2
    return f"[{signed(float(check['low']), digits)}, {signed(float(check['high']), digits)}]"


def statistical_gate(gate: GateSummary, records: Sequence[CellRecord]) -> tuple[Table, list[str]]:
    """The statistical gate's policy and what it found, and the warnings a run prints about it.

    Args:
        gate: The suite's statistical gate (policy, family size, per-number level).
        records: The suite's cells.

    Returns:
        The table, and one line per inconclusive cell and per number whose margin the suite is
        too small to confirm at 80% power.
    """
    margin = {"gamma_r": gate.margin_gamma_r, "score": gate.margin_score}
    rows = [
        ("method", f"paired bootstrap of per-{gate.unit} statistics against the baseline's (same corrupted pixels)"),
        ("margin", f"γr {gate.margin_gamma_r:g}, score {gate.margin_score:g} points"),
        ("confidence", f"{gate.confidence:g} for the family of {gate.numbers} gated numbers"),
        ("multiplicity", gate.multiplicity + (f" (each number at {gate.level:.6g})" if gate.multiplicity == "bonferroni" else "")),
        ("inconclusive cells", gate.inconclusive),
        ("resamples", str(gate.resamples)),
    ]
    warnings: list[str] = []
    checks = [(r, c) for r in records for c in r.checks if "low" in c]
    outcomes = {"fail": 0, "pass": 0, "inconclusive": 0}
    for r, c in checks:
        outcomes[str(c["outcome"])] += 1
        if c["outcome"] == "inconclusive":
            more, unit = c.get("images_to_decide"), str(c.get("unit", gate.unit))
            warnings.append(
                f"{r.suite}::{row_name(r)}::{r.corruption}[{r.severity}] {c['metric']}: inconclusive, interval "
                f"{_interval(c)} straddles {-float(c['margin']) + 0.0:g}"
                + (f"; about {plural(int(more), unit)} (now {c['images']}) would decide it" if more else "")
            )
    if checks:
        rows.append(("numbers", ", ".join(f"{n} {o}" for o, n in outcomes.items())))
    for number in ("score", "gamma_r"):
        found = [
            (float(c["detectable"]), int(c["images"]))
            for _, c in checks
            if str(c["metric"]).endswith(number) and c.get("detectable") is not None
        ]
        if not found:  # every run agreed with its baseline image by image: no spread to judge power by
            continue
        worst, images = max(found)
        allowed = float(margin[number])
        rows.append((f"smallest {number} margin confirmable (80% power)", f"{worst:.4g} (the margin is {allowed:g})"))
        if worst > allowed:
            needed = math.ceil(images * (worst / allowed) ** 2) if allowed > 0 else None
            warnings.append(
                f"suite {records[0].suite}: with {plural(images, gate.unit)} it cannot confirm a {number} margin of "
                f"{allowed:g} at 80% power in every cell (it needs {worst:.4g})"
                + (f"; about {plural(needed, gate.unit)} would" if needed else "")
            )
    return Table("Statistical gate", ("", "setting"), tuple(rows)), warnings


def aggregate_changes(rows: Sequence[AggregateChange], confidence: float, unit: str = "image") -> Table:
    """Each model's aggregates against its baseline: the paired change and its interval (``unit``: what
    the bootstrap resampled)."""
    shown = []
    for row in rows:
        digits = 2 if row.number == "mPC" else 4
        shown.append(
            (
                row.model,
                row.number,
                signed(row.change, digits),
                f"[{signed(row.low, digits)}, {signed(row.high, digits)}]",
                str(row.cells),
            )
        )
    return Table(
        f"Aggregate changes against the baseline ({confidence:g} intervals, paired bootstrap)",
        ("model", "number", "change", "interval", "cells"),
        tuple(shown),
        f"Every cell of a model is resampled with the same {unit}s, so each aggregate's interval accounts for "
        "its cells' correlation; these intervals describe, the per-cell gate decides.",
    )


_OUTCOME_MARK = {"pass": "met", "fail": "✗ UNMET", "inconclusive": "? undecided"}
_OUTCOME_WORD = {"pass": "met", "fail": "unmet", "inconclusive": "undecided"}


def release_criteria(suites: Mapping[str, SuiteReport]) -> Table:
    """Each suite's requirements: the threshold, the decisive value with its bounds, the outcome.

    One row per requirement (a rule of the suite for one number), over every cell or model it
    was decided for; the value shown is the decision nearest the threshold, and where another
    decision misses it by more, that one is named as the worst.
    """
    rows = []
    point = False
    for name, suite in suites.items():
        for row in suite.release.requirements if suite.release is not None else ():
            closest, worst = row.nearest, row.worst
            digits = _digits(row.number)
            bounds = "–" if closest.low is None else f"[{fmt(closest.low, digits)}, {fmt(closest.high, digits)}]"
            point = point or closest.low is None
            total = sum(row.outcomes.values())
            outcome = _OUTCOME_MARK[row.outcome]
            if total > 1:
                outcome += f" ({', '.join(f'{n} {_OUTCOME_WORD[o]}' for o, n in row.outcomes.items())})"
            where = f"{row.rule}" + (f" (line {row.line})" if row.line else "")
            sign = "≥" if row.at_least else "≤"
            decided = closest.subject if total == 1 else f"{total} decisions; closest: {closest.subject}"
            if worst.subject != closest.subject:
                decided += f"; worst: {worst.subject} ({fmt(worst.observed, digits)})"
            rows.append(
                (
                    name,
                    where,
                    f"{sign} {fmt(row.threshold, digits)}",
                    decided,
                    fmt(closest.observed, digits),
                    bounds,
                    "–" if row.confirmable is None else f"{sign} {fmt(row.confirmable, digits)}",
                    outcome,
                )
            )
    note = (
        "Bounds are one-sided confidence bounds from the per-image bootstrap at the suite's level for each "
        "decision (its confidence split over the statistical gate's family): a requirement is met when the bound "
        "on its side clears the threshold and unmet when the other bound misses it. The last column but one is "
        "the strictest threshold every decision would confirm with 80% power."
    )
    if point:
        note += " Rows without bounds compare the point value: their suite has no statistical gate (or the number, like mCE, pairs two models)."
    header = ("suite", "requirement", "threshold", "decided for", "value", "bounds", "confirmable at 80%", "outcome")
    return Table("Release criteria", header, tuple(rows), note)


def model_gates(suites: Mapping[str, SuiteReport]) -> Table:
    """Each model's aggregates against its baseline's (``gate.aggregates``): change, interval, margin, outcome."""
    rows = []
    for name, suite in suites.items():
        for outcome in suite.release.models if suite.release is not None else ():
            for check in outcome.checks:
                digits = 2 if check.metric.startswith("mPC") else 4
                rows.append(
                    (
                        name,
                        outcome.model,
                        check.metric,
                        fmt(check.observed, digits),
                        fmt(check.baseline, digits),
                        signed(check.observed - check.baseline, digits),
                        f"[{signed(check.low, digits)}, {signed(check.high, digits)}]",
                        fmt(check.margin, digits),  # as the suite declares it
                        "–" if check.detectable is None else fmt(check.detectable, digits),
                        {"fail": "▼ REGRESSED", "pass": "ok", "inconclusive": "? inconclusive"}[check.outcome],
                    )
                )
    header = ("suite", "model", "aggregate", "value", "baseline", "Δ", "interval", "margin", "detectable at 80%", "outcome")
    return Table(
        "Aggregate gate",
        header,
        tuple(rows),
        "A model's aggregates, paired over the same image resamples as its cells, against the suite's "
        "gate.aggregates margins; the detectable margin is the smallest an unchanged model is confirmed within with 80% power.",
    )


def _digits(number: str) -> int:
    return 2 if number.split(".")[-1].split(" ")[0] in ("score", "mPC", "Δ%", "mCE", "rmCE") else 4


def _columns_by_category(records: Sequence[CellRecord]) -> list[tuple[str, str]]:
    """``(category, corruption)`` in report order: categories by first appearance, then corruptions."""
    order: dict[str, list[str]] = {}
    for r in corrupted(records):
        names = order.setdefault(r.category, [])
        if r.corruption not in names:
            names.append(r.corruption)
    return [(category, name) for category, names in order.items() for name in names]


def grouped_by_category(models: dict[str, list[CellRecord]], value: str, title: str, digits: int) -> Table:
    """Model x corruption (columns grouped by category), each averaged over severities."""
    columns = _columns_by_category([r for records in models.values() for r in records])
    rows = []
    for model, records in models.items():
        cells = corrupted(records)
        means = [mean(getattr(r, value) for r in cells if r.corruption == name) for _, name in columns]
        rows.append((model, *(fmt(m, digits) for m in means), fmt(mean(getattr(r, value) for r in cells), digits)))
    header = ("model", *(f"{category}<br>{name}" for category, name in columns), "mean")
    return Table(title, header, tuple(rows), "Each cell is the mean over severities; columns are grouped by category.")


def severity_curves(models: dict[str, list[CellRecord]], metric: str) -> Table:
    """Score against severity 0 (clean) .. 5 for every model and corruption."""
    severities = sorted({r.severity for records in models.values() for r in corrupted(records)})
    rows = []
    for model, records in models.items():
        clean = records[0].clean_score if records else math.nan
        for _, name in _columns_by_category(records):
            by_severity = {r.severity: r.score for r in corrupted(records) if r.corruption == name}
            rows.append((model, name, fmt(clean), *(fmt(by_severity.get(s)) for s in severities)))
    return Table(f"{metric} against severity", ("model", "corruption", "s0 (clean)", *(f"s{s}" for s in severities)), tuple(rows))


def degradation(models: dict[str, list[CellRecord]], reference: str, noise_severities: Sequence[int]) -> Table:
    """CD and rCD per corruption against the reference model (Kamann & Rother), in percent."""
    from pytest_segrobust.metrics.robustness import corruption_degradation, error, relative_corruption_degradation

    ref = models.get(reference, [])
    columns = _columns_by_category(ref)
    rows = []
    for model, records in models.items():
        cds, rcds = [], []
        for category, name in columns:
            allowed = set(noise_severities) if category == "noise" else None

            def errors(rs: list[CellRecord], name: str = name, allowed: set[int] | None = allowed) -> dict[int, float]:
                return {r.severity: error(r.score) for r in corrupted(rs) if r.corruption == name and (allowed is None or r.severity in allowed)}

            mine, theirs = errors(records), errors(ref)
            shared = sorted(set(mine) & set(theirs))
            cds.append(100 * corruption_degradation([mine[s] for s in shared], [theirs[s] for s in shared]))
            rcds.append(
                100
                * relative_corruption_degradation(
                    [mine[s] for s in shared], error(records[0].clean_score), [theirs[s] for s in shared], error(ref[0].clean_score)
                )
            )
        rows.append((model, *(fmt(c, 1) for c in cds), fmt(mean(cds), 1), fmt(mean(rcds), 1)))
    note = (
        f"CD_c = Σ_s D_f / Σ_s D_ref and rCD_c = Σ_s (D_f - D_f,clean) / Σ_s (D_ref - D_ref,clean), D = 1 - score, "
        f"in percent against `{reference}`; noise summed over severities {', '.join(map(str, noise_severities))}."
    )
    header = ("model", *(f"{category}<br>{name}" for category, name in columns), "mCD", "rCD")
    return Table(f"Corruption degradation against {reference}", header, tuple(rows), note)


def per_class(models: dict[str, list[CellRecord]], metric: str) -> Table:
    """Per class: the clean metric and the mean gamma_r over every corrupted cell, per model."""
    names: list[str] = []
    supercategory: dict[str, str | None] = {}
    for records in models.values():
        for r in records:
            for name, group in zip(r.class_names, r.supercategories or [None] * len(r.class_names)):
                if name not in supercategory:
                    names.append(name)
                    supercategory[name] = group
    grouped = any(group is not None for group in supercategory.values())
    clean = {model: _clean_per_class(records) for model, records in models.items()}
    gammas = {model: class_gamma_r(corrupted(records)) for model, records in models.items()}
    rows = []
    for name in names:
        if all(clean[m].get(name) is None and name not in gammas[m] for m in models):
            continue  # never defined: e.g. background under mAP
        row = [name, *([supercategory[name] or "–"] if grouped else [])]
        for model in models:
            row += [fmt(clean[model].get(name)), fmt(gammas[model].get(name), 3)]
        rows.append(tuple(row))
    header = ("class", *(["supercategory"] if grouped else []))
    for model in models:
        header += (f"{model}<br>clean {metric}", f"{model}<br>γr")
    return Table(
        "Per class: clean score and γr (mean over corruptions and severities)",
        header,
        tuple(rows),
        "Per-class γr = 1 - (A_c,k - A_ps,k)/A_c,k from the class's own clean and corrupted score; "
        "classes without a clean score (or with 0) have none.",
    )


def _clean_per_class(records: Sequence[CellRecord]) -> dict[str, float | None]:
    first = next(iter(records), None)
    if first is None:
        return {}
    return dict(zip(first.class_names, first.clean_per_class or [None] * len(first.class_names)))


def _holds(value: float | None) -> bool:
    """Whether a number is there to show (not missing, not NaN)."""
    return value is not None and not math.isnan(value)


def _number(value: float | None) -> float:
    """A number that may be missing as a float: NaN where it is."""
    return math.nan if value is None else value


def carries_per_class(models: Mapping[str, Sequence[CellRecord]]) -> bool:
    """Whether some record holds a per-class value, clean or corrupted: a metric of objects (J&F) or of
    prompted instances keeps its class list and no number per class."""
    return any(_holds(v) for records in models.values() for r in records for v in (*r.per_class, *(r.clean_per_class or ())))


def has_supercategories(models: dict[str, list[CellRecord]]) -> bool:
    """Whether some corrupted cell has a γr per supercategory: supercategories and per-class values both."""
    return any(_cell_supercategories(r) for records in models.values() for r in corrupted(records))


def supercategories(models: dict[str, list[CellRecord]]) -> Table:
    """Model x supercategory: mean gamma_r over every corruption and severity (Schiappa Table 4)."""
    per_model = {model: supercategory_gamma_r(corrupted(records)) for model, records in models.items()}
    names = list(dict.fromkeys(name for values in per_model.values() for name in values))
    rows = [(model, *(fmt(values.get(name), 3) for name in names)) for model, values in per_model.items()]
    return Table(
        "γr per supercategory (mean over corruptions and severities)",
        ("model", *names),
        tuple(rows),
        "A cell's supercategory γr is the mean per-class γr of its classes; the table averages it over cells.",
    )


def supercategory_by_category(models: dict[str, list[CellRecord]]) -> Table:
    """Per model and supercategory: mean gamma_r per corruption category, then over all cells."""
    categories = list(dict.fromkeys(r.category for records in models.values() for r in corrupted(records)))
    rows = []
    for model, records in models.items():
        cells = corrupted(records)
        overall = supercategory_gamma_r(cells)
        by_category = {c: supercategory_gamma_r(r for r in cells if r.category == c) for c in categories}
        for name, value in overall.items():
            rows.append((model, name, *(fmt(by_category[c].get(name), 3) for c in categories), fmt(value, 3)))
    return Table(
        "γr per supercategory and corruption category",
        ("model", "supercategory", *categories, "all"),
        tuple(rows),
    )


def carried_details(records: Iterable[CellRecord]) -> list[str]:
    """The detail keys some record holds a value of, clean or corrupted, in the order first met: a
    detail without one anywhere (no large instance in the data) gets no column and no table."""
    keys: dict[str, None] = {}
    for r in records:
        for details in (r.clean_details, r.details):
            keys.update((key, None) for key, value in details.items() if _holds(value))
    return list(keys)


def metric_details(models: dict[str, list[CellRecord]], metric: str, labels: dict[str, str] | None = None) -> Table:
    """The metric with its further numbers (AP50, AP75, box AP), clean and per corruption: a column
    per detail the records hold a value of (:func:`carried_details`)."""
    keys = carried_details(r for records in models.values() for r in records)
    rows = []
    for model, records in models.items():
        if records:
            first = records[0]
            rows.append((model, "clean", fmt(first.clean_score), *(fmt(first.clean_details.get(k)) for k in keys)))
        for _, name in _columns_by_category(records):
            cells = [r for r in corrupted(records) if r.corruption == name]
            # A detail read back from JSON is None where it was NaN (no instance of a size): undefined alike.
            means = [mean(_number(r.details[k]) for r in cells if k in r.details) for k in keys]
            rows.append((model, name, fmt(mean(r.score for r in cells)), *(fmt(m) for m in means)))
    return Table(
        f"{metric} and its companions (mean over severities)",
        ("model", "corruption", metric, *((labels or {}).get(k, k) for k in keys)),
        tuple(rows),
    )


def _clean_record(records: Sequence[CellRecord]) -> CellRecord | None:
    return next((r for r in records if r.severity == 0), None)


def _by_split(models: dict[str, list[CellRecord]]) -> dict[str, dict[str, CellRecord]]:
    """Each model's clean record per split (rows of a natural-shift suite are ``model @ split``)."""
    out: dict[str, dict[str, CellRecord]] = {}
    for records in models.values():
        clean = _clean_record(records)
        if clean is not None and clean.split is not None:
            out.setdefault(clean.model, {})[clean.split] = clean
    return out


def shift_delta(score: float | None, reference: float | None) -> float | None:
    """Delta% = (A_split - A_reference) / A_reference x 100 (SOOD-ImageNet, Table 2)."""
    if score is None or reference is None or reference == 0 or math.isnan(score) or math.isnan(reference):
        return None
    return (score - reference) / reference * 100.0


def natural_shift(models: dict[str, list[CellRecord]], reference: str, splits: Sequence[str], metric: str) -> Table:
    """Per model: the clean score on every split and its Delta% against the reference split."""
    others = [s for s in splits if s != reference]
    rows = []
    for model, by_split in _by_split(models).items():
        ref = by_split.get(reference)
        ref_score = None if ref is None else ref.score
        row = [model, fmt(ref_score)]
        for split in others:
            record = by_split.get(split)
            score = None if record is None else record.score
            row += [fmt(score), signed(shift_delta(score, ref_score))]
        rows.append(tuple(row))
    header = ("model", f"{reference} (reference) {metric}")
    for split in others:
        header += (f"{split} {metric}", f"{split} Δ%")
    return Table(
        "Natural distribution shift: clean score per split",
        header,
        tuple(rows),
        f"Δ% = (A_split - A_{reference}) / A_{reference} × 100, as SOOD-ImageNet's Table 2.",
    )


def natural_shift_per_class(models: dict[str, list[CellRecord]], reference: str, splits: Sequence[str]) -> Table:
    """Per class and model: Delta% of the class's clean score on each split against the reference split."""
    others = [s for s in splits if s != reference]
    per_model = _by_split(models)
    names = list(dict.fromkeys(n for by_split in per_model.values() for r in by_split.values() for n in r.class_names))
    rows = []
    for name in names:
        row = [name]
        for by_split in per_model.values():
            ref = by_split.get(reference)
            ref_value = None if ref is None else dict(zip(ref.class_names, ref.per_class)).get(name)
            for split in others:
                record = by_split.get(split)
                value = None if record is None else dict(zip(record.class_names, record.per_class)).get(name)
                row.append(signed(shift_delta(value, ref_value)))
        if any(cell != "–" for cell in row[1:]):
            rows.append(tuple(row))
    header = ("class", *(f"{model}<br>{split} Δ%" for model in per_model for split in others))
    return Table("Natural distribution shift per class: Δ% against the reference split", header, tuple(rows))


def further_metrics(models: dict[str, list[CellRecord]], labels: dict[str, str]) -> Table:
    """Per model and further metric: clean score, mean corrupted score and mean γr."""
    rows = []
    for model, records in models.items():
        cells = corrupted(records)
        for name, label in labels.items():
            values = [r.metrics[name] for r in records if name in r.metrics]
            if not values:
                continue
            corrupted_values = [r.metrics[name] for r in cells if name in r.metrics]
            rows.append(
                (
                    model,
                    label,
                    fmt(values[0]["clean_score"]),
                    fmt(mean(v["score"] for v in corrupted_values)),
                    fmt(mean(v["gamma_r"] for v in corrupted_values if v.get("gamma_r") is not None), 3),
                    fmt(mean(v["gamma_a"] for v in corrupted_values if v.get("gamma_a") is not None), 3),
                )
            )
    return Table(
        "Further metrics (mean over corruptions and severities)",
        ("model", "metric", "clean", "mPC", "mean γr", "mean γa"),
        tuple(rows),
        "Each metric's γr and γa follow its own direction and scale; the gate checks them as the headline's.",
    )


# -- the top of the report: verdict, regressions, what was measured ---------------------------

# Statuses that fail a cell's test (an update run passes: it accepts the numbers).
FAILING = ("regressed", "unmet", "inconclusive", "new", "error")
_NUMBER_NAMES = {"score": "score", "gamma_r": "γr", "gamma_a": "γa"}


def row_name(record: CellRecord) -> str:
    """A record's row in the report: its model, or ``model @ split`` in a natural-shift suite."""
    return record.model if record.split is None else f"{record.model} @ {record.split}"


def status_counts(records: Iterable[CellRecord]) -> dict[str, int]:
    """How many cells ended in each status, in :data:`STATUS_MARK`'s order (statuses with none left out)."""
    counts: dict[str, int] = {}
    for r in records:
        status = getattr(r.status, "value", r.status)
        counts[status] = counts.get(status, 0) + 1
    return {status: counts[status] for status in (*STATUS_MARK, *counts) if status in counts}


def number_label(name: str, labels: dict[str, str]) -> str:
    """``score`` -> the headline metric's label, ``pq.gamma_r`` -> ``PQ γr``."""
    metric, _, number = name.rpartition(".")
    shown = labels.get(metric, metric or "score")
    if number == "score":
        return shown
    suffix = _NUMBER_NAMES.get(number, number)
    return f"{shown} {suffix}" if metric else suffix


def _allowed(check: Mapping[str, Any]) -> float:
    """How far a number may fall: its tolerance, or its gate margin (a paired check)."""
    return float(check.get("tolerance", check.get("margin", 0.0)))


def _fall(check: Mapping[str, Any]) -> float:
    """How far a number fell against its baseline (positive: worse), in its metric's direction."""
    delta = float(check["observed"]) - float(check["baseline"])
    return -delta if check.get("higher_is_better", True) else delta


def _beyond(check: Mapping[str, Any]) -> float:
    """A fall in units of what the number may fall; infinite for an exact gate or a NaN."""
    fall, allowed = _fall(check), _allowed(check)
    return fall / allowed if allowed > 0 and math.isfinite(fall) else math.inf


REGRESSED_ORDER = (
    "Worst first: cells are ordered by the largest fall of any of their numbers, counted in what the suite "
    "allows that number (its tolerance, or its gate margin); ties by node id. A NaN on either side counts as "
    "a regression and sorts first."
)


def regressed_cells(records: Sequence[CellRecord], labels: dict[str, dict[str, str]]) -> Table:
    """One row per cell with a number that fell further below its baseline than the suite allows:
    the headline metric and γr (baseline, now, change), then each number that fell with its allowance.

    Args:
        records: Every cell of the run.
        labels: Per suite, the label of each metric name (``""`` for the headline metric).
    """
    found: list[tuple[float, str, tuple[str, ...]]] = []
    for r in records:
        fell = [check for check in r.checks if check.get("regressed")]
        if not fell:
            continue
        shown = labels.get(r.suite, {})
        stored = r.baseline or {}
        gamma_now = r.gamma_r if r.severity > 0 else None
        gamma_then = stored.get("gamma_r") if r.severity > 0 else None
        numbers = []
        for check in sorted(fell, key=lambda c: -_beyond(c)):
            name = str(check["metric"])
            digits = 2 if name.rpartition(".")[2] == "score" else 3
            delta = float(check["observed"]) - float(check["baseline"])
            kind = "tolerance" if "tolerance" in check else "margin"
            allowed = f"{kind} {fmt(_allowed(check), digits)}"
            numbers.append(f"{number_label(name, shown)} {signed(delta, digits)} ({allowed})")
        row = (
            f"`{r.nodeid}`",
            shown.get("", "score"),
            fmt(stored.get("score")),
            fmt(r.score),
            signed(r.score - stored["score"]) if "score" in stored else "–",
            fmt(gamma_then, 3),
            fmt(gamma_now, 3),
            signed(gamma_now - gamma_then, 3) if gamma_now is not None and gamma_then is not None else "–",
            "; ".join(numbers),
        )
        found.append((-max(_beyond(c) for c in fell), r.nodeid, row))
    found.sort(key=lambda item: item[:2])
    return Table(
        "Regressed cells",
        ("cell", "metric", "baseline", "now", "Δ", "baseline γr", "now γr", "Δγr", "fell beyond what is allowed"),
        tuple(row for _, _, row in found),
        "One row per cell whose numbers fell further below its baseline than the suite allows. " + REGRESSED_ORDER,
    )


def environment(info: RunEnvironment) -> Table:
    """The run's provenance: git commit, versions, device, allocator, threads, wall time (one row per item)."""
    rows: list[tuple[str, str]] = []
    if info.git_commit:
        rows.append(("git commit", info.git_commit + (" (uncommitted changes)" if info.git_dirty else "")))
    else:
        rows.append(("git commit", "– (not a git checkout, or git is not installed)"))
    if info.started:
        rows.append(("started", info.started))
    if info.wall_seconds is not None:
        rows.append(("wall time", duration(float(info.wall_seconds))))
    if info.device:
        rows.append(("device", info.device))
    if info.platform:
        rows.append(("platform", info.platform))
    if info.malloc:
        rows.append(("malloc", info.malloc))
    if info.threads:
        rows.append(("threads", info.threads))
    if info.versions:
        rows.append(("versions", ", ".join(f"{name} {version}" for name, version in info.versions.items())))
    note = WALL_TIME_NOTE if info.wall_seconds is not None else ""
    return Table("Run", ("item", "value"), tuple(rows), note)


WALL_TIME_NOTE = (
    "Wall time: from the start of the run (pytest's configuration) to the writing of this report, "
    "every cell, the worst images re-evaluated and the figures included."
)


def measured(report_suites: Mapping[str, SuiteReport]) -> Table:
    """Per suite and model: where it ran, seed, images, the dataset's and the model's fingerprints, compute time."""
    entries = [
        (suite_name, row, suite, entry.cells)
        for suite_name, suite in report_suites.items()
        for row, entry in suite.models.items()
        if entry.cells
    ]
    # Each column cut so that distinct fingerprints stay distinct (two splits of one dataset).
    dataset = abbreviations(c[0].dataset_fingerprint or "" for *_, c in entries)
    model = abbreviations(c[0].model_fingerprint or "" for *_, c in entries)
    rows = []
    for suite_name, row, suite, cells in entries:
        first = cells[0]
        images = sorted({c.num_images for c in cells})
        rows.append(
            (
                suite_name,
                row,
                "/".join(sorted({str(c.device) for c in cells if c.device})) or "–",
                "–" if suite.seed is None else str(suite.seed),
                "/".join(map(str, images)),
                short(first.dataset_fingerprint, dataset),
                short(first.model_fingerprint, model),
                str(len(cells)) + (f" ({cached} cached)" if (cached := sum(c.cached for c in cells)) else ""),
                duration(sum(c.seconds for c in cells)),
            )
        )
    return Table(
        "What was measured",
        ("suite", "model", "device", "seed", "images", "dataset fingerprint", "model fingerprint", "cells", "compute"),
        tuple(rows),
        "Fingerprints longer than 48 characters (digests) are cut to 16, or as many more as tell them apart "
        "(the JSON report has them whole); compute is the sum of the cells' evaluation times, clean ones included.",
    )


def short(fingerprint: str | None, shown: Mapping[str, str]) -> str:
    """A fingerprint as code, as its column shows it (:func:`~pytest_segrobust.core.wording.abbreviations`)."""
    if not fingerprint:
        return "–"
    text = shown[fingerprint]
    return f"`{text}`" if text == fingerprint else f"`{text.removesuffix('…')}`…"


def duration(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "–"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest:02d} s" if minutes < 60 else f"{minutes // 60} h {minutes % 60:02d} min"


# -- pictures and the geometry behind them -----------------------------------------------------


def frame_kept(frames: FrameKept) -> Table:
    """Per geometric corruption: the share of the frame that still shows the image, per severity."""
    severities = frames.severities
    height, width = frames.size
    rows = []
    for name, entry in frames.corruptions.items():
        kept = [f"{100 * v:.0f}%" for v in entry.kept]
        parameters = entry.parameters
        shown = " … ".join(dict.fromkeys([parameters[0], parameters[-1]])) if parameters else "–"
        rows.append((name, *kept, "yes: constants in pixels" if entry.in_pixels else "no", shown))
    return Table(
        "How much of the frame geometric corruptions keep",
        ("corruption", *(f"s{s}" for s in severities), "depends on image size", "parameters"),
        tuple(rows),
        f"Share of the corrupted image that still shows the image, at {width}×{height} (the first image's size) "
        "with that image's random draw; the rest is black and its labels are ignored, so the cell scores less "
        "of the image. Measured again at half the size: where the share changes, the corruption's constants "
        "are in pixels, and the same severity is stronger on smaller images.",
    )


def worst_images(worst: Mapping[str, WorstEntry], metric: str, title: str | None = None) -> Table:
    """Per model: its worst cell and the images whose own score fell most in it."""
    rows = []
    notes = []
    # Referring samples carry their expression: show it clean and as the model read it.
    texts = any(image.clean_text is not None for entry in worst.values() for image in entry.images)
    for row, entry in worst.items():
        cell = f"{entry.corruption} s{entry.severity}"
        if entry.note:
            notes.append(f"{row}: {entry.note}")
        for image in entry.images:
            said = (_quoted(image.clean_text), _quoted(image.corrupted_text)) if texts else ()
            rows.append(
                (
                    row,
                    cell,
                    fmt(entry.gamma_r, 3),
                    image.sample_id,
                    *said,
                    fmt(image.clean),
                    fmt(image.corrupted),
                    signed(image.corrupted - image.clean),
                )
            )
    considered = sorted({entry.considered for entry in worst.values()} - {0})
    note = (
        f"Each model's worst cell is the one with the lowest γr; among its first {'/'.join(map(str, considered)) or 'few'} "
        f"images, those whose own {metric} fell most (each image scored on its own, with the seed it gets in the suite)."
    )
    return Table(
        title or f"Images whose {metric} fell most in each model's worst cell",
        ("model", "cell", "cell γr", "image", *(("clean text", "perturbed text") if texts else ()), "clean", "corrupted", "Δ"),
        tuple(rows),
        " ".join([note, *notes]),
    )


def _quoted(text: str | None) -> str:
    """An expression in a table cell: quoted, its pipes escaped so a markdown row stays one row."""
    return "–" if text is None else '"' + text.replace("|", "\\|").replace("\n", " ") + '"'


def worst_cell(records: Sequence[CellRecord]) -> CellRecord | None:
    """The corrupted cell with the lowest γr (the first such in report order), if any has one."""
    candidates = [r for r in corrupted(records) if r.gamma_r is not None and math.isfinite(r.gamma_r)]
    return min(candidates, key=lambda r: r.gamma_r) if candidates else None  # type: ignore[arg-type, return-value]
