"""Release criteria measured: a cell's requirement checks, and each model's ``aggregates`` item.

:mod:`pytest_segrobust.suite.requirements` reads and decides thresholds; this module finds the numbers
they are decided on. A cell's requirements use the cell's own results (and, under a statistical
gate, their bootstrap resamples). A model's aggregates (mPC, rPC, mean gamma_r and gamma_a,
per category, mCE against the reference model, a split's change from the reference split) need
every cell of the model: the model's ``aggregates`` item (``suites/demo.yaml::tiny-unet::aggregates``)
decides them, with the aggregate regression gate (``gate.aggregates``), from the cells this
process evaluated, measuring (never gating) any it did not, so that ``--lf``, ``-k aggregates``
and a worker that was sent the item alone all decide the same. Its outcome is a
:class:`~pytest_segrobust.store.decisions.ModelOutcome`, which crosses processes as JSON like a
cell's record.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from pytest_segrobust.core.statistics import Change
from pytest_segrobust.core.wording import shown_number
from pytest_segrobust.gate.verdict import GatedNumber, decide_paired
from pytest_segrobust.metrics import METRICS
from pytest_segrobust.metrics.robustness import corruption_degradation, error, mean, relative_corruption_degradation
from pytest_segrobust.store.decisions import ModelOutcome, PairedCheck, RequirementCheck
from pytest_segrobust.store.records import CellRecord, Status
from pytest_segrobust.store.sidecar import unpack
from pytest_segrobust.suite.requirements import (
    AGGREGATE_LABELS,
    CROSS_MODEL,
    CellPlace,
    Estimate,
    Rule,
    decide,
    robustness,
)
from pytest_segrobust.suite.schema import AGGREGATE_MARGINS, Suite
from pytest_segrobust.tasks import get_task


def family_size(suite: Suite) -> int:
    """How many numbers a full run of ``suite`` decides with statistics: each metric's score per
    cell and its gamma_r per corrupted cell, every requirement decided by the bootstrap and every
    aggregate margin (:func:`release_tests`). Bonferroni splits the
    suite's error rate over them."""
    corrupted = sum(len(suite.cell_severities(name)) for name in suite.corruptions)
    per_model = len(suite.splits) * (1 + 2 * corrupted)
    return len(suite.models) * len(suite.metrics) * per_model + release_tests(suite)


def cell_level(suite: Suite) -> float:
    """The confidence of each number's interval under the suite's policy."""
    policy = suite.gate
    assert policy is not None
    if policy.multiplicity == "bonferroni":
        return 1 - (1 - policy.confidence) / family_size(suite)
    return policy.confidence


def per_test_tail(suite: Suite) -> float | None:
    """The one-sided error rate of each requirement's bound; ``None`` without a statistical gate."""
    if suite.gate is None:
        return None
    alpha = 1 - suite.gate.confidence
    return alpha / family_size(suite) if suite.gate.multiplicity == "bonferroni" else alpha


def release_tests(suite: Suite) -> int:
    """How many requirements and aggregate margins a full run of ``suite`` decides by the bootstrap
    (what they add to the statistical gate's multiplicity family). Class rules count once per
    cell and class named; mCE and rmCE, compared by point value, do not count."""
    if suite.gate is None:
        return 0
    count = 0
    categories = {name: suite.corruption(name).category.value for name in suite.corruptions}
    margins = suite.gate.aggregates
    requirements = suite.requirements
    for split in suite.splits:
        places = [CellPlace("clean", "clean", 0, split)]
        places += [
            CellPlace(c, categories[c], s, split) for c in suite.corruptions for s in suite.cell_severities(c)
        ]
        if requirements is not None:
            for place in places:
                for metric in suite.metrics:
                    count += len(
                        requirements.cell_rules(metric, suite.metric, place, score_at_least=_score_at_least(metric))
                    )
                    count += sum(len(rules) for rules in requirements.class_rules(metric, suite.metric, place).values())
            count += sum(1 for number in requirements.aggregates if number not in CROSS_MODEL)
            count += sum(len(rules) for rules in requirements.category_aggregates.values())
            count += 1 if split in requirements.split_delta else 0
        if margins:
            several = len(set(categories.values())) > 1
            count += len(margins) + (len(set(categories.values())) if several and "mean_gamma_r" in margins else 0)
    return count * len(suite.models)


def _score_at_least(metric: str) -> bool:
    return bool(METRICS.get(metric).higher_is_better)


