"""Paired statistics for the gate: bootstrap intervals of a cell's change, three-state verdicts.

A baseline run and a candidate run see the same corrupted pixels, so their difference is
paired image by image. Each metric keeps per-image sufficient statistics (for mIoU, an
image's true positives, false positives and false negatives per class); a resample of the
images is a weight per image (how often it was drawn), the same weights for the baseline and
the candidate, clean and corrupted alike. Where the statistics add up (mIoU, PQ, referring),
the metric of a resample is the metric of the weighted sums (:func:`of_sums`): with ``R``
resamples of ``N`` images, the sums of all resamples are one matrix product
``(R, N) @ (N, S)``, and a thousand resamples of a cell take milliseconds. A metric whose
statistics do not add up (COCO mAP) scores the weighted multiset its own way
(:meth:`~pytest_segrobust.metrics.base.Metric.resampled_scores`).

The bootstrap draws resampling units, not rows. A task whose samples are images or clips has a
row per unit; a referring task has a row per expression and several expressions per image (an
R-VOS task several per clip), whose changes under a perturbation go together. Drawing such
rows as if they were independent narrows the interval by the design effect
``sqrt(1 + (k - 1) ICC)`` (``k`` rows per unit, intra-unit correlation ``ICC``) and raises the
false alarms with it. Statistics that add up are summed per unit first (:func:`unit_sums`),
and everything downstream (the weights, the degrees of freedom, the sample-size hints) counts
units.

A cell is judged against a non-inferiority ``margin`` (how far the candidate may fall below
the baseline) at a confidence level, by :func:`non_inferiority` (every paired check's rule):

* ``FAIL``: the drop is significantly larger than the margin (the interval's upper end is
  below ``-margin``);
* ``PASS``: the drop is significantly smaller than the margin (the lower end is above
  ``-margin``);
* ``INCONCLUSIVE``: the interval straddles ``-margin``; more images would decide it.

Over many cells, the suite's ``1 - confidence`` is split over every number it gates
(Bonferroni, :func:`pytest_segrobust.gate.evidence.cell_level`): each cell is decided on its own as
its item runs, under ``-k``, ``--lf``, xdist and shards alike. Step-wise procedures (Holm,
Benjamini-Hochberg) would decide each number from the p-values of the whole family, so a
cell's verdict would depend on which other cells ran; the gate offers none.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np

# The score of weighted multisets of a run's images: (per-image statistics, weights (R, N)) -> (R,).
Statistic = Callable[[np.ndarray, np.ndarray], np.ndarray]
_NORMAL = NormalDist()


class Outcome(str, enum.Enum):
    """What a gated number's check decided; the value is what records and reports show."""

    PASS = "pass"
    FAIL = "fail"
    INCONCLUSIVE = "inconclusive"


def resample_weights(images: int, resamples: int, seed: int) -> np.ndarray:
    """How often each image is drawn in each resample (with replacement): ``(resamples, images)``.

    Whole counts, stored as float64 (exact) so that the resample sums are one BLAS matrix
    product; numpy multiplies integer matrices a hundred times slower.
    """
    if images < 1 or resamples < 1:
        raise ValueError(f"need at least one image and one resample, got {images} and {resamples}")
    draws = np.random.default_rng(seed).integers(0, images, size=(resamples, images))
    counts = np.zeros(resamples * images, dtype=np.int64)
    np.add.at(counts, (np.arange(resamples)[:, None] * images + draws).ravel(), 1)
    return counts.reshape(resamples, images).astype(np.float64)


def of_sums(score_of: Callable[[np.ndarray], np.ndarray]) -> Statistic:
    """The :data:`Statistic` of a metric whose per-image statistics ``(N, ...)`` add up: its
    score (``(..., *S) -> (...)``) of each resample's weighted sums."""

    def statistic(statistics: np.ndarray, weights: np.ndarray) -> np.ndarray:
        return score_of(weighted_sums(weights, statistics))

    return statistic


