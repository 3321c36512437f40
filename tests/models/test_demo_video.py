"""The video demo models with their shipped weights, scored through the J&F metrics.

Clean J&F on the val clips clears a bound, and Gaussian noise at severity 5 on the clips
(a corruption applied to the ``Video`` field) lowers it. Both models are small, follow the
reference as given, and score a clip the same alone or in a batch.
"""

from __future__ import annotations

import importlib.resources
from typing import Any

import pytest
import torch

from pytest_segrobust.core.types import SampleIndex, Video, VideoMasks
from pytest_segrobust.corruptions import REGISTRY
from pytest_segrobust.data.demo_video import DemoClips, DemoReferringClips, given_masks, stack_clips
from pytest_segrobust.metrics.base import MetricContext
from pytest_segrobust.metrics.video import RegionAndBoundary, RegionAndBoundaryAllFrames, VideoObjectMetric
from pytest_segrobust.models.demo_video import (
    RVOS_WEIGHTS_PATH,
    VOS_WEIGHTS_PATH,
    ObjectLayout,
    TinyRVOSNet,
    TinyVOSNet,
    tiny_rvos,
    tiny_vos,
)

# What the shipped weights clear (scripts/train_demo_vos.py and train_demo_rvos.py print the values).
VOS_CLEAN_BOUND = 75.0
RVOS_CLEAN_BOUND = 60.0
# Points that Gaussian noise at severity 5 takes at least.
NOISE_DROP = 5.0


def _batch(video: Video, masks: VideoMasks, ids: list[str]) -> dict[str, Any]:
    return {"video": video, "objects": masks, "index": SampleIndex(tuple(range(len(ids))), tuple(ids))}


def _shown_reference(masks: VideoMasks) -> torch.Tensor:
    """Each object's mask in the first frame that shows it, as a (perturbed) batch holds them."""
    firsts = []
    for clip, objects in zip(masks.data, masks.object_ids, strict=True):
        per_object = []
        for object_id in objects:
            shown = (clip == object_id).flatten(1).any(dim=1).nonzero()
            per_object.append(int(shown[0, 0]) if len(shown) else 0)
        firsts.append(given_masks(clip, objects, per_object))
    return torch.stack(firsts)


def _score(metric: VideoObjectMetric, predict: Any, batches: list[dict[str, Any]]) -> float:
    metric.reset()
    for batch in batches:
        metric.update(predict(batch), batch)
    return metric.compute().score


def _noisy(batches: list[dict[str, Any]]) -> list[dict[str, Any]]:
    noise = REGISTRY.get("gaussian_noise")
    return [
        noise(batch, 5, list(range(100 * i, 100 * i + batch["video"].batch_size()))) for i, batch in enumerate(batches)
    ]


@pytest.fixture(scope="module")
def vos_batches() -> list[dict[str, Any]]:
    dataset = DemoClips("val")
    batches = []
    for start in range(0, len(dataset), 8):
        samples = [dataset[i] for i in range(start, min(start + 8, len(dataset)))]
        video, masks, _ = stack_clips(samples)
        batches.append(_batch(video, masks, [s.sample_id for s in samples]))
    return batches


@pytest.fixture(scope="module")
def vos_model() -> TinyVOSNet:
    return tiny_vos()


def _predict_vos(model: TinyVOSNet) -> Any:
    @torch.no_grad()
    def predict(batch: dict[str, Any]) -> torch.Tensor:
        return model(batch["video"].data, _shown_reference(batch["objects"]))

    return predict


@pytest.fixture(scope="module")
def vos_clean(vos_model: TinyVOSNet, vos_batches: list[dict[str, Any]]) -> float:
    metric = RegionAndBoundary(MetricContext(DemoClips.class_names, DemoClips.ignore_index))
    return _score(metric, _predict_vos(vos_model), vos_batches)


def test_the_vos_model_follows_the_clean_clips(vos_clean: float) -> None:
    assert vos_clean >= VOS_CLEAN_BOUND


def test_gaussian_noise_at_severity_5_hurts_the_vos_model(
    vos_model: TinyVOSNet, vos_batches: list[dict[str, Any]], vos_clean: float
) -> None:
    metric = RegionAndBoundary(MetricContext(DemoClips.class_names, DemoClips.ignore_index))
    noisy = _score(metric, _predict_vos(vos_model), _noisy(vos_batches))
    assert noisy <= vos_clean - NOISE_DROP