def cell_checks(
    suite: Suite,
    record: CellRecord,
    observed: Mapping[str, float],
    runs: Mapping[str, tuple[Any, Any]] | None,
    class_runs: Mapping[str, ClassRuns | None] | None = None,
) -> list[RequirementCheck]:
    """The suite's requirements of one cell, decided.

    Args:
        record: The cell's record (its class names and per-class numbers).
        observed: The cell's gated numbers (``score``, ``gamma_r``, ``<metric>.score``...).
        runs: Per metric, this run's clean and corrupted :class:`~pytest_segrobust.core.statistics.RunScores`
            under the model's resamples; ``None`` without a statistical gate.
        class_runs: Per metric, its per-class clean and corrupted scores per resample, where the
            metric can resample classes (:class:`ClassRuns`).

    Raises:
        ValueError: for a class rule naming a class the dataset does not have.
    """
    requirements = suite.requirements
    if requirements is None:
        return []
    tail = None if runs is None else per_test_tail(suite)
    place = CellPlace(record.corruption, record.category, record.severity, record.split)
    checks: list[RequirementCheck] = []
    for index, metric in enumerate(suite.metrics):
        prefix = "" if index == 0 else f"{metric}."
        kind = METRICS.get(metric)
        at_least = _score_at_least(metric)
        rules = requirements.cell_rules(metric, suite.metric, place, score_at_least=at_least)
        run = None if runs is None else runs[metric]
        estimates: dict[str, Estimate] = {}
        if run is not None:
            clean, corrupted = run
            gamma_r, gamma_a = robustness(
                clean.resampled, corrupted.resampled, higher_is_better=at_least, worst=kind.worst(), scale=kind.scale()
            )
            estimates = {
                "score": Estimate(observed[f"{prefix}score"], corrupted.resampled, corrupted.images),
                "gamma_r": Estimate(observed.get(f"{prefix}gamma_r", math.nan), gamma_r, corrupted.images),
                "gamma_a": Estimate(observed.get(f"{prefix}gamma_a", math.nan), gamma_a, corrupted.images),
            }
        for number, rule in rules.items():
            estimate = estimates.get(number) or Estimate(observed.get(f"{prefix}{number}", math.nan))
            checks.append(
                decide(
                    record.nodeid,
                    f"{prefix}{number}",
                    rule,
                    estimate,
                    at_least=at_least if number == "score" else True,
                    tail=tail,
                )
            )
        class_rules = requirements.class_rules(metric, suite.metric, place)
        if class_rules:
            checks += _class_checks(record, metric, prefix, class_rules, (class_runs or {}).get(metric), tail)
    return checks


def _class_checks(
    record: CellRecord,
    metric: str,
    prefix: str,
    class_rules: Mapping[str, Mapping[str, Rule]],
    per_class: ClassRuns | None,
    tail: float | None,
) -> list[RequirementCheck]:
    kind = METRICS.get(metric)
    names = list(record.class_names)
    if prefix:
        clean_values, corrupted_values = record.metrics[metric]["clean_per_class"], record.metrics[metric]["per_class"]
    else:
        clean_values, corrupted_values = record.clean_per_class, record.per_class
    checks = []
    for name, rules in class_rules.items():
        if name not in names:
            rule = next(iter(rules.values()))
            raise ValueError(f"{rule.path}: the dataset has no class {name!r}; its classes: {', '.join(names)}")
        k = names.index(name)
        clean, corrupted = clean_values[k], corrupted_values[k]
        point = (
            (math.nan, math.nan)
            if clean is None or corrupted is None
            else robustness(
                clean, corrupted, higher_is_better=kind.higher_is_better, worst=kind.worst(), scale=kind.scale()
            )
        )
        resampled = None
        if per_class is not None and tail is not None:
            resampled = robustness(
                per_class.clean[:, k],
                per_class.corrupted[:, k],
                higher_is_better=kind.higher_is_better,
                worst=kind.worst(),
                scale=kind.scale(),
            )
        for number, rule in rules.items():
            which = 0 if number == "gamma_r" else 1
            estimate = Estimate(
                float(point[which]),
                None if resampled is None else resampled[which],
                per_class.units if per_class is not None and resampled is not None else 0,
            )
            checks.append(
                decide(record.nodeid, f"{prefix}{number} of {name}", rule, estimate, at_least=True, tail=tail)
            )
    return checks


@dataclass(frozen=True)
class ClassRuns:
    """A metric's per-class scores of one cell's clean and corrupted run in each resample.

    Attributes:
        clean, corrupted: ``(R, K)``, NaN where a class is absent from a resample.
        units: How many units (images, clips) the bootstrap drew from: what the per-class
            intervals' degrees of freedom count.
    """

    clean: np.ndarray
    corrupted: np.ndarray
    units: int