@dataclass(frozen=True)
class Change:
    """A cell's change from baseline to candidate, with its bootstrap distribution.

    Attributes:
        observed: The change on the images as they are.
        resampled: The change in each resample, ``(R,)``.
    """

    observed: float
    resampled: np.ndarray
    images: int

    @property
    def standard_error(self) -> float:
        """The bootstrap standard error, widened by ``sqrt(n / (n - 1))`` (a bootstrap of ``n``
        images underestimates the variance by that factor)."""
        spread = float(np.std(self.resampled, ddof=1)) if self.resampled.size > 1 else 0.0
        return spread * math.sqrt(self.images / (self.images - 1)) if self.images > 1 else spread

    def interval(self, confidence: float) -> tuple[float, float]:
        """The two-sided interval of the change at ``confidence`` (e.g. 0.95, or 1 - 0.05/m for
        one of ``m`` Bonferroni-split tests).

        The observed change plus or minus Student's ``t`` quantile (``n - 1`` degrees of
        freedom) times the bootstrap standard error: unlike percentiles of the resamples, it
        stays stable far in the tails, where a family of many cells puts each cell's level.
        """
        half = t_quantile((1 - confidence) / 2, self.images) * self.standard_error
        return self.observed - half, self.observed + half

    def images_to_decide(self, margin: float, confidence: float) -> int | None:
        """About how many units (images, clips) an interval at ``confidence`` needs to exclude
        ``-margin`` (the width shrinks as one over the square root of the units), or ``None``
        where that means nothing: the observed change lies within one standard error of the
        margin, where its distance from it is noise and the estimate grows without bound
        (``about 12518422 images (now 12)``); more units may then decide either way.

        Within that, the hint is at most ``t ** 2`` times the units now.
        """
        distance = abs(self.observed + margin)
        error = self.standard_error
        if error == 0 or distance < error:
            return None
        low, high = self.interval(confidence)
        return max(self.images, math.ceil(self.images * ((high - low) / 2 / distance) ** 2))

    def detectable(self, confidence: float, power: float = 0.8) -> float:
        """The smallest margin an unchanged candidate is confirmed within, with probability
        ``power``: ``(t + z_power)`` standard errors (equally, how far beyond the margin a true
        drop must go to fail with that power)."""
        return (t_quantile((1 - confidence) / 2, self.images) + _NORMAL.inv_cdf(power)) * self.standard_error


def t_quantile(tail: float, images: int) -> float:
    """Student's ``t`` with ``images - 1`` degrees of freedom exceeded with probability ``tail``
    (the normal quantile for fewer than 2 images).

    By the Cornish-Fisher expansion of ``t`` in ``1 / dof`` (Abramowitz and Stegun 26.7.5,
    four terms): below the exact quantile by under 0.5% at 10 degrees of freedom and
    tails down to 1e-4, and by under 0.04% from 30 degrees of freedom on at tails down to 1e-6.
    """
    z = _NORMAL.inv_cdf(1 - tail)
    if images < 2:
        return z
    dof = images - 1
    return (
        z
        + (z**3 + z) / (4 * dof)
        + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * dof**2)
        + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * dof**3)
    )


@dataclass(frozen=True)
class RunScores:
    """One run's score on its images as they are, and on each resample of them.

    Attributes:
        observed: The score of every image taken once.
        resampled: The score of each resample, ``(R,)``.
        images: How many images the run scored.
    """

    observed: float
    resampled: np.ndarray
    images: int

    @classmethod
    def of(cls, statistics: np.ndarray, statistic: Statistic, weights: np.ndarray) -> RunScores:
        """Score per-image statistics as they are and under each row of ``weights``.

        Args:
            statistics: One run's per-image statistics, in the layout ``statistic`` reads.
            statistic: The metric of a weighted multiset of the images, e.g. a metric's
                :meth:`~pytest_segrobust.metrics.base.Metric.resampled_scores`.
            weights: :func:`resample_weights` ``(R, N)`` for the run's ``N`` images.
        """
        images = weights.shape[1]
        observed = float(statistic(statistics, np.ones((1, images)))[0])
        return cls(observed, np.asarray(statistic(statistics, weights), dtype=np.float64), images)


def paired_change(baseline: RunScores, candidate: RunScores) -> Change:
    """The change of the score from ``baseline`` to ``candidate``, two runs over the same images
    resampled with the same weights."""
    _check_paired(baseline, candidate)
    return Change(candidate.observed - baseline.observed, candidate.resampled - baseline.resampled, baseline.images)


