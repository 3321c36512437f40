"""Per-sample random draws: one generator per image, stacked into a batch."""

from __future__ import annotations

from collections.abc import Sequence

import torch


def standard_normal_like(images: torch.Tensor, rngs: Sequence[torch.Generator]) -> torch.Tensor:
    """Draw one standard normal field per sample from that sample's generator.

    Shape:
        images: ``(B, C, H, W)``; return: same shape and dtype.
    """
    return torch.stack(
        [torch.randn(images.shape[1:], generator=g, device=images.device, dtype=images.dtype) for g in rngs]
    )


def uniform_like(images: torch.Tensor, rngs: Sequence[torch.Generator], channels: int | None = None) -> torch.Tensor:
    """Draw one ``U[0, 1)`` field per sample; ``channels`` overrides the channel count.

    Shape:
        images: ``(B, C, H, W)``; return: ``(B, channels or C, H, W)``.
    """
    _, c, h, w = images.shape
    shape = (channels if channels is not None else c, h, w)
    return torch.stack([torch.rand(shape, generator=g, device=images.device, dtype=images.dtype) for g in rngs])


def random_signs(rngs: Sequence[torch.Generator], device: torch.device) -> torch.Tensor:
    """One random sign (+1 or -1) per sample, drawn from its generator.

    Shape:
        return: ``(B,)``, float32.
    """
    draws = torch.stack([torch.randint(0, 2, (1,), generator=g, device=device) for g in rngs])[:, 0]
    return draws.to(torch.float32) * 2 - 1
