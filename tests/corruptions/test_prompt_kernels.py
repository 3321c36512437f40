"""Prompts move with the image: hypothesis properties under every geometric corruption of every preset."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_segrobust.core.prompts import ABSENT, FOREGROUND, InstancePrompts, PromptedInstances
from pytest_segrobust.core.types import Image, InstanceMasks, InstanceTarget, boxes_from_masks
from pytest_segrobust.corruptions import kernels
from pytest_segrobust.corruptions.base import Corruption
from pytest_segrobust.corruptions.prompt_kernels import moved_positions
from pytest_segrobust.corruptions.registry import REGISTRY
from pytest_segrobust.data.prompt_protocol import StandardProtocol, StandardProtocolSettings
from pytest_segrobust.testing.strategies import Batch, batches, severities

GEOMETRIC = [(label, c) for label, c in REGISTRY.labelled() if c.geometric and c.accepts(Image)]
PHOTOMETRIC = [c for c in REGISTRY.preset("coco-p") if not c.geometric]
PROTOCOL = StandardProtocol(StandardProtocolSettings(clicks=3, where="random", box=True))


def prompted_batch(batch: Batch) -> dict[str, Any]:
    """The batch's image, its non-crowd instances, and their prompts (three random clicks and the tight box)."""
    height, width = batch.masks.shape[-2:]
    plain = [
        InstanceTarget(t.masks[~t.iscrowd], t.labels[~t.iscrowd], t.boxes[~t.iscrowd], t.iscrowd[~t.iscrowd])
        for t in batch.instances
    ]
    prompts = tuple(PROTOCOL.prompts(t, f"s{i}", 0) for i, t in enumerate(plain))
    return {
        "image": Image(batch.images),
        "instances": InstanceMasks(tuple(plain), int(height), int(width)),
        "prompted": PromptedInstances(prompts, int(height), int(width)),
    }


def test_every_preset_has_geometric_corruptions_to_check() -> None:
    assert {label.split("@")[1] for label, _ in GEOMETRIC} >= {"coco-p", "imagenet-c", "cityscapes-c"}


@pytest.mark.parametrize("corruption", [c for _, c in GEOMETRIC], ids=[label for label, _ in GEOMETRIC])
@settings(max_examples=8, deadline=None)
@given(batch=batches(max_batch=2, min_side=12, max_side=32), severity=severities)
def test_prompts_move_with_their_masks(corruption: Corruption[Any], batch: Batch, severity: int) -> None:
    fields = prompted_batch(batch)
    moved = corruption(fields, severity, batch.seeds)
    for before, after, masks in zip(fields["prompted"].targets, moved["prompted"].targets, moved["instances"].targets):
        # The same map as the instance masks: the same moved masks, vanished instances dropped alike.
        assert torch.equal(after.masks, masks.masks)
        # A tight box is the moved mask's tight box.
        assert torch.equal(after.boxes[after.tight], boxes_from_masks(after.masks)[after.tight])
        assert len(after) <= len(before)
        for i in range(len(after)):
            for (x, y), label in zip(after.points[i].long().tolist(), after.point_labels[i].tolist()):
                if label == FOREGROUND:  # a kept click lies in its instance's moved mask
                    assert bool(after.masks[i, y, x])


@pytest.mark.parametrize("corruption", PHOTOMETRIC, ids=[c.name for c in PHOTOMETRIC])
@settings(max_examples=3, deadline=None)
@given(batch=batches(max_batch=2, min_side=16, max_side=24), severity=severities)
def test_photometric_corruptions_leave_prompts_untouched(corruption: Corruption[Any], batch: Batch, severity: int) -> None:
    fields = prompted_batch(batch)
    assert corruption(fields, severity, batch.seeds)["prompted"] is fields["prompted"]


def test_a_click_moves_to_the_pixel_showing_it_and_is_dropped_once_out_of_the_picture() -> None:
    # Output pixel (x, y) shows source (x - 2, y + 1): source row 0 and columns 6, 7 are shown nowhere.
    ys, xs = torch.meshgrid(torch.arange(8.0), torch.arange(8.0), indexing="ij")
    coords = torch.stack([xs - 2, ys + 1], dim=-1)
    where, kept = moved_positions(torch.tensor([[3.0, 4.0], [7.0, 3.0], [2.0, 0.0]]), coords)
    assert where[0].tolist() == [5.0, 3.0] and bool(kept[0])
    assert not bool(kept[1])  # two columns out: the nearest sampling position is two pixels away
    assert bool(kept[2]) and where[2].tolist() == [4.0, 0.0]  # one row out: within a pixel of a shown one