def paired_gamma_r_change(
    baseline_clean: RunScores,
    baseline_corrupted: RunScores,
    candidate_clean: RunScores,
    candidate_corrupted: RunScores,
    worst: float = 0.0,
) -> Change:
    """The change of gamma_r, every run resampled with the same images.

    gamma_r is the corrupted score's distance from the metric's ``worst`` end over the clean
    score's (:func:`pytest_segrobust.metrics.robustness.relative_robustness`, in either direction):
    corrupted / clean for a percentage where higher is better.
    """
    _check_paired(baseline_clean, baseline_corrupted, candidate_clean, candidate_corrupted)

    def gamma_r(clean: Any, corrupted: Any) -> Any:
        return (corrupted - worst) / (clean - worst)

    observed = gamma_r(candidate_clean.observed, candidate_corrupted.observed) - gamma_r(
        baseline_clean.observed, baseline_corrupted.observed
    )
    resampled = gamma_r(candidate_clean.resampled, candidate_corrupted.resampled) - gamma_r(
        baseline_clean.resampled, baseline_corrupted.resampled
    )
    return Change(float(observed), resampled, baseline_clean.images)


def _check_paired(*runs: RunScores) -> None:
    shapes = {(run.images, run.resampled.shape) for run in runs}
    if len(shapes) > 1:
        raise ValueError(f"paired runs must cover the same images with the same resamples, got {sorted(shapes)}")


def non_inferiority(low: float, high: float, margin: float) -> Outcome:
    """The gate's three-state rule, from the interval ``[low, high]`` of a number's gain over its
    baseline (how much better the candidate is: negative when it is worse).

    ``FAIL`` when the whole interval lies below ``-margin`` (the number surely fell further than
    the margin), ``PASS`` when it lies above (surely less far), ``INCONCLUSIVE`` when it straddles
    ``-margin``. Every paired check decides by it: a cell's numbers and a model's aggregates.

    Raises:
        ValueError: for a negative margin.
    """
    if margin < 0:
        raise ValueError(f"a margin is how far the candidate may fall, >= 0; got {margin}")
    if high < -margin:
        return Outcome.FAIL
    if low > -margin:
        return Outcome.PASS
    return Outcome.INCONCLUSIVE


def unit_sums(statistics: np.ndarray, units: np.ndarray) -> np.ndarray:
    """Per-row statistics ``(N, ...)`` that add up, summed per resampling unit: ``(U, ...)``, one
    row per distinct id of ``units`` in sorted order (so the order of the rows does not matter).

    A unit's summed row is its own sufficient statistics: every score of a multiset of units
    is the score of the sums of its rows, so the bootstrap draws units through these rows as
    it draws images through an image task's.

    Raises:
        ValueError: for ids that are not one non-empty string per row.

    Shape:
        statistics: ``(N, ...)``; units: ``(N,)`` str; return: ``(U, ...)`` float64.
    """
    ids = np.asarray(units)
    if ids.ndim != 1 or ids.dtype.kind != "U" or ids.shape[0] != statistics.shape[0]:
        raise ValueError(
            f"expected one unit id per row: {statistics.shape[0]} rows, ids of {ids.dtype} {ids.shape}"
        )
    if ids.size and not np.all(np.char.str_len(ids) > 0):
        raise ValueError(f"row {int(np.argmin(np.char.str_len(ids)))} has an empty unit id")
    distinct, index = np.unique(ids, return_inverse=True)
    flat = statistics.reshape(statistics.shape[0], -1).astype(np.float64)
    summed = np.zeros((distinct.size, flat.shape[1]), dtype=np.float64)
    np.add.at(summed, index.reshape(-1), flat)
    return summed.reshape(distinct.size, *statistics.shape[1:])


def weighted_sums(weights: np.ndarray, statistics: np.ndarray) -> np.ndarray:
    """Per-resample sums ``(R, ...)`` of per-image statistics ``(N, ...)``: one matrix product.

    Raises:
        ValueError: when the statistics do not have one row per image of ``weights``.
    """
    if statistics.ndim == 0 or statistics.shape[0] != weights.shape[1]:
        raise ValueError(f"per-image statistics of shape {statistics.shape} for {weights.shape[1]} images")
    flat = statistics.reshape(statistics.shape[0], -1).astype(np.float64)
    return (weights.astype(np.float64, copy=False) @ flat).reshape(weights.shape[0], *statistics.shape[1:])
