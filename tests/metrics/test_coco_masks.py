"""COCO RLE encodings of masks, and the ground-truth encodings kept across cells.

The encodings must be exactly what the metric stored before they were read off the RLEs:
pycocotools' encoding of a Fortran copy, the mask's pixel count as area, and the tight box of
:func:`~pytest_segrobust.core.types.boxes_from_masks`. The cache of ground-truth encodings must
never serve one for masks that are not bit for bit the ones encoded: a geometric corruption
moves the ground truth, and its cell must score the moved masks.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("faster_coco_eval")
mask_utils = pytest.importorskip("pycocotools.mask")

from pytest_segrobust.core.types import InstanceMasks, InstanceTarget, boxes_from_masks, field_of
from pytest_segrobust.corruptions import REGISTRY
from pytest_segrobust.corruptions.base import Corruption
from pytest_segrobust.data.demo import DemoScenes
from pytest_segrobust.engine.evaluation import EvalSettings, evaluate
from pytest_segrobust.metrics import coco_masks
from pytest_segrobust.metrics.coco_map import CocoMAP
from pytest_segrobust.metrics.coco_masks import EncodingCache, encode_masks
from pytest_segrobust.models import as_instance_model
from pytest_segrobust.models.base import InstancePredictions
from pytest_segrobust.models.demo import tiny_unet_instances
from pytest_segrobust.randomness.seeding import sample_seed
from pytest_segrobust.tasks import get_task

# Every geometric corruption of every preset (two presets' shears differ), and a composition.
GEOMETRIC = [corruption for corruption in REGISTRY if corruption.geometric] + [REGISTRY.get("contrast+rotate")]


def odd_masks(seed: int, height: int, width: int) -> torch.Tensor:
    """Masks with what RLEs and boxes can get wrong: empty, full, one pixel, edges, several parts."""
    rng = np.random.default_rng(seed)
    masks = [np.zeros((height, width), bool), np.ones((height, width), bool)]
    pixel = np.zeros((height, width), bool)
    pixel[rng.integers(height), rng.integers(width)] = True
    masks.append(pixel)
    edges = np.zeros((height, width), bool)
    edges[:, -1] = edges[-1, :] = True
    masks.append(edges)
    for _ in range(6):
        noisy = rng.random((height, width)) < rng.uniform(0.01, 0.6)
        masks.append(noisy)  # runs that wrap from one column into the next
        parts = np.zeros((height, width), bool)
        for _ in range(int(rng.integers(1, 4))):
            y0, x0 = int(rng.integers(height)), int(rng.integers(width))
            parts[y0 : int(rng.integers(y0, height)) + 1, x0 : int(rng.integers(x0, width)) + 1] = True
        masks.append(parts)
    return torch.from_numpy(np.stack(masks))


def old_rles(masks: torch.Tensor) -> list[dict]:
    """The metric's encoding before this module: a numpy Fortran copy of the uint8 masks."""
    stacked = np.asfortranarray(masks.numpy().astype(np.uint8).transpose(1, 2, 0))
    rles = mask_utils.encode(stacked)
    return [{"size": [int(v) for v in rle["size"]], "counts": rle["counts"].decode("ascii")} for rle in rles]


@pytest.mark.parametrize("with_opencv", [True, False])
@pytest.mark.parametrize(("seed", "height", "width"), [(0, 1, 1), (1, 1, 17), (2, 23, 1), (3, 31, 47), (4, 64, 64)])
def test_areas_boxes_and_rles_equal_the_full_mask_computation(
    monkeypatch: pytest.MonkeyPatch, with_opencv: bool, seed: int, height: int, width: int
) -> None:
    if not with_opencv:
        monkeypatch.setattr(coco_masks, "opencv", lambda: None)
    elif coco_masks.opencv() is None:
        pytest.skip("OpenCV is not installed")
    masks = odd_masks(seed, height, width)
    encoded = encode_masks(mask_utils, masks)
    assert encoded.rles() == old_rles(masks)
    assert list(encoded.areas) == masks.flatten(1).sum(dim=1).tolist()
    x0, y0, x1, y1 = boxes_from_masks(masks).double().unbind(dim=1)
    assert [list(box) for box in encoded.boxes] == torch.stack([x0, y0, x1 - x0, y1 - y0], dim=1).tolist()
    # Masks given as integers are binary masks too.
    assert encode_masks(mask_utils, masks.to(torch.uint8) * 3) == encoded


def test_no_masks_encode_to_nothing() -> None:
    encoded = encode_masks(mask_utils, torch.zeros(0, 5, 7, dtype=torch.bool))
    assert (encoded.size, encoded.rles(), encoded.areas, encoded.boxes) == ((5, 7), [], (), ())


def test_cache_serves_only_masks_equal_bit_for_bit() -> None:
    cache = EncodingCache()
    masks = odd_masks(5, 24, 32)
    first = cache.encode(mask_utils, masks)
    assert (cache.hits, cache.misses) == (0, 1)
    assert cache.encode(mask_utils, masks.clone()) is first
    assert cache.encode(mask_utils, masks.to(torch.uint8)) is first  # the same bits
    assert (cache.hits, cache.misses) == (2, 1)
    flipped = masks.clone()
    flipped[4, 0, 0] = ~flipped[4, 0, 0]
    others = [
        torch.roll(masks, 1, dims=2),  # moved one pixel
        flipped,  # one pixel differs
        odd_masks(6, 24, 32),  # another sample
        masks[:-1],  # one instance fewer
        masks.reshape(len(masks), 32, 24),  # the same bytes in another shape
    ]
    for other in others:
        assert cache.encode(mask_utils, other) == encode_masks(mask_utils, other)
    assert (cache.hits, cache.misses) == (2, 1 + len(others))
    assert len(cache) == 1 + len(others)


