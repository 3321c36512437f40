"""The gate's statistics: bootstrap of paired per-image statistics, verdicts, multiplicity, and their error rates."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_segrobust.core.statistics import (
    Change,
    Outcome,
    RunScores,
    non_inferiority,
    of_sums,
    paired_change,
    paired_gamma_r_change,
    resample_weights,
)
from pytest_segrobust.metrics.miou import MeanIoU


def miou_of_counts(counts: np.ndarray) -> np.ndarray:
    """mIoU in percent from summed ``(..., K, 3)`` counts: the metric's own :meth:`MeanIoU.score_of`."""
    return MeanIoU.score_of(counts)


def mean_of_values(values: np.ndarray) -> np.ndarray:
    """The mean of per-image values ``(..., 2)`` stored as (sum, count): a metric that averages images."""
    return values[..., 0] / values[..., 1]


def verdict(change: Change, margin: float, confidence: float) -> Outcome:
    """The gate's rule on ``change``'s interval at ``confidence``."""
    return non_inferiority(*change.interval(confidence), margin)


def scores(runs: list[np.ndarray], score_of, weights: np.ndarray) -> list[RunScores]:
    """Each run of sum-decomposable per-image statistics scored as it is and in each resample."""
    return [RunScores.of(run, of_sums(score_of), weights) for run in runs]


def per_image_counts(truth: np.ndarray, prediction: np.ndarray, classes: int) -> np.ndarray:
    """(N, K, 3) TP, FP, FN per image and class."""
    counts = np.zeros((len(truth), classes, 3), dtype=np.int64)
    for i, (t, p) in enumerate(zip(truth, prediction, strict=True)):
        for k in range(classes):
            counts[i, k] = [np.sum((t == k) & (p == k)), np.sum((t != k) & (p == k)), np.sum((t == k) & (p != k))]
    return counts


def dataset_miou(truth: np.ndarray, prediction: np.ndarray, classes: int) -> float:
    """The dataset-level metric from one confusion matrix over all pixels (the oracle)."""
    matrix = np.bincount(truth.ravel() * classes + prediction.ravel(), minlength=classes**2).reshape(classes, classes)
    tp = np.diag(matrix)
    union = matrix.sum(0) + matrix.sum(1) - tp
    return float(100 * np.mean(tp[union > 0] / union[union > 0]))


def test_resample_weights_draw_every_image_count_times_per_resample() -> None:
    weights = resample_weights(10, 50, seed=3)
    assert weights.shape == (50, 10) and (weights.sum(axis=1) == 10).all() and (weights >= 0).all()
    assert np.array_equal(weights, np.round(weights))  # whole counts, in float64 for BLAS
    assert np.array_equal(weights, resample_weights(10, 50, seed=3)) and not np.array_equal(weights, resample_weights(10, 50, seed=4))


def test_miou_of_summed_counts_is_the_dataset_miou() -> None:
    rng = np.random.default_rng(0)
    truth = rng.integers(0, 4, size=(6, 8, 8))
    truth[:, :4] = 3  # class 3 common, class 2 rare
    prediction = np.where(rng.random(truth.shape) < 0.7, truth, rng.integers(0, 4, size=truth.shape))
    counts = per_image_counts(truth, prediction, classes=5)  # class 4 never appears: left out
    assert miou_of_counts(counts.sum(0)) == pytest.approx(dataset_miou(truth, prediction, 5))


def test_the_vectorised_bootstrap_equals_resampling_image_lists() -> None:
    rng = np.random.default_rng(1)
    base, cand = rng.integers(0, 50, size=(12, 3, 3)), rng.integers(0, 50, size=(12, 3, 3))
    weights = resample_weights(12, 20, seed=5)
    change = paired_change(*scores([base, cand], miou_of_counts, weights))
    for r in range(20):
        chosen = np.repeat(np.arange(12), weights[r].astype(int))  # the images of resample r, with repeats
        expected = miou_of_counts(cand[chosen].sum(0)) - miou_of_counts(base[chosen].sum(0))
        assert change.resampled[r] == pytest.approx(expected)
    assert change.observed == pytest.approx(miou_of_counts(cand.sum(0)) - miou_of_counts(base.sum(0)))


