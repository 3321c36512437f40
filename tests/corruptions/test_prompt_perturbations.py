"""The prompt perturbation family: prompts alone change, per sample, and it is listed and composable."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from pytest_segrobust.core.prompts import ABSENT, FOREGROUND, PromptedInstances
from pytest_segrobust.core.types import Image, InstanceTarget
from pytest_segrobust.corruptions.composition import Stage, stage_of
from pytest_segrobust.corruptions.prompts import PROMPT_PERTURBATIONS, PromptPerturbation
from pytest_segrobust.corruptions.registry import REGISTRY
from pytest_segrobust.data.prompt_protocol import StandardProtocol, StandardProtocolSettings
from pytest_segrobust.suite.catalogue import catalogue
from pytest_segrobust.text.registry import TextPerturbationRegistry

PROTOCOL = StandardProtocol(StandardProtocolSettings(3, "random", True))


def _batch(images: int = 2) -> dict[str, Any]:
    targets = []
    for i in range(images):
        masks = torch.zeros(3, 32, 32, dtype=torch.bool)
        masks[0, 2:12, 2:12] = True
        masks[1, 14 + i : 30, 4:20] = True
        masks[2, 3:10, 22:30] = True
        targets.append(PROTOCOL.prompts(InstanceTarget.from_masks(masks, torch.tensor([1, 1, 1])), f"s{i}", 0))
    return {"image": Image(torch.rand(images, 3, 32, 32, generator=torch.Generator().manual_seed(0))),
            "prompted": PromptedInstances(tuple(targets), 32, 32)}


@pytest.mark.parametrize("perturbation", PROMPT_PERTURBATIONS, ids=lambda p: p.name)
def test_only_the_prompts_change_and_per_sample(perturbation: PromptPerturbation) -> None:
    batch = _batch()
    out = perturbation(batch, 5, [11, 12])
    assert out["image"] is batch["image"]
    alone = perturbation({k: v.take(range(1, 2)) for k, v in batch.items()}, 5, [12])["prompted"].targets[0]
    for before, after in zip(batch["prompted"].targets, out["prompted"].targets):
        assert torch.equal(before.masks, after.masks) and torch.equal(before.areas, after.areas)
        assert (after.boxes[:, :2] >= 0).all() and (after.boxes[:, 2] <= 32).all() and (after.boxes[:, 3] <= 32).all()
        assert (after.boxes[:, 2:] > after.boxes[:, :2]).all()
    changed = [
        not (torch.equal(b.points, a.points) and torch.equal(b.point_labels, a.point_labels) and torch.equal(b.boxes, a.boxes))
        for b, a in zip(batch["prompted"].targets, out["prompted"].targets)
    ]
    assert any(changed), "severity 5 changes some prompt"
    mine = out["prompted"].targets[1]
    assert torch.equal(alone.points, mine.points) and torch.equal(alone.boxes, mine.boxes)
    assert perturbation(batch, 5, [11, 12])["prompted"].targets[0].boxes.equal(out["prompted"].targets[0].boxes)


def test_a_false_click_lands_on_the_background_and_a_missing_click_leaves() -> None:
    batch = _batch(1)
    target = REGISTRY.get("false_click", "coco-p-prompts")(batch, 5, [3])["prompted"].targets[0]
    extra = target.points[:, -1].long()
    assert target.point_labels[:, -1].eq(FOREGROUND).all()  # rate 1 at severity 5: every instance
    assert not any(bool(target.masks[:, y, x].any()) for x, y in extra.tolist())
    missing = REGISTRY.get("missing_click", "coco-p-prompts")(batch, 5, [3])["prompted"].targets[0]
    assert 0 < int(missing.point_labels.eq(ABSENT).sum()) < missing.point_labels.numel()


def test_a_neighbour_box_is_another_instances_box() -> None:
    batch = _batch(1)
    before = batch["prompted"].targets[0]
    after = REGISTRY.get("neighbour_box", "coco-p-prompts")(batch, 5, [8])["prompted"].targets[0]
    swapped = [i for i in range(3) if not torch.equal(after.boxes[i], before.boxes[i])]
    assert swapped and all(any(torch.equal(after.boxes[i], before.boxes[j]) for j in range(3) if j != i) for i in swapped)
    assert not after.tight[swapped].any() and after.tight[[i for i in range(3) if i not in swapped]].all()


def test_compositions_perturb_the_prompts_last_as_a_cross_modal_cell() -> None:
    cell = REGISTRY.get("box_shift+rotate", "coco-p-prompts")
    assert cell.name == "rotate+box_shift" and cell.category.value == "cross-modal"
    assert stage_of(REGISTRY.get("box_shift", "coco-p-prompts")) is Stage.PROMPT
    out = cell(_batch(), 3, [1, 2])["prompted"].targets[0]
    assert not out.tight.all()  # the box was shifted after the rotation moved it


def test_the_family_is_listed() -> None:
    families = {family.name: family for family in catalogue(REGISTRY, TextPerturbationRegistry.builtin())}
    assert families["prompt"].names() == [p.name for p in PROMPT_PERTURBATIONS]
    assert "acts on prompt" in families["prompt"].heading
