"""Pixel noise models."""

from __future__ import annotations

from collections.abc import Sequence

import torch


def additive_gaussian_noise(images: torch.Tensor, noise: torch.Tensor, std: float) -> torch.Tensor:
    """Add ``std``-scaled standard normal ``noise`` and clip to ``[0, 1]``.

    Shape:
        images, noise: ``(B, C, H, W)``; return: same.
    """
    return (images + std * noise).clamp_(0.0, 1.0)


def shot_noise(images: torch.Tensor, photons: float, rngs: Sequence[torch.Generator]) -> torch.Tensor:
    """Poisson photon noise: ``poisson(x * photons) / photons``, clipped.

    Shape:
        images: ``(B, C, H, W)``; return: same.
    """
    rate = images * photons
    counts = torch.stack([torch.poisson(rate[i], generator=g) for i, g in enumerate(rngs)])
    return (counts / photons).clamp_(0.0, 1.0)
