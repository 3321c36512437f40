"""The statistical gate's inputs: a cell's per-image statistics, paired with its baseline's.

:func:`pytest_segrobust.gate.paired_checks` decides from numbers; this module finds them. For a
suite with ``gate:``, :class:`Evidence` looks the baseline cell's statistics up in its sidecar
(:mod:`pytest_segrobust.sidecar`), checks they pair with this run's (the same images), draws the
bootstrap's weights once per model and image count, and splits the suite's confidence over the
family of numbers it gates. It also packs a cell's statistics for the controller to store.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from pytest_segrobust.baselines import UPDATE_FLAG, CellKey, key_path
from pytest_segrobust.errors import BaselineError
from pytest_segrobust.evaluation import CellResult
from pytest_segrobust.gate import PairedCheck, paired_checks
from pytest_segrobust.metrics import METRICS
from pytest_segrobust.seeding import sample_seed
from pytest_segrobust.sidecar import Sidecar, SidecarEntry, pack, unpack
from pytest_segrobust.stats import resample_weights
from pytest_segrobust.suite import Suite


def family_size(suite: Suite) -> int:
    """How many numbers a full run of ``suite`` gates: each metric's score per cell, and its
    gamma_r per corrupted cell. Bonferroni splits the suite's error rate over them."""
    per_model = len(suite.splits) * (1 + 2 * len(suite.corruptions) * len(suite.severities))
    return len(suite.models) * len(suite.metrics) * per_model


def cell_level(suite: Suite) -> float:
    """The confidence of each number's interval under the suite's policy."""
    policy = suite.gate
    assert policy is not None
    if policy.multiplicity == "bonferroni":
        return 1 - (1 - policy.confidence) / family_size(suite)
    return policy.confidence


def pack_statistics(suite: Suite, result: CellResult) -> dict[str, dict[str, str]]:
    """The cell's statistics per metric (corrupted and clean), as text a worker can send; empty
    for a suite without a statistical gate, whose baselines keep none."""
    if suite.gate is None:
        return {}
    return {
        name: {"corrupted": pack(result.corrupted.statistics[name]), "clean": pack(result.clean.statistics[name])}
        for name in suite.metrics
        if name in result.corrupted.statistics and name in result.clean.statistics
    }


def sidecar_entries(key: CellKey, packed: Mapping[str, Mapping[str, str]]) -> list[SidecarEntry]:
    """:func:`pack_statistics`'s output as the sidecar's entries of ``key``."""
    return [
        SidecarEntry(key_path(key), metric, unpack(arrays["corrupted"]), unpack(arrays["clean"]))
        for metric, arrays in packed.items()
    ]


class Evidence:
    """Sidecars read by this process and bootstrap weights drawn, shared by a run's cells."""

    def __init__(self) -> None:
        self._sidecars: dict[Path, Sidecar] = {}
        self._weights: dict[tuple[int, str, str, int, int], np.ndarray] = {}

    def checks(
        self,
        suite: Suite,
        key: CellKey,
        observed: Mapping[str, float],
        stored: Mapping[str, float],
        result: CellResult,
        baseline: Path,
        shown: str,
    ) -> tuple[tuple[PairedCheck, ...] | None, str | None]:
        """The cell's paired checks, or why they cannot be made (the cell then fails).

        Args:
            observed, stored: The cell's numbers in this run and in the baseline.
            result: This run's results, with their per-image statistics.
            baseline: The baseline JSON; its sidecar holds the stored statistics.
            shown: The baseline JSON as messages show it.
        """
        policy = suite.gate
        assert policy is not None
        sidecar = self._sidecars.setdefault(baseline, Sidecar(baseline))
        statistics: dict[str, Any] = {}
        margins: dict[str, float] = {}
        for index, name in enumerate(suite.metrics):
            prefix = "" if index == 0 else f"{name}."
            score_of = METRICS.get(name).score_of
            wanted = {number: stored.get(f"{prefix}{number}") for number in ("score", "gamma_r")}
            try:
                found = sidecar.lookup(key_path(key), name, score_of, wanted)
            except BaselineError as exc:
                return None, str(exc)
            if found is None:
                return None, (
                    f"{shown} stores this cell's numbers, but its statistics file {sidecar.path.name} has no per-image "
                    f"statistics of {name} for it, which the statistical gate (gate: in the suite) pairs; record them "
                    f"with pytest --segrobust {UPDATE_FLAG}"
                )
            clean, corrupted = result.clean.statistics.get(name), result.corrupted.statistics.get(name)
            if clean is None or corrupted is None:
                return None, f"metric {name} gave no per-image statistics in this run"
            if found.corrupted.shape != corrupted.shape:
                return None, (
                    f"the baseline's statistics of {name} cover {found.corrupted.shape[0]} images "
                    f"{tuple(found.corrupted.shape[1:])}, this run's {corrupted.shape[0]} {tuple(corrupted.shape[1:])}: "
                    f"they cannot be paired; re-record with pytest --segrobust {UPDATE_FLAG}"
                )
            statistics[prefix] = (score_of, found.clean, found.corrupted, clean, corrupted)
            margins[f"{prefix}score"] = policy.margin.score
            if key.severity > 0:
                margins[f"{prefix}gamma_r"] = policy.margin.gamma_r
        images = result.corrupted.num_images
        weights = self.weights(suite, key, images)
        return paired_checks(observed, stored, statistics, margins, weights, cell_level(suite)), None

    def weights(self, suite: Suite, key: CellKey, images: int) -> np.ndarray:
        """The bootstrap's weights for a model's (and split's) cells: every cell of the model is
        resampled with the same images, so its cells' changes can be aggregated."""
        assert suite.gate is not None
        index = (suite.seed, key.model, str(key.split), images, suite.gate.resamples)
        if index not in self._weights:
            seed = sample_seed(suite.seed, f"{key.model}/{key.split}", "bootstrap", 0)
            self._weights[index] = resample_weights(images, suite.gate.resamples, seed)
        return self._weights[index]
