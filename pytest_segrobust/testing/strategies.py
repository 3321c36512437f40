"""Hypothesis strategies for segmentation batches: images, label maps, instance targets.

Tensors are generated from a drawn seed rather than element by element, so examples are
cheap and shrinking works on sizes and seeds. Requires ``hypothesis`` (the ``test`` extra).

Example::

    from hypothesis import given
    from pytest_segrobust.testing.strategies import batches, severities

    @given(batch=batches(), severity=severities)
    def test_my_corruption_keeps_shape(batch, severity):
        ...
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from hypothesis import strategies as st

from pytest_segrobust.core.types import DEFAULT_IGNORE_INDEX, Field, Image, InstanceMasks, InstanceTarget, SemanticMask


@dataclass(frozen=True)
class Batch:
    """Images with structure (smooth blobs plus texture), label maps, instances and seeds.

    Shape:
        images: ``(B, 3, H, W)`` float in ``[0, 1]``, multiples of 1/255;
        masks: ``(B, H, W)`` int64; instances: one :class:`InstanceTarget` per image.
    """

    images: torch.Tensor
    masks: torch.Tensor
    seeds: list[int]
    instances: list[InstanceTarget]

    def fields(self, ignore_index: int = DEFAULT_IGNORE_INDEX) -> dict[str, Field]:
        """The batch as typed fields, as a corruption takes it: ``image``, ``mask``, ``instances``."""
        height, width = self.masks.shape[-2:]
        return {
            "image": Image(self.images),
            "mask": SemanticMask(self.masks, ignore_index),
            "instances": InstanceMasks(tuple(self.instances), int(height), int(width)),
        }


def make_batch(batch: int, height: int, width: int, classes: int, seed: int) -> Batch:
    """A deterministic batch; the building block of :func:`batches`."""
    g = torch.Generator().manual_seed(seed)
    coarse = torch.rand(batch, 3, max(height // 8, 1), max(width // 8, 1), generator=g)
    smooth = torch.nn.functional.interpolate(coarse, size=(height, width), mode="bilinear", align_corners=False)
    images = (0.8 * smooth + 0.2 * torch.rand(batch, 3, height, width, generator=g)).clamp(0, 1)
    images = (images * 255).round() / 255  # like decoded 8-bit images
    blocks = torch.randint(0, classes, (batch, 1, max(height // 4, 1), max(width // 4, 1)), generator=g)
    masks = torch.nn.functional.interpolate(blocks.float(), size=(height, width), mode="nearest")[:, 0].long()
    seeds = torch.randint(0, 2**62, (batch,), generator=g).tolist()
    return Batch(images, masks, seeds, [instances_of(m) for m in masks])


def instances_of(mask: torch.Tensor) -> InstanceTarget:
    """One instance per non-zero class region of a label map; class 1 regions are crowd.

    Shape:
        mask: ``(H, W)``.
    """
    classes = [int(c) for c in mask.unique() if c != 0]
    if not classes:
        empty = torch.zeros(0, *mask.shape, dtype=torch.bool)
        return InstanceTarget.from_masks(empty, torch.zeros(0, dtype=torch.int64))
    labels = torch.tensor(classes)
    return InstanceTarget.from_masks(torch.stack([mask == c for c in classes]), labels, iscrowd=labels == 1)


@st.composite
def batches(draw: st.DrawFn, max_batch: int = 4, min_side: int = 8, max_side: int = 48) -> Batch:
    """Random batches of random (not necessarily square) size."""
    return make_batch(
        batch=draw(st.integers(1, max_batch)),
        height=draw(st.integers(min_side, max_side)),
        width=draw(st.integers(min_side, max_side)),
        classes=draw(st.integers(2, 6)),
        seed=draw(st.integers(0, 2**31 - 1)),
    )


severities = st.integers(1, 5)
"""Severity levels 1..5."""
