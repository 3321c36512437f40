"""Release criteria: the absolute thresholds a suite requires (``require:``), and their decisions.

A baseline says "no worse than before"; a requirement says "good enough to ship"::

    require:
      score: 50                                  # every cell's headline score (clean and corrupted)
      gamma_r: 0.80                              # every corrupted cell
      gamma_a: 0.90
      severities: {3: {gamma_r: 0.85}}
      corruptions: {gaussian_noise: {gamma_r: 0.70}}
      categories: {noise: {gamma_r: 0.75}}
      classes: {person: {gamma_r: 0.75}}         # per-class relative robustness
      metrics: {boundary_iou: {gamma_r: 0.70}}   # a further metric's own rules
      aggregates: {mpc: 45, rpc: 0.80, mean_gamma_r: 0.85, mce: 100}
      splits: {ood-hard: {delta_pct: -20}}       # natural-shift suites

**Which rule applies.** The top-level numbers (``score``, ``gamma_r``, ``gamma_a``) hold for every
cell of the headline metric; ``metrics: {name: {...}}`` gives a further metric rules of the same
form. ``splits``, ``categories``, ``severities`` and ``corruptions`` narrow a rule to their cells,
and nest (``corruptions: {rotate: {severities: {5: {gamma_r: 0.5}}}}``). For each cell and number
the narrowest rule that names it applies, a corruption being narrower than a severity, a
severity than a category and a category than a split (a rule's narrowness adds up over its
nesting); two rules equally narrow (reached by different nestings) both hold, so the stricter
decides. ``classes`` rules nest the same way.

**Direction.** A threshold is a minimum, except for a number that is better lower: the score of
an error metric (its ``higher_is_better`` is false), mPC of such a metric, and mCE / rmCE
(Kamann and Rother's corruption degradation against the suite's ``cd`` reference, in percent),
for which it is a maximum.

**Decision.** Under a statistical gate (``gate:`` in the suite) each requirement is decided with
the per-image bootstrap of the regression gate (the same resamples), as a one-sided test at the
suite's confidence counted in its multiplicity family: it passes when its lower confidence bound
is at or above a minimum (upper bound at or below a maximum), fails when the other bound is
beyond the threshold, and is inconclusive otherwise, which the suite's ``inconclusive`` policy
turns into a failure, a warning or a pass. Without a statistical gate, the point value is
compared, and the report says so. mCE and rmCE compare two models, which the per-model bootstrap
does not resample together: they are always compared by point value.

This module is pure: it parses, resolves and decides; the session feeds it numbers. Its decisions
are values of :mod:`pytest_segrobust.store.decisions`, which records and the report carry.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from statistics import NormalDist
from typing import Any

import numpy as np
import yaml

from pytest_segrobust.core.errors import FieldError
from pytest_segrobust.core.statistics import t_quantile
from pytest_segrobust.core.wording import shown_number
from pytest_segrobust.store.decisions import RequirementCheck, RuleSummary
from pytest_segrobust.suite.yaml_loader import compose_yaml

CELL_NUMBERS = ("score", "gamma_r", "gamma_a")
"""The numbers a rule block may require of a cell."""
AGGREGATE_NUMBERS = ("mpc", "rpc", "mean_gamma_r", "mean_gamma_a", "mce", "rmce")
"""The numbers ``aggregates`` may require of a model (per split in a natural-shift suite)."""
CATEGORY_AGGREGATES = ("mpc", "rpc", "mean_gamma_r", "mean_gamma_a")
"""The aggregates a category of ``aggregates.categories`` may require."""
SPLIT_NUMBERS = ("delta_pct",)
"""What a split may require besides a rule block: its clean score's change from the reference split, in percent."""
CROSS_MODEL = ("mce", "rmce")
"""Aggregates against the suite's reference model: compared by point value."""
AGGREGATE_LABELS = {
    "mpc": "mPC",
    "rpc": "rPC",
    "mean_gamma_r": "mean γr",
    "mean_gamma_a": "mean γa",
    "mce": "mCE",
    "rmce": "rmCE",
    "delta_pct": "Δ%",
}
MODEL_ITEM = "aggregates"
"""The name of each model's item that decides its aggregates (``suites/demo.yaml::tiny-unet::aggregates``)."""
POWER = 0.8
"""The power at which the report states the threshold a number could confirm."""

