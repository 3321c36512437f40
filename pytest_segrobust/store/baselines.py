"""Stored baselines: one JSON file per suite, compared cell by cell, written atomically.

A file looks like::

    {"format": 2, "suite": "demo",
     "conditions": {"task": "semantic", "metric": "miou", "preset": "coco-p", "seed": 0,
                    "limit": null, "dataset": "demo-scenes:v1:...",
                    "severity_tables": {"gaussian_noise": ["std=0.08", "std=0.12", ...]}},
     "models": {"tiny-unet": {"clean": {"score": 91.2},
                              "gaussian_noise": {"3": {"score": 60.1, "gamma_r": 0.66, "gamma_a": 0.69}}}}}

A suite with further metrics stores them beside the headline's as ``<metric>.score``,
``<metric>.gamma_r`` and ``<metric>.gamma_a`` and names them in ``conditions.metrics``. A
suite over dataset splits (natural shifts) lists them in ``conditions.splits`` and nests each
model's cells one level deeper, by split: ``models.<model>.<split>.<corruption>``.

The conditions say what the numbers were measured under; a run under other conditions
(another seed, dataset, severity table, metric, ...) is not compared with them but fails,
naming the field. Every stored value is a finite number: a file with anything else is
reported as broken, and ``--segrobust-update-baselines`` rewrites it.

An optional ``made_with`` block (their provenance) says what the numbers were made with: the
tool's version and each model's fingerprint (the dataset's is ``conditions.dataset``)::

    "made_with": {"tool_version": "0.1.0", "models": {"tiny-unet": "9f2c..."}}

It is recorded and shown, never gated on: a changed model is what the gate measures. Values
are written rounded to :data:`SIGNIFICANT_DIGITS` significant digits, so that a diff of a
baseline file is readable; every tolerance is far coarser than that rounding.

A baseline has a lifecycle. Entries the suite no longer has (a model, split, corruption or
severity removed from it) are :func:`unused_entries`, reported at the end of a run and
removed by ``--segrobust-prune``; an update of every cell of a suite writes exactly its
current cells; :func:`write_baseline` says, per cell, what changed.

Reading happens in any process; writing happens once, at the end of the run, in the one
process that owns the run's output (the xdist controller, or the only process).
"""

from __future__ import annotations

import copy
import json
import math
import re
import shlex
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from pytest_segrobust import __version__
from pytest_segrobust.core.errors import BaselineError
from pytest_segrobust.core.files import atomic_write_text
from pytest_segrobust.core.wording import article, plural

FORMAT = 2
UPDATE_FLAG = "--segrobust-update-baselines"
PRUNE_FLAG = "--segrobust-prune"
CLEAN = "clean"
# The keys of a corruption's severities in a file.
SEVERITY_KEYS = frozenset(str(severity) for severity in range(1, 6))
# Precision of stored values: readable diffs, and far below any tolerance.
SIGNIFICANT_DIGITS = 6


def update_command(nodeid: str | None = None) -> str:
    """The command that accepts the current numbers: of one cell, named by its node id (quoted for
    a shell: ``rotate[5]`` is a glob there), or of every suite the run collects."""
    cell = "" if nodeid is None else f" {shlex.quote(nodeid)}"
    return f"pytest --segrobust{cell} {UPDATE_FLAG}"


@dataclass(frozen=True)
class CellKey:
    """Address of one cell in a suite: model x [split x] corruption x severity (0 for clean)."""

    suite: str
    model: str
    corruption: str
    severity: int
    split: str | None = None

    @property
    def label(self) -> str:
        cell = self.corruption if self.severity == 0 else f"{self.corruption}::{self.severity}"
        split = "" if self.split is None else f"{self.split}::"
        return f"{self.suite}::{self.model}::{split}{cell}"


