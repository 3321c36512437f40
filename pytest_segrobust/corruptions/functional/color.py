"""Tone and colour operations."""

from __future__ import annotations

import torch

# ITU-R 601-2 luma, the weights PIL uses for ``convert("L")``.
_LUMA = (0.299, 0.587, 0.114)


def luma(images: torch.Tensor) -> torch.Tensor:
    """ITU-R 601-2 luma of RGB images.

    Shape:
        images: ``(B, 3, H, W)``; return: ``(B, 1, H, W)``.
    """
    weights = torch.tensor(_LUMA, device=images.device, dtype=images.dtype).view(1, 3, 1, 1)
    return (images * weights).sum(dim=1, keepdim=True)


def enhance_contrast(images: torch.Tensor, factor: float) -> torch.Tensor:
    """PIL's ``ImageEnhance.Contrast``: blend with the mean grey level by ``factor``.

    Factors above 1 increase contrast; the mean is each image's own mean luma.

    Shape:
        images: ``(B, 3, H, W)``; return: same.
    """
    mean = luma(images).mean(dim=(1, 2, 3), keepdim=True)
    return (mean + factor * (images - mean)).clamp_(0.0, 1.0)


def to_uint8(images: torch.Tensor) -> torch.Tensor:
    """Round float images in ``[0, 1]`` to ``uint8``.

    Shape:
        images: any; return: same.
    """
    return (images.clamp(0.0, 1.0) * 255.0).round_().to(torch.uint8)
