"""The statistical gate's inputs: a cell's per-image statistics, paired with its baseline's.

:func:`pytest_segrobust.gate.verdict.paired_checks` decides from numbers; this module finds them. For a
suite with ``gate:``, :class:`Evidence` looks the baseline cell's statistics up in its sidecar
(:mod:`pytest_segrobust.store.sidecar`), checks they pair with this run's (the same images), draws the
bootstrap's weights once per model and image count, and splits the suite's confidence over the
family of numbers it gates. It also packs a cell's statistics for the controller to store.

Where the task groups samples (a referring task's expressions of one image, an R-VOS task's of
one clip), every run's rows carry their unit; the four runs of a check must name the same unit
row by row, and :func:`unit_rows` sums each unit's rows before the bootstrap draws units. A
baseline recorded before its statistics carried units is refused, never compared.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pytest_segrobust.core.errors import BaselineError
from pytest_segrobust.core.statistics import Change, RunScores, resample_weights, unit_sums
from pytest_segrobust.engine.evaluation import CellResult
from pytest_segrobust.gate.release import ClassRuns, cell_level
from pytest_segrobust.gate.verdict import Observation, PairedRuns, allowances, paired_checks
from pytest_segrobust.metrics import METRICS
from pytest_segrobust.randomness.seeding import sample_seed
from pytest_segrobust.store.baselines import UPDATE_FLAG, CellKey, key_path, update_command
from pytest_segrobust.store.decisions import PairedCheck
from pytest_segrobust.store.records import CellRecord
from pytest_segrobust.store.sidecar import Sidecar, SidecarEntry, pack, sidecar_path, unpack
from pytest_segrobust.suite.schema import Suite
from pytest_segrobust.tasks import Task, get_task


def pack_statistics(suite: Suite, result: CellResult) -> dict[str, dict[str, Any]]:
    """The cell's statistics per metric (corrupted and clean, as text) and their image count,
    JSON a worker can send; empty for a suite without a statistical gate, whose baselines keep none.

    Where the task groups samples, each metric's row units go with them (``units``, once: the
    clean and the corrupted run must name the same unit for each row).

    Raises:
        ValueError: when the clean and the corrupted run scored different numbers of images, or
            (where the task groups samples) a metric kept no units or the runs' units differ.
    """
    if suite.gate is None:
        return {}
    if result.corrupted.num_images != result.clean.num_images:
        raise ValueError(
            f"the corrupted run scored {result.corrupted.num_images} images, the clean run {result.clean.num_images}"
        )
    task = get_task(suite.task)
    packed: dict[str, dict[str, Any]] = {}
    for name in suite.metrics:
        if name not in result.corrupted.statistics or name not in result.clean.statistics:
            continue
        packed[name] = {
            "corrupted": pack(result.corrupted.statistics[name]),
            "clean": pack(result.clean.statistics[name]),
            "images": result.corrupted.num_images,
        }
        if task.groups_samples:
            units = _run_units(task, name, ("clean", "corrupted"), (result.clean.units, result.corrupted.units))
            packed[name]["units"] = pack(units)
    return packed


def sidecar_entries(key: CellKey, packed: Mapping[str, Mapping[str, Any]]) -> list[SidecarEntry]:
    """:func:`pack_statistics`'s output as the sidecar's entries of ``key``."""
    return [
        SidecarEntry(
            key_path(key),
            metric,
            unpack(arrays["corrupted"]),
            unpack(arrays["clean"]),
            int(arrays["images"]),
            unpack(arrays["units"]) if "units" in arrays else None,
        )
        for metric, arrays in packed.items()
    ]


def _run_units(
    task: Task, metric: str, labels: Sequence[str], found: Sequence[Mapping[str, np.ndarray]]
) -> np.ndarray:
    """The one array of row units that every run (``found``: each run's units by metric, named
    ``labels`` in messages) keeps for ``metric``.

    Raises:
        ValueError: for a run whose statistics of ``metric`` carry no units, or two runs whose
            units differ (their rows are not the same samples).
    """
    unit = task.resampling_unit
    first: np.ndarray | None = None
    for label, units in zip(labels, found, strict=True):
        mine = units.get(metric)
        if mine is None:
            raise ValueError(
                f"the {label} statistics of {metric} name no {unit} for their rows: the {task.name} task's gate "
                f"resamples {unit}s, so the metric must keep each row's {unit} (Metric.keep_row_units)"
            )
        if first is not None and not np.array_equal(mine, first):
            raise ValueError(
                f"the {labels[0]} and {label} statistics of {metric} name different {unit}s for their rows "
                f"({_first_difference(first, mine)}): they are not the same samples"
            )
        first = mine
    assert first is not None
    return first


def _first_difference(one: np.ndarray, other: np.ndarray) -> str:
    if one.shape != other.shape:
        return f"{one.shape[0]} rows and {other.shape[0]}"
    row = int(np.flatnonzero(one != other)[0])
    return f"row {row}: {str(one[row])!r} and {str(other[row])!r}"


def unit_rows(
    task: Task, statistics: Sequence[np.ndarray], units: np.ndarray | None, images: int
) -> tuple[list[np.ndarray], int]:
    """Runs' statistics of ``images`` samples as the bootstrap draws them, and how many units
    it draws: as they are (a sample per unit) where the task does not group samples; summed
    per unit (:func:`~pytest_segrobust.core.statistics.unit_sums`) where it does, every run's
    rows being of ``units``.

    Raises:
        ValueError: for a task that groups samples given no units.
    """
    if not task.groups_samples:
        return list(statistics), images
    if units is None:
        raise ValueError(f"the {task.name} task resamples {task.resampling_unit}s: the rows need their units")
    return [unit_sums(array, units) for array in statistics], int(np.unique(units).size)


@dataclass(frozen=True)
class BaselineFiles:
    """A suite's baseline JSON and where its per-image statistics are kept.

    Attributes:
        path: The baseline JSON; its statistics file (sidecar) is named after it.
        shown: The baseline JSON as messages show it.
        store: The folder of the statistics file when it is not beside the JSON
            (:func:`~pytest_segrobust.store.sidecar.sidecar_path`).
    """

    path: Path
    shown: str
    store: Path | None = None


class Evidence:
    """Sidecars read by this process, bootstrap weights drawn and runs scored, shared by a run's cells."""

    def __init__(self) -> None:
        self._sidecars: dict[Path, Sidecar] = {}
        self._weights: dict[tuple[int, str, str, int, int], np.ndarray] = {}
        self._scores: dict[tuple[str, int, bytes], RunScores] = {}

    def checks(
        self,
        suite: Suite,
        observation: Observation,
        stored: Mapping[str, float],
        result: CellResult,
        files: BaselineFiles,
    ) -> tuple[tuple[PairedCheck, ...] | None, str | None, dict[str, Any] | None]:
        """The cell's paired checks, or why they cannot be made (the cell then fails), and the
        headline score of each resample (:func:`aggregate_changes` averages them over cells).

        Args:
            observation: The cell and its numbers in this run; its node id is what the command
                that records its missing statistics selects.
            stored: The cell's numbers in the baseline.
            result: This run's results, with their per-image statistics.
            files: The baseline JSON, whose sidecar holds the stored statistics.
        """
        key, observed, nodeid = observation.key, observation.numbers, observation.nodeid
        baseline, shown, store = files.path, files.shown, files.store
        policy = suite.gate
        assert policy is not None
        path = sidecar_path(baseline, store)
        if path not in self._sidecars:
            # Beside the JSON it is named as the JSON is; in the cache folder, by its full path.
            self._sidecars[path] = Sidecar(baseline, store, str(sidecar_path(Path(shown))) if store is None else None)
        sidecar = self._sidecars[path]
        images = result.corrupted.num_images
        task = get_task(suite.task)
        runs: dict[str, PairedRuns] = {}
        drawn = images
        for index, name in enumerate(suite.metrics):
            prefix = "" if index == 0 else f"{name}."
            kind = METRICS.get(name)
            worst = kind.worst()
            wanted = {number: stored.get(f"{prefix}{number}") for number in ("score", "gamma_r")}
            try:
                found = sidecar.lookup(key_path(key), name, kind.resampled_scores, wanted, worst)
            except BaselineError as exc:
                return None, str(exc), None
            shown_sidecar = sidecar.path.name if store is None else sidecar.path
            if found is None:
                return None, (
                    f"{shown} stores this cell's numbers, but its statistics file {shown_sidecar} has no per-image "
                    f"statistics of {name} for it, which the statistical gate (gate: in the suite) pairs; record them "
                    f"with {update_command(nodeid)}"
                ), None
            clean, corrupted = result.clean.statistics.get(name), result.corrupted.statistics.get(name)
            if clean is None or corrupted is None:
                return None, f"metric {name} gave no per-image statistics in this run", None
            if found.images != images or found.corrupted.shape[1:] != corrupted.shape[1:]:
                return None, (
                    f"the baseline's statistics of {name} cover {found.images} images {tuple(found.corrupted.shape[1:])}, "
                    f"this run's {images} {tuple(corrupted.shape[1:])}: they cannot be paired; "
                    f"re-record with pytest --segrobust {UPDATE_FLAG}"
                ), None
            if task.groups_samples and found.units is None:
                unit = task.resampling_unit
                return None, (
                    f"{shown}: its statistics file {shown_sidecar} was recorded before statistics carried each row's "
                    f"{unit}: the {task.name} task's gate resamples {unit}s (the samples of one {unit} change "
                    f"together), so the baseline is not compared; re-record it with {update_command(nodeid)}"
                ), None
            try:
                units = None
                if task.groups_samples:
                    labels = ("baseline's clean", "baseline's corrupted", "clean", "corrupted")
                    stored_units = {name: found.units} if found.units is not None else {}
                    found_units = (stored_units, stored_units, result.clean.units, result.corrupted.units)
                    units = _run_units(task, name, labels, found_units)
                arrays, drawn = unit_rows(task, (found.clean, found.corrupted, clean, corrupted), units, images)
                weights = self.weights(suite, key, drawn)
                scored = [self.scores(name, array, weights) for array in arrays]
                runs[prefix] = PairedRuns(*scored, worst, task.resampling_unit)
            except ValueError as exc:
                return None, f"the statistics of {name} cannot be paired with the baseline's: {exc}", None
        margins, lower_is_better = allowances(policy.margin, suite.metrics, corrupted=key.severity > 0)
        headline = runs[""]
        resampled = {
            "images": drawn,
            "clean": pack(np.stack([headline.clean.resampled, headline.baseline_clean.resampled]).astype(np.float32)),
            "corrupted": pack(
                np.stack([headline.corrupted.resampled, headline.baseline_corrupted.resampled]).astype(np.float32)
            ),
        }
        checks = paired_checks(observed, stored, runs, margins, cell_level(suite), lower_is_better=lower_is_better)
        return checks, None, resampled

    def own_runs(self, suite: Suite, key: CellKey, result: CellResult) -> dict[str, tuple[RunScores, RunScores]]:
        """Each metric's clean and corrupted scores of this run, as they are and in each resample
        (the model's resamples, as :meth:`checks` pairs them): what requirements are decided by.

        Raises:
            ValueError: for a metric that gave no per-image statistics in this run, or (where the
                task groups samples) no units or units that differ between its clean and corrupted run.
        """
        runs = {}
        for name in suite.metrics:
            clean, corrupted, drawn = self._own_rows(suite, result, name)
            weights = self.weights(suite, key, drawn)
            runs[name] = (self.scores(name, clean, weights), self.scores(name, corrupted, weights))
        return runs

    def class_runs(self, suite: Suite, key: CellKey, result: CellResult, metric: str) -> ClassRuns | None:
        """``metric``'s per-class clean and corrupted scores in each resample, or ``None`` where the
        metric cannot resample classes (or gave no statistics)."""
        kind = METRICS.get(metric)
        if result.clean.statistics.get(metric) is None or result.corrupted.statistics.get(metric) is None:
            return None
        clean, corrupted, drawn = self._own_rows(suite, result, metric)
        weights = self.weights(suite, key, drawn)
        per_clean = kind.resampled_class_scores(clean, weights)
        per_corrupted = kind.resampled_class_scores(corrupted, weights)
        return None if per_clean is None or per_corrupted is None else ClassRuns(per_clean, per_corrupted, drawn)

    def _own_rows(self, suite: Suite, result: CellResult, metric: str) -> tuple[np.ndarray, np.ndarray, int]:
        """This run's clean and corrupted statistics of ``metric`` as the bootstrap draws them
        (:func:`unit_rows`), and how many units it draws.

        Raises:
            ValueError: as :meth:`own_runs`.
        """
        clean, corrupted = result.clean.statistics.get(metric), result.corrupted.statistics.get(metric)
        if clean is None or corrupted is None:
            raise ValueError(f"metric {metric} gave no per-image statistics in this run")
        task = get_task(suite.task)
        units = None
        if task.groups_samples:
            units = _run_units(task, metric, ("clean", "corrupted"), (result.clean.units, result.corrupted.units))
        (clean, corrupted), drawn = unit_rows(task, (clean, corrupted), units, result.corrupted.num_images)
        return clean, corrupted, drawn

    def scores(self, metric: str, statistics: np.ndarray, weights: np.ndarray) -> RunScores:
        """``metric``'s scores of a run's statistics under ``weights`` (from :meth:`weights`),
        computed once per distinct array: a model's clean run, the same for all its cells, is
        resampled once (for COCO mAP that is most of a cell's bootstrap time)."""
        digest = hashlib.blake2b(
            statistics.dtype.str.encode() + repr(statistics.shape).encode() + statistics.tobytes(), digest_size=16
        ).digest()
        index = (metric, id(weights), digest)  # weights live in self._weights as long as self
        if index not in self._scores:
            self._scores[index] = RunScores.of(statistics, METRICS.get(metric).resampled_scores, weights)
        return self._scores[index]

    def weights(self, suite: Suite, key: CellKey, images: int) -> np.ndarray:
        """The bootstrap's weights for a model's (and split's) cells: every cell of the model is
        resampled with the same images, so its cells' changes can be aggregated."""
        assert suite.gate is not None
        index = (suite.seed, key.model, str(key.split), images, suite.gate.resamples)
        if index not in self._weights:
            seed = sample_seed(suite.seed, f"{key.model}/{key.split}", "bootstrap", 0)
            self._weights[index] = resample_weights(images, suite.gate.resamples, seed)
        return self._weights[index]