@dataclass(frozen=True)
class Conditions:
    """What a suite's numbers are measured under; baselines are only comparable under equal ones.

    Attributes:
        task: The suite's task (``semantic``, ``instance``, ``panoptic``).
        metric: What the scores are (``miou``, ``map``): the headline metric.
        metrics: The further metrics stored beside it (``boundary_iou``).
        splits: The dataset splits of a natural-shift suite, in order.
        preset: Whose severity tables the corruption names refer to.
        seed: Global seed of the corruptions' random draws.
        limit: Images evaluated (``None``: the whole dataset).
        dataset: The dataset's fingerprint.
        severity_tables: Each corruption's five parameter rows, as text.
        task_setting: What the suite binds its task to that moves its numbers, as JSON values
            (a promptable suite's prompt protocol: name, version and options); empty for a
            task that binds nothing, and then not written.
    """

    task: str
    metric: str
    preset: str
    seed: int
    limit: int | None
    dataset: str
    severity_tables: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    metrics: tuple[str, ...] = ()
    splits: tuple[str, ...] = ()
    task_setting: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        optional = {"metrics": list(self.metrics), "splits": list(self.splits), "task_setting": dict(self.task_setting)}
        return {
            "task": self.task,
            "metric": self.metric,
            **{name: value for name, value in optional.items() if value},
            "preset": self.preset,
            "seed": self.seed,
            "limit": self.limit,
            "dataset": self.dataset,
            "severity_tables": {name: list(rows) for name, rows in sorted(self.severity_tables.items())},
        }

    @classmethod
    def from_json(cls, data: Any, where: str) -> Conditions:
        """Parse a file's ``conditions``; ``where`` prefixes the error messages.

        Raises:
            BaselineError: naming the field that is missing or of the wrong type.
        """
        if not isinstance(data, dict):
            raise BaselineError(f"{where}: 'conditions' must be a mapping, got {data!r}")
        expected = {"task": str, "metric": str, "preset": str, "seed": int, "dataset": str}
        for name, kind in expected.items():
            if not isinstance(data.get(name), kind) or isinstance(data.get(name), bool):
                raise BaselineError(
                    f"{where}: conditions.{name}: expected {article(kind.__name__)}, got {data.get(name)!r}"
                )
        limit = data.get("limit")
        if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool)):
            raise BaselineError(f"{where}: conditions.limit: expected an integer or null, got {limit!r}")
        tables = data.get("severity_tables", {})
        if not isinstance(tables, dict) or not all(
            isinstance(rows, list) and all(isinstance(row, str) for row in rows) for rows in tables.values()
        ):
            raise BaselineError(f"{where}: conditions.severity_tables: expected lists of strings by corruption")
        names = {}
        for name in ("metrics", "splits"):
            value = data.get(name, [])
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise BaselineError(f"{where}: conditions.{name}: expected a list of names, got {value!r}")
            names[name] = tuple(value)
        setting = data.get("task_setting", {})
        if not isinstance(setting, dict):
            raise BaselineError(f"{where}: conditions.task_setting: expected a mapping, got {setting!r}")
        return cls(
            task=data["task"],
            metric=data["metric"],
            preset=data["preset"],
            seed=data["seed"],
            limit=limit,
            dataset=data["dataset"],
            severity_tables={name: tuple(rows) for name, rows in tables.items()},
            task_setting=setting,
            **names,
        )

    def general_differences(self, stored: Conditions) -> list[str]:
        """``field: baseline X, this run Y`` for each condition shared by all cells that differs."""
        return [
            f"{name}: baseline {getattr(stored, name)!r}, this run {getattr(self, name)!r}"
            for name in ("task", "metric", "metrics", "splits", "preset", "seed", "limit", "dataset", "task_setting")
            if getattr(stored, name) != getattr(self, name)
        ]

    def table_difference(self, stored: Conditions, corruption: str) -> str | None:
        """How ``corruption``'s severity table differs from the stored one, if it does."""
        mine, theirs = self.severity_tables.get(corruption), stored.severity_tables.get(corruption)
        if mine is None or theirs is None or mine == theirs:
            return None
        for severity, (old, new) in enumerate(zip(theirs, mine), start=1):
            if old != new:
                return f"severity_tables.{corruption}: severity {severity} was {old!r}, this run {new!r}"
        return f"severity_tables.{corruption}: baseline {list(theirs)!r}, this run {list(mine)!r}"


