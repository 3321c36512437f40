"""J, F and J&F (video object segmentation) against a plain numpy reference written from the
DAVIS 2017 definitions, and, where it is installed, against vos-benchmark's F.

vos-benchmark (MIT) is the DAVIS F code packaged; it needs OpenCV and scikit-image. It is not a
dependency of the gate: install it beside the project and put it on the path to run its checks,
e.g. ``pip install --target /tmp/vospkgs vos-benchmark scikit-image lazy_loader`` and
``PYTHONPATH=$PWD:/tmp/vospkgs``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_segrobust.core.errors import ModelOutputError
from pytest_segrobust.core.statistics import resample_weights
from pytest_segrobust.core.types import VideoMasks
from pytest_segrobust.metrics import METRICS, MetricContext, video
from pytest_segrobust.metrics.video import (
    DETAIL_LABELS,
    VideoObjectMetric,
    _count_near_marked,
    boundary_accuracy,
    boundary_counts,
    boundary_radius,
    count_near,
    decay_edges,
    dilate_by_disk,
    object_region_counts,
    region_similarity,
)

NAMES = ("vos_j", "vos_f", "vos_jf", "vos_jf_all")
CONTEXT = MetricContext(class_names=("background", "object"), ignore_index=255)
IGNORE = 255

# One batch of clips: predicted ids (B, T, H, W), true ids (B, T, H, W), each clip's objects, annotated (B, T).
Clips = tuple[np.ndarray, np.ndarray, tuple[tuple[int, ...], ...], np.ndarray]


# --- the reference, from the definitions, one frame and one object at a time ---------------


def reference_boundary(mask: np.ndarray) -> np.ndarray:
    """Pixels that differ from their east, south or south-east neighbour inside the frame."""
    height, width = mask.shape
    bounds = np.zeros_like(mask, dtype=bool)
    for y in range(height):
        for x in range(width):
            for dy, dx in ((0, 1), (1, 0), (1, 1)):
                if y + dy < height and x + dx < width and mask[y + dy, x + dx] != mask[y, x]:
                    bounds[y, x] = True
    return bounds


def reference_dilate(bounds: np.ndarray, radius: int) -> np.ndarray:
    """Every pixel within Euclidean distance ``radius`` of a set pixel."""
    height, width = bounds.shape
    dilated = np.zeros_like(bounds)
    for y, x in zip(*np.nonzero(bounds)):
        for dy in range(-radius, radius + 1):
            for dx in range(-radius, radius + 1):
                if dy * dy + dx * dx <= radius * radius and 0 <= y + dy < height and 0 <= x + dx < width:
                    dilated[y + dy, x + dx] = True
    return dilated


def reference_j(predicted: np.ndarray, truth: np.ndarray, void: np.ndarray) -> float:
    intersection = int((predicted & truth & ~void).sum())
    union = int(((predicted | truth) & ~void).sum())
    return 1.0 if union == 0 else intersection / union


def reference_f(predicted: np.ndarray, truth: np.ndarray, void: np.ndarray, radius: int) -> float:
    predicted_bounds = reference_boundary(predicted & ~void)
    true_bounds = reference_boundary(truth & ~void)
    n_predicted, n_true = int(predicted_bounds.sum()), int(true_bounds.sum())
    if n_predicted == 0 and n_true > 0:
        precision, recall = 1.0, 0.0
    elif n_predicted > 0 and n_true == 0:
        precision, recall = 0.0, 1.0
    elif n_predicted == 0 and n_true == 0:
        precision, recall = 1.0, 1.0
    else:
        precision = int((predicted_bounds & reference_dilate(true_bounds, radius)).sum()) / n_predicted
        recall = int((true_bounds & reference_dilate(predicted_bounds, radius)).sum()) / n_true
    return 0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall)


def reference_statistics(values: np.ndarray) -> tuple[float, float, float]:
    """Mean, Recall (share above 0.5) and Decay (first bin minus last of 4), bins as the reference
    draws them but with integer edges that do not wrap."""
    edges = (np.round(np.linspace(1, len(values), 5) + 1e-10) - 1).astype(np.int64)
    bins = [values[edges[i] : edges[i + 1] + 1] for i in range(4)]
    return float(values.mean()), float((values > 0.5).mean()), float(bins[0].mean() - bins[3].mean())


def reference(batches: list[Clips], drops_ends: bool) -> dict[str, float]:
    """Every number of the metrics in percent: per object over its scored frames, then the mean over objects."""
    per_object: dict[str, list[tuple[float, float, float]]] = {"j": [], "f": []}
    for predicted, truth, objects, annotated in batches:
        radius = math.ceil(0.008 * np.linalg.norm(truth.shape[-2:]))
        for clip, ids in enumerate(objects):
            frames = [t for t in range(truth.shape[1]) if annotated[clip, t]]
            frames = frames[1:-1] if drops_ends else frames
            if not frames:
                continue
            for object_id in ids:
                j, f = [], []
                for t in frames:
                    void = truth[clip, t] == IGNORE
                    pair = (predicted[clip, t] == object_id, truth[clip, t] == object_id)
                    j.append(reference_j(*pair, void))
                    f.append(reference_f(*pair, void, radius))
                per_object["j"].append(reference_statistics(np.array(j)))
                per_object["f"].append(reference_statistics(np.array(f)))
    out = {}
    for measure, rows in per_object.items():
        for column, statistic in enumerate(("mean", "recall", "decay")):
            out[f"{measure}_{statistic}"] = 100 * float(np.mean([r[column] for r in rows])) if rows else math.nan
    out["jf_mean"] = (out["j_mean"] + out["f_mean"]) / 2
    return out


def expected_of(name: str, numbers: dict[str, float]) -> tuple[float, dict[str, float]]:
    """The score and the details metric ``name`` should report, from :func:`reference`'s numbers."""
    kind = METRICS.get(name)
    key = "jf_mean" if len(kind.measures) == 2 else f"{kind.measures[0].lower()}_mean"
    details = {
        k: v for k, v in numbers.items() if k != "jf_mean" and k[0] in {m.lower() for m in kind.measures} and k != key
    }
    return numbers[key], details