# -- a model's aggregates -----------------------------------------------------------------------


@dataclass
class CellEvidence:
    """What a model's aggregates need of one of its cells.

    Attributes:
        record: The cell's record (its baseline numbers in ``baseline`` where one was compared).
        clean, corrupted: The headline's clean and corrupted score in each of the model's
            resamples, ``(R,)``; ``None`` without a statistical gate.
        images: Units (images, clips) resampled: what the aggregates' degrees of freedom count.
        paired: The candidate's and the baseline's resampled scores (what
            :meth:`pytest_segrobust.gate.evidence.Evidence.checks` returns), where a baseline was paired.
    """

    record: CellRecord
    clean: np.ndarray | None = None
    corrupted: np.ndarray | None = None
    images: int = 0
    paired: Mapping[str, Any] | None = None


def judge_model(
    suite: Suite,
    model: str,
    nodeid: str,
    cells: Mapping[str | None, Sequence[CellEvidence]],
    reference: Mapping[str | None, Sequence[CellRecord]] | None = None,
    suite_file: str = "",
) -> ModelOutcome:
    """Decide a model's aggregate requirements and aggregate margins.

    Args:
        cells: The model's cells per split (``None`` for a suite of one dataset), clean and corrupted.
        reference: The ``cd`` reference model's records per split, for mCE and rmCE.
        suite_file: The suite file as messages show it.
    """
    requirements, checks, notes = model_checks(suite, model, cells, reference)
    policy = suite.gate.inconclusive if suite.gate is not None else "fail"
    unmet = [c for c in requirements if c.outcome == "fail"]
    regressed = [c for c in checks if c.outcome == "fail"]
    undecided = [c for c in requirements if c.outcome == "inconclusive"] + [
        c for c in checks if c.outcome == "inconclusive"
    ]
    lines: list[str] = []
    if regressed:
        lines.append(f"{nodeid}: {len(regressed)} aggregate{'s' if len(regressed) > 1 else ''} regressed:")
        lines += [
            f"  {c.metric}: observed {shown_number(c.observed)}, baseline {shown_number(c.baseline)}, change {shown_number(c.delta)}, "
            f"interval [{shown_number(c.low)}, {shown_number(c.high)}] entirely below the margin {shown_number(-c.margin)} (gate.aggregates)"
            for c in regressed
        ]
    if unmet:
        lines.append(f"{nodeid}: {len(unmet)} requirement{'s' if len(unmet) > 1 else ''} not met:")
        lines += [f"  {c.subject}: {c.describe()}" for c in unmet]
    undecided_lines = []
    if undecided:
        undecided_lines.append(f"{nodeid}: {len(undecided)} undecided (suite policy: inconclusive: {policy}):")
        for c in undecided:
            if isinstance(c, RequirementCheck):
                undecided_lines.append(f"  {c.subject}: {c.describe()}")
            else:
                undecided_lines.append(
                    f"  {c.metric}: change {shown_number(c.delta)}, interval [{shown_number(c.low)}, {shown_number(c.high)}] straddles {shown_number(-c.margin)}"
                )
        if policy == "fail":
            lines += undecided_lines
    if lines and suite_file:
        lines.append(f"  suite file: {suite_file}")
    status = (
        Status.REGRESSED
        if regressed
        else Status.UNMET
        if unmet
        else (Status.INCONCLUSIVE if policy == "fail" else Status.INCONCLUSIVE_ALLOWED)
        if undecided
        else Status.PASSED
    )
    return ModelOutcome(
        nodeid,
        suite.name,
        model,
        status.value,
        tuple(requirements),
        tuple(checks),
        tuple(notes + (undecided_lines if undecided and policy == "warn" else [])),
        "\n".join(lines) if lines else None,
    )


