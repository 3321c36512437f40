"""Robustness suites: the YAML schema, validated into typed objects at the boundary.

A suite names the task (``semantic``, scored by mIoU, or ``instance``, scored by COCO
mask AP), the models, the dataset, the corruptions and severities, the metric and the
tolerances of its gate. Every error names the file and the field at fault.

Example::

    name: demo
    task: semantic
    dataset:
      factory: pytest_segrobust.data.demo:demo_dataset
      kwargs: {split: val}
    models:
      - name: tiny-unet
        factory: pytest_segrobust.models.demo:tiny_unet
    corruptions: [gaussian_noise, defocus_blur, rotate]
    severities: [1, 2, 3, 4, 5]
    metric: miou              # the task's default; an instance suite uses map
    tolerance: {gamma_r: 0.01, score: 1.0}
    batch_size: 16
    seed: 0
    timeout: 600              # seconds a cell may take (optional; no limit by default)

A suite of a task that reads referring expressions (``referring``, ``rvos``) may also list text
perturbations (``misspelling``, ``mispunctuation``, ``grammar_error``, ``character_missing``) and
cross-modal compositions of one image corruption and one text perturbation
(``gaussian_noise+misspelling``) in ``corruptions``.

A task may accept keys of its own (:attr:`Task.suite_keys <pytest_segrobust.tasks.base.Task.suite_keys>`):
:meth:`Task.suite_names <pytest_segrobust.tasks.base.Task.suite_names>` reads what they let
``corruptions`` name before that list is read (a replay file's text perturbations), and
:meth:`Task.suite_cells <pytest_segrobust.tasks.base.Task.suite_cells>` what they make of the cells.
The video tasks (``vos``, ``rvos``) take ``static:``, ``dynamic:`` and ``temporal:`` (see
:mod:`pytest_segrobust.tasks.clip_cells`), the referring ones (``referring``, ``rvos``)
``text_replay:`` and ``mixture:`` (see :mod:`pytest_segrobust.tasks.referring_cells`), the
audio-visual one ``acoustic:`` and its own ``mixture:`` (see :mod:`pytest_segrobust.tasks.avs`).
Another task's key is refused, naming the task that takes it.

Relative paths in factory arguments (dataset folders, weight files) mean the same from any
working directory: factories run, and datasets read, with the pytest rootdir as the current
directory, where baselines and the report go too. Modules next to the suite file or in the
rootdir are importable as factories without any ``pythonpath`` setting.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from pytest_segrobust.core.errors import FieldError, SegRobustError, SuiteError, UnknownNameError
from pytest_segrobust.core.extras import Extra, unmet
from pytest_segrobust.core.types import Expressions, VideoMasks
from pytest_segrobust.core.wording import did_you_mean
from pytest_segrobust.corruptions import DEFAULT_PRESET, REGISTRY, CorruptionRegistry
from pytest_segrobust.corruptions.base import MAX_SEVERITY, Corruption
from pytest_segrobust.corruptions.composition import SEPARATOR
from pytest_segrobust.metrics import METRICS
from pytest_segrobust.suite.factories import FactorySpec, read_factory
from pytest_segrobust.suite.model_sources import MODEL_SOURCES, EntryContext, ModelSpec, listed_sources, source_keys
from pytest_segrobust.suite.requirements import RequirementError, Requirements, SuiteShape, parse_requirements
from pytest_segrobust.suite.yaml_loader import load_yaml
from pytest_segrobust.tasks import TASKS, get_task
from pytest_segrobust.tasks.base import SuiteCells, SuiteKeyError, SuiteNames, Task
from pytest_segrobust.text.cells import CellResolver, is_text_name, resolve_cell
from pytest_segrobust.text.registry import TEXT_PERTURBATIONS, TextPerturbationRegistry

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")


def name_problem(text: str) -> str | None:
    """Why ``text`` cannot name a suite, model or split (it names files and node ids), or ``None``."""
    return None if _NAME.match(text) else f"{text!r} is not a valid name (letters, digits, '_', '.', '+', '-')"


DEFAULT_TASK = "semantic"
DEFAULT_BATCH_SIZE = 16
DEFAULT_SEED = 0


@dataclass(frozen=True)
class SuiteKey:
    """One top-level key every suite may set (a task's own keys are the task's: ``Task.suite_keys``).

    The documentation's suite reference is generated from :data:`SUITE_KEYS`, and the loader
    accepts exactly these keys, so the two cannot drift apart.

    Attributes:
        name: The key as a suite writes it.
        kind: What its value is, in words (``integer >= 1``, ``mapping``...).
        default: What an absent key means, as YAML or in words (``required`` where it must be given).
        meaning: One sentence: what it sets.
    """

    name: str
    kind: str
    default: str
    meaning: str


SUITE_KEYS: tuple[SuiteKey, ...] = (
    SuiteKey("name", "string", "the file's name without .yaml", "names the suite, its node ids and its baseline file baselines/NAME.json"),
    SuiteKey("description", "string", '""', "one line about the suite, shown in the report"),
    SuiteKey("task", "task name", DEFAULT_TASK, "what the models segment: the fields read, the default metrics, the keys of its own"),
    SuiteKey("dataset", "mapping {factory, kwargs}", "required", "the dataset factory (package.module:callable) and its keyword arguments"),
    SuiteKey("models", "list of model entries", "required", "each model: a name and one model source key (factory, onnx, transformers), with its options"),
    SuiteKey("preset", "preset name", DEFAULT_PRESET, "the corruption table the names of corruptions come from"),
    SuiteKey("corruptions", "list of names", "every corruption of the preset", "the perturbations cells run under (a+b composes two)"),
    SuiteKey("severities", "list of integers 1..5", str(list(range(1, MAX_SEVERITY + 1))), "the levels each corruption runs at"),
    SuiteKey("metric", "metric name", "the task's default", "the one-item form of metrics"),
    SuiteKey("metrics", "list of metric names", "the task's default metrics", "what is scored; the first is the headline, each is gated and stored"),
    SuiteKey("tolerance", "mapping {score, gamma_r, metrics}", "{gamma_r: 0.01, score: 1.0}", "how far a number may move the wrong way from its baseline (point values)"),
    SuiteKey("batch_size", "integer >= 1", str(DEFAULT_BATCH_SIZE), "samples per forward pass (--segrobust-batch-size overrides it)"),
    SuiteKey("seed", "integer >= 0", str(DEFAULT_SEED), "the seed every random draw of a perturbation is keyed by"),
    SuiteKey("limit", "integer >= 1", "null (every sample)", "evaluate only the first N samples"),
    SuiteKey("cd", "mapping {reference, noise_severities}", "null", "Kamann & Rother's CD and rCD against a reference model of the suite"),
    SuiteKey("timeout", "seconds > 0", "null (no limit)", "how long a cell may take (--segrobust-timeout overrides it)"),
    SuiteKey("shifts", "mapping {reference, splits}", "null", "a natural-shift suite: every cell on each split of the data"),
    SuiteKey("gate", "mapping", "null", "the statistical gate: paired bootstrap intervals against non-inferiority margins (instead of tolerance)"),
    SuiteKey("require", "mapping", "null", "release criteria: absolute thresholds on any number the suite computes"),
)
"""Every top-level key a suite of any task may set, in the order the reference lists them."""

_KNOWN_KEYS = frozenset(key.name for key in SUITE_KEYS)
# Multiplicity procedures that need every p-value of the family at once (refused, with the reason).
_STEPWISE = frozenset({"holm", "hochberg", "benjamini-hochberg", "bh", "fdr", "by", "benjamini-yekutieli"})
_GATE_KEYS = ("margin", "confidence", "inconclusive", "multiplicity", "resamples", "statistics", "aggregates")
# What ``gate.aggregates`` may give a non-inferiority margin: a model's aggregates (and the mean
# gamma_r of each category, under mean_gamma_r's margin).
AGGREGATE_MARGINS = ("mpc", "rpc", "mean_gamma_r")
# The keys of a dataset's factory mapping (a model entry's are its source's).
_DATASET_KEYS = ("factory", "kwargs")


@dataclass(frozen=True)
class Allowance:
    """One metric's own tolerance (or margin), where the suite gives it; ``None`` takes the suite's.

    Attributes:
        score: How far the metric's score may fall (rise, where lower is better), in its own units.
        gamma_r: How far its relative robustness may fall (a fraction).
    """

    score: float | None = None
    gamma_r: float | None = None


@dataclass(frozen=True)
class Tolerance:
    """How far a cell's numbers may move the wrong way from their baselines before the gate fails.

    ``tolerance`` (point values) and ``gate.margin`` (paired intervals) are both one::

        tolerance:
          score: 1.0                 # points of a 0..100 scale: 1.0 of mIoU, 0.01 of a 0..1 metric
          gamma_r: 0.01              # every metric's relative robustness (a fraction)
          metrics:                   # a metric's own, in its units (as require.metrics)
            boundary_iou: {score: 0.5}

    Attributes:
        gamma_r: Absolute slack on relative robustness (a fraction, e.g. 0.01), of every metric
            without its own.
        score: Absolute slack on the score of every metric without its own, in points of a
            0..100 scale: a metric on another scale gets the same share of its scale
            (:meth:`~pytest_segrobust.metrics.base.Metric.scale`), so a 0..1 metric falls by
            at most 0.01 under the default 1.0.
        metrics: Each metric's own slack by name, where the suite gives one.
    """

    gamma_r: float = 0.01
    score: float = 1.0
    metrics: Mapping[str, Allowance] = field(default_factory=dict)

    def score_of(self, metric: str) -> float:
        """How far ``metric``'s score may move the wrong way, in its units."""
        own = self.metrics.get(metric, Allowance()).score
        # scale / 100 is exactly 1 for a percentage: today's numbers, to the last bit.
        return own if own is not None else self.score * (METRICS.get(metric).scale() / 100)

    def gamma_r_of(self, metric: str) -> float:
        """How far ``metric``'s relative robustness may fall."""
        own = self.metrics.get(metric, Allowance()).gamma_r
        return own if own is not None else self.gamma_r


