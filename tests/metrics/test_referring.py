"""Referring metrics (mIoU, oIoU, P@0.5..0.9) against a plain numpy reference on random masks."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_segrobust.core.errors import ModelOutputError
from pytest_segrobust.core.statistics import resample_weights
from pytest_segrobust.core.types import ReferringMask
from pytest_segrobust.metrics import METRICS, MetricContext
from pytest_segrobust.metrics.referring import PRECISION_THRESHOLDS, ReferringMetric

NAMES = ("referring_miou", "referring_oiou", *(f"referring_p{round(t * 100)}" for t in PRECISION_THRESHOLDS))
CONTEXT = MetricContext(class_names=("background", "referent"), ignore_index=255)


def reference(pairs: list[tuple[np.ndarray, np.ndarray]]) -> dict[str, float]:
    """Every score in percent, one sample at a time, the plain way (empty & empty has IoU 1)."""
    ious, total_i, total_u = [], 0, 0
    for predicted, target in pairs:
        intersection = int(np.logical_and(predicted, target).sum())
        union = int(np.logical_or(predicted, target).sum())
        ious.append(intersection / union if union else 1.0)
        total_i += intersection
        total_u += union
    scores = {
        "referring_miou": 100 * sum(ious) / len(ious),
        "referring_oiou": 100 * total_i / total_u if total_u else 100.0,
    }
    for t in PRECISION_THRESHOLDS:
        scores[f"referring_p{round(t * 100)}"] = 100 * sum(iou >= t for iou in ious) / len(ious)
    return scores


def scored(name: str, batches: list[tuple[np.ndarray, np.ndarray]]) -> ReferringMetric:
    metric = METRICS.get(name)(CONTEXT)
    for predicted, target in batches:
        metric.update(torch.from_numpy(predicted), {"referring_mask": ReferringMask(torch.from_numpy(target))})
    return metric


@st.composite
def mask_batches(draw: st.DrawFn) -> list[tuple[np.ndarray, np.ndarray]]:
    """1..4 batches of 1..5 (prediction, target) mask pairs of one drawn size, some empty."""
    height, width = draw(st.integers(1, 12)), draw(st.integers(1, 12))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    batches = []
    for _ in range(draw(st.integers(1, 4))):
        size = int(rng.integers(1, 6))
        density = rng.uniform(0, 1, size=(2, size, 1, 1))
        density[rng.uniform(size=density.shape) < 0.15] = 0.0  # some masks are empty
        predicted = rng.uniform(size=(size, height, width)) < density[0]
        target = rng.uniform(size=(size, height, width)) < density[1]
        batches.append((predicted, target))
    return batches


@settings(max_examples=60, deadline=None)
@given(batches=mask_batches())
def test_every_score_matches_the_numpy_reference(batches: list[tuple[np.ndarray, np.ndarray]]) -> None:
    pairs = [(p, t) for predicted, target in batches for p, t in zip(predicted, target)]
    expected = reference(pairs)
    for name in NAMES:
        metric = scored(name, batches)
        result = metric.compute()
        assert result.score == pytest.approx(expected[name], abs=1e-9), name
        others = {f"referring_{key}": value for key, value in result.details.items()}
        assert others == pytest.approx({k: v for k, v in expected.items() if k != name}, abs=1e-9)
        # The per-sample statistics give the same score through score_of, summed in any order.
        statistics = metric.image_statistics()
        assert statistics.shape[0] == len(pairs)
        assert float(type(metric).score_of(statistics[::-1].sum(axis=0))) == pytest.approx(expected[name], abs=1e-9)


@settings(max_examples=25, deadline=None)
@given(batches=mask_batches(), seed=st.integers(0, 2**16))
def test_a_bootstrap_resample_scores_like_the_resampled_samples(batches, seed: int) -> None:
    pairs = [(p, t) for predicted, target in batches for p, t in zip(predicted, target)]
    weights = resample_weights(len(pairs), 3, seed)
    for name in NAMES:
        statistics = scored(name, batches).image_statistics()
        resampled = METRICS.get(name).score_of(weights @ statistics)
        for row, draw in zip(resampled, weights):
            drawn = [pair for pair, times in zip(pairs, draw) for _ in range(int(times))]
            assert float(row) == pytest.approx(reference(drawn)[name], abs=1e-9)


def test_a_hand_computed_batch() -> None:
    target = np.zeros((3, 2, 4), dtype=bool)
    predicted = np.zeros((3, 2, 4), dtype=bool)
    target[0, :, :2] = True  # 4 pixels
    predicted[0, :, 1:3] = True  # I 2, U 6 -> 1/3
    target[1, 0, :] = True
    predicted[1, 0, :] = True  # I 4, U 4 -> 1
    # sample 2: both empty -> IoU 1 by convention, adds nothing to oIoU
    result = scored("referring_miou", [(predicted, target)]).compute()
    assert result.score == pytest.approx(100 * (1 / 3 + 1 + 1) / 3)
    assert result.details["oiou"] == pytest.approx(100 * 6 / 10)
    assert result.details["p50"] == pytest.approx(200 / 3)
    assert result.details["p90"] == pytest.approx(200 / 3)
    assert result.per_class == (None, None)


def test_an_empty_target_with_a_predicted_mask_scores_zero() -> None:
    target = np.zeros((1, 2, 2), dtype=bool)
    predicted = np.ones((1, 2, 2), dtype=bool)
    result = scored("referring_oiou", [(predicted, target)]).compute()
    assert result.score == 0.0
    assert result.details["miou"] == 0.0


def test_only_empty_samples_score_100_and_no_sample_is_nan() -> None:
    empty = np.zeros((2, 3, 3), dtype=bool)
    assert scored("referring_oiou", [(empty, empty)]).compute().score == 100.0
    for name in NAMES:
        assert math.isnan(scored(name, []).compute().score)


def test_precision_counts_an_iou_exactly_at_the_threshold() -> None:
    target = np.zeros((1, 1, 10), dtype=bool)
    predicted = np.zeros((1, 1, 10), dtype=bool)
    target[0, 0, :7] = True
    predicted[0, 0, :10] = True  # I 7, U 10: IoU exactly 0.7
    result = scored("referring_p70", [(predicted, target)]).compute()
    assert result.score == 100.0
    assert result.details["p80"] == 0.0


def test_states_merge_and_round_trip_like_one_run() -> None:
    rng = np.random.default_rng(3)
    batches = [(rng.uniform(size=(4, 6, 5)) < 0.5, rng.uniform(size=(4, 6, 5)) < 0.4) for _ in range(3)]
    for name in NAMES:
        whole = scored(name, batches)
        first, second = scored(name, batches[:1]), scored(name, batches[1:])
        restored = METRICS.get(name)(CONTEXT)
        restored.load_state_dict(second.state_dict())
        first.merge(restored)
        assert first.compute() == whole.compute()
        np.testing.assert_array_equal(first.image_statistics(), whole.image_statistics())


def test_non_bool_or_misshapen_predictions_are_model_errors() -> None:
    metric = METRICS.get("referring_miou")(CONTEXT)
    batch = {"referring_mask": ReferringMask(torch.zeros(2, 3, 3, dtype=torch.bool))}
    with pytest.raises(ModelOutputError, match="expected bool masks of shape"):
        metric.update(torch.zeros(2, 3, 3), batch)
    with pytest.raises(ModelOutputError, match=r"\(2, 3, 3\)"):
        metric.update(torch.zeros(2, 3, 4, dtype=torch.bool), batch)


def test_metrics_declare_their_scale_and_direction() -> None:
    for name in NAMES:
        kind = METRICS.get(name)
        assert kind.higher_is_better and kind.bounds == (0.0, 100.0)
        assert kind.accepts == (ReferringMask,)