# How much narrower a level makes a rule: a corruption is narrower than a severity, a severity
# than a category, a category than a split. Powers of two, so nestings add up unambiguously.
_NARROWNESS = {"splits": 1, "categories": 2, "severities": 4, "corruptions": 8}
_LEVELS = ("categories", "severities", "corruptions")
_BLOCK_KEYS = (*CELL_NUMBERS, "classes", *_LEVELS)
_TOP_KEYS = (*_BLOCK_KEYS, "metrics", "aggregates", "splits")
_NORMAL = NormalDist()


class RequirementError(FieldError):
    """A ``require:`` block that cannot be read; ``field`` is the dotted path of the bad entry."""


@dataclass(frozen=True)
class Rule:
    """One threshold as the suite states it.

    Attributes:
        number: What it bounds (``score``, ``gamma_r``, ``mpc``, ``delta_pct``...).
        threshold: The bound, in the number's unit.
        path: Where the suite states it, as a dotted path (``require.corruptions.rotate.gamma_r``).
        line: Its line in the suite file (1-based), where known.
        narrowness: How narrow the rule is (the sum of its levels' weights); the narrowest applies.
    """

    number: str
    threshold: float
    path: str
    line: int | None = None
    narrowness: int = 0

    def where(self, suite_file: str) -> str:
        """``suites/demo.yaml:31 (require.gamma_r)``: the suite line to change."""
        return f"{suite_file}:{self.line} ({self.path})" if self.line else f"{suite_file} ({self.path})"


@dataclass(frozen=True)
class Block:
    """Rules for the cells of one level: numbers, per-class numbers, and narrower levels."""

    numbers: Mapping[str, Rule] = field(default_factory=dict)
    classes: Mapping[str, Mapping[str, Rule]] = field(default_factory=dict)
    categories: Mapping[str, Block] = field(default_factory=dict)
    severities: Mapping[int, Block] = field(default_factory=dict)
    corruptions: Mapping[str, Block] = field(default_factory=dict)

    def matching(self, cell: CellPlace, narrowness: int = 0) -> Iterable[tuple[int, Block]]:
        """This block and every nested one that holds for ``cell``, with their narrowness."""
        yield narrowness, self
        for level, key in (
            ("categories", cell.category),
            ("severities", cell.severity),
            ("corruptions", cell.corruption),
        ):
            sub = getattr(self, level).get(key)
            if sub is not None and cell.severity > 0:
                yield from sub.matching(cell, narrowness + _NARROWNESS[level])

    def rules(self) -> Iterable[Rule]:
        yield from self.numbers.values()
        for per_class in self.classes.values():
            yield from per_class.values()
        for level in _LEVELS:
            for sub in getattr(self, level).values():
                yield from sub.rules()


@dataclass(frozen=True)
class CellPlace:
    """Where a cell sits in a suite: what rules select it by."""

    corruption: str
    category: str
    severity: int
    split: str | None = None


@dataclass(frozen=True)
class Requirements:
    """A suite's validated ``require:`` block.

    Attributes:
        headline: The headline metric's rules.
        metrics: Each further metric's rules, by name.
        aggregates: The model's aggregates (per split in a natural-shift suite).
        category_aggregates: Aggregates over one category's cells, by category.
        splits: Per split, rules for its cells (the headline metric's) and its ``delta_pct``.
        split_delta: Per split, the minimum change of its clean score from the reference split, in percent.
    """

    headline: Block = Block()
    metrics: Mapping[str, Block] = field(default_factory=dict)
    aggregates: Mapping[str, Rule] = field(default_factory=dict)
    category_aggregates: Mapping[str, Mapping[str, Rule]] = field(default_factory=dict)
    splits: Mapping[str, Block] = field(default_factory=dict)
    split_delta: Mapping[str, Rule] = field(default_factory=dict)

    @property
    def has_model_level(self) -> bool:
        """Whether anything is required of a model's aggregates (its ``aggregates`` item decides it)."""
        return bool(self.aggregates or self.category_aggregates or self.split_delta)

    def cell_rules(
        self, metric: str, headline: str, cell: CellPlace, *, score_at_least: bool = True
    ) -> dict[str, Rule]:
        """The rule of each number that applies to ``cell`` for ``metric`` (ties: the stricter, see
        :func:`stricter`; ``score_at_least`` is false for an error metric, whose score has maxima)."""
        return _narrowest(
            self._blocks(metric, headline, cell), lambda block: block.numbers.items(), cell, score_at_least
        )

    def class_rules(self, metric: str, headline: str, cell: CellPlace) -> dict[str, dict[str, Rule]]:
        """Per class, the rule of each number that applies to ``cell`` for ``metric``."""
        classes: dict[str, dict[str, Rule]] = {}
        blocks = list(self._blocks(metric, headline, cell))
        names = dict.fromkeys(name for _, block in blocks for name in block.classes)
        for name in names:
            rules = _narrowest(blocks, lambda block, name=name: block.classes.get(name, {}).items(), cell)
            if rules:
                classes[name] = rules
        return classes

    def _blocks(self, metric: str, headline: str, cell: CellPlace) -> list[tuple[int, Block]]:
        if metric != headline:
            block = self.metrics.get(metric)
            return [] if block is None else list(block.matching(cell))
        found = list(self.headline.matching(cell))
        split = self.splits.get(cell.split) if cell.split is not None else None
        if split is not None:
            found += list(split.matching(cell, _NARROWNESS["splits"]))
        return found

    def all_rules(self) -> list[Rule]:
        out = [*self.headline.rules()]
        for block in (*self.metrics.values(), *self.splits.values()):
            out += block.rules()
        out += self.aggregates.values()
        for per_category in self.category_aggregates.values():
            out += per_category.values()
        return [*out, *self.split_delta.values()]


