"""How often the statistical gate calls an equally robust referring model "regressed", by resampling unit.

    python benchmarks/clustered_gate.py [--images 500] [--repetitions 400] [--resamples 500]

A referring data set puts several expressions on one image (RefCOCO: about 7 per image), and
a perturbation moves the expressions of one image together. This simulates suites of
``--images`` images with ``k`` expressions each whose IoU changes are correlated within an
image, and a candidate exactly as robust as its baseline: its four runs (clean and corrupted,
candidate and baseline) are exchangeable draws, so every number's true change is 0. One cell
gates the four metrics of ``suites/demo-referring.yaml`` (score and gamma_r each: 8 numbers)
through the project's own chain: the referring metrics' per-expression statistics, the rows
summed per image where the task resamples images (``unit_rows``), ``resample_weights``,
each metric's ``resampled_scores``, ``paired_checks`` and the non-inferiority rule, at margin
0 (the boundary an equally robust model sits on).

It prints, for each setting of expressions per image and latent correlation (and the
intra-image correlation of the per-expression IoU changes it produced), the rate of FAIL
("regressed") per number at 95% (two-sided: nominal 2.5%) and per cell at the demo-referring
family's Bonferroni level, with images and with expressions as the resampling unit, each
with its Monte Carlo standard error. Images stay within nominal; expressions do not once
``k > 1``: their intervals are too narrow by the design effect ``sqrt(1 + (k - 1) ICC)``,
which the ratio of the two units' standard errors (last column) follows.

Measured (defaults, one CPU thread: ``OPENBLAS_NUM_THREADS=1``, about 8 minutes):

| k, correlation | ICC of changes | unit | per number | per cell | SE ratio |
|---|---|---|---|---|---|
| 1, 0.66 | - | image | 2.7 ± 0.4% | 0.0 ± 0.0% | 1.00 |
| 1, 0.66 | - | expression | 2.6 ± 0.4% | 0.2 ± 0.2% | 1.00 |
| 3, 0.66 | 0.62 | image | 2.2 ± 0.4% | 0.0 ± 0.0% | 1.49 |
| 3, 0.66 | 0.62 | expression | 6.2 ± 0.7% | 0.8 ± 0.4% | 1.49 |
| 7, 0.28 | 0.26 | image | 2.4 ± 0.4% | 0.0 ± 0.0% | 1.61 |
| 7, 0.28 | 0.26 | expression | 7.3 ± 0.8% | 1.5 ± 0.6% | 1.61 |
| 7, 0.66 | 0.62 | image | 1.8 ± 0.4% | 0.0 ± 0.0% | 2.17 |
| 7, 0.66 | 0.62 | expression | 10.4 ± 1.0% | 7.0 ± 1.3% | 2.17 |

Per number is the share of the cell's 8 numbers that fail, averaged over repetitions; per cell
the share of repetitions where any of them fails; ± one Monte Carlo standard error.
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import numpy as np

from pytest_segrobust.core.statistics import Outcome, RunScores, resample_weights
from pytest_segrobust.gate.evidence import unit_rows
from pytest_segrobust.gate.release import cell_level
from pytest_segrobust.gate.verdict import PairedRuns, paired_checks
from pytest_segrobust.metrics import METRICS
from pytest_segrobust.metrics.referring import sample_statistics
from pytest_segrobust.suite.schema import load_suite
from pytest_segrobust.tasks import get_task

SUITE = Path(__file__).resolve().parent.parent / "suites" / "demo-referring.yaml"
SETTINGS = ((1, 0.66), (3, 0.66), (7, 0.28), (7, 0.66))
SPREAD = 0.6  # of a run's latent noise around an expression's difficulty (logit of its IoU)


def runs_of(rng: np.random.Generator, images: int, per_image: int, correlation: float) -> tuple[list[np.ndarray], np.ndarray]:
    """The per-expression statistics of four exchangeable runs (baseline clean, baseline
    corrupted, candidate clean, candidate corrupted) and each row's image id.

    Each expression has a difficulty (its image's and its own) and an object size; each run
    adds noise whose image part carries ``correlation`` of its variance. IoU is the logistic
    of difficulty plus noise (the corrupted runs a step harder); intersection and union are
    pixel counts, as the referring metrics keep them.
    """
    rows = images * per_image
    image_of = np.repeat(np.arange(images), per_image)
    difficulty = 1.0 + 0.8 * rng.standard_normal(images)[image_of] + 0.8 * rng.standard_normal(rows)
    union = np.round(np.exp(rng.normal(7.0, 0.8, rows))) + 1
    runs = []
    for shift in (0.5, -0.5, 0.5, -0.5):
        noise = math.sqrt(correlation) * rng.standard_normal(images)[image_of]
        noise += math.sqrt(1 - correlation) * rng.standard_normal(rows)
        iou = 1 / (1 + np.exp(-(difficulty + shift + SPREAD * noise)))
        runs.append(sample_statistics(np.round(iou * union), union))
    return runs, np.char.add("image-", image_of.astype(str))


def intra_image_correlation(change: np.ndarray, per_image: int) -> float:
    """The one-way ANOVA estimate of the correlation of ``change`` within images (NaN for one per image)."""
    if per_image < 2:
        return math.nan
    groups = change.reshape(-1, per_image)
    within = groups.var(axis=1, ddof=1).mean()
    between = per_image * groups.mean(axis=1).var(ddof=1)
    return float((between - within) / (between + (per_image - 1) * within))


class GatedCell:
    """One simulated cell's runs, scored under one resampling unit's weights, as the gate pairs them.

    Args:
        arrays: The four runs' statistics (:func:`runs_of`), a row per resampling unit.
        weights: :func:`resample_weights` for as many units.
        metrics: The suite's metrics, the headline first.
    """

    def __init__(self, arrays: list[np.ndarray], weights: np.ndarray, metrics: tuple[str, ...]) -> None:
        self.runs: dict[str, PairedRuns] = {}
        self.observed: dict[str, float] = {}
        self.stored: dict[str, float] = {}
        for index, name in enumerate(metrics):
            prefix = "" if index == 0 else f"{name}."
            kind = METRICS.get(name)
            scored = [RunScores.of(array, kind.resampled_scores, weights) for array in arrays]
            self.runs[prefix] = PairedRuns(*scored, kind.worst())
            base_clean, base_corrupted, clean, corrupted = (run.observed for run in scored)
            self.observed |= {f"{prefix}score": corrupted, f"{prefix}gamma_r": corrupted / clean}
            self.stored |= {f"{prefix}score": base_corrupted, f"{prefix}gamma_r": base_corrupted / base_clean}

    def failed(self, level: float) -> np.ndarray:
        """Which numbers the gate fails ("regressed") at confidence ``level``, margin 0."""
        checks = paired_checks(self.observed, self.stored, self.runs, dict.fromkeys(self.observed, 0.0), level)
        return np.array([check.outcome == Outcome.FAIL for check in checks])

    def spread(self) -> float:
        """The bootstrap spread of the headline score's change."""
        headline = self.runs[""]
        return float(np.std(headline.corrupted.resampled - headline.baseline_corrupted.resampled, ddof=1))


def rate(hits: np.ndarray) -> str:
    """Mean and Monte Carlo standard error, in percent, of per-repetition shares ``hits``."""
    error = hits.std(ddof=1) / math.sqrt(len(hits)) if len(hits) > 1 else math.nan
    return f"{100 * hits.mean():.1f} ± {100 * error:.1f}%"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=500)
    parser.add_argument("--repetitions", type=int, default=400)
    parser.add_argument("--resamples", type=int, default=500)
    args = parser.parse_args()
    suite = load_suite(SUITE)
    family = cell_level(suite)
    task = get_task(suite.task)
    print(
        f"{args.images} images, {args.repetitions} repetitions, {args.resamples} resamples; one cell gates "
        f"{2 * len(suite.metrics)} numbers of {', '.join(suite.metrics)}; per number at 95% (nominal 2.5% FAIL), "
        f"per cell at {suite.name}'s family level {family:.6f} (nominal {100 * 2 * len(suite.metrics) * (1 - family) / 2:.2f}%)"
    )
    print("| k, correlation | ICC of changes | unit | per number | per cell | SE ratio (images / expressions) |")
    print("|---|---|---|---|---|---|")
    for per_image, correlation in SETTINGS:
        start = time.perf_counter()
        rng = np.random.default_rng(44 + per_image * 100 + round(correlation * 100))
        rows = args.images * per_image
        weights = {
            "image": resample_weights(args.images, args.resamples, seed=1),
            "expression": resample_weights(rows, args.resamples, seed=1),
        }
        numbers = {unit: [] for unit in weights}
        cells = {unit: [] for unit in weights}
        spreads = {unit: [] for unit in weights}
        correlations = []
        for _ in range(args.repetitions):
            arrays, units = runs_of(rng, args.images, per_image, correlation)
            change = arrays[1][:, 2] - arrays[3][:, 2]  # per-expression IoU, corrupted: baseline - candidate
            correlations.append(intra_image_correlation(change, per_image))
            by_unit = {"image": unit_rows(task, arrays, units, rows)[0], "expression": arrays}
            for unit, drawn in by_unit.items():
                cell = GatedCell(drawn, weights[unit], suite.metrics)
                numbers[unit].append(cell.failed(0.95).mean())
                spreads[unit].append(cell.spread())
                cells[unit].append(bool(cell.failed(family).any()))
        ratio = np.mean(spreads["image"]) / np.mean(spreads["expression"])
        icc = np.nanmean(correlations) if per_image > 1 else math.nan
        for unit in weights:
            print(
                f"| {per_image}, {correlation:g} | {icc:.2f} | {unit} | {rate(np.array(numbers[unit]))} | "
                f"{rate(np.array(cells[unit], dtype=float))} | {ratio:.2f} |"
            )
        print(f"<!-- {time.perf_counter() - start:.0f} s -->")


if __name__ == "__main__":
    main()