def test_gamma_r_change_resamples_clean_and_corrupted_with_the_same_images() -> None:
    rng = np.random.default_rng(2)
    runs = [rng.integers(1, 40, size=(9, 3, 3)) for _ in range(4)]
    weights = resample_weights(9, 7, seed=0)
    change = paired_gamma_r_change(*scores(runs, miou_of_counts, weights))
    for r in range(7):
        chosen = np.repeat(np.arange(9), weights[r].astype(int))
        gamma = [miou_of_counts(runs[i + 1][chosen].sum(0)) / miou_of_counts(runs[i][chosen].sum(0)) for i in (0, 2)]
        assert change.resampled[r] == pytest.approx(gamma[1] - gamma[0])


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (np.linspace(-3.0, -2.0, 101), Outcome.FAIL),  # surely more than 1 point down
        (np.linspace(-0.5, 0.5, 101), Outcome.PASS),  # surely less than 1 point down
        (np.linspace(-1.5, -0.5, 101), Outcome.INCONCLUSIVE),
    ],
)
def test_three_state_verdicts(values: np.ndarray, expected: Outcome) -> None:
    change = Change(float(values.mean()), values, images=10_000)  # many images: the plain percentile interval
    assert verdict(change, margin=1.0, confidence=0.9) is expected
    with pytest.raises(ValueError, match="margin"):
        verdict(change, margin=-1.0, confidence=0.9)


def simulate(rng: np.random.Generator, images: int, shift: float) -> tuple[np.ndarray, np.ndarray]:
    """Paired per-image scores (sum, count) of a baseline and a candidate whose true change is ``shift``."""
    base = rng.normal(60, 15, size=images)
    cand = base + shift + rng.normal(0, 3, size=images)  # paired: the same images, some per-image wobble
    ones = np.ones(images)
    return np.stack([base, ones], axis=1), np.stack([cand, ones], axis=1)


def test_at_the_margin_a_cell_fails_or_passes_by_chance_at_most_as_often_as_the_level() -> None:
    rng, margin, runs, images = np.random.default_rng(7), 1.0, 4000, 64
    weights = resample_weights(images, 400, seed=11)
    outcomes = {Outcome.FAIL: 0, Outcome.PASS: 0, Outcome.INCONCLUSIVE: 0}
    for _ in range(runs):
        base, cand = simulate(rng, images, shift=-margin)  # exactly at the margin: neither is true
        outcomes[verdict(paired_change(*scores([base, cand], mean_of_values, weights)), margin, confidence=0.90)] += 1
    level, error = 0.05, 3 * np.sqrt(0.05 * 0.95 / runs)  # each one-sided tail of a 90% interval
    assert outcomes[Outcome.FAIL] / runs <= level + error and outcomes[Outcome.PASS] / runs <= level + error


def test_a_true_drop_beyond_the_margin_is_found() -> None:
    rng, margin, images = np.random.default_rng(9), 1.0, 200
    weights = resample_weights(images, 500, seed=13)
    found = sum(
        verdict(paired_change(*scores(simulate(rng, images, shift=-3.0), mean_of_values, weights)), margin, 0.9) is Outcome.FAIL
        for _ in range(50)
    )
    assert found >= 48


def test_the_miou_metric_keeps_each_images_counts_in_order() -> None:
    import torch

    from pytest_segrobust.core.types import SemanticMask
    from pytest_segrobust.metrics.base import MetricContext
    from pytest_segrobust.metrics.miou import MeanIoU

    rng = np.random.default_rng(3)
    truth = rng.integers(0, 4, size=(5, 6, 6))
    truth[0, 0, :3] = 255  # ignored pixels count nowhere
    prediction = np.where(rng.random(truth.shape) < 0.6, np.where(truth == 255, 0, truth), rng.integers(0, 4, size=truth.shape))
    metric = MeanIoU(MetricContext(class_names=("a", "b", "c", "d", "e"), ignore_index=255))
    for part in (slice(0, 2), slice(2, 5)):  # two batches
        batch = {"mask": SemanticMask(torch.from_numpy(truth[part]), ignore_index=255)}
        metric.update(torch.from_numpy(prediction[part]), batch)
    counts = metric.image_statistics()
    assert counts.shape == (5, 5, 3)
    scored = truth != 255
    expected = per_image_counts(np.where(scored, truth, -1), np.where(scored, prediction, -2), classes=5)
    np.testing.assert_array_equal(counts, expected)
    assert float(MeanIoU.score_of(counts.sum(0))) == pytest.approx(metric.compute().score)
    restored = MeanIoU(metric.context)
    restored.load_state_dict(metric.state_dict())
    np.testing.assert_array_equal(restored.image_statistics(), counts)
    restored.merge(metric)
    np.testing.assert_array_equal(restored.image_statistics(), np.concatenate([counts, counts]))