@dataclass(frozen=True)
class Provenance:
    """What a baseline file's numbers were made with; recorded and shown, never compared.

    Attributes:
        tool_version: The version of pytest-segrobust that last wrote the file.
        models: Each model's fingerprint when its cells were last written.
    """

    tool_version: str | None = None
    models: Mapping[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"tool_version": self.tool_version, "models": dict(sorted(self.models.items()))}

    @classmethod
    def from_json(cls, data: Any, where: str) -> Provenance:
        """Parse a file's ``made_with``; a file written before it existed has none.

        Raises:
            BaselineError: naming the field of the wrong type.
        """
        if data is None:
            return cls()
        if not isinstance(data, dict):
            raise BaselineError(f"{where}: 'made_with' must be a mapping, got {data!r}")
        version = data.get("tool_version")
        if version is not None and not isinstance(version, str):
            raise BaselineError(f"{where}: made_with.tool_version: expected a string, got {version!r}")
        models = data.get("models", {})
        if not isinstance(models, dict) or not all(isinstance(v, str) for v in models.values()):
            raise BaselineError(f"{where}: made_with.models: expected a fingerprint (string) by model, got {models!r}")
        return cls(version, dict(models))


@dataclass(frozen=True)
class StatisticsRecord:
    """What a baseline file records of the statistics file written with it
    (:mod:`pytest_segrobust.store.sidecar`): the SHA-256 of its content, or ``None`` where it has none.

    A file without the record was written before it existed; its statistics file is taken as found.
    """

    sha256: str | None

    def to_json(self) -> dict[str, Any]:
        return {"sha256": self.sha256}

    @classmethod
    def from_json(cls, data: Any, where: str) -> StatisticsRecord:
        """Parse a file's ``statistics``.

        Raises:
            BaselineError: naming the field of the wrong type.
        """
        digest = data.get("sha256", "") if isinstance(data, dict) else ""
        if digest is not None and not (isinstance(digest, str) and re.fullmatch("[0-9a-f]{64}", digest)):
            raise BaselineError(f"{where}: statistics: expected {{'sha256': 64 hex digits or null}}, got {data!r}")
        return cls(digest)


class StatisticsWriter(Protocol):
    """The statistics file written with a baseline file (:class:`pytest_segrobust.store.sidecar.SidecarWriter`).

    A write of the pair calls :meth:`stage`, writes the JSON with the record it returns, then
    calls :meth:`commit`; a process killed anywhere in between leaves both files old or both new.
    """

    def stage(self, cells: set[str], recorded: StatisticsRecord | None) -> StatisticsRecord:
        """Write the statistics of ``cells`` (the new JSON's :func:`key_path` s) where a reader of
        the new JSON finds them, without touching the file a reader of the old JSON (which
        records ``recorded``) uses; return the new JSON's record."""
        ...

    def commit(self) -> None:
        """Put the staged file in place, once the JSON that records it is written."""
        ...


@dataclass(frozen=True)
class StoredBaselines:
    """A parsed baseline file: its conditions, its numbers by model, what made them and its statistics file."""

    suite: str
    conditions: Conditions
    models: dict[str, dict[str, Any]]
    provenance: Provenance = field(default_factory=Provenance)
    statistics: StatisticsRecord | None = None