@dataclass(frozen=True)
class GatePolicy:
    """The statistical gate (:mod:`pytest_segrobust.core.statistics`): paired bootstrap against a margin.

    Attributes:
        margin: How far each number may truly fall below its baseline (rise above it, for a
            score where lower is better; non-inferiority): ``gamma_r`` as a fraction, ``score``
            in points of a 0..100 scale, and per metric in its own units (as :class:`Tolerance`).
        confidence: Level of the family of intervals (0.95: at most 5% chance of any false
            alarm in a run of the suite, with ``multiplicity: bonferroni``).
        inconclusive: What a cell whose interval straddles the margin does: ``fail``,
            ``warn`` (passes, listed as a warning) or ``pass``.
        multiplicity: ``bonferroni`` splits ``1 - confidence`` over every number the suite
            gates; ``none`` gives each its own ``1 - confidence``.
        resamples: Bootstrap resamples per cell.
        statistics: Where the baseline cells' per-image statistics live: ``baselines``
            (``<suite>.stats.npz`` beside the JSON, committed with it) or ``cache`` (in
            pytest's cache folder on this machine only: nothing binary in git, but a machine
            without the recorded cache cannot gate, and says so).
        aggregates: Non-inferiority margins of a model's aggregates (``mpc`` in the metric's
            points, ``rpc`` and ``mean_gamma_r`` as fractions; ``mean_gamma_r``'s also for each
            category's mean), paired over the same image resamples as the cells and decided by
            the model's ``aggregates`` item.
    """

    margin: Tolerance = Tolerance()
    confidence: float = 0.95
    inconclusive: str = "fail"
    multiplicity: str = "bonferroni"
    resamples: int = 2000
    statistics: str = "baselines"
    aggregates: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class DegradationSettings:
    """Kamann & Rother's corruption degradation against a reference model.

    Attributes:
        reference: Name of the suite's model that CD and rCD are relative to.
        noise_severities: Severities summed over for the noise category (the paper: 1..3).
    """

    reference: str
    noise_severities: tuple[int, ...] = (1, 2, 3, 4, 5)