def test_a_rotation_skips_few_clicks() -> None:
    masks = torch.zeros(1, 32, 32, dtype=torch.bool)
    masks[0, 4:28, 4:28] = True
    target = InstanceTarget.from_masks(masks, torch.tensor([1]))
    every = InstancePrompts(
        masks, torch.stack(torch.meshgrid(torch.arange(8.0, 24), torch.arange(8.0, 24), indexing="xy"), -1).reshape(1, -1, 2),
        torch.full((1, 256), FOREGROUND), target.boxes, torch.ones(1, dtype=torch.bool), torch.ones(1, dtype=torch.bool),
        torch.tensor([576]), "points",
    )
    image = Image(torch.zeros(1, 3, 32, 32))
    moved = REGISTRY.get("rotate")({"image": image, "p": PromptedInstances((every,), 32, 32)}, 3, [5])["p"].targets[0]
    assert int(moved.point_labels.eq(FOREGROUND).sum()) == 256  # every inner click stays, none lost to the resampling


def test_a_click_leaving_the_frame_is_dropped_and_the_instance_with_it() -> None:
    masks = torch.zeros(2, 8, 8, dtype=torch.bool)
    masks[0, 2:6, 2:6] = True
    masks[1, 0, 0] = True  # a one-pixel instance in the corner the shift takes out
    target = InstanceTarget.from_masks(masks, torch.tensor([1, 2]))
    prompts = StandardProtocol(StandardProtocolSettings(1, "center", True)).prompts(target, "a", 0)
    field = PromptedInstances((prompts,), 8, 8)
    ys, xs = torch.meshgrid(torch.arange(8.0), torch.arange(8.0), indexing="ij")
    coords = torch.stack([xs + 1, ys], dim=-1)[None]  # shifts everything one pixel left
    after = kernels.warp(field, coords).targets[0]
    assert len(after) == 1  # the corner instance left the frame
    assert after.point_labels[0, 0] == FOREGROUND
    x, y = after.points[0, 0].long().tolist()
    assert bool(after.masks[0, y, x]) and after.boxes[0].tolist() == [1.0, 2.0, 5.0, 6.0]
    assert int(after.point_labels.eq(ABSENT).sum()) == 0


def test_a_perturbed_box_moves_by_its_corners() -> None:
    masks = torch.zeros(1, 8, 8, dtype=torch.bool)
    masks[0, 2:6, 2:6] = True
    target = InstancePrompts(
        masks, torch.zeros(1, 1, 2), torch.full((1, 1), ABSENT), torch.tensor([[1.0, 1.0, 7.0, 7.0]]),
        torch.ones(1, dtype=torch.bool), torch.zeros(1, dtype=torch.bool), torch.tensor([16]), "box",
    )
    ys, xs = torch.meshgrid(torch.arange(8.0), torch.arange(8.0), indexing="ij")
    after = kernels.warp(PromptedInstances((target,), 8, 8), torch.stack([xs + 1, ys], dim=-1)[None]).targets[0]
    assert after.boxes[0].tolist() == [0.0, 1.0, 6.0, 7.0]  # not the mask's tight box (1, 2, 5, 6)


@given(st.integers(0, 2**31 - 1))
@settings(max_examples=10, deadline=None)
def test_random_clicks_are_keyed_by_seed_sample_and_instance(seed: int) -> None:
    masks = torch.zeros(2, 16, 16, dtype=torch.bool)
    masks[0, 1:9, 1:9] = True
    masks[1, 8:15, 3:14] = True
    target = InstanceTarget.from_masks(masks, torch.tensor([1, 2]))
    drawn = PROTOCOL.prompts(target, "img", seed)
    assert torch.equal(PROTOCOL.prompts(target, "img", seed).points, drawn.points)
    assert drawn.point_labels.eq(FOREGROUND).all()
    for i in range(2):
        for x, y in drawn.points[i].long().tolist():
            assert bool(masks[i, y, x])
    # Three clicks among 64 pixels: another sample id or seed draws other ones (odds of a repeat ~4e-5).
    assert not torch.equal(PROTOCOL.prompts(target, "other", seed).points[0], drawn.points[0])
    assert not torch.equal(PROTOCOL.prompts(target, "img", seed + 1).points[0], drawn.points[0])