# --- generated clips --------------------------------------------------------------------------


def generated_clips(rng: np.random.Generator, clips: int, frames: int, height: int, width: int, sparse: bool) -> Clips:
    """Clips of rectangles that appear late, leave early or never show, a distractor id that is no
    object, ignored pixels, and predictions that copy, shift, drop or scramble the truth."""
    truth = np.zeros((clips, frames, height, width), dtype=np.int64)
    objects = []
    for clip in range(clips):
        ids = tuple(int(i) for i in sorted(rng.choice([1, 2, 3, 7], size=int(rng.integers(0, 4)), replace=False)))
        objects.append(ids)
        for object_id in (*ids, 9):  # 9: in the truth, but not one of the clip's objects
            first, last = sorted(int(v) for v in rng.integers(0, frames + 1, size=2))
            for t in range(first, last):
                y0, y1 = sorted(int(v) for v in rng.integers(0, height + 1, size=2))
                x0, x1 = sorted(int(v) for v in rng.integers(0, width + 1, size=2))
                truth[clip, t, y0:y1, x0:x1] = object_id
        truth[clip][rng.uniform(size=(frames, height, width)) < rng.choice([0.0, 0.05])] = IGNORE
    predicted = np.where(truth == IGNORE, 0, truth)
    for clip in range(clips):
        choices = np.array([0, *objects[clip], 9])
        for t in range(frames):
            mode = int(rng.integers(0, 5))
            if mode == 1:
                predicted[clip, t] = np.roll(predicted[clip, t], int(rng.integers(-2, 3)), axis=int(rng.integers(0, 2)))
            elif mode == 2:
                predicted[clip, t] = 0
            elif mode == 3:
                predicted[clip, t] = rng.choice(choices, size=(height, width))
            flips = rng.uniform(size=(height, width)) < 0.1
            predicted[clip, t][flips] = rng.choice(choices, size=int(flips.sum()))
    annotated = rng.uniform(size=(clips, frames)) < (0.6 if sparse else 1.0)
    return predicted, truth, tuple(objects), annotated


