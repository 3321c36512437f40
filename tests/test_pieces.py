"""A cell cut into consecutive sample ranges and merged gives the unsplit cell's result, bit for bit.

Pure: no Ray. The Ray backend's own test (tests/test_ray_backend.py) checks the same through actors.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from pytest_segrobust.corruptions import REGISTRY
from pytest_segrobust.data.demo import demo_dataset
from pytest_segrobust.engine.evaluation import EvalSettings, evaluate
from pytest_segrobust.engine.pieces import evaluate_piece, merge_pieces, piece_range
from pytest_segrobust.metrics import MetricContext
from pytest_segrobust.models import as_instance_model, as_segmentation_model
from pytest_segrobust.models.base import model_device
from pytest_segrobust.models.demo import tiny_unet, tiny_unet_instances


@pytest.mark.parametrize("block", [1, 4])
@pytest.mark.parametrize("count", [1, 2, 3, 7])
def test_pieces_cut_the_samples_into_consecutive_ranges_each_sample_once(count: int, block: int) -> None:
    for total in range(30):
        ranges = [piece_range(total, index, count, block) for index in range(count)]
        assert [i for r in ranges for i in r] == list(range(total))
        assert all(r.start % block == 0 or r.start == total for r in ranges)  # the unsplit evaluation's batches
        blocks = [-(-len(r) // block) for r in ranges]
        assert max(blocks) - min(blocks) <= 1
    with pytest.raises(ValueError, match="expected an index from 0"):
        piece_range(5, count, count)


SUITES = {
    "semantic-miou": ("semantic", ["miou"], lambda: as_segmentation_model(tiny_unet()), "gaussian_noise"),
    # rotate moves the instance masks with the image; COCO's records are numbered by dataset position.
    "instance-map": ("instance", ["map"], lambda: as_instance_model(tiny_unet_instances()), "rotate"),
}


@pytest.mark.parametrize("suite", SUITES)
# 14 images in batches of 4 cut in 3: pieces of 2, 1 and a short batch; 6 in 3: two batches, one piece empty.
@pytest.mark.parametrize(("limit", "count"), [(14, 3), (6, 3)], ids=["14-images-in-3", "6-images-in-3-one-empty"])
def test_a_split_evaluation_merges_into_the_unsplit_one(suite: str, limit: int, count: int) -> None:
    task, metrics, build, corruption = SUITES[suite]
    model, dataset = build(), demo_dataset("val")
    settings = EvalSettings.of(task, metrics, seed=3, batch_size=4, limit=limit, scored_images=limit)
    whole = evaluate(model, dataset, REGISTRY.get(corruption), 3, settings)
    pieces = [evaluate_piece(model, dataset, REGISTRY.get(corruption), 3, i, count, settings) for i in range(count)]
    context = MetricContext.of(dataset, model_device(model))
    merged = merge_pieces(pieces, limit, context, statistics=True, seconds=whole.seconds)
    assert merged == whole  # every metric's score, per-class and details; the image count
    assert merged.metrics[metrics[0]].score == whole.score  # mask AP itself, exactly
    assert list(merged.statistics) == list(whole.statistics) == metrics
    # Each image's own score, from whichever piece evaluated it, in dataset order.
    assert len(whole.image_scores) == limit
    assert np.array_equal(merged.image_scores, whole.image_scores, equal_nan=True)
    for name, array in whole.statistics.items():
        assert merged.statistics[name].dtype == array.dtype
        assert merged.statistics[name].tobytes() == array.tobytes()


def test_merging_refuses_pieces_that_are_not_each_sample_once() -> None:
    model, dataset = as_segmentation_model(tiny_unet()), demo_dataset("val")
    settings = EvalSettings.of("semantic", ["miou"], seed=0, batch_size=4, limit=6)
    first, second = (evaluate_piece(model, dataset, None, 0, i, 2, settings) for i in range(2))
    context = MetricContext.of(dataset, model_device(model))
    with pytest.raises(ValueError, match=r"piece 0 covers samples 4\.\.5, expected it to start at 0"):
        merge_pieces([second, first], 6, context, statistics=False, seconds=0.0)  # out of order
    with pytest.raises(ValueError, match=r"piece 1 covers samples 0\.\.3, expected it to start at 4"):
        merge_pieces([first, first], 6, context, statistics=False, seconds=0.0)  # a duplicate
    with pytest.raises(ValueError, match=r"piece 1 covers samples 5\.\.5, expected it to start at 4"):
        merge_pieces([first, replace(second, start=5)], 6, context, statistics=False, seconds=0.0)  # a gap
    with pytest.raises(ValueError, match="piece 1 has metrics"):
        merge_pieces([first, replace(second, states={})], 6, context, statistics=False, seconds=0.0)
    with pytest.raises(ValueError, match=r"the pieces cover samples 0\.\.3, the evaluation has 6"):
        merge_pieces([first], 6, context, statistics=False, seconds=0.0)  # the last piece lost
    with pytest.raises(ValueError, match=r"the pieces cover samples 0\.\.5, the evaluation has 7"):
        merge_pieces([first, second], 7, context, statistics=False, seconds=0.0)  # a shorter evaluation's pieces
    with pytest.raises(ValueError, match="no piece to merge"):
        merge_pieces([], 6, context, statistics=False, seconds=0.0)
    assert np.isfinite(merge_pieces([first, second], 6, context, statistics=False, seconds=0.0).score)