def _narrowest(
    blocks: Iterable[tuple[int, Block]],
    items: Callable[[Block], Iterable[tuple[str, Rule]]],
    cell: CellPlace,
    score_at_least: bool = True,
) -> dict[str, Rule]:
    chosen: dict[str, Rule] = {}
    for narrowness, block in blocks:
        for number, rule in items(block):
            if number in ("gamma_r", "gamma_a") and cell.severity == 0:
                continue  # a clean cell has no robustness to require
            rule = Rule(rule.number, rule.threshold, rule.path, rule.line, narrowness)
            held = chosen.get(number)
            if held is None or narrowness > held.narrowness:
                chosen[number] = rule
            elif narrowness == held.narrowness:
                chosen[number] = stricter(held, rule, score_at_least if number == "score" else True)
    return chosen


def stricter(a: Rule, b: Rule, at_least: bool = True) -> Rule:
    """Of two equally narrow rules for one number, the one that asks more."""
    if at_least:
        return a if a.threshold >= b.threshold else b
    return a if a.threshold <= b.threshold else b


# -- reading the YAML ------------------------------------------------------------------------


@dataclass(frozen=True)
class SuiteShape:
    """What the validator knows of the suite that a ``require:`` block must fit."""

    headline: str
    metrics: tuple[str, ...]
    corruptions: Mapping[str, str]  # name -> category
    severities: tuple[int, ...]
    splits: tuple[str, ...] | None  # None: not a natural-shift suite
    reference_split: str | None
    has_cd: bool
    lower_is_better: frozenset[str]  # metrics whose score is better lower
    percent: frozenset[str]  # metrics on a 0..100 higher-is-better scale (what mCE reads)


def parse_requirements(raw: Any, shape: SuiteShape, suite_file: Path | None = None) -> Requirements:
    """Validate a suite's ``require:`` mapping against the suite it belongs to.

    Raises:
        RequirementError: naming the dotted field at fault; every key is known or an error.
    """
    lines = _lines(suite_file) if suite_file is not None else {}
    reader = _Reader(shape, lines)
    return reader.top(raw)