@dataclass(frozen=True)
class CellChange:
    """What a write did to one cell: its stored numbers before (``None``: new) and after."""

    key: CellKey
    old: Mapping[str, float] | None
    new: Mapping[str, float]

    @property
    def changed(self) -> bool:
        return self.old is None or {k: round_value(v) for k, v in self.old.items()} != dict(self.new)

    def describe(self, name: str | None = None) -> str:
        """``suites/s.yaml::model::cell[3]: score 61.2 -> 58.1, gamma_r 0.71 -> 0.68``, or ``...: new (score 70.1, ...)``.

        Args:
            name: The cell's node id (what a failure names and ``pytest`` takes); without it, its
                address in the file (:func:`key_path`).
        """
        cell = name or key_path(self.key)
        shown = [name for name in self.new if _headline_number(name)] or list(self.new)
        if self.old is None:
            return f"{cell}: new ({', '.join(f'{name} {_digits(self.new[name])}' for name in shown)})"
        moved = [name for name in shown if self.old.get(name) is None or round_value(self.old[name]) != self.new[name]]
        differences = [f"{name} {_digits(self.old.get(name))} -> {_digits(self.new[name])}" for name in moved]
        return f"{cell}: {', '.join(differences) or 'changed'}"


@dataclass(frozen=True)
class BaselineUpdate:
    """What one write of a baseline file did: each written cell's change and the entries removed."""

    path: Path
    changes: tuple[CellChange, ...] = ()
    removed: tuple[str, ...] = ()

    def summary(self, shown: str, names: Mapping[CellKey, str] | None = None) -> list[str]:
        """Terminal lines: counts, then one ``old -> new`` line per changed or new cell (named by its node id
        in ``names``, where it has one), then the removals."""
        changed = [c for c in self.changes if c.changed and c.old is not None]
        new = [c for c in self.changes if c.old is None]
        unchanged = len(self.changes) - len(changed) - len(new)
        lines = []
        if self.changes:
            lines.append(f"{shown}: {plural(len(changed), 'cell')} changed, {len(new)} new, {unchanged} unchanged")
            lines += [f"  {c.describe((names or {}).get(c.key))}" for c in self.changes if c.changed]
        if self.removed:
            removed = plural(len(self.removed), "unused entry", "unused entries")
            lines.append(f"{shown}: removed {removed}: {', '.join(self.removed)}")
        return lines


def round_value(value: float) -> float:
    """``value`` to :data:`SIGNIFICANT_DIGITS` significant digits, as a baseline stores it."""
    return float(f"{value:.{SIGNIFICANT_DIGITS}g}")


def key_path(key: CellKey) -> str:
    """A cell's address inside its suite's file: ``model::[split::]corruption[::severity]``."""
    return key.label.removeprefix(f"{key.suite}::")


def _headline_number(name: str) -> bool:
    # gamma_a follows from the score and the clean score: the summary leaves it out.
    return name.rsplit(".", 1)[-1] in ("score", "gamma_r")


def _digits(value: float | None) -> str:
    return "-" if value is None else f"{value:.{SIGNIFICANT_DIGITS}g}"


