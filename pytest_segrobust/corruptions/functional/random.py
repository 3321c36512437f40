"""Per-sample random fields shaped like a batch of images, from a batch's :class:`SampleStreams`."""

from __future__ import annotations

import torch

from pytest_segrobust.randomness.seeding import SampleStreams


def standard_normal_like(images: torch.Tensor, streams: SampleStreams) -> torch.Tensor:
    """One standard normal field per sample, from that sample's stream (one draw).

    Shape:
        images: ``(B, C, H, W)``; return: same shape and dtype.
    """
    return streams.normal(images.shape[1:], dtype=images.dtype)


def uniform_like(images: torch.Tensor, streams: SampleStreams, channels: int | None = None) -> torch.Tensor:
    """One ``U[0, 1)`` field per sample (one draw); ``channels`` overrides the channel count.

    Shape:
        images: ``(B, C, H, W)``; return: ``(B, channels or C, H, W)``.
    """
    _, c, h, w = images.shape
    return streams.uniform((channels if channels is not None else c, h, w)).to(images.dtype)


def random_signs(streams: SampleStreams, dtype: torch.dtype = torch.float32, magnitude: float = 1.0) -> torch.Tensor:
    """One random sign (+1 or -1) per sample (one draw), times ``magnitude`` (an angle, a shift).

    Shape:
        return: ``(B,)``, ``dtype``.
    """
    return streams.signs(dtype, magnitude)
