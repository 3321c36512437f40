"""Corruptions that run a whole CPU batch through one kernel give every sample what it gets alone.

On the CPU most corruptions work image by image (``Corruption.image_by_image_on_cpu``); the
ones below run one kernel over the batch instead, where that costs less than kornia's batched
path (``benchmarks/peers.py --against-kornia``). A sample's result may not depend on the
batch it sits in, so each is compared here, bit for bit, with its samples corrupted one by one.
"""

from __future__ import annotations

import pytest
import torch

from pytest_segrobust.corruptions import REGISTRY

WHOLE_BATCH_ON_CPU = [("brightness", "imagenet-c"), ("darkness", "coco-p"), ("pixelate", "imagenet-c")]


def distinct_images(count: int = 3, height: int = 128, width: int = 136) -> torch.Tensor:
    """Different shading, noise and clipped regions per image, on the 8-bit grid.

    Shape:
        return: ``(count, 3, height, width)`` float32.
    """
    generator = torch.Generator().manual_seed(17)
    y, x = torch.meshgrid(torch.linspace(0, 1, height), torch.linspace(0, 1, width), indexing="ij")
    images = []
    for index in range(count):
        image = torch.stack([0.2 + 0.6 * y, 0.3 + 0.5 * x, 0.5 + 0.3 * (x - y)]) * (0.6 + 0.2 * index)
        image = image + 0.08 * torch.randn(3, height, width, generator=generator)
        image[:, : height // (4 + index), : width // 4] = 1.2 - 1.3 * (index % 2)  # clipped white or black
        images.append(image)
    return (torch.stack(images).clamp(0, 1) * 255).round() / 255


def bits(images: torch.Tensor) -> torch.Tensor:
    """The float32 values' bit patterns (``-0.0`` and ``0.0`` differ, NaNs compare)."""
    return images.contiguous().view(torch.int32)


@pytest.mark.parametrize(("name", "preset"), WHOLE_BATCH_ON_CPU)
def test_a_whole_batch_is_its_samples_corrupted_one_by_one(name: str, preset: str) -> None:
    corruption = REGISTRY.get(name, preset)
    assert not corruption.image_by_image_on_cpu, f"{name} runs CPU batches image by image: nothing batched to test"
    images = distinct_images()
    seeds = [41, 42, 43]
    for severity in range(1, 6):
        batched = corruption(images, severity, seeds)
        alone = torch.cat([corruption(images[i : i + 1], severity, [seed]) for i, seed in enumerate(seeds)])
        assert torch.equal(bits(batched), bits(alone)), f"{name}[{severity}]: a sample differs in its batch"
        # The order of the batch is the samples' own: reversed in, reversed out.
        flipped = corruption(images.flip(0), severity, seeds[::-1])
        assert torch.equal(bits(flipped), bits(batched.flip(0))), f"{name}[{severity}]: depends on its place"