def model_checks(
    suite: Suite,
    model: str,
    cells: Mapping[str | None, Sequence[CellEvidence]],
    reference: Mapping[str | None, Sequence[CellRecord]] | None = None,
) -> tuple[list[RequirementCheck], list[PairedCheck], list[str]]:
    """The model's aggregate requirements and aggregate margins, decided (see :func:`judge_model`)."""
    requirements = suite.requirements
    tail = per_test_tail(suite)
    kind = METRICS.get(suite.metric)
    at_least = bool(kind.higher_is_better)
    checks: list[RequirementCheck] = []
    paired: list[PairedCheck] = []
    notes: list[str] = []
    subject_of = {split: model if split is None else f"{model} @ {split}" for split in cells}
    clean_estimates: dict[str | None, Estimate] = {}
    for split, evidence in cells.items():
        subject = f"{subject_of[split]} aggregates"
        numbers = aggregates(evidence, kind)
        clean_estimates[split] = numbers.pop("clean")
        if requirements is not None:
            for number, rule in requirements.aggregates.items():
                if number in CROSS_MODEL:
                    value = _degradation(suite, number, [e.record for e in evidence], (reference or {}).get(split, []))
                    checks.append(
                        decide(subject, AGGREGATE_LABELS[number], rule, Estimate(value), at_least=False, tail=None)
                    )
                    continue
                number_at_least = at_least if number == "mpc" else True
                checks.append(
                    decide(
                        subject, AGGREGATE_LABELS[number], rule, numbers[number], at_least=number_at_least, tail=tail
                    )
                )
            for category, rules in requirements.category_aggregates.items():
                members = [e for e in evidence if e.record.category == category]
                per_category = aggregates([*(e for e in evidence if e.record.severity == 0), *members], kind)
                for number, rule in rules.items():
                    number_at_least = at_least if number == "mpc" else True
                    label = f"{AGGREGATE_LABELS[number]} ({category})"
                    checks.append(
                        decide(subject, label, rule, per_category[number], at_least=number_at_least, tail=tail)
                    )
        if suite.gate is not None and suite.gate.aggregates:
            found, why = _aggregate_regressions(suite, evidence)
            paired += found
            if why:
                notes.append(f"{subject_of[split]}: aggregate margins not compared: {why}")
    if requirements is not None and requirements.split_delta and suite.shifts is not None:
        reference_clean = clean_estimates.get(suite.shifts.reference)
        for split, rule in requirements.split_delta.items():
            if split not in clean_estimates or reference_clean is None:
                notes.append(f"{model} @ {split}: Δ% not decided: the split or the reference split was not evaluated")
                continue
            estimate = _delta_pct(clean_estimates[split], reference_clean)
            checks.append(
                decide(
                    f"{model} @ {split} aggregates",
                    AGGREGATE_LABELS["delta_pct"],
                    rule,
                    estimate,
                    at_least=at_least,
                    tail=tail,
                )
            )
    return checks, paired, notes


