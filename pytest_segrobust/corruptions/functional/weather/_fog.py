"""Fog: ImageNet-C's diamond-square plasma haze over a contrast-compressed image."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from pytest_segrobust.randomness.seeding import SampleStreams


@dataclass(frozen=True)
class FogParams:
    """Weight of the plasma layer and how fast its roughness decays with finer scales."""

    strength: float
    wibble_decay: float


def next_power_of_two(n: int) -> int:
    """The smallest power of two ``>= n`` (1 for ``n <= 1``)."""
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def plasma_fractal(mapsize: int, wibble_decay: float, streams: SampleStreams) -> torch.Tensor:
    """ImageNet-C's diamond-square height map, one per sample, normalised to ``[0, 1]``.

    Starting from a zero corner, each level sets square centres, then diamond centres, to the
    mean of their four (toroidally wrapped) neighbours plus ``wibble * U(-wibble, wibble)``
    noise — the reference multiplies the noise by ``wibble`` twice, so the amplitude of level
    ``k`` is ``100^2 / wibble_decay^(2k)`` — then halves the step and divides ``wibble`` by
    ``wibble_decay``, until the step drops below 2. Each level is one vectorised update of
    the whole batch; each update's noise is one draw from ``streams`` (float64 uniforms),
    three per level, in the reference's order.

    Shape:
        return: ``(B, mapsize, mapsize)``, float64, on the streams' device.
    """
    if mapsize & (mapsize - 1):
        raise ValueError(f"mapsize must be a power of two, got {mapsize}")
    heights = torch.zeros(len(streams), mapsize, mapsize, dtype=torch.float64, device=streams.device)
    step, wibble = mapsize, 100.0

    def wibbled_mean(total: torch.Tensor) -> torch.Tensor:
        noise = streams.uniform(total.shape[1:], dtype=torch.float64) * (2 * wibble) - wibble
        return total / 4 + wibble * noise

    while step >= 2:
        half = step // 2
        corners = heights[:, 0::step, 0::step]
        square = corners + corners.roll(-1, 1)
        square = square + square.roll(-1, 2)
        heights[:, half::step, half::step] = wibbled_mean(square)
        centres = heights[:, half::step, half::step]
        corners = heights[:, 0::step, 0::step]
        heights[:, 0::step, half::step] = wibbled_mean(centres + centres.roll(1, 1) + corners + corners.roll(-1, 2))
        heights[:, half::step, 0::step] = wibbled_mean(centres + centres.roll(1, 2) + corners + corners.roll(-1, 1))
        step //= 2
        wibble /= wibble_decay
    heights -= heights.amin(dim=(1, 2), keepdim=True)
    peak = heights.amax(dim=(1, 2), keepdim=True)
    return torch.where(peak > 0, heights / torch.where(peak > 0, peak, 1.0), heights)


def fog(images: torch.Tensor, params: FogParams, streams: SampleStreams) -> torch.Tensor:
    """ImageNet-C fog: add a plasma fractal, then rescale by the image's own maximum.

    ``out = clip((x + strength * plasma) * max(x) / (max(x) + strength))`` with one plasma
    layer per image (shared by its channels) cut from a power-of-two map.

    Shape:
        images: ``(B, C, H, W)``; return: same.
    """
    height, width = images.shape[-2:]
    mapsize = next_power_of_two(max(height, width))
    plasma = plasma_fractal(mapsize, params.wibble_decay, streams)[:, None, :height, :width]
    plasma = plasma.to(images.dtype)
    peak = images.amax(dim=(1, 2, 3), keepdim=True)
    strength = params.strength
    return ((images + strength * plasma) * (peak / (peak + strength))).clamp_(0.0, 1.0)
