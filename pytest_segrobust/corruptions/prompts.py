"""Prompt perturbations: what a user's clicks and boxes get wrong, acting on the prompts alone.

Each perturbation changes the prompts of a :class:`~pytest_segrobust.core.prompts.PromptedInstances`
field and nothing else (its masks, the image and every other field pass through), with a
five-row severity table and its randomness drawn from the sample's own seed (one stream per
image, the draws shaped by the image's instances alone), so a sample's prompts are the same in
any batch, order or process:

* ``box_jitter``: each box corner moves independently by a normal offset of ``sigma`` times the
  box's width (x) or height (y);
* ``box_shift``: the whole box moves by ``fraction`` of its size in a uniformly drawn direction;
* ``point_displacement``: each click moves by ``pixels`` plus ``fraction`` of its instance's
  box diagonal, in a uniformly drawn direction (clamped to the frame);
* ``missing_click``: each foreground click is dropped with probability ``rate`` (a prompt set
  left without a click scores an empty mask);
* ``false_click``: with probability ``rate``, an instance gets one more foreground click on a
  background pixel (no instance there), drawn uniformly;
* ``neighbour_box``: with probability ``rate``, an instance's box is its nearest neighbour's
  (by box centre; unchanged for an image's only instance).

Boxes a perturbation changed are no longer tight (:attr:`~pytest_segrobust.core.prompts.InstancePrompts.tight`),
and every box is kept inside the frame and at least one pixel wide. The ``coco-p-prompts`` preset
holds COCO-P's corruptions and these; in a composition with an image corruption
(``gaussian_noise+box_jitter``) the prompt part comes last, after the whole imaging chain
(:class:`~pytest_segrobust.corruptions.composition.Stage`), so a geometric part moves the clean
prompts and the perturbation then acts on the moved ones.
"""

from __future__ import annotations

import math
from abc import abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from pytest_segrobust.core.modality import Category
from pytest_segrobust.core.prompts import ABSENT, FOREGROUND, InstancePrompts, PromptedInstances
from pytest_segrobust.corruptions import prompt_kernels  # noqa: F401 - registers the field's geometric kernel
from pytest_segrobust.corruptions.base import Corruption, SeverityTable
from pytest_segrobust.randomness.seeding import SampleStreams


class PromptPerturbation(Corruption[Any]):
    """Changes the prompts of every image, image by image; every other field passes through."""

    acts_on = (PromptedInstances,)

    def __init__(self, name: str, table: SeverityTable[Any]) -> None:
        super().__init__(name, Category.PROMPT, table)

    @property
    def kind(self) -> str:
        return "prompt"

    @abstractmethod
    def perturb(self, target: InstancePrompts, params: Any, streams: SampleStreams, size: tuple[int, int]) -> InstancePrompts:
        """One image's prompts perturbed, drawing from ``streams`` (that image's alone) in a fixed order."""

    def _corrupt(self, batch, severity, seeds, size, device):  # type: ignore[no-untyped-def]
        params = self.table[severity]
        out = dict(batch)
        for name, field in batch.items():
            if isinstance(field, PromptedInstances):
                changed = tuple(
                    target if len(target) == 0 else self.perturb(target, params, SampleStreams([seed], device), field.size())
                    for target, seed in zip(field.targets, seeds)
                )
                out[name] = PromptedInstances(changed, field.height, field.width)
        return out