@dataclass(frozen=True)
class Shifts:
    """Natural distribution shifts: the same task on other splits of the data (SOOD-ImageNet).

    Attributes:
        reference: The split the others are compared with (Delta% = (A_split - A_ref) / A_ref).
        splits: Each split's dataset factory, in the suite's order (the reference among them).
    """

    reference: str
    splits: Mapping[str, FactorySpec]


@dataclass(frozen=True)
class Suite:
    """A validated suite file.

    ``metrics`` lists the metric names, the headline first; ``shifts``, when set, replaces the
    single ``dataset`` by one dataset per split and makes every cell a split x corruption x
    severity.
    """

    path: Path
    name: str
    task: str
    dataset: FactorySpec
    models: tuple[ModelSpec, ...]
    preset: str
    corruptions: tuple[str, ...]
    severities: tuple[int, ...]
    metrics: tuple[str, ...]
    tolerance: Tolerance
    batch_size: int
    seed: int
    limit: int | None
    description: str = ""
    degradation: DegradationSettings | None = None
    timeout: float | None = None
    shifts: Shifts | None = None
    gate: GatePolicy | None = None
    requirements: Requirements | None = None
    task_cells: SuiteCells = field(default_factory=SuiteCells)
    text_perturbations: TextPerturbationRegistry = field(
        default_factory=TextPerturbationRegistry.builtin, compare=False, repr=False
    )

    def corruption(self, name: str, registry: CorruptionRegistry = REGISTRY) -> Corruption[Any]:
        """The cell ``name`` of this suite: an image corruption of its preset, a text perturbation
        (bound to the suite's seed), a cross-modal composition, or what the task's own keys make
        of it (:meth:`~pytest_segrobust.tasks.base.Task.suite_cells`: R2-Bench's mixture, a dynamic cell)."""
        resolve = CellResolver(registry, self.preset, self.text_perturbations, self.seed)
        return self.task_cells.with_seed(self.seed).cell(name, resolve)

    def cell_severities(self, name: str) -> tuple[int, ...]:
        """The severities cell ``name`` runs at: the suite's, or its first alone for a cell that draws
        its own levels (:attr:`SuiteCells.once <pytest_segrobust.tasks.base.SuiteCells.once>`)."""
        return self.severities[:1] if name in self.task_cells.once else self.severities

    @property
    def metric(self) -> str:
        """The headline metric."""
        return self.metrics[0]

    @property
    def reads_text(self) -> bool:
        """Whether the suite's task reads referring expressions (its targets include a text field)."""
        return Expressions in get_task(self.task).target_types

    @property
    def reads_clips(self) -> bool:
        """Whether the suite's task scores clips (its targets include per-frame object masks)."""
        return VideoMasks in get_task(self.task).target_types

    @property
    def splits(self) -> tuple[str | None, ...]:
        """The splits cells run on; ``(None,)`` for a suite of one dataset."""
        return (None,) if self.shifts is None else tuple(self.shifts.splits)

    def dataset_spec(self, split: str | None) -> FactorySpec:
        return self.dataset if split is None or self.shifts is None else self.shifts.splits[split]

    def model(self, name: str) -> ModelSpec:
        """The model called ``name``.

        Raises:
            SuiteError: naming the suite, the model and the models it has, when it has none of that name.
        """
        for model in self.models:
            if model.name == name:
                return model
        names = [m.name for m in self.models]
        raise SuiteError(f"{self.name}: no model {name!r} (models: {', '.join(names)}){did_you_mean(name, names)}")

    @property
    def gates_models(self) -> bool:
        """Whether each model has an ``aggregates`` item: aggregate requirements or aggregate margins."""
        required = self.requirements is not None and self.requirements.has_model_level
        return required or (self.gate is not None and bool(self.gate.aggregates))