def test_cache_keeps_what_fits_its_budget() -> None:
    masks = [odd_masks(seed, 16, 16) for seed in range(4)]
    size = encode_masks(mask_utils, masks[0]).nbytes()
    cache = EncodingCache(budget=size + 1)
    for one in masks:
        cache.encode(mask_utils, one)
    assert len(cache) == 1 and cache.used == size
    cache.encode(mask_utils, masks[0])
    cache.encode(mask_utils, masks[1])
    assert (cache.hits, cache.misses) == (1, 5)  # the first stays, the others are encoded each time
    nothing = EncodingCache(budget=0)
    nothing.encode(mask_utils, masks[0])
    nothing.encode(mask_utils, masks[0])
    assert (len(nothing), nothing.hits, nothing.used) == (0, 0, 0)
    with pytest.raises(ValueError, match="budget"):
        EncodingCache(budget=-1)


def demo_batch(corruption: Corruption | None) -> InstanceMasks:
    """The instances of four demo scenes, under ``corruption`` at severity 3 (clean for ``None``)."""
    dataset = DemoScenes("val", size=4, image_size=64)
    samples = [dataset[index] for index in range(len(dataset))]
    task = get_task("instance")
    batch = task.collate(samples, range(len(samples)), dataset, torch.device("cpu"))
    if corruption is not None:
        seeds = [sample_seed(0, sample.sample_id, corruption.name, 3) for sample in samples]
        batch = corruption(batch, 3, seeds)
    return field_of(batch, InstanceMasks)


def stored_ground_truths(instances: InstanceMasks, cache: EncodingCache) -> list[dict]:
    """CocoMAP's ground-truth records of ``instances`` (with no detections), encodings from ``cache``."""
    coco = CocoMAP(DemoScenes.categories, encodings=cache)
    no_masks = torch.zeros(0, instances.height, instances.width, dtype=torch.bool)
    for image_id, target in enumerate(instances.targets):
        nothing = InstancePredictions(no_masks, torch.zeros(0, dtype=torch.long), torch.zeros(0))
        coco.update(image_id, instances.height, instances.width, target, nothing)
    return coco.ground_truths


def independent_records(target: InstanceTarget) -> list[tuple[dict, int]]:
    return list(zip(old_rles(target.masks), target.masks.flatten(1).sum(dim=1).tolist()))


@pytest.mark.parametrize("corruption", GEOMETRIC, ids=[f"{c.name}-{i}" for i, c in enumerate(GEOMETRIC)])
def test_a_geometric_cell_never_gets_the_clean_ground_truth(corruption: Corruption) -> None:
    cache = EncodingCache()
    clean = demo_batch(None)
    stored_ground_truths(clean, cache)  # the model's clean cell: every image's encoding is kept
    moved = demo_batch(corruption)
    stayed = sum(
        len(a) > 0 and a.masks.shape == b.masks.shape and torch.equal(a.masks, b.masks)
        for a, b in zip(clean.targets, moved.targets)
    )
    assert stayed < len(clean.targets), f"{corruption} at severity 3 moved nothing: the test would prove nothing"
    records = stored_ground_truths(moved, cache)
    expected = [record for target in moved.targets for record in independent_records(target)]
    assert [(r["segmentation"], r["area"]) for r in records] == expected
    assert cache.hits == stayed  # a hit only where the ground truth stayed put


def test_a_photometric_cell_reuses_the_clean_encodings() -> None:
    cache = EncodingCache()
    clean = stored_ground_truths(demo_batch(None), cache)
    records = stored_ground_truths(demo_batch(REGISTRY.get("contrast")), cache)
    assert records == clean
    assert (cache.hits, cache.misses) == (4, 4)


def test_evaluate_under_a_geometric_corruption_scores_the_moved_ground_truth(monkeypatch: pytest.MonkeyPatch) -> None:
    """End to end, with the process's cache warmed by the clean cell, as a suite runs."""
    dataset, model = DemoScenes("val", size=6, image_size=64), as_instance_model(tiny_unet_instances())
    rotate = REGISTRY.get("rotate")
    monkeypatch.setattr(coco_masks, "GROUND_TRUTH", EncodingCache(budget=0))
    unshared = evaluate(model, dataset, rotate, 4, settings=EvalSettings.of(task="instance", statistics=False))
    monkeypatch.setattr(coco_masks, "GROUND_TRUTH", EncodingCache())
    evaluate(model, dataset, settings=EvalSettings.of(task="instance", statistics=False))
    shared = evaluate(model, dataset, rotate, 4, settings=EvalSettings.of(task="instance", statistics=False))
    assert coco_masks.GROUND_TRUTH.misses == 2 * len(dataset)  # nothing of the clean cell was served to the rotated one
    assert repr(shared.metrics["map"]) == repr(unshared.metrics["map"])
    clean = evaluate(model, dataset, settings=EvalSettings.of(task="instance", statistics=False))
    assert coco_masks.GROUND_TRUTH.hits == len(dataset)
    assert clean.metrics["map"].score != shared.metrics["map"].score
