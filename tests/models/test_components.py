"""Connected components against a breadth-first-search oracle; instances from semantic logits."""

from __future__ import annotations

from collections import deque

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_segrobust.models import as_instance_model
from pytest_segrobust.models.adapters import adapt_model
from pytest_segrobust.models.components import ComponentInstances, ComponentPanoptic, connected_components
from pytest_segrobust.tasks import get_task


def bfs_components(labels: list[list[int]], background: int) -> list[list[int]]:
    """8-connected regions by flood fill; each region's id is 1 + the flat index of its last pixel."""
    height, width = len(labels), len(labels[0])
    region = [[-1] * width for _ in range(height)]
    members: list[list[tuple[int, int]]] = []
    for y in range(height):
        for x in range(width):
            if labels[y][x] == background or region[y][x] >= 0:
                continue
            region[y][x] = len(members)
            found, queue = [], deque([(y, x)])
            while queue:
                cy, cx = queue.popleft()
                found.append((cy, cx))
                for ny in range(max(cy - 1, 0), min(cy + 2, height)):
                    for nx in range(max(cx - 1, 0), min(cx + 2, width)):
                        if region[ny][nx] < 0 and labels[ny][nx] == labels[y][x]:
                            region[ny][nx] = len(members)
                            queue.append((ny, nx))
            members.append(found)
    ids = [[0] * width for _ in range(height)]
    for found in members:
        last = max(cy * width + cx for cy, cx in found) + 1
        for cy, cx in found:
            ids[cy][cx] = last
    return ids


@st.composite
def label_maps(draw: st.DrawFn) -> tuple[torch.Tensor, int]:
    batch, height, width = draw(st.integers(1, 3)), draw(st.integers(1, 12)), draw(st.integers(1, 12))
    classes = draw(st.integers(2, 4))
    values = draw(
        st.lists(st.integers(0, classes - 1), min_size=batch * height * width, max_size=batch * height * width)
    )
    return torch.tensor(values).view(batch, height, width), draw(st.integers(0, classes - 1))


@settings(max_examples=150, deadline=None)
@given(label_maps())
def test_components_match_a_flood_fill(case: tuple[torch.Tensor, int]) -> None:
    labels, background = case
    ids = connected_components(labels, background=background)
    assert ids.dtype == torch.int64 and ids.shape == labels.shape
    assert ids.tolist() == [bfs_components(image, background) for image in labels.tolist()]


def test_all_background_gives_zeros() -> None:
    assert connected_components(torch.zeros(2, 5, 7, dtype=torch.uint8)).tolist() == torch.zeros(2, 5, 7).tolist()
    assert connected_components(torch.zeros(0, 4, 4, dtype=torch.int64)).shape == (0, 4, 4)


def test_a_single_pixel_is_its_own_region() -> None:
    assert connected_components(torch.tensor([[[3]]])).tolist() == [[[1]]]


def test_diagonal_neighbours_are_connected() -> None:
    labels = torch.tensor([[[1, 0, 0], [0, 1, 0], [0, 0, 1]]])
    ids = connected_components(labels)
    assert ids[0].diagonal().unique().tolist() == [9]


def test_regions_of_one_class_separated_by_another_are_distinct() -> None:
    labels = torch.tensor([[[1, 1, 2, 1], [1, 1, 2, 1], [2, 2, 2, 1]]])
    ids = connected_components(labels)
    assert ids.tolist() == [[[6, 6, 11, 12], [6, 6, 11, 12], [11, 11, 11, 12]]]


def test_long_winding_regions_converge() -> None:
    # A serpentine: one region whose path is ~H*W/2 pixels long.
    labels = torch.zeros(31, 31, dtype=torch.int64)
    labels[::2] = 1
    labels[1::4, -1] = 1
    labels[3::4, 0] = 1
    ids = connected_components(labels[None])
    assert ids[0][labels == 1].unique().tolist() == [31 * 31]


def test_float_labels_are_refused() -> None:
    with pytest.raises(ValueError, match="integer"):
        connected_components(torch.zeros(1, 2, 2))


class FixedLogits(torch.nn.Module):
    """Returns the same logits for any batch: class map ``classes`` with confidence ``confidence``."""

    def __init__(self, classes: torch.Tensor, confidence: torch.Tensor, num_classes: int = 3) -> None:
        super().__init__()
        logits = torch.zeros(classes.shape[0], num_classes, *classes.shape[1:])
        logits.scatter_(1, classes[:, None], confidence[:, None])
        self.register_buffer("logits", logits)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.logits.clone()


def images_like(classes: torch.Tensor) -> torch.Tensor:
    return torch.zeros(classes.shape[0], 3, *classes.shape[1:])


def test_one_instance_per_region_scored_by_mean_class_probability() -> None:
    classes = torch.tensor([[[1, 1, 0, 2, 2], [1, 1, 0, 2, 2], [0, 0, 0, 0, 0], [1, 1, 0, 0, 0], [1, 1, 0, 0, 0]]])
    confidence = torch.full(classes.shape, 2.0)
    confidence[0, 3:, :2] = 4.0  # the lower class-1 region is the most confident
    confidence[0, 0, 3] = 1.0  # the class-2 region is less confident at one pixel
    (result,) = ComponentInstances(FixedLogits(classes, confidence), min_area=1)(images_like(classes))

    assert result["labels"].tolist() == [1, 1, 2]
    assert result["masks"].dtype == torch.bool and result["masks"].shape == (3, 5, 5)
    assert result["masks"][0, 3:, :2].all() and result["masks"][0].sum() == 4
    assert result["masks"][1, :2, :2].all() and result["masks"][1].sum() == 4
    probability = confidence.exp() / (confidence.exp() + 2)  # softmax of (c, 0, 0)
    expected = [probability[0, 3:, :2].mean(), probability[0, :2, :2].mean(), probability[0, :2, 3:].mean()]
    assert result["scores"].dtype == torch.float32
    torch.testing.assert_close(result["scores"], torch.stack(expected))