def aggregate_changes(
    records: list[CellRecord], resampled: Mapping[str, Mapping[str, Any]], confidence: float
) -> list[dict[str, Any]]:
    """The change of each model's aggregates from its baseline, with intervals at ``confidence``.

    Every cell of a model was resampled with the same images (:meth:`Evidence.weights`), so
    an aggregate's change in one resample is the aggregate of its cells' scores in that
    resample, candidate minus baseline: mPC (mean corrupted score), rPC (mPC over the clean
    score), the mean gamma_r over every corrupted cell and over each category's cells.

    Args:
        records: One suite's cells.
        resampled: Per node id, :meth:`Evidence.checks`'s resampled scores.
        confidence: The intervals' level (each aggregate on its own, not split over a family).
    """
    rows: list[dict[str, Any]] = []
    by_model: dict[tuple[str, str | None], list[CellRecord]] = {}
    for r in records:
        if r.severity > 0 and r.nodeid in resampled:
            by_model.setdefault((r.model, r.split), []).append(r)
    for (model, split), cells in by_model.items():
        images = int(resampled[cells[0].nodeid]["images"])
        clean = unpack(resampled[cells[0].nodeid]["clean"]).astype(np.float64)  # (2, R): candidate, baseline
        scores = np.stack([unpack(resampled[r.nodeid]["corrupted"]).astype(np.float64) for r in cells])  # (C, 2, R)
        # The observed values: this run's and the baseline's numbers of every cell.
        seen = np.array([[r.score, float((r.baseline or {})["score"])] for r in cells])  # (C, 2)
        seen_clean = np.array([cells[0].clean_score, _clean_baseline(cells[0])])
        groups = [("all", list(range(len(cells))))]
        categories = dict.fromkeys(r.category for r in cells)
        groups += [(c, [i for i, r in enumerate(cells) if r.category == c]) for c in categories if len(categories) > 1]

        def change(values: np.ndarray) -> np.ndarray:  # (2, ...) candidate, baseline -> their difference
            return values[0] - values[1]

        numbers = {
            "mPC": (change(seen.mean(0)), change(scores.mean(0)), len(cells)),
            "rPC": (change(seen.mean(0) / seen_clean), change(scores.mean(0) / clean), len(cells)),
        }
        for label, members in groups:
            name = "mean γr" if label == "all" else f"mean γr ({label})"
            numbers[name] = (
                change((seen[members] / seen_clean).mean(0)),
                change((scores[members] / clean).mean(0)),
                len(members),
            )
        row_name = model if split is None else f"{model} @ {split}"
        for number, (observed, per_resample, count) in numbers.items():
            low, high = Change(float(observed), per_resample, images).interval(confidence)
            rows.append(
                {"model": row_name, "number": number, "change": float(observed), "low": low, "high": high, "cells": count}
            )
    return rows


def _clean_baseline(record: CellRecord) -> float:
    """The baseline's clean score of a corrupted cell: its score over its stored gamma_r."""
    stored = record.baseline or {}
    if stored.get("gamma_r"):
        return float(stored["score"]) / float(stored["gamma_r"])
    return record.clean_score  # a baseline cell scored 0: its clean score is not recoverable from it