def _framed(boxes: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """Boxes rounded to pixels, inside the frame and at least one pixel wide and high."""
    height, width = size
    boxes = boxes.round()
    x0 = boxes[:, 0].clamp(0, width - 1)
    y0 = boxes[:, 1].clamp(0, height - 1)
    x1 = torch.maximum(boxes[:, 2].clamp(1, width), x0 + 1)
    y1 = torch.maximum(boxes[:, 3].clamp(1, height), y0 + 1)
    return torch.stack([x0, y0, x1, y1], dim=1)


def _with_boxes(target: InstancePrompts, boxes: torch.Tensor, changed: torch.Tensor, size: tuple[int, int]) -> InstancePrompts:
    """``target`` with the boxes of instances ``changed`` (``(N,)`` bool) replaced by ``boxes``."""
    new = torch.where(changed[:, None], _framed(boxes, size), target.boxes)
    return target.with_prompts(target.points, target.point_labels, new, target.box_given, target.tight & ~changed)


@dataclass(frozen=True)
class BoxJitterParams:
    """Each box corner moves by a normal offset of sigma times the box's width (x) or height (y)."""

    sigma: float


class BoxJitter(PromptPerturbation):
    def perturb(self, target, params, streams, size):  # type: ignore[no-untyped-def]
        extent = (target.boxes[:, 2:] - target.boxes[:, :2]).repeat(1, 2)  # (N, 4): w, h, w, h
        offsets = streams.normal([len(target), 4])[0].to(extent.device) * params.sigma * extent
        return _with_boxes(target, target.boxes + offsets, target.box_given, size)


@dataclass(frozen=True)
class BoxShiftParams:
    """The whole box moves by fraction of its width and height, in a uniformly drawn direction."""

    fraction: float


class BoxShift(PromptPerturbation):
    def perturb(self, target, params, streams, size):  # type: ignore[no-untyped-def]
        angle = streams.uniform([len(target)], dtype=torch.float64)[0].to(target.boxes.device) * 2 * math.pi
        extent = target.boxes[:, 2:] - target.boxes[:, :2]
        shift = torch.stack([angle.cos(), angle.sin()], dim=1).float() * params.fraction * extent
        return _with_boxes(target, target.boxes + shift.repeat(1, 2), target.box_given, size)


@dataclass(frozen=True)
class PointDisplacementParams:
    """Each click moves by pixels plus fraction of its instance's box diagonal, in a uniformly drawn direction."""

    pixels: float
    fraction: float


class PointDisplacement(PromptPerturbation):
    def perturb(self, target, params, streams, size):  # type: ignore[no-untyped-def]
        count, slots = int(target.points.shape[0]), int(target.points.shape[1])
        angle = streams.uniform([count, slots], dtype=torch.float64)[0].to(target.points.device) * 2 * math.pi
        extent = target.boxes[:, 2:] - target.boxes[:, :2]
        reach = params.pixels + params.fraction * extent.norm(dim=1)  # (N,)
        step = torch.stack([angle.cos(), angle.sin()], dim=2).float() * reach[:, None, None]
        height, width = size
        moved = (target.points + step).round()
        moved = torch.stack([moved[..., 0].clamp(0, width - 1), moved[..., 1].clamp(0, height - 1)], dim=2)
        present = (target.point_labels != ABSENT)[..., None]
        points = torch.where(present, moved, target.points)
        return target.with_prompts(points, target.point_labels, target.boxes, target.box_given, target.tight)


@dataclass(frozen=True)
class RateParams:
    """The probability of the perturbation, per click or per instance."""

    rate: float


class MissingClick(PromptPerturbation):
    def perturb(self, target, params, streams, size):  # type: ignore[no-untyped-def]
        draws = streams.uniform(list(target.point_labels.shape))[0].to(target.point_labels.device)
        dropped = (target.point_labels == FOREGROUND) & (draws < params.rate)
        labels = torch.where(dropped, torch.full_like(target.point_labels, ABSENT), target.point_labels)
        return target.with_prompts(target.points, labels, target.boxes, target.box_given, target.tight)


class FalseClick(PromptPerturbation):
    def perturb(self, target, params, streams, size):  # type: ignore[no-untyped-def]
        count = len(target)
        hit = streams.uniform([count])[0] < params.rate
        picks = streams.uniform([count], dtype=torch.float64)[0]
        background = (~target.masks.any(dim=0)).flatten().nonzero().flatten().cpu()
        extra_points = torch.zeros(count, 1, 2, dtype=torch.float32)
        extra_labels = torch.full((count, 1), ABSENT, dtype=torch.int64)
        if background.numel():
            width = int(target.masks.shape[2])
            for i in hit.nonzero().flatten().tolist():
                pixel = int(background[min(int(float(picks[i]) * background.numel()), background.numel() - 1)])
                extra_points[i, 0] = torch.tensor([pixel % width, pixel // width], dtype=torch.float32)
                extra_labels[i, 0] = FOREGROUND
        device = target.points.device
        points = torch.cat([target.points, extra_points.to(device)], dim=1)
        labels = torch.cat([target.point_labels, extra_labels.to(device)], dim=1)
        return target.with_prompts(points, labels, target.boxes, target.box_given, target.tight)


class NeighbourBox(PromptPerturbation):
    def perturb(self, target, params, streams, size):  # type: ignore[no-untyped-def]
        count = len(target)
        hit = (streams.uniform([count])[0] < params.rate).to(target.boxes.device)
        if count < 2:
            return target
        centres = (target.boxes[:, :2] + target.boxes[:, 2:]) / 2
        distance = torch.cdist(centres.double(), centres.double())
        distance.fill_diagonal_(float("inf"))
        nearest = distance.argmin(dim=1)  # the first of equally near ones
        return _with_boxes(target, target.boxes[nearest], hit & target.box_given, size)


box_jitter = BoxJitter("box_jitter", SeverityTable(tuple(BoxJitterParams(s) for s in (0.03, 0.06, 0.1, 0.15, 0.2))))  # type: ignore[arg-type]
box_shift = BoxShift("box_shift", SeverityTable(tuple(BoxShiftParams(f) for f in (0.05, 0.1, 0.2, 0.3, 0.4))))  # type: ignore[arg-type]
point_displacement = PointDisplacement(
    "point_displacement",
    SeverityTable(tuple(PointDisplacementParams(p, f) for p, f in ((1, 0.02), (2, 0.05), (3, 0.1), (4, 0.15), (5, 0.2)))),  # type: ignore[arg-type]
)
missing_click = MissingClick("missing_click", SeverityTable(tuple(RateParams(r) for r in (0.1, 0.2, 0.3, 0.4, 0.5))))  # type: ignore[arg-type]
false_click = FalseClick("false_click", SeverityTable(tuple(RateParams(r) for r in (0.2, 0.4, 0.6, 0.8, 1.0))))  # type: ignore[arg-type]
neighbour_box = NeighbourBox("neighbour_box", SeverityTable(tuple(RateParams(r) for r in (0.1, 0.2, 0.3, 0.4, 0.5))))  # type: ignore[arg-type]

PROMPT_PERTURBATIONS: Sequence[PromptPerturbation] = (
    box_jitter, box_shift, point_displacement, missing_click, false_click, neighbour_box,
)
"""The family, in the order the ``coco-p-prompts`` preset lists it."""