def declared_name(path: Path) -> str | None:
    """The name a suite file declares (its stem by default); ``None`` if it cannot be read."""
    try:
        raw = load_yaml(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    name = raw.get("name", path.stem) if isinstance(raw, dict) else path.stem
    return name if isinstance(name, str) else None


def load_suite(path: Path, registry: CorruptionRegistry = REGISTRY, *, import_factories: bool = True) -> Suite:
    """Read and validate a suite file; corruption names are looked up in ``registry``.

    ``import_factories=False`` leaves the factories' modules unimported (their targets are still
    checked for form): what reads a suite without running it (``segrobust merge``) needs
    neither the models nor the data.

    Raises:
        SuiteError: naming the file, the field and what was expected.
    """
    try:
        raw = load_yaml(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise SuiteError(f"{path}: cannot read the suite ({exc.strerror})") from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise SuiteError(f"{path}: invalid YAML{where}: {problem}") from exc
    return _Validator(path, registry, import_factories=import_factories).suite(raw)


class _Validator:
    """Turns the parsed YAML into a :class:`Suite`, failing on the first bad field."""

    def __init__(self, path: Path, registry: CorruptionRegistry, *, import_factories: bool = True) -> None:
        self.path = path
        self.registry = registry
        self.import_factories = import_factories
        self.text = TextPerturbationRegistry()  # what the task's keys let the suite name (Task.suite_names)
        self.reserved: Mapping[str, str] = {}
        self.task_name = DEFAULT_TASK
        self.task_reads_text = False

    def fail(self, field_name: str, message: str) -> SuiteError:
        return SuiteError(f"{self.path}: field '{field_name}': {message}")

    def suite(self, raw: Any) -> Suite:
        if not isinstance(raw, dict):
            raise SuiteError(f"{self.path}: a suite is a YAML mapping, got {type(raw).__name__}")
        task_keys = {key: name for name in TASKS.names() for key in get_task(name).suite_keys}
        unknown = sorted(set(raw) - _KNOWN_KEYS - set(task_keys))
        if unknown:
            raise self.fail(unknown[0], f"unknown field; expected one of {', '.join(sorted(_KNOWN_KEYS | set(task_keys)))}")
        name = self.name("name", raw.get("name", self.path.stem))
        task = self.choice("task", raw.get("task", DEFAULT_TASK), tuple(TASKS.names()))
        preset = self.string("preset", raw.get("preset", DEFAULT_PRESET))
        if preset not in self.registry.presets():
            raise self.fail("preset", f"unknown preset {preset!r}; known: {', '.join(self.registry.presets())}")
        models = self.models(self.required(raw, "models"), task)
        dataset = self.factory("dataset", self.required(raw, "dataset"))
        self.task_reads_text = Expressions in get_task(task).target_types
        self.task_name = task
        options = self.task_options(raw, get_task(task), task_keys)
        names = self.task_names(get_task(task), options)
        self.text, self.reserved = names.text, names.reserved
        corruptions = self.corruptions(raw.get("corruptions"), preset)
        task_cells = self.task_cells(options, task, corruptions, preset)
        corruptions = (*corruptions, *task_cells.added)
        metrics = self.metrics(raw, task)
        severities = self.severities(raw.get("severities", list(range(1, MAX_SEVERITY + 1))))
        shifts = None if raw.get("shifts") is None else self.shifts(raw["shifts"], dataset)
        requirements = None
        if raw.get("require") is not None:
            categories = {
                name: task_cells.cell(name, self.resolver(preset)).category.value
                for name in corruptions
            }
            shape = SuiteShape(
                headline=metrics[0],
                metrics=metrics,
                corruptions=categories,
                severities=severities,
                splits=None if shifts is None else tuple(shifts.splits),
                reference_split=None if shifts is None else shifts.reference,
                has_cd=raw.get("cd") is not None,
                lower_is_better=frozenset(m for m in metrics if not METRICS.get(m).higher_is_better),
                percent=frozenset(
                    m for m in metrics if METRICS.get(m).higher_is_better and tuple(METRICS.get(m).bounds) == (0.0, 100.0)
                ),
            )
            try:
                requirements = parse_requirements(raw["require"], shape, self.path)
            except RequirementError as exc:
                raise self.fail(exc.field, str(exc)) from None
        return Suite(
            path=self.path,
            name=name,
            description=self.string("description", raw.get("description", "")),
            task=task,
            dataset=dataset,
            models=models,
            preset=preset,
            corruptions=corruptions,
            severities=severities,
            metrics=metrics,
            tolerance=self.tolerance(raw.get("tolerance", {}), metrics),
            batch_size=self.integer("batch_size", raw.get("batch_size", DEFAULT_BATCH_SIZE), minimum=1),
            seed=self.integer("seed", raw.get("seed", DEFAULT_SEED), minimum=0),
            limit=None if raw.get("limit") is None else self.integer("limit", raw["limit"], minimum=1),
            degradation=None if raw.get("cd") is None else self.degradation(raw["cd"], models),
            timeout=None if raw.get("timeout") is None else self.positive("timeout", raw["timeout"]),
            shifts=shifts,
            gate=None if raw.get("gate") is None else self.gate(raw, metrics),
            requirements=requirements,
            task_cells=task_cells,
            text_perturbations=self.text,
        )

    def resolver(self, preset: str) -> CellResolver:
        """A cell name's corruption as the suite has it without the task's own keys."""
        return CellResolver(self.registry, preset, self.text)

    def task_options(self, raw: dict[str, Any], task: Task, task_keys: dict[str, str]) -> dict[str, Any]:
        """The task's own suite keys that the suite sets (:attr:`Task.suite_keys
        <pytest_segrobust.tasks.base.Task.suite_keys>`); another task's key is refused, saying whose it is."""
        for key in sorted(set(raw) & set(task_keys) - set(task.suite_keys) - _KNOWN_KEYS):
            takers = sorted(name for name in TASKS.names() if key in get_task(name).suite_keys)
            # A taker may say why this task cannot take the key (the text keys: it has no expressions).
            reasons = (get_task(name).suite_key_refusal(key, task) for name in takers)
            reason = next((r for r in reasons if r is not None), None)
            raise self.fail(key, reason or f"task {task.name} takes no {key!r}; it is a key of task {', '.join(takers)}")
        return {key: raw[key] for key in task.suite_keys if key in raw}

    def task_names(self, task: Task, options: dict[str, Any]) -> SuiteNames:
        """What the task's keys let ``corruptions`` name (:meth:`Task.suite_names
        <pytest_segrobust.tasks.base.Task.suite_names>`), read before it."""
        try:
            return task.suite_names(options, self.path.parent)
        except SuiteKeyError as exc:
            raise self.fail(exc.field, str(exc)) from None

    def task_cells(self, options: dict[str, Any], task: str, corruptions: tuple[str, ...], preset: str) -> SuiteCells:
        """What the task's own suite keys make of the cells (:meth:`Task.suite_cells
        <pytest_segrobust.tasks.base.Task.suite_cells>`)."""
        try:
            cells = get_task(task).suite_cells(options, corruptions, self.resolver(preset))
        except SuiteKeyError as exc:
            raise self.fail(exc.field, str(exc)) from None
        for cell in cells.added:
            if cell in corruptions:
                raise self.fail("corruptions", f"{cell!r} is added by the task's keys, not listed")
        return cells

    def gate(self, raw: dict[str, Any], metrics: tuple[str, ...]) -> GatePolicy:
        """``gate: {margin: {gamma_r, score}, confidence, inconclusive, multiplicity, resamples}``."""
        if "tolerance" in raw:
            raise self.fail("gate", "a suite gates by tolerance (point values) or by gate (paired statistics), not both")
        spec = raw["gate"]
        if not isinstance(spec, dict):
            raise self.fail("gate", f"expected a mapping with {', '.join(_GATE_KEYS)}, got {spec!r}")
        unknown = sorted(set(spec) - set(_GATE_KEYS))
        if unknown:
            raise self.fail(f"gate.{unknown[0]}", f"unknown field; expected one of {', '.join(_GATE_KEYS)}")
        task = get_task(self.task_name)
        for name in metrics:
            if not METRICS.get(name).keeps_image_statistics():
                raise self.fail(
                    "gate", f"metric {name} keeps no per-image statistics, which the statistical gate pairs; "
                    "gate it by tolerance instead"
                )
            if task.groups_samples and not METRICS.get(name).statistics_add_up():
                unit = task.resampling_unit
                raise self.fail(
                    "gate", f"metric {name}'s statistics do not add up, so the rows of one {unit} cannot be summed: "
                    f"the {task.name} task's gate resamples {unit}s; gate it by tolerance instead"
                )
        if spec.get("aggregates") and not METRICS.get(metrics[0]).higher_is_better:
            raise self.fail(
                "gate.aggregates",
                f"the aggregates' margins (mPC, rPC, mean gamma_r as corrupted over clean score) are defined for a "
                f"headline score where higher is better; {metrics[0]} is lower-is-better: gate its cells "
                "(gate.margin) and leave aggregates out",
            )
        defaults = GatePolicy()
        confidence = spec.get("confidence", defaults.confidence)
        if isinstance(confidence, bool) or not isinstance(confidence, (int, float)) or not 0.5 <= confidence < 1:
            raise self.fail("gate.confidence", f"expected a level in [0.5, 1), e.g. 0.95, got {confidence!r}")
        margin = self.tolerance(spec.get("margin", {}), metrics, "gate.margin")
        given = {"": Allowance(margin.score, margin.gamma_r), **margin.metrics}
        for name, allowed in given.items():
            for number in ("gamma_r", "score"):
                if getattr(allowed, number) != 0:  # a tolerance of 0 means exact; a margin of 0 can never be confirmed
                    continue
                instead = f"{{{number}: 0}}" if not name else f"{{metrics: {{{name}: {{{number}: 0}}}}}}"
                raise self.fail(
                    f"gate.margin.{'metrics.' + name + '.' if name else ''}{number}",
                    "expected a non-inferiority margin > 0, got 0: a number passes only when its whole interval "
                    "lies above -margin, which an unchanged model's interval [0, 0] does not, so every cell would be "
                    f"inconclusive; to require unchanged numbers, gate by tolerance: {instead} instead",
                )
        return GatePolicy(
            margin=margin,
            confidence=float(confidence),
            inconclusive=self.choice("gate.inconclusive", spec.get("inconclusive", defaults.inconclusive), ("fail", "warn", "pass")),
            multiplicity=self.multiplicity(spec.get("multiplicity", defaults.multiplicity)),
            resamples=self.integer("gate.resamples", spec.get("resamples", defaults.resamples), minimum=200),
            statistics=self.choice("gate.statistics", spec.get("statistics", defaults.statistics), ("baselines", "cache")),
            aggregates=self.aggregate_margins(spec.get("aggregates", {})),
        )

    def multiplicity(self, raw: Any) -> str:
        """``gate.multiplicity``: ``bonferroni`` or ``none``; a step-wise procedure is refused, saying why."""
        if isinstance(raw, str) and raw.lower().replace("_", "-") in _STEPWISE:
            raise self.fail(
                "gate.multiplicity",
                f"{raw!r} is not offered: each cell is decided on its own as its item runs (also under -k, --lf, "
                "xdist and shards, without the other cells' results), while Holm and Benjamini-Hochberg decide each "
                "number from the p-values of the whole family, so a cell's verdict would change with the cells run "
                "beside it; expected one of bonferroni (the family-wise guarantee, cell by cell), none",
            )
        return self.choice("gate.multiplicity", raw, ("bonferroni", "none"))

    def aggregate_margins(self, raw: Any) -> dict[str, float]:
        """``gate.aggregates: {mpc: 0.5, rpc: 0.005, mean_gamma_r: 0.005}``: margins, each > 0."""
        if not isinstance(raw, dict):
            raise self.fail("gate.aggregates", f"expected a mapping of {', '.join(AGGREGATE_MARGINS)} to margins, got {raw!r}")
        margins: dict[str, float] = {}
        for name, value in raw.items():
            where = f"gate.aggregates.{name}"
            if name not in AGGREGATE_MARGINS:
                raise self.fail(where, f"unknown field; expected one of {', '.join(AGGREGATE_MARGINS)}")
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < float("inf"):
                raise self.fail(where, f"expected a margin > 0 (how far the aggregate may truly fall), got {value!r}")
            margins[name] = float(value)
        return margins

    def shifts(self, raw: Any, dataset: FactorySpec) -> Shifts:
        """``{reference: a, splits: [a, b]}`` (the dataset factory called with ``split=``) or
        ``splits: {a: {factory, kwargs}, ...}`` (a factory per split)."""
        if not isinstance(raw, dict) or "splits" not in raw or "reference" not in raw:
            raise self.fail("shifts", "expected a mapping with 'reference: <split>' and 'splits: [<split>, ...]'")
        unknown = sorted(set(raw) - {"reference", "splits"})
        if unknown:
            raise self.fail(f"shifts.{unknown[0]}", "unknown field; expected reference or splits")
        listed = raw["splits"]
        splits: dict[str, FactorySpec] = {}
        if isinstance(listed, list) and listed:
            for i, name in enumerate(listed):
                split = self.name(f"shifts.splits[{i}]", name)
                if split in splits:
                    raise self.fail(f"shifts.splits[{i}]", f"split {split!r} is listed twice")
                splits[split] = FactorySpec(dataset.target, {**dataset.kwargs, "split": split})
        elif isinstance(listed, dict) and listed:
            for name, spec in listed.items():
                split = self.name(f"shifts.splits.{name}", name)
                splits[split] = self.factory(f"shifts.splits.{name}", spec)
        else:
            raise self.fail("shifts.splits", f"expected a non-empty list of split names or mapping of factories, got {listed!r}")
        reference = self.string("shifts.reference", raw["reference"])
        if reference not in splits:
            raise self.fail("shifts.reference", f"{reference!r} is not one of the splits ({', '.join(splits)})")
        return Shifts(reference, splits)

    def metrics(self, raw: dict[str, Any], task_name: str) -> tuple[str, ...]:
        """``metrics: [a, b]`` (the first is the headline) or its one-item shorthand ``metric: a``."""
        if "metric" in raw and "metrics" in raw:
            raise self.fail("metric", "give either 'metric' or 'metrics', not both")
        task = get_task(task_name)
        field_name = "metrics" if "metrics" in raw else "metric"
        if field_name in raw:
            listed = [raw["metric"]] if field_name == "metric" else raw["metrics"]
        else:
            listed = list(task.default_metrics)
        if not isinstance(listed, list) or not listed:
            raise self.fail(field_name, f"expected a non-empty list of metric names, got {listed!r}")
        names: list[str] = []
        for i, name in enumerate(listed):
            where = field_name if field_name == "metric" else f"metrics[{i}]"
            if not isinstance(name, str):
                raise self.fail(where, f"expected a metric name, got {name!r}")
            try:
                metric = METRICS.get(name)
            except UnknownNameError as exc:
                raise self.fail(where, str(exc)) from None
            self.require(where, f"metric {name!r}", metric.requires)
            missing = [kind.__name__ for kind in metric.accepts if kind not in task.target_types]
            if missing:
                raise self.fail(
                    where,
                    f"metric {name!r} reads {', '.join(missing)}, which task {task_name} does not provide "
                    f"(it provides {', '.join(k.__name__ for k in task.target_types)}); "
                    f"task {task_name} is scored by e.g. {', '.join(task.default_metrics)}",
                )
            if name in names:
                raise self.fail(where, f"metric {name!r} is listed twice")
            names.append(name)
        return tuple(names)

    def degradation(self, raw: Any, models: tuple[ModelSpec, ...]) -> DegradationSettings:
        if not isinstance(raw, dict) or "reference" not in raw:
            raise self.fail("cd", "expected a mapping with 'reference: <model name>' and optional 'noise_severities'")
        unknown = sorted(set(raw) - {"reference", "noise_severities"})
        if unknown:
            raise self.fail(f"cd.{unknown[0]}", "unknown field; expected reference or noise_severities")
        names = [m.name for m in models]
        if raw["reference"] not in names:
            raise self.fail("cd.reference", f"{raw['reference']!r} is not one of the suite's models ({', '.join(names)})")
        noise = raw.get("noise_severities", [1, 2, 3, 4, 5])
        return DegradationSettings(raw["reference"], self.severities(noise, "cd.noise_severities"))

    def required(self, raw: dict[str, Any], key: str) -> Any:
        if key not in raw or raw[key] is None:
            raise self.fail(key, "is required")
        return raw[key]

    def string(self, field_name: str, value: Any) -> str:
        if not isinstance(value, str):
            raise self.fail(field_name, f"expected a string, got {value!r}")
        return value

    def name(self, field_name: str, value: Any) -> str:
        text = self.string(field_name, value)
        problem = name_problem(text)
        if problem is not None:
            raise self.fail(field_name, problem)
        return text

    def require(self, field_name: str, what: str, extras: Iterable[Extra]) -> None:
        """Refuse ``what`` where the packages of its ``extras`` are not installed, naming the one to install."""
        reason = unmet(what, extras)
        if reason is not None:
            raise self.fail(field_name, reason)

    def choice(self, field_name: str, value: Any, choices: tuple[str, ...]) -> str:
        if value not in choices:
            raise self.fail(field_name, f"expected one of {', '.join(choices)}, got {value!r}")
        return value

    def integer(self, field_name: str, value: Any, minimum: int) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise self.fail(field_name, f"expected an integer >= {minimum}, got {value!r}")
        return value

    def number(self, field_name: str, value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < float("inf"):
            raise self.fail(field_name, f"expected a number >= 0, got {value!r}")
        return float(value)

    def positive(self, field_name: str, value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < float("inf"):
            raise self.fail(field_name, f"expected a number of seconds > 0, got {value!r}")
        return float(value)

    def factory(self, field_name: str, raw: Any) -> FactorySpec:
        """A dataset's ``{factory, kwargs}`` (or its target alone)."""
        if isinstance(raw, str):
            raw = {"factory": raw}
        if not isinstance(raw, dict) or "factory" not in raw:
            raise self.fail(field_name, "expected a mapping with 'factory: package.module:callable'")
        try:
            return read_factory(raw, _DATASET_KEYS, import_factories=self.import_factories)
        except FieldError as exc:
            raise self.fail(f"{field_name}.{exc.field}", str(exc)) from exc

    def models(self, raw: Any, task: str = "semantic") -> tuple[ModelSpec, ...]:
        if not isinstance(raw, list) or not raw:
            raise self.fail("models", "expected a non-empty list of {name, factory, kwargs}")
        specs: list[ModelSpec] = []
        keys = source_keys()
        for i, entry in enumerate(raw):
            where = f"models[{i}]"
            if not isinstance(entry, dict):
                raise self.fail(where, f"expected a mapping with name and factory, got {entry!r}")
            name = self.name(f"{where}.name", self.required_in(entry, where, "name"))
            if any(s.name == name for s in specs):
                raise self.fail(f"{where}.name", f"duplicate model name {name!r}")
            specs.append(self.model(where, name, entry, task, keys))
        return tuple(specs)

    def model(self, where: str, name: str, entry: dict[str, Any], task: str, keys: list[str]) -> ModelSpec:
        """One ``models`` entry, read by the source its one source key names (``factory``, ``onnx``, ...)."""
        given = [key for key in entry if key in keys]
        if len(given) != 1:
            raise self.fail(where, f"expected exactly one of {listed_sources()}")
        try:
            source = MODEL_SOURCES.get(given[0])
        except UnknownNameError as exc:  # an installed source that does not load
            raise self.fail(f"{where}.{given[0]}", str(exc)) from None
        try:
            settings = source.read(entry, EntryContext(task, self.import_factories))
        except FieldError as exc:
            raise self.fail(f"{where}.{exc.field}" if exc.field else where, str(exc)) from exc
        return ModelSpec(name, source.name, settings)

    def required_in(self, raw: dict[str, Any], where: str, key: str) -> Any:
        if key not in raw:
            raise self.fail(f"{where}.{key}", "is required")
        return raw[key]

    def corruptions(self, raw: Any, preset: str) -> tuple[str, ...]:
        if raw is None:
            try:
                return tuple(c.name for c in self.registry.preset(preset))
            except SegRobustError as exc:
                raise self.fail("preset", str(exc)) from exc
        if not isinstance(raw, list) or not raw:
            raise self.fail("corruptions", "expected a non-empty list of corruption names")
        canonical: list[str] = []
        # A task without expressions offers no text perturbation (self.text is empty): an unknown
        # name lists the image corruptions only.
        for i, name in enumerate(raw):
            if not isinstance(name, str):
                raise self.fail(f"corruptions[{i}]", f"expected a corruption name, got {name!r}")
            if name in self.reserved:
                raise self.fail(f"corruptions[{i}]", f"{name} is added by '{self.reserved[name]}', not listed")
            if is_text_name(name, TEXT_PERTURBATIONS) and not self.task_reads_text:
                raise self.fail(
                    f"corruptions[{i}]",
                    f"{name!r} perturbs referring expressions; task {self.task_name} has none "
                    "(text perturbations fit task referring)",
                )
            try:
                # A composition is stored under its canonical, stage-ordered name.
                resolved = resolve_cell(name, registry=self.registry, preset=preset, text=self.text, seed=0)
            except SegRobustError as exc:
                raise self.fail(f"corruptions[{i}]", f"{exc}{self._text_hint(name)}") from exc
            self.require(f"corruptions[{i}]", f"corruption {name!r}", getattr(resolved, "requires", ()))
            cell = resolved.name
            if cell in canonical:
                first = canonical.index(cell)
                also = "names it too" if raw[first] == name else f"{raw[first]!r} is the same cell"
                raise self.fail(
                    f"corruptions[{i}]", f"corruption {name!r} is listed twice: corruptions[{first}] {also}"
                )
            canonical.append(cell)
        return tuple(canonical)

    def _text_hint(self, name: str) -> str:
        """For a task without expressions, which lists no text perturbation: the one an unknown
        name was likely meant to be, and why it would not fit either."""
        if self.task_reads_text:
            return ""
        for part in name.split(SEPARATOR):
            close = difflib.get_close_matches(part.strip(), TEXT_PERTURBATIONS.names(), n=1)
            if close:
                return (
                    f"; {part.strip()!r} is close to text perturbation {close[0]!r}, which perturbs referring "
                    f"expressions: task {self.task_name} has none (text perturbations fit task referring)"
                )
        return ""

    def severities(self, raw: Any, field_name: str = "severities") -> tuple[int, ...]:
        if not isinstance(raw, list) or not raw:
            raise self.fail(field_name, f"expected a non-empty list of integers 1..{MAX_SEVERITY}")
        for i, s in enumerate(raw):
            if isinstance(s, bool) or not isinstance(s, int) or not 1 <= s <= MAX_SEVERITY:
                raise self.fail(f"{field_name}[{i}]", f"expected an integer 1..{MAX_SEVERITY}, got {s!r}")
            if s in raw[:i]:
                raise self.fail(f"{field_name}[{i}]", f"severity {s} is listed twice")
        return tuple(sorted(raw))

    def tolerance(self, raw: Any, metrics: tuple[str, ...], where: str = "tolerance") -> Tolerance:
        """``{gamma_r, score, metrics: {<metric>: {gamma_r, score}}}``: the suite's slack, and a metric's own."""
        if not isinstance(raw, dict):
            raise self.fail(where, f"expected a mapping with gamma_r, score and/or metrics, got {raw!r}")
        unknown = sorted(set(raw) - {"gamma_r", "score", "metrics"})
        if unknown:
            hint = (
                f" (a metric's own goes under metrics: {{{unknown[0]}: {{score: ...}}}})"
                if unknown[0] in metrics
                else did_you_mean(str(unknown[0]), ["gamma_r", "score", "metrics"])
            )
            raise self.fail(f"{where}.{unknown[0]}", f"unknown field; expected gamma_r, score or metrics{hint}")
        given = raw.get("metrics", {})
        if not isinstance(given, dict):
            raise self.fail(
                f"{where}.metrics", f"expected a mapping of the suite's metrics to their own, got {given!r}"
            )
        own = {}
        for name, entry in given.items():
            at = f"{where}.metrics.{name}"
            if name not in metrics:
                raise self.fail(
                    at, f"not a metric of the suite ({', '.join(metrics)}){did_you_mean(str(name), list(metrics))}"
                )
            if not isinstance(entry, dict) or not entry:
                raise self.fail(
                    at, f"expected a mapping with gamma_r and/or score (the score in {name}'s units), got {entry!r}"
                )
            extra = sorted(set(entry) - {"gamma_r", "score"})
            if extra:
                raise self.fail(f"{at}.{extra[0]}", "unknown field; expected gamma_r or score")
            own[name] = Allowance(
                score=None if "score" not in entry else self.number(f"{at}.score", entry["score"]),
                gamma_r=None if "gamma_r" not in entry else self.number(f"{at}.gamma_r", entry["gamma_r"]),
            )
        defaults = Tolerance()
        return Tolerance(
            gamma_r=self.number(f"{where}.gamma_r", raw.get("gamma_r", defaults.gamma_r)),
            score=self.number(f"{where}.score", raw.get("score", defaults.score)),
            metrics=own,
        )