def aggregates(evidence: Sequence[CellEvidence], kind: Any) -> dict[str, Estimate]:
    """mPC, rPC, mean gamma_r and mean gamma_a of a model's cells (and its clean score), with their
    resamples where every cell has them."""
    corrupted = [e for e in evidence if e.record.severity > 0]
    clean_cell = next((e for e in evidence if e.record.severity == 0), None)
    first = clean_cell or (corrupted[0] if corrupted else None)
    if first is None:
        nan = Estimate(math.nan)
        return {"clean": nan, "mpc": nan, "rpc": nan, "mean_gamma_r": nan, "mean_gamma_a": nan}
    clean_value = first.record.clean_score
    mpc = mean(e.record.score for e in corrupted)
    observed = {
        "clean": clean_value,
        "mpc": mpc,
        "rpc": mpc / clean_value if clean_value else math.nan,
        "mean_gamma_r": mean(e.record.gamma_r for e in corrupted if e.record.gamma_r is not None),
        "mean_gamma_a": mean(e.record.gamma_a for e in corrupted if e.record.gamma_a is not None),
    }
    resampled = all(e.corrupted is not None and e.clean is not None for e in (*corrupted, first))
    if not resampled or not corrupted:
        return {name: Estimate(value) for name, value in observed.items()}
    clean = np.asarray(first.clean, dtype=np.float64)
    scores = np.stack([np.asarray(e.corrupted, dtype=np.float64) for e in corrupted])  # (C, R)
    gamma_r, gamma_a = robustness(
        clean, scores, higher_is_better=kind.higher_is_better, worst=kind.worst(), scale=kind.scale()
    )
    images = first.images
    mpc_r = scores.mean(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        rpc_r = mpc_r / clean
    per_resample = {
        "clean": clean,
        "mpc": mpc_r,
        "rpc": rpc_r,
        "mean_gamma_r": gamma_r.mean(axis=0),
        "mean_gamma_a": gamma_a.mean(axis=0),
    }
    return {name: Estimate(observed[name], per_resample[name], images) for name in observed}


def _delta_pct(split: Estimate, reference: Estimate) -> Estimate:
    """A split's clean score's change from the reference split's, in percent (two independent sets of images)."""
    observed = 100.0 * (split.observed - reference.observed) / reference.observed if reference.observed else math.nan
    if split.resampled is None or reference.resampled is None:
        return Estimate(observed)
    with np.errstate(divide="ignore", invalid="ignore"):
        resampled = 100.0 * (split.resampled - reference.resampled) / reference.resampled
    return Estimate(observed, resampled, min(split.images, reference.images))


def _degradation(suite: Suite, number: str, records: Sequence[CellRecord], reference: Sequence[CellRecord]) -> float:
    """mCE (``mce``) or rmCE (``rmce``) of ``records`` against the reference model's, in percent,
    as the report's corruption degradation table computes them."""
    if suite.degradation is None or not reference:
        return math.nan
    noise = set(suite.degradation.noise_severities)
    mine_clean = next((r.clean_score for r in records), math.nan)
    theirs_clean = next((r.clean_score for r in reference), math.nan)
    values = []
    for corruption in dict.fromkeys(r.corruption for r in reference if r.severity > 0):

        def errors(rs: Iterable[CellRecord], name: str = corruption) -> dict[int, float]:
            return {
                r.severity: error(r.score)
                for r in rs
                if r.severity > 0 and r.corruption == name and (r.category != "noise" or r.severity in noise)
            }

        mine, theirs = errors(records), errors(reference)
        shared = sorted(set(mine) & set(theirs))
        if not shared:
            continue
        if number == "mce":
            values.append(100 * corruption_degradation([mine[s] for s in shared], [theirs[s] for s in shared]))
        else:
            values.append(
                100
                * relative_corruption_degradation(
                    [mine[s] for s in shared], error(mine_clean), [theirs[s] for s in shared], error(theirs_clean)
                )
            )
    return mean(values)


def _aggregate_regressions(suite: Suite, evidence: Sequence[CellEvidence]) -> tuple[list[PairedCheck], str | None]:
    """The model's aggregates against its baseline's, each against its margin (``gate.aggregates``).

    Every cell of a model is resampled with the same images, so an aggregate's change in one
    resample is the aggregate of its cells' changes in that resample.
    """
    assert suite.gate is not None
    corrupted = [e for e in evidence if e.record.severity > 0]
    lacking = [e.record.nodeid for e in corrupted if e.paired is None or not e.record.baseline]
    if not corrupted:
        return [], "the model has no corrupted cell"
    if lacking:
        return (
            [],
            f"{len(lacking)} of {len(corrupted)} cells have no baseline statistics to pair with (e.g. {lacking[0]})",
        )
    images = int(corrupted[0].paired["images"])  # type: ignore[index]
    clean = unpack(corrupted[0].paired["clean"]).astype(np.float64)  # type: ignore[index]  # (2, R): candidate, baseline
    scores = np.stack([unpack(e.paired["corrupted"]).astype(np.float64) for e in corrupted])  # type: ignore[index]  # (C, 2, R)
    seen = np.array([[e.record.score, float(e.record.baseline["score"])] for e in corrupted])  # type: ignore[index]
    stored_gamma = [float((e.record.baseline or {}).get("gamma_r") or 0.0) for e in corrupted]
    base_clean = seen[0, 1] / stored_gamma[0] if stored_gamma[0] else corrupted[0].record.clean_score
    seen_clean = np.array([corrupted[0].record.clean_score, base_clean])
    groups: list[tuple[str, str, list[int]]] = []
    margins = suite.gate.aggregates
    for number in AGGREGATE_MARGINS:
        if number in margins:
            groups.append((number, AGGREGATE_LABELS[number], list(range(len(corrupted)))))
    categories = list(dict.fromkeys(e.record.category for e in corrupted))
    if "mean_gamma_r" in margins and len(categories) > 1:
        for category in categories:
            members = [i for i, e in enumerate(corrupted) if e.record.category == category]
            groups.append(("mean_gamma_r", f"{AGGREGATE_LABELS['mean_gamma_r']} ({category})", members))
    level = cell_level(suite)
    checks = []
    for number, label, members in groups:
        if number == "mpc":
            values, per_resample = seen[members].mean(0), scores[members].mean(0)
        elif number == "rpc":
            values, per_resample = seen[members].mean(0) / seen_clean, scores[members].mean(0) / clean
        else:
            values, per_resample = (seen[members] / seen_clean).mean(0), (scores[members] / clean).mean(0)
        change = Change(float(values[0] - values[1]), per_resample[0] - per_resample[1], images)
        gated = GatedNumber(label, values[0], values[1])
        checks.append(decide_paired(gated, change, margins[number], level, get_task(suite.task).resampling_unit))
    return checks, None
