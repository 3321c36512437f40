"""Stored baselines: one JSON file per suite, compared cell by cell, written atomically.

A file looks like::

    {"format": 1, "suite": "demo", "metric": "miou",
     "models": {"tiny-unet": {"clean": {"score": 91.2},
                              "gaussian_noise": {"3": {"score": 60.1, "gamma_r": 0.66, "gamma_a": 0.69}}}}}

Reading happens in any process; writing happens once, at the end of the run, in the one
process that owns the run's output (the xdist controller, or the only process).
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_segrobust.errors import BaselineError

FORMAT = 1
UPDATE_FLAG = "--segrobust-update-baselines"


@dataclass(frozen=True)
class CellKey:
    """Address of one cell in a suite: model x corruption x severity (0 for clean)."""

    suite: str
    model: str
    corruption: str
    severity: int

    @property
    def label(self) -> str:
        cell = self.corruption if self.severity == 0 else f"{self.corruption}::{self.severity}"
        return f"{self.suite}::{self.model}::{cell}"


@dataclass(frozen=True)
class Check:
    """One number compared with its baseline."""

    metric: str
    observed: float
    baseline: float
    tolerance: float

    @property
    def delta(self) -> float:
        return self.observed - self.baseline

    @property
    def regressed(self) -> bool:
        # NaN never passes silently: a cell that lost its score is a regression.
        return math.isnan(self.observed) or self.observed < self.baseline - self.tolerance

    @property
    def improved(self) -> bool:
        return self.observed > self.baseline + self.tolerance


class BaselineFile:
    """The baselines of one suite.

    Args:
        path: The JSON file; it need not exist yet.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._models: dict[str, dict[str, Any]] | None = None

    def load(self) -> dict[str, dict[str, Any]]:
        """The stored values by model, read once.

        Raises:
            BaselineError: when the file exists but is not a readable baseline.
        """
        if self._models is None:
            self._models = read_baseline(self.path)
        return self._models

    def lookup(self, key: CellKey) -> dict[str, float] | None:
        """Stored numbers of a cell, or ``None`` if it has none yet."""
        model = self.load().get(key.model, {})
        if key.severity == 0:
            return model.get(key.corruption)
        return model.get(key.corruption, {}).get(str(key.severity))


def read_baseline(path: Path) -> dict[str, dict[str, Any]]:
    """Parse a baseline file; a missing file is an empty baseline."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise BaselineError(f"{path}: cannot read baseline ({exc.strerror})") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BaselineError(
            f"{path}: broken baseline file (invalid JSON at line {exc.lineno}); fix or delete it, "
            f"or rewrite it with {UPDATE_FLAG}"
        ) from exc
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("models"), dict):
        raise BaselineError(
            f"{path}: not a baseline of format {FORMAT} (expected keys 'format' and 'models'); "
            f"rewrite it with {UPDATE_FLAG}"
        )
    return data["models"]


def compare(
    observed: Mapping[str, float], stored: Mapping[str, float], tolerances: Mapping[str, float]
) -> list[Check]:
    """Checks of every toleranced metric present in both ``observed`` and ``stored``."""
    return [
        Check(metric, float(observed[metric]), float(stored[metric]), tolerance)
        for metric, tolerance in tolerances.items()
        if metric in observed and metric in stored
    ]


def write_baseline(
    path: Path, suite: str, metric: str, cells: Iterable[tuple[CellKey, Mapping[str, float]]], replace_all: bool
) -> None:
    """Merge ``cells`` into the file at ``path`` and write it atomically.

    Cells not given keep their stored values (a ``-k`` run does not forget the rest),
    unless ``replace_all`` is set because the stored file is broken.
    """
    models = {} if replace_all else read_baseline(path)
    for key, values in cells:
        model = models.setdefault(key.model, {})
        if key.severity == 0:
            model[key.corruption] = dict(values)
        else:
            model.setdefault(key.corruption, {})[str(key.severity)] = dict(values)
    document = {"format": FORMAT, "suite": suite, "metric": metric, "models": _sorted(models)}
    atomic_write_text(path, json.dumps(document, indent=2, allow_nan=True) + "\n")


def _sorted(models: dict[str, Any]) -> dict[str, Any]:
    def by_severity(item: tuple[str, Any]) -> tuple[int, str]:
        return (int(item[0]) if item[0].isdigit() else -1, item[0])

    out: dict[str, Any] = {}
    for model in sorted(models):
        cells = models[model]
        out[model] = {
            name: dict(sorted(value.items(), key=by_severity)) if name != "clean" else value
            for name, value in sorted(cells.items(), key=lambda kv: (kv[0] != "clean", kv[0]))
        }
    return out


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that readers see the old file or the new one, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