class _Reader:
    def __init__(self, shape: SuiteShape, lines: Mapping[str, int]) -> None:
        self.shape = shape
        self.lines = lines

    def fail(self, where: str, message: str) -> RequirementError:
        return RequirementError(where, message)

    def top(self, raw: Any) -> Requirements:
        where = "require"
        mapping = self.mapping(where, raw, _TOP_KEYS)
        headline = self.block(where, {k: v for k, v in mapping.items() if k in _BLOCK_KEYS}, self.shape.headline)
        metrics: dict[str, Block] = {}
        if "metrics" in mapping:
            listed = self.mapping(f"{where}.metrics", mapping["metrics"], None)
            for name, spec in listed.items():
                here = f"{where}.metrics.{name}"
                if name == self.shape.headline:
                    raise self.fail(here, f"{name} is the headline metric: its rules are the top-level ones of require")
                if name not in self.shape.metrics:
                    raise self.fail(
                        here,
                        f"the suite has no metric {name!r}; its further metrics: {_listing(self.shape.metrics[1:])}",
                    )
                metrics[name] = self.block(here, self.mapping(here, spec, _BLOCK_KEYS), name)
        aggregates, categories = ({}, {}) if "aggregates" not in mapping else self.aggregates(mapping["aggregates"])
        splits, deltas = ({}, {}) if "splits" not in mapping else self.splits(mapping["splits"])
        requirements = Requirements(headline, metrics, aggregates, categories, splits, deltas)
        if not requirements.all_rules():
            raise self.fail(where, "states no threshold; remove it or require at least one number")
        return requirements

    def block(
        self, where: str, raw: Mapping[str, Any], metric: str, narrowness: int = 0, used: frozenset[str] = frozenset()
    ) -> Block:
        numbers = {n: self.rule(f"{where}.{n}", n, raw[n], metric, narrowness) for n in CELL_NUMBERS if n in raw}
        classes: dict[str, dict[str, Rule]] = {}
        if "classes" in raw:
            for name, spec in self.mapping(f"{where}.classes", raw["classes"], None).items():
                here = f"{where}.classes.{name}"
                listed = self.mapping(here, spec, ("gamma_r", "gamma_a"))
                if not listed:
                    raise self.fail(here, "expected gamma_r and/or gamma_a")
                classes[str(name)] = {n: self.rule(f"{here}.{n}", n, v, metric, narrowness) for n, v in listed.items()}
        levels: dict[str, dict[Any, Block]] = {level: {} for level in _LEVELS}
        for level in _LEVELS:
            if level not in raw:
                continue
            if level in used:
                raise self.fail(f"{where}.{level}", f"is nested inside {level} already")
            for key, spec in self.mapping(f"{where}.{level}", raw[level], None).items():
                here = f"{where}.{level}.{key}"
                self.check_level_key(here, level, key)
                sub = self.mapping(here, spec, _BLOCK_KEYS)
                if not sub:
                    raise self.fail(here, "states no threshold")
                levels[level][key] = self.block(here, sub, metric, narrowness + _NARROWNESS[level], used | {level})
        return Block(numbers, classes, levels["categories"], levels["severities"], levels["corruptions"])

    def check_level_key(self, where: str, level: str, key: Any) -> None:
        shape = self.shape
        if level == "severities":
            if isinstance(key, bool) or not isinstance(key, int) or key not in shape.severities:
                raise self.fail(
                    where, f"the suite runs severities {_listing(shape.severities)}; {key!r} is not one of them"
                )
        elif level == "corruptions":
            if key not in shape.corruptions:
                raise self.fail(where, f"the suite has no corruption {key!r}; it has {_listing(shape.corruptions)}")
        else:
            categories = tuple(dict.fromkeys(shape.corruptions.values()))
            if key not in categories:
                raise self.fail(
                    where, f"no corruption of the suite is of category {key!r}; its categories: {_listing(categories)}"
                )

    def aggregates(self, raw: Any) -> tuple[dict[str, Rule], dict[str, dict[str, Rule]]]:
        where = "require.aggregates"
        mapping = self.mapping(where, raw, (*AGGREGATE_NUMBERS, "categories"))
        rules: dict[str, Rule] = {}
        for number in AGGREGATE_NUMBERS:
            if number not in mapping:
                continue
            if number in CROSS_MODEL:
                if not self.shape.has_cd:
                    raise self.fail(
                        f"{where}.{number}",
                        f"{number} is against the suite's reference model: set 'cd: {{reference: <model>}}'",
                    )
                if self.shape.headline not in self.shape.percent:
                    raise self.fail(
                        f"{where}.{number}",
                        f"{number} reads errors 1 - score/100 of a percent metric; {self.shape.headline} is not one",
                    )
            rules[number] = self.rule(f"{where}.{number}", number, mapping[number], self.shape.headline)
        categories: dict[str, dict[str, Rule]] = {}
        if "categories" in mapping:
            for key, spec in self.mapping(f"{where}.categories", mapping["categories"], None).items():
                here = f"{where}.categories.{key}"
                self.check_level_key(here, "categories", key)
                listed = self.mapping(here, spec, CATEGORY_AGGREGATES)
                if not listed:
                    raise self.fail(here, f"expected one of {', '.join(CATEGORY_AGGREGATES)}")
                categories[str(key)] = {
                    n: self.rule(f"{here}.{n}", n, v, self.shape.headline) for n, v in listed.items()
                }
        return rules, categories

    def splits(self, raw: Any) -> tuple[dict[str, Block], dict[str, Rule]]:
        where = "require.splits"
        if self.shape.splits is None:
            raise self.fail(where, "the suite has no natural shifts (shifts:); split rules need them")
        blocks: dict[str, Block] = {}
        deltas: dict[str, Rule] = {}
        for key, spec in self.mapping(where, raw, None).items():
            here = f"{where}.{key}"
            if key not in self.shape.splits:
                raise self.fail(here, f"the suite has no split {key!r}; its splits: {_listing(self.shape.splits)}")
            mapping = self.mapping(here, spec, (*_BLOCK_KEYS, *SPLIT_NUMBERS))
            if not mapping:
                raise self.fail(here, "states no threshold")
            if "delta_pct" in mapping:
                if key == self.shape.reference_split:
                    raise self.fail(
                        f"{here}.delta_pct", f"{key} is the reference split: its change from itself is 0 by definition"
                    )
                deltas[str(key)] = self.rule(
                    f"{here}.delta_pct", "delta_pct", mapping["delta_pct"], self.shape.headline
                )
            rest = {k: v for k, v in mapping.items() if k in _BLOCK_KEYS}
            if rest:
                blocks[str(key)] = self.block(here, rest, self.shape.headline, _NARROWNESS["splits"])
        return blocks, deltas

    def rule(self, where: str, number: str, value: Any, metric: str, narrowness: int = 0) -> Rule:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise self.fail(where, f"expected a finite number, got {value!r}")
        if number in ("gamma_r", "gamma_a", "rpc", "mean_gamma_r", "mean_gamma_a") and value <= 0:
            raise self.fail(where, f"a robustness threshold is a fraction above 0 (0.8 for 80%), got {value!r}")
        if number in ("score", "mpc") and metric in self.shape.percent and not 0 <= value <= 100:
            raise self.fail(where, f"{metric} is a percentage: expected a threshold in 0..100, got {value!r}")
        return Rule(number, float(value), where, self.lines.get(where), narrowness)

    def mapping(self, where: str, raw: Any, keys: Sequence[str] | None) -> dict[Any, Any]:
        if not isinstance(raw, dict):
            expected = f"a mapping of {', '.join(keys)}" if keys else "a mapping"
            raise self.fail(where, f"expected {expected}, got {raw!r}")
        if keys is not None:
            unknown = [str(k) for k in raw if k not in keys]
            if unknown:
                raise self.fail(f"{where}.{unknown[0]}", f"unknown field; expected one of {', '.join(keys)}")
        return raw