def test_the_vos_model_gives_back_the_reference_and_nothing_before_it(
    vos_model: TinyVOSNet, vos_batches: list[dict[str, Any]]
) -> None:
    batch = vos_batches[0]
    reference = _shown_reference(batch["objects"])
    with torch.no_grad():
        ids = vos_model(batch["video"].data, reference)
    assert ids.dtype == torch.int64 and ids.shape == reference.shape
    layout = ObjectLayout.of(reference)
    late = 0
    for clip, object_id, first in zip(layout.clip.tolist(), layout.ids.tolist(), layout.first.tolist(), strict=True):
        assert torch.equal(ids[clip, first] == object_id, reference[clip, first] == object_id)
        assert not (ids[clip, :first] == object_id).any()
        late += first > 0
    assert late > 0
    # An object the reference does not give is never predicted.
    assert set(ids.unique().tolist()) <= {0, *layout.ids.tolist()}


def test_a_clip_is_segmented_the_same_alone_or_in_a_batch(
    vos_model: TinyVOSNet, vos_batches: list[dict[str, Any]]
) -> None:
    batch = vos_batches[1]
    reference = _shown_reference(batch["objects"])
    with torch.no_grad():
        together = vos_model(batch["video"].data, reference)
        alone = vos_model(batch["video"].data[3:4], reference[3:4])
    assert torch.equal(together[3:4], alone)


@pytest.fixture(scope="module")
def rvos_batches() -> list[dict[str, Any]]:
    dataset = DemoReferringClips("val")
    batches = []
    for start in range(0, len(dataset), 16):
        samples = [dataset[i] for i in range(start, min(start + 16, len(dataset)))]
        video, masks, _ = stack_clips(samples, named_only=True)
        batch = _batch(video, masks, [s.sample_id for s in samples])
        batch["texts"] = [s.field("expression").text for s in samples]
        batches.append(batch)
    return batches


def _predict_rvos(model: TinyRVOSNet) -> Any:
    @torch.no_grad()
    def predict(batch: dict[str, Any]) -> torch.Tensor:
        return (model(batch["video"].data, batch["texts"]) > 0).long()

    return predict


@pytest.fixture(scope="module")
def rvos_model() -> TinyRVOSNet:
    return tiny_rvos()


@pytest.fixture(scope="module")
def rvos_clean(rvos_model: TinyRVOSNet, rvos_batches: list[dict[str, Any]]) -> float:
    metric = RegionAndBoundaryAllFrames(MetricContext(DemoReferringClips.class_names, DemoReferringClips.ignore_index))
    return _score(metric, _predict_rvos(rvos_model), rvos_batches)


def test_the_rvos_model_finds_the_named_objects(rvos_clean: float) -> None:
    assert rvos_clean >= RVOS_CLEAN_BOUND


def test_gaussian_noise_at_severity_5_hurts_the_rvos_model(
    rvos_model: TinyRVOSNet, rvos_batches: list[dict[str, Any]], rvos_clean: float
) -> None:
    metric = RegionAndBoundaryAllFrames(MetricContext(DemoReferringClips.class_names, DemoReferringClips.ignore_index))
    noisy_batches = _noisy([{k: v for k, v in b.items() if k != "texts"} for b in rvos_batches])
    for noisy, batch in zip(noisy_batches, rvos_batches, strict=True):
        noisy["texts"] = batch["texts"]
    assert _score(metric, _predict_rvos(rvos_model), noisy_batches) <= rvos_clean - NOISE_DROP


def test_the_expression_decides_what_is_segmented(rvos_model: TinyRVOSNet, rvos_batches: list[dict[str, Any]]) -> None:
    batch = rvos_batches[0]
    with torch.no_grad():
        right = rvos_model(batch["video"].data, batch["texts"])
        shuffled = rvos_model(batch["video"].data, batch["texts"][1:] + batch["texts"][:1])
    assert not torch.equal(right > 0, shuffled > 0)


@pytest.mark.parametrize(("path", "limit"), [(VOS_WEIGHTS_PATH, 1 << 20), (RVOS_WEIGHTS_PATH, 2 << 20)])
def test_the_shipped_weights_are_small(path: tuple[str, str], limit: int) -> None:
    resource = importlib.resources.files("pytest_segrobust.models").joinpath(*path)
    assert 0 < len(resource.read_bytes()) < limit