class BaselineFile:
    """The baselines of one suite.

    Args:
        path: The JSON file; it need not exist yet.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._stored: StoredBaselines | None = None
        self._read = False

    def load(self) -> StoredBaselines | None:
        """The stored file, read once; ``None`` if there is none yet.

        Raises:
            BaselineError: when the file exists but is not a valid baseline.
        """
        if not self._read:
            self._stored = read_baseline(self.path)
            self._read = True
        return self._stored

    def lookup(self, key: CellKey, conditions: Conditions) -> dict[str, float] | None:
        """Stored numbers of a cell, or ``None`` if it has none yet.

        Raises:
            BaselineError: when the file is broken, or was recorded under other conditions
                than ``conditions`` (for this cell: the general ones and its corruption's table).
        """
        stored = self.load()
        if stored is None:
            return None
        differences = conditions.general_differences(stored.conditions)
        table = None if key.severity == 0 else conditions.table_difference(stored.conditions, key.corruption)
        if table is not None:
            differences.append(table)
        if differences:
            raise BaselineError(
                f"{self.path}: recorded under other conditions than this run ({'; '.join(differences)}); "
                f"its numbers are not comparable. Re-record them with {UPDATE_FLAG}"
            )
        return _stored_cell(stored, key)

    def fingerprint(self, model: str) -> str | None:
        """The fingerprint of ``model`` when its cells were last written, if the file records it."""
        stored = self.load()
        return None if stored is None else stored.provenance.models.get(model)


def stored_cells(stored: StoredBaselines | None) -> set[str]:
    """The :func:`key_path` of every cell ``stored`` holds numbers for."""
    return set() if stored is None else _cell_paths(stored.models, bool(stored.conditions.splits))


def _cell_paths(models: Mapping[str, Any], splits: bool) -> set[str]:
    found: set[str] = set()
    for model, entry in models.items():
        groups = entry.items() if splits else [(None, entry)]
        for split, cells in groups:
            prefix = model if split is None else f"{model}::{split}"
            for corruption, value in cells.items():
                if corruption == CLEAN:
                    found.add(f"{prefix}::{corruption}")
                else:
                    found.update(f"{prefix}::{corruption}::{severity}" for severity in value)
    return found


def _stored_cell(stored: StoredBaselines, key: CellKey) -> dict[str, float] | None:
    if bool(stored.conditions.splits) != (key.split is not None):
        return None  # stored by split and asked without one, or the other way round
    model = stored.models.get(key.model, {})
    if key.split is not None:
        model = model.get(key.split, {})
    if key.severity == 0:
        return model.get(key.corruption)
    return model.get(key.corruption, {}).get(str(key.severity))


def read_baseline(path: Path) -> StoredBaselines | None:
    """Parse and validate a baseline file; ``None`` where there is no file.

    Raises:
        BaselineError: naming the file and the first field that is wrong.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise BaselineError(f"{path}: cannot read baseline ({getattr(exc, 'strerror', None) or exc})") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BaselineError(
            f"{path}: broken baseline file (invalid JSON at line {exc.lineno}); fix or delete it, "
            f"or rewrite it with {UPDATE_FLAG}"
        ) from exc
    except (ValueError, RecursionError) as exc:  # an integer of over 4300 digits; arrays nested too deep
        raise BaselineError(
            f"{path}: broken baseline file ({type(exc).__name__}: {exc}); fix or delete it, or rewrite it with {UPDATE_FLAG}"
        ) from None
    if not isinstance(data, dict) or not isinstance(data.get("models"), dict):
        raise BaselineError(f"{path}: not a baseline file (expected keys 'format' and 'models'); rewrite it with {UPDATE_FLAG}")
    if data.get("format") != FORMAT:
        raise BaselineError(
            f"{path}: baseline of format {data.get('format')!r}, expected {FORMAT} (format 1 recorded no conditions, "
            f"so its numbers cannot be checked against this run's); rewrite it with {UPDATE_FLAG}"
        )
    try:
        if not isinstance(data.get("suite"), str):
            raise BaselineError(f"{path}: 'suite' must be a string, got {data.get('suite')!r}")
        conditions = Conditions.from_json(data.get("conditions"), str(path))
        provenance = Provenance.from_json(data.get("made_with"), str(path))
        statistics = StatisticsRecord.from_json(data["statistics"], str(path)) if "statistics" in data else None
        _validate_models(data["models"], str(path), conditions.splits)
    except BaselineError as exc:
        raise BaselineError(f"{exc}; fix it or rewrite it with {UPDATE_FLAG}") from None
    return StoredBaselines(data["suite"], conditions, data["models"], provenance, statistics)


def _validate_models(models: dict[str, Any], where: str, splits: tuple[str, ...]) -> None:
    for model, cells in models.items():
        if not isinstance(cells, dict):
            raise BaselineError(f"{where}: models.{model}: expected a mapping of corruptions, got {cells!r}")
        if not splits:
            _validate_cells(cells, f"models.{model}", where)
            continue
        for split, entry in cells.items():
            if split not in splits:
                raise BaselineError(f"{where}: models.{model}.{split}: not one of conditions.splits ({', '.join(splits)})")
            if not isinstance(entry, dict):
                raise BaselineError(f"{where}: models.{model}.{split}: expected a mapping of corruptions, got {entry!r}")
            _validate_cells(entry, f"models.{model}.{split}", where)


def _validate_cells(cells: dict[str, Any], prefix: str, where: str) -> None:
    for corruption, entry in cells.items():
        at = f"{prefix}.{corruption}"
        if corruption == CLEAN:
            _validate_values(entry, at, where)
            continue
        if not isinstance(entry, dict):
            raise BaselineError(f"{where}: {at}: expected a mapping of severities, got {entry!r}")
        for severity, values in entry.items():
            if severity not in SEVERITY_KEYS:  # not isdigit(): "¹" is a digit that int() refuses
                raise BaselineError(f"{where}: {at}: expected severities '1'..'5', got {severity!r}")
            _validate_values(values, f"{at}.{severity}", where)


def _validate_values(values: Any, at: str, where: str) -> None:
    if not isinstance(values, dict) or "score" not in values:
        raise BaselineError(f"{where}: {at}: expected a mapping with at least 'score', got {values!r}")
    for metric, value in values.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise BaselineError(f"{where}: {at}.{metric}: expected a number, got {value!r}")
        try:
            number = float(value)
        except OverflowError:
            raise BaselineError(f"{where}: {at}.{metric} is an integer too large for a float") from None
        if not math.isfinite(number):
            raise BaselineError(f"{where}: {at}.{metric} is {value}: a baseline stores finite numbers only")


def write_baseline(
    path: Path,
    suite: str,
    conditions: Conditions,
    cells: Iterable[tuple[CellKey, Mapping[str, float]]],
    replace_all: bool,
    *,
    keep_only: Collection[CellKey] | None = None,
    fingerprints: Mapping[str, str] | None = None,
    tool_version: str = __version__,
    statistics: StatisticsWriter | None = None,
) -> BaselineUpdate:
    """Merge ``cells``, rounded, into the file at ``path`` and write it atomically.

    Stored cells not given keep their values (a ``-k`` run does not forget the rest). A change
    of seed, dataset, metric, ... invalidates them all, a changed severity table that
    corruption's: the write must then give every invalidated cell the suite still has (an
    update of the whole suite, or of that corruption), and refuses otherwise, never discarding
    stored cells silently. ``replace_all`` (set when the stored file could not be used)
    starts from an empty file where the stored one is broken.

    Args:
        keep_only: The suite's cells, when every stored entry it no longer has must go (an
            update of the whole suite, or ``--segrobust-prune``); ``None`` keeps them.
        fingerprints: The fingerprint of each model whose cells are written.
        tool_version: The version recorded as having made the numbers.
        statistics: The statistics file written with it, of the file's cells; without one the
            file keeps its record of the statistics file, which this write leaves as it was.

    Returns:
        Each written cell's stored numbers before and after, and the entries removed.

    Raises:
        ValueError: for a value that is not a finite number (a baseline never stores NaN).
        BaselineError: when the stored file is broken (without ``replace_all``), or when the
            write would discard stored cells that this run's conditions invalidate and it does
            not give (a ``-k`` update after a change of seed); nothing is written then.
        WriteError: when the file cannot be written.
    """
    cells = list(cells)
    models: dict[str, dict[str, Any]] = {}
    tables = dict(conditions.severity_tables)
    recorded: dict[str, str] = {}
    try:
        stored = read_baseline(path)
    except BaselineError:
        if not replace_all:
            raise
        stored = None
    reasons = [] if stored is None else conditions.general_differences(stored.conditions)
    if stored is not None and not reasons:
        stale = {c for c in stored.conditions.severity_tables if conditions.table_difference(stored.conditions, c)}
        reasons = [conditions.table_difference(stored.conditions, c) or c for c in sorted(stale)]
        tables = {c: rows for c, rows in stored.conditions.severity_tables.items() if c not in stale} | tables
        recorded = dict(stored.provenance.models)

        def fresh(cells_: dict[str, Any]) -> dict[str, Any]:
            return {corruption: entry for corruption, entry in cells_.items() if corruption not in stale}

        models = {
            model: fresh(cells_) if not conditions.splits else {split: fresh(c) for split, c in cells_.items()}
            for model, cells_ in copy.deepcopy(stored.models).items()
        }
    invalidated = stored_cells(stored) - _cell_paths(models, bool(conditions.splits))
    discarded = invalidated - {key_path(key) for key, _ in cells}
    gone: list[tuple[str, ...]] = []
    if keep_only is not None:  # entries the suite no longer has go whatever their conditions
        suite_cells = {key_path(key) for key in keep_only}
        gone = [tuple(entry.split("::")) for entry in sorted(discarded - suite_cells)]
        discarded &= suite_cells
    if discarded:
        shown = sorted(discarded)
        listed = ", ".join(shown[:5]) + (f" and {len(shown) - 5} more" if len(shown) > 5 else "")
        raise BaselineError(
            f"{path}: this update writes {plural(len(cells), 'cell')} of suite {suite} under other conditions "
            f"than the file's ({'; '.join(reasons)}) and would discard {plural(len(discarded), 'stored cell')} "
            f"it did not measure ({listed}); update every cell of the suite at once (without -k): "
            f"pytest --segrobust {UPDATE_FLAG}"
        )
    changes = []
    for key, values in cells:
        bad = {metric: value for metric, value in values.items() if not math.isfinite(value)}
        if bad:
            raise ValueError(f"{key.label}: refusing to store non-finite values {bad}")
        rounded = {metric: round_value(value) for metric, value in values.items()}
        # The old numbers as the file held them, even where this run's conditions drop them.
        changes.append(CellChange(key, None if stored is None else _stored_cell(stored, key), rounded))
        model = models.setdefault(key.model, {})
        if key.split is not None:
            model = model.setdefault(key.split, {})
        if key.severity == 0:
            model[key.corruption] = rounded
        else:
            model.setdefault(key.corruption, {})[str(key.severity)] = rounded
    removed: list[tuple[str, ...]] = []
    if keep_only is not None:
        removed = _unused(models, bool(conditions.splits), keep_only)
        _drop(models, removed)
        removed += gone
        kept = {key.corruption for key in keep_only}
        tables = {name: rows for name, rows in tables.items() if name in kept}
    recorded |= dict(fingerprints or {})
    provenance = Provenance(tool_version, {model: fp for model, fp in recorded.items() if model in models})
    old_record = None if stored is None else stored.statistics
    _write(path, suite, replace(conditions, severity_tables=tables), provenance, models, old_record, statistics)
    return BaselineUpdate(path, tuple(changes), tuple("::".join(entry) for entry in removed))


def unused_entries(stored: StoredBaselines | None, cells: Collection[CellKey]) -> list[str]:
    """The stored entries the suite of ``cells`` no longer has, each at the highest level that goes.

    An entry is a whole model (``old-net``), split (``tiny-unet::night``), corruption
    (``tiny-unet::fog``) or a single severity (``tiny-unet::gaussian_noise::4``). A file stored
    by split for a suite without splits, or the other way round, is under other conditions,
    which fail every cell; it has no unused entries of its own.
    """
    if stored is None or not _same_layout(stored, cells):
        return []
    return ["::".join(entry) for entry in _unused(stored.models, bool(stored.conditions.splits), cells)]


def prune_baseline(
    path: Path, cells: Collection[CellKey], statistics: StatisticsWriter | None = None
) -> BaselineUpdate:
    """Remove from the file at ``path`` every entry the suite of ``cells`` no longer has.

    Everything else is written back as it was: the numbers, conditions and provenance of the
    cells kept, and with ``statistics`` their statistics. Nothing is written when there is
    nothing to remove.

    Raises:
        BaselineError: when the file is broken.
        WriteError: when the file cannot be written.
    """
    stored = read_baseline(path)
    if stored is None or not _same_layout(stored, cells):
        return BaselineUpdate(path)
    unused = _unused(stored.models, bool(stored.conditions.splits), cells)
    if not unused:
        return BaselineUpdate(path)
    models = copy.deepcopy(stored.models)
    _drop(models, unused)
    kept = {key.corruption for key in cells}
    tables = {name: rows for name, rows in stored.conditions.severity_tables.items() if name in kept}
    provenance = replace(stored.provenance, models={m: fp for m, fp in stored.provenance.models.items() if m in models})
    conditions = replace(stored.conditions, severity_tables=tables)
    _write(path, stored.suite, conditions, provenance, models, stored.statistics, statistics)
    return BaselineUpdate(path, removed=tuple("::".join(entry) for entry in unused))


def _same_layout(stored: StoredBaselines, cells: Collection[CellKey]) -> bool:
    return bool(cells) and bool(stored.conditions.splits) == any(key.split is not None for key in cells)


def _unused(models: Mapping[str, Any], splits: bool, cells: Iterable[CellKey]) -> list[tuple[str, ...]]:
    """Paths (model, [split,] corruption, severity) of the entries of ``models`` not among ``cells``."""
    wanted: dict[str, dict[str | None, dict[str, set[str]]]] = {}
    for key in cells:
        wanted.setdefault(key.model, {}).setdefault(key.split, {}).setdefault(key.corruption, set()).add(str(key.severity))
    unused: list[tuple[str, ...]] = []
    for model, entry in models.items():
        if model not in wanted:
            unused.append((model,))
            continue
        for split, corruptions in entry.items() if splits else [(None, entry)]:
            at = (model,) if split is None else (model, split)
            if split not in wanted[model]:
                unused.append(at)
                continue
            for corruption, severities in corruptions.items():
                kept = wanted[model][split].get(corruption)
                if kept is None:
                    unused.append((*at, corruption))
                elif corruption != CLEAN:
                    unused.extend((*at, corruption, severity) for severity in severities if severity not in kept)
    return unused


def _drop(models: dict[str, Any], entries: Iterable[tuple[str, ...]]) -> None:
    """Delete each entry; a corruption left without severities goes with it."""
    for entry in entries:
        chain = [models]
        for name in entry[:-1]:
            chain.append(chain[-1][name])
        del chain[-1][entry[-1]]
        for depth in range(len(chain) - 1, 0, -1):
            if chain[depth]:
                break
            del chain[depth - 1][entry[depth - 1]]


def _write(
    path: Path,
    suite: str,
    conditions: Conditions,
    provenance: Provenance,
    models: dict[str, Any],
    record: StatisticsRecord | None,
    statistics: StatisticsWriter | None,
) -> None:
    """Write the file, and with ``statistics`` its statistics file: staged, the JSON, committed.

    ``record`` is the file's record of its statistics file so far.
    """
    if statistics is not None:
        record = statistics.stage(_cell_paths(models, bool(conditions.splits)), record)
    document: dict[str, Any] = {"format": FORMAT, "suite": suite, "conditions": conditions.to_json()}
    if provenance != Provenance():
        document["made_with"] = provenance.to_json()
    if record is not None:
        document["statistics"] = record.to_json()
    document["models"] = _sorted(models, bool(conditions.splits))
    atomic_write_text(path, json.dumps(document, indent=2, allow_nan=False) + "\n")
    if statistics is not None:
        statistics.commit()


def _sorted(models: dict[str, Any], splits: bool) -> dict[str, Any]:
    def by_severity(item: tuple[str, Any]) -> tuple[int, str]:
        return (int(item[0]) if item[0].isdigit() else -1, item[0])

    def cells_sorted(cells: dict[str, Any]) -> dict[str, Any]:
        return {
            name: dict(sorted(value.items(), key=by_severity)) if name != CLEAN else value
            for name, value in sorted(cells.items(), key=lambda kv: (kv[0] != CLEAN, kv[0]))
        }

    return {
        model: cells_sorted(models[model]) if not splits else {s: cells_sorted(models[model][s]) for s in sorted(models[model])}
        for model in sorted(models)
    }