def _listing(values: Iterable[Any]) -> str:
    return ", ".join(str(v) for v in values) or "none"


def _lines(path: Path) -> dict[str, int]:
    """The line (1-based) of every key under ``require`` in the suite file, by dotted path."""
    try:
        document = compose_yaml(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return {}
    lines: dict[str, int] = {}

    def walk(node: yaml.Node, prefix: str) -> None:
        if not isinstance(node, yaml.MappingNode):
            return
        for key, value in node.value:
            path = f"{prefix}.{key.value}" if prefix else str(key.value)
            lines[path] = key.start_mark.line + 1
            walk(value, path)

    if isinstance(document, yaml.MappingNode):
        for key, value in document.value:
            if key.value == "require":
                lines["require"] = key.start_mark.line + 1
                walk(value, "require")
    return lines


# -- deciding --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Estimate:
    """A number as observed and, under a statistical gate, in each bootstrap resample.

    Attributes:
        observed: Its value on the images as they are.
        resampled: Its value in each resample, ``(R,)``; ``None`` for a point value only.
        images: How many images (clips, samples) were resampled.
    """

    observed: float
    resampled: np.ndarray | None = None
    images: int = 0

    @property
    def standard_error(self) -> float | None:
        """The bootstrap standard error, widened by ``sqrt(n / (n - 1))`` as the paired gate's."""
        if self.resampled is None:
            return None
        values = self.resampled[np.isfinite(self.resampled)]
        if values.size < 2:
            return math.nan
        spread = float(np.std(values, ddof=1))
        return spread * math.sqrt(self.images / (self.images - 1)) if self.images > 1 else spread


def decide(
    subject: str, number: str, rule: Rule, estimate: Estimate, *, at_least: bool, tail: float | None
) -> RequirementCheck:
    """Decide one requirement.

    Args:
        subject, number: What is measured, as messages name it.
        rule: The threshold and where the suite states it.
        estimate: The number, with its resamples under a statistical gate.
        at_least: The threshold is a minimum (else a maximum).
        tail: The one-sided error rate of each bound (the suite's, split over its family);
            ``None`` compares the point value.
    """
    value, threshold = estimate.observed, rule.threshold
    se = estimate.standard_error if tail is not None else None
    if not math.isfinite(value):
        return RequirementCheck(subject, number, rule.path, rule.line, threshold, at_least, value, None, None, "fail")
    if se is None:
        met = value >= threshold if at_least else value <= threshold
        return RequirementCheck(
            subject, number, rule.path, rule.line, threshold, at_least, value, None, None, "pass" if met else "fail"
        )
    if not math.isfinite(se):
        se = 0.0 if estimate.resampled is not None and np.all(estimate.resampled == value) else math.inf
    quantile = t_quantile(tail, estimate.images) if tail is not None else 0.0
    low, high = value - quantile * se, value + quantile * se
    if at_least:
        outcome = "pass" if low >= threshold else "fail" if high < threshold else "inconclusive"
    else:
        outcome = "pass" if high <= threshold else "fail" if low > threshold else "inconclusive"
    reach = (quantile + _NORMAL.inv_cdf(POWER)) * se
    confirmable = value - reach if at_least else value + reach
    return RequirementCheck(
        subject,
        number,
        rule.path,
        rule.line,
        threshold,
        at_least,
        value,
        low,
        high,
        outcome,
        confirmable,
        estimate.images,
    )


def robustness(
    clean: np.ndarray | float, corrupted: np.ndarray | float, *, higher_is_better: bool, worst: float, scale: float
) -> tuple[Any, Any]:
    """gamma_r and gamma_a, vectorised over resamples, as :mod:`pytest_segrobust.metrics.robustness` defines them."""
    clean_a, corrupted_a = np.asarray(clean, dtype=np.float64), np.asarray(corrupted, dtype=np.float64)
    degradation = clean_a - corrupted_a if higher_is_better else corrupted_a - clean_a
    room = clean_a - worst if higher_is_better else worst - clean_a
    with np.errstate(divide="ignore", invalid="ignore"):
        gamma_r = np.where(room == 0, np.nan, 1.0 - degradation / np.where(room == 0, 1.0, room))
    return gamma_r, 1.0 - degradation / scale


def summarize(checks: Iterable[RequirementCheck]) -> list[RuleSummary]:
    """One :class:`RuleSummary` per rule and number, in the order they first appear."""
    groups: dict[tuple[str, str], list[RequirementCheck]] = {}
    for check in checks:
        groups.setdefault((check.rule, check.number), []).append(check)
    out = []
    for (rule, number), members in groups.items():
        first = members[0]
        sign = 1.0 if first.at_least else -1.0

        def slack(c: RequirementCheck, sign: float = sign) -> float:
            bound = c.observed if c.low is None else (c.low if c.at_least else c.high)
            value = bound if bound is not None and math.isfinite(bound) else -math.inf * sign
            return sign * (value - c.threshold)

        outcomes: dict[str, int] = {}
        for c in members:
            outcomes[c.outcome] = outcomes.get(c.outcome, 0) + 1
        reach = [c.confirmable for c in members if c.confirmable is not None]
        confirmable = (min(reach) if first.at_least else max(reach)) if reach and len(reach) == len(members) else None
        out.append(
            RuleSummary(
                rule,
                first.line,
                number,
                first.threshold,
                first.at_least,
                outcomes,
                min(members, key=slack),
                confirmable,
                closest=min(members, key=lambda c: abs(slack(c))),
            )
        )
    return out


def unmet_lines(checks: Iterable[RequirementCheck], suite_file: str) -> list[str]:
    """One terminal line per requirement (rule) that failed or stayed undecided, naming the suite line to change."""
    lines = []
    for summary in summarize(checks):
        if summary.outcome == "pass":
            continue
        c = summary.worst
        where = f"{suite_file}:{summary.line}" if summary.line else suite_file
        state = "unmet" if summary.outcome == "fail" else "undecided"
        count = summary.outcomes.get(summary.outcome, 0)
        bounds = "" if c.low is None else f", bounds [{shown_number(c.low)}, {shown_number(c.high)}]"
        lines.append(
            f"{where}: {summary.rule} {c.relation} {shown_number(summary.threshold)} {state} for {count} of {summary.decisions} "
            f"(worst: {c.subject}: {c.number} {shown_number(c.observed)}{bounds})"
        )
    return lines