def test_ties_are_ordered_by_where_the_region_ends() -> None:
    classes = torch.tensor([[[1, 0, 1], [0, 0, 0], [1, 0, 1]]])
    (result,) = ComponentInstances(FixedLogits(classes, torch.ones(classes.shape)), min_area=1)(images_like(classes))
    assert result["scores"].unique().numel() == 1
    corners = [divmod(int(mask.flatten().nonzero()), 3) for mask in result["masks"]]
    assert corners == [(0, 0), (0, 2), (2, 0), (2, 2)]  # raster order of the one-pixel regions


def test_small_regions_are_dropped_and_the_count_is_capped() -> None:
    classes = torch.zeros(2, 8, 8, dtype=torch.int64)
    classes[0, :3, :3] = 1  # 9 pixels
    classes[0, 5:, 5:] = 2  # 9 pixels, more confident
    classes[0, 0, 7] = 2  # 1 pixel
    confidence = torch.ones(classes.shape)
    confidence[0, 5:, 5:] = 3.0
    model = ComponentInstances(FixedLogits(classes, confidence), min_area=4, max_instances=1)
    first, second = model(images_like(classes))
    assert first["labels"].tolist() == [2] and first["masks"][0, 5:, 5:].all()
    assert second["masks"].shape == (0, 8, 8) and second["labels"].shape == (0,) and second["scores"].shape == (0,)


def test_low_resolution_logits_are_resized_to_the_image() -> None:
    classes = torch.tensor([[[0, 1], [0, 1]]])
    model = ComponentInstances(FixedLogits(classes, torch.full(classes.shape, 5.0)), min_area=1)
    (result,) = model(torch.zeros(1, 3, 8, 8))
    assert (
        result["masks"].shape == (1, 8, 8) and result["masks"][0, :, 4:].all() and not result["masks"][0, :, :4].any()
    )


def test_settings_are_checked_and_reach_the_fingerprint() -> None:
    with pytest.raises(ValueError, match="min_area"):
        ComponentInstances(torch.nn.Identity(), min_area=0)
    classes = torch.zeros(1, 2, 2, dtype=torch.int64)
    module = FixedLogits(classes, torch.ones(classes.shape))
    prints = {as_instance_model(ComponentInstances(module, min_area=area)).fingerprint() for area in (4, 4, 8)}
    assert len(prints) == 2


def test_panoptic_stuff_is_one_segment_per_class_and_thing_regions_are_instances() -> None:
    # Class 0 is stuff in two disconnected parts; class 1 has two regions, one of them a speck.
    classes = torch.tensor([[[1, 1, 0, 2, 2], [1, 1, 0, 2, 2], [0, 0, 0, 0, 0], [0, 1, 0, 0, 0], [0, 0, 0, 1, 1]]])
    classes[0, 2, 1:4] = 2  # splits the class-0 pixels into an upper and a lower part
    module = ComponentPanoptic(FixedLogits(classes, torch.full(classes.shape, 3.0)), stuff=(0,), min_area=2)
    (result,) = module(images_like(classes))
    segments, ids, labels = result["segments"], result["ids"], result["labels"]
    assert segments.dtype == ids.dtype == labels.dtype == torch.int64 and segments.shape == (5, 5)
    assert len(ids.unique()) == len(ids) and int(ids.min()) > 0
    assert labels.tolist().count(0) == 1  # both class-0 parts are one stuff segment
    stuff_id = int(ids[labels == 0])
    assert torch.equal(segments == stuff_id, classes[0] == 0)
    assert sorted(labels.tolist()) == [0, 1, 1, 2]  # the one-pixel class-1 speck is dropped
    assert int(segments[3, 1]) == 0  # and left void
    painted = torch.full_like(segments, -1)
    for segment_id, label in zip(ids.tolist(), labels.tolist(), strict=True):
        painted[segments == segment_id] = label
    assert torch.equal(painted[segments > 0], classes[0][segments > 0])


def test_panoptic_module_adapts_to_the_panoptic_task_and_settings_reach_the_fingerprint() -> None:
    with pytest.raises(ValueError, match="min_area"):
        ComponentPanoptic(torch.nn.Identity(), min_area=0)
    classes = torch.tensor([[[0, 1], [2, 2]]])
    module = FixedLogits(classes, torch.ones(classes.shape))
    task = get_task("panoptic")
    models = [adapt_model(ComponentPanoptic(module, stuff=stuff), task) for stuff in ((0,), (0,), (0, 2))]
    assert all(task.accepts_model(model) for model in models)
    assert len({model.fingerprint() for model in models}) == 2
    (predicted,) = models[2].predict(images_like(classes))
    assert sorted(predicted.labels.tolist()) == [0, 2]  # class 1 is one pixel, below min_area 4