@st.composite
def clip_batches(draw: st.DrawFn) -> list[Clips]:
    """1..3 batches, each of its own number of clips, frames and frame size."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    return [
        generated_clips(
            rng,
            clips=draw(st.integers(1, 3)),
            frames=draw(st.integers(1, 9)),
            height=draw(st.integers(1, 9)),
            width=draw(st.integers(1, 9)),
            sparse=draw(st.booleans()),
        )
        for _ in range(draw(st.integers(1, 3)))
    ]


def batch_of(truth: np.ndarray, objects: tuple[tuple[int, ...], ...], annotated: np.ndarray) -> dict[str, VideoMasks]:
    data = torch.from_numpy(truth)
    frames = torch.arange(truth.shape[1]).expand(truth.shape[0], -1)
    return {"masks": VideoMasks(data, objects, torch.from_numpy(annotated), frames, IGNORE)}


def scored(name: str, batches: list[Clips]) -> VideoObjectMetric:
    metric = METRICS.get(name)(CONTEXT)
    for predicted, truth, objects, annotated in batches:
        metric.update(torch.from_numpy(predicted), batch_of(truth, objects, annotated))
    return metric


# --- the metrics against the reference --------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(batches=clip_batches())
def test_every_number_matches_the_numpy_reference(batches: list[Clips]) -> None:
    numbers = {drops: reference(batches, drops) for drops in (True, False)}
    for name in NAMES:
        metric = scored(name, batches)
        result = metric.compute()
        score, details = expected_of(name, numbers[METRICS.get(name).drops_ends])
        assert result.score == pytest.approx(score, abs=1e-6, nan_ok=True), name
        assert result.details == pytest.approx(details, abs=1e-6, nan_ok=True), name
        # One row per clip; summed in any order they give the score.
        statistics = metric.image_statistics()
        assert statistics.shape == (sum(len(objects) for _, _, objects, _ in batches), len(metric.columns()))
        summed = statistics[::-1].sum(axis=0)
        assert float(type(metric).score_of(summed)) == pytest.approx(score, abs=1e-6, nan_ok=True)


@settings(max_examples=20, deadline=None)
@given(batches=clip_batches(), seed=st.integers(0, 2**16))
def test_a_bootstrap_resample_of_clips_scores_like_the_resampled_clips(batches: list[Clips], seed: int) -> None:
    clips = [
        (predicted[[c]], truth[[c]], (objects[c],), annotated[[c]])
        for predicted, truth, objects, annotated in batches
        for c in range(len(objects))
    ]
    weights = resample_weights(len(clips), 3, seed)
    for name in ("vos_jf", "vos_f"):
        kind = METRICS.get(name)
        statistics = scored(name, batches).image_statistics()
        resampled = kind.resampled_scores(statistics, weights)
        for value, draw in zip(resampled, weights):
            drawn = [clip for clip, times in zip(clips, draw) for _ in range(int(times))]
            expected, _ = expected_of(name, reference(drawn, kind.drops_ends))
            assert float(value) == pytest.approx(expected, abs=1e-6, nan_ok=True)


@pytest.mark.parametrize("radius", [1, 2, 3, 5])
def test_boundary_counts_match_the_reference_at_every_radius(radius: int) -> None:
    rng = np.random.default_rng(radius)
    for _ in range(30):
        height, width = (int(v) for v in rng.integers(1, 17, size=2))
        predicted = rng.uniform(size=(height, width)) < rng.uniform()
        truth = np.zeros((height, width), dtype=bool)
        y0, y1 = sorted(rng.integers(0, height + 1, size=2))
        x0, x1 = sorted(rng.integers(0, width + 1, size=2))
        truth[y0:y1, x0:x1] = True
        void = rng.uniform(size=(height, width)) < 0.05
        as_batch = [torch.from_numpy(a)[None] for a in (predicted, truth, ~void)]
        f = boundary_accuracy(boundary_counts(*as_batch, radius).numpy())[0]
        j = region_similarity(object_region_counts(*(a.long() for a in as_batch[:2]), as_batch[2], 1).numpy())[0, 0]
        assert f == pytest.approx(reference_f(predicted, truth, void, radius), abs=1e-12)
        assert j == pytest.approx(reference_j(predicted, truth, void), abs=1e-12)


@pytest.mark.parametrize("radius", [1, 2, 4, 7])
def test_both_ways_of_counting_nearby_pixels_match_the_reference_dilation(radius: int) -> None:
    rng = np.random.default_rng(100 + radius)
    for height, width in [(1, 1), (2, 9), (5, 3), (12, 17), (20, 20)]:
        targets = rng.uniform(size=(4, height, width)) < np.array([0.0, 0.02, 0.2, 0.7])[:, None, None]
        marked = rng.uniform(size=(4, height, width)) < 0.3
        dilated = np.stack([reference_dilate(t, radius) for t in targets])
        expected = (marked & dilated).sum(axis=(1, 2)).tolist()
        as_torch = torch.from_numpy(targets)
        np.testing.assert_array_equal(dilate_by_disk(as_torch, radius).numpy(), dilated)
        assert _count_near_marked(torch.from_numpy(marked).nonzero(), as_torch, radius).tolist() == expected
        assert count_near(torch.from_numpy(marked), as_torch, radius).tolist() == expected


def test_the_empty_cases_of_f() -> None:
    # (matched predicted, predicted, matched true, true) boundary pixels
    counts = np.array([[0, 0, 0, 5], [0, 5, 0, 0], [0, 0, 0, 0], [0, 4, 0, 4], [2, 4, 4, 4]])
    precision, recall = 0.5, 1.0
    assert boundary_accuracy(counts).tolist() == pytest.approx(
        [0.0, 0.0, 1.0, 0.0, 2 * precision * recall / (precision + recall)]
    )
    assert region_similarity(np.array([[0, 0], [0, 3], [2, 3]])).tolist() == pytest.approx([1.0, 0.0, 2 / 3])


def test_the_matching_radius_is_the_ceiling_of_a_share_of_the_diagonal() -> None:
    assert boundary_radius(480, 854) == math.ceil(0.008 * math.sqrt(480**2 + 854**2)) == 8
    assert boundary_radius(720, 1280) == 12
    assert boundary_radius(3, 4) == 1  # 0.04, up to 1


# --- frames: the protocol, sparse annotations, decay over long clips -------------------------


def test_the_semi_supervised_protocol_drops_the_first_and_last_annotated_frame() -> None:
    frames, size = 7, 6
    truth = np.zeros((1, frames, size, size), dtype=np.int64)
    truth[..., 1:5, 1:5] = 1
    predicted = truth.copy()
    predicted[0, [1, 5]] = 0  # wrong only on the first and last annotated frames
    annotated = np.array([[False, True, True, True, False, True, False]])
    batch = batch_of(truth, ((1,),), annotated)
    dropped, every = METRICS.get("vos_jf")(CONTEXT), METRICS.get("vos_jf_all")(CONTEXT)
    for metric in (dropped, every):
        metric.update(torch.from_numpy(predicted), batch)
    assert dropped.compute().score == 100.0  # frames 2 and 3 scored, both right
    assert every.compute().details["j_mean"] == pytest.approx(100 * 2 / 4)  # frames 1, 2, 3, 5
    assert every.compute().details["j_decay"] == pytest.approx(100 * (0 - 0))  # bins {1, 2} and {3, 5}: 0.5 - 0.5


def test_a_clip_without_scored_frames_or_objects_adds_nothing() -> None:
    truth = np.ones((2, 2, 3, 3), dtype=np.int64)
    metric = METRICS.get("vos_jf")(CONTEXT)
    metric.update(torch.from_numpy(truth), batch_of(truth, ((1,), ()), np.ones((2, 2), dtype=bool)))
    assert metric.image_statistics().tolist() == [[0.0] * 7, [0.0] * 7]
    assert math.isnan(metric.compute().score)
    for name in NAMES:
        assert math.isnan(METRICS.get(name)(CONTEXT).compute().score)


def test_decay_edges_are_the_references_without_its_uint8_wrap() -> None:
    for frames in range(1, 3000):
        expected = (np.round(np.linspace(1, frames, 5) + 1e-10) - 1).astype(np.int64)
        assert decay_edges(frames) == tuple(expected.tolist()), frames


def test_decay_of_a_clip_of_more_than_256_frames() -> None:
    frames = 302  # 300 scored: the reference's last uint8 edge, 299, would wrap to 43
    truth = np.zeros((1, frames, 4, 4), dtype=np.int64)
    truth[..., 1:3, 1:3] = 1
    predicted = truth.copy()
    predicted[0, 150:] = 0  # right on the first half, wrong on the second
    predicted[0, 120:150, 1:3, 1] = 0  # half right for a while: J 0.5, not above 0.5
    metric = METRICS.get("vos_j")(CONTEXT)
    metric.update(torch.from_numpy(predicted), batch_of(truth, ((1,),), np.ones((1, frames), dtype=bool)))
    result = metric.compute()
    values = np.array([1.0] * 119 + [0.5] * 30 + [0.0] * 151)  # frames 1 .. 300
    mean, recall, decay = reference_statistics(values)
    assert result.score == pytest.approx(100 * mean, abs=1e-9)
    assert result.details["j_recall"] == pytest.approx(100 * recall, abs=1e-9)
    assert result.details["j_decay"] == pytest.approx(100 * decay, abs=1e-9) == 100.0
    wrapped = (np.round(np.linspace(1, len(values), 5) + 1e-10) - 1).astype(np.uint8)
    assert wrapped[-1] == 43 and len(values[wrapped[3] : wrapped[4] + 1]) == 0  # the reference's last bin: empty


# --- states -----------------------------------------------------------------------------------


def test_two_halves_merge_into_the_whole() -> None:
    rng = np.random.default_rng(11)
    batches = [generated_clips(rng, clips=c, frames=t, height=h, width=w, sparse=s) for c, t, h, w, s in
               [(2, 6, 7, 9, False), (3, 8, 5, 5, True), (1, 4, 9, 3, False), (2, 9, 8, 8, False)]]  # fmt: skip
    for name in NAMES:
        whole = scored(name, batches)
        first, second = scored(name, batches[:2]), scored(name, batches[2:])
        restored = METRICS.get(name)(CONTEXT)
        restored.load_state_dict(second.state_dict())  # as a worker's share arrives: JSON
        first.merge(restored)
        assert first.compute() == whole.compute()
        np.testing.assert_array_equal(first.image_statistics(), whole.image_statistics())
        assert math.isfinite(whole.compute().score)


def test_a_clip_cut_into_chunks_of_frames_scores_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(12)
    batches = [generated_clips(rng, clips=3, frames=9, height=8, width=7, sparse=False) for _ in range(2)]
    whole = scored("vos_jf", batches)
    monkeypatch.setattr(video, "_PIXELS_AT_ONCE", 2 * 8 * 7)  # one or two frames at a time
    np.testing.assert_array_equal(scored("vos_jf", batches).image_statistics(), whole.image_statistics())


def test_predictions_as_video_masks_and_model_errors() -> None:
    truth = np.zeros((1, 3, 4, 4), dtype=np.int64)
    truth[..., :2, :2] = 1
    batch = batch_of(truth, ((1,),), np.ones((1, 3), dtype=bool))
    metric = METRICS.get("vos_jf")(CONTEXT)
    metric.update(batch["masks"], batch)
    assert metric.compute().score == 100.0
    with pytest.raises(ModelOutputError, match=r"expected integer object ids of shape \(1, 3, 4, 4\)"):
        metric.update(torch.zeros(1, 3, 4, 4), batch)
    with pytest.raises(ModelOutputError, match=r"\(1, 3, 4, 5\)"):
        metric.update(torch.zeros(1, 3, 4, 5, dtype=torch.int64), batch)


def test_narrow_predicted_ids_do_not_wrap_onto_an_object() -> None:
    truth = np.zeros((1, 3, 4, 4), dtype=np.int64)
    truth[..., :2, :2] = 300
    predicted = torch.from_numpy(np.where(truth == 300, 44, 0).astype(np.uint8))  # 300 wraps to 44 in uint8
    metric = METRICS.get("vos_jf")(CONTEXT)
    metric.update(predicted, batch_of(truth, ((300,),), np.ones((1, 3), dtype=bool)))
    assert metric.compute().score == 0.0


def test_metrics_declare_their_scale_direction_and_labels() -> None:
    labels = {"vos_j": "J", "vos_f": "F", "vos_jf": "J&F"}
    for name in NAMES:
        kind = METRICS.get(name)
        assert kind.higher_is_better and kind.bounds == (0.0, 100.0)
        assert kind.accepts == (VideoMasks,) and kind.keeps_image_statistics()
        assert labels.get(name, kind.label) == kind.label
        assert set(scored(name, []).compute().details) <= set(DETAIL_LABELS)


# --- vos-benchmark, where installed -----------------------------------------------------------


def _vos_benchmark():  # type: ignore[no-untyped-def]
    return pytest.importorskip(
        "vos_benchmark.evaluator",
        reason="vos-benchmark (with OpenCV and scikit-image) is not importable: install it beside the project "
        "(pip install --target DIR vos-benchmark scikit-image lazy_loader) and add DIR to PYTHONPATH",
    )


def vos_benchmark_frame(evaluator_module, predicted: np.ndarray, truth: np.ndarray) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    """vos-benchmark's J and F of one object's binary masks on one frame (empty and empty included)."""
    evaluator = evaluator_module.Evaluator()
    evaluator.objects_in_gt.add(1)  # scored even where both masks are empty
    evaluator.feed_frame(predicted.astype(np.uint8), truth.astype(np.uint8))
    return float(evaluator.object_iou[1][0]), float(evaluator.boundary_f[1][0])


def blob_masks(rng: np.random.Generator, count: int, height: int, width: int) -> np.ndarray:
    """Ellipses with ragged edges, some empty."""
    y, x = np.mgrid[:height, :width]
    masks = np.zeros((count, height, width), dtype=bool)
    for mask in masks:
        if rng.uniform() < 0.15:
            continue
        cy, cx = rng.uniform(0, height), rng.uniform(0, width)
        ry, rx = rng.uniform(1, height / 2 + 1), rng.uniform(1, width / 2 + 1)
        mask |= ((y - cy) / ry) ** 2 + ((x - cx) / rx) ** 2 <= 1
        mask ^= rng.uniform(size=mask.shape) < 0.02
    return masks


def test_j_and_f_per_frame_match_vos_benchmark() -> None:
    evaluator_module = _vos_benchmark()
    rng = np.random.default_rng(5)
    worst = {"J": 0.0, "F": 0.0}
    compared = 0
    for height, width in [(1, 1), (3, 7), (16, 16), (33, 20), (120, 160), (240, 427), (480, 854)]:
        count = 12 if height * width < 50_000 else 3
        truth = blob_masks(rng, count, height, width)
        # Predictions: the truth moved by a few pixels, grown or cut, or another blob.
        predicted = np.stack(
            [np.roll(m, tuple(int(v) for v in rng.integers(-9, 10, size=2)), axis=(0, 1)) for m in truth]
        )
        predicted[::3] = blob_masks(rng, len(predicted[::3]), height, width)
        scored_pixels = np.ones_like(truth)
        as_batch = [torch.from_numpy(a) for a in (predicted, truth, scored_pixels)]
        radius = boundary_radius(height, width)
        # Each mask is a frame of one object (index 1): one count of (frame, true, predicted) indices.
        j = region_similarity(object_region_counts(as_batch[0].long(), as_batch[1].long(), as_batch[2], 1).numpy())[0]
        f = boundary_accuracy(boundary_counts(*as_batch, radius).numpy())
        for i in range(count):
            oracle_j, oracle_f = vos_benchmark_frame(evaluator_module, predicted[i], truth[i])
            worst["J"] = max(worst["J"], abs(j[i] - oracle_j))
            worst["F"] = max(worst["F"], abs(f[i] - oracle_f))
            compared += 1
    assert compared == 12 * 5 + 3 * 2
    assert worst["J"] <= 1e-6 and worst["F"] <= 1e-6, worst


def test_jf_over_every_frame_matches_vos_benchmark_per_object_means() -> None:
    evaluator_module = _vos_benchmark()
    rng = np.random.default_rng(8)
    frames, height, width = 12, 90, 140  # radius 2
    truth = np.zeros((2, frames, height, width), dtype=np.int64)
    objects = ((1, 2), (3,))
    for clip, ids in enumerate(objects):
        for object_id in ids:
            blobs = blob_masks(rng, frames, height, width)
            blobs[0] |= np.pad(np.ones((2, 2), dtype=bool), ((0, height - 2), (0, width - 2)))  # in the first frame
            truth[clip][blobs] = object_id
    predicted = np.roll(truth, 3, axis=-1)
    predicted[:, 5:8] = np.roll(truth[:, 5:8], -6, axis=-2)
    metric = METRICS.get("vos_jf_all")(CONTEXT)
    metric.update(torch.from_numpy(predicted), batch_of(truth, objects, np.ones((2, frames), dtype=bool)))
    per_object_j, per_object_f = [], []
    for clip, ids in enumerate(objects):
        evaluator = evaluator_module.Evaluator()
        for t in range(frames):
            evaluator.feed_frame(predicted[clip, t].astype(np.uint8), truth[clip, t].astype(np.uint8))
        j, f = evaluator.conclude()  # per object, in percent, over every frame
        assert set(j) == set(ids)
        per_object_j += list(j.values())
        per_object_f += list(f.values())
    result = metric.compute()
    assert result.details["j_mean"] == pytest.approx(np.mean(per_object_j), abs=1e-6)
    assert result.details["f_mean"] == pytest.approx(np.mean(per_object_f), abs=1e-6)
    assert result.score == pytest.approx((np.mean(per_object_j) + np.mean(per_object_f)) / 2, abs=1e-6)
