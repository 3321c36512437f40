"""Frost: procedural ice crystals over a haze, standing in for ImageNet-C's frost photographs."""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from pytest_segrobust.corruptions.functional.color import luma
from pytest_segrobust.corruptions.functional.filters import gaussian_filter
from pytest_segrobust.corruptions.functional.padding import Border
from pytest_segrobust.corruptions.functional.weather._fog import next_power_of_two, plasma_one


@dataclass(frozen=True)
class FrostParams:
    """Weights of the image and of the frost layer in their (unnormalised) sum."""

    image_weight: float
    frost_weight: float


# A cool white for the procedural frost: photos of window frost are slightly blue.
_FROST_TINT_RGB = (0.86, 0.94, 1.0)

FROST_TEXTURES = 6
"""Frost textures in a bank, as ImageNet-C has six frost photographs."""

_FROST_BANK_SEED = 20_190_401
"""Seeds the bank's textures (``_FROST_BANK_SEED + k`` for texture ``k``): fixed, so the bank
is the same in every process, on every device, whatever the samples' seeds."""


def frost_layer(
    rngs: Sequence[torch.Generator], height: int, width: int, device: torch.device | None = None
) -> torch.Tensor:
    """Procedural frost: bright ice dendrites over a patchy haze, tinted cool white.

    Stands in for ImageNet-C's six frost photographs, which we neither ship nor copy, and is
    used the same way: a bank of :data:`FROST_TEXTURES` square textures a tenth larger than
    the image (built once per size and device, from fixed seeds, and cached), of which each
    image takes one at random, flipped at random along either axis, and a random crop, all
    drawn from that image's generator. A texture: a low-frequency plasma haze (where frost
    is thick); a few hundred crystals, each a straight spine with side branches at +/-60
    degrees (hexagonal ice), drawn as thin antialiased strokes with a soft glow, brighter
    where the haze is thick; a fine grain; stored, like the photographs, with 8 bits. Values
    lie in ``[0, 1]`` with a mean near 0.45 and bright streaks near 1, like the photos.

    Shape:
        return: ``(B, 3, H, W)``, float32.
    """
    device = torch.device("cpu") if device is None else torch.device(device)
    tint = torch.tensor(_FROST_TINT_RGB, dtype=torch.float32, device=device).view(3, 1, 1) / 255
    return torch.stack([tint * _frost_crop(g, height, width, device) for g in rngs])


def _frost_crop(rng: torch.Generator, height: int, width: int, device: torch.device) -> torch.Tensor:
    # One image's frost, uint8 (1, H, W): a texture of the bank, flips and crop offsets
    # drawn from the image's generator in one call.
    bank = _frost_bank(_frost_side(height, width), device)
    side = bank.shape[-1]
    pick, top, left, flip_rows, flip_cols = torch.rand(5, generator=rng, device=device).tolist()
    # int(u * n) < n for u < 1 in float32 and n < 2^24.
    texture = bank[int(pick * len(bank))]
    top, left = int(top * (side - height + 1)), int(left * (side - width + 1))
    crop = texture[None, top : top + height, left : left + width]
    flips = [dim for dim, u in ((-2, flip_rows), (-1, flip_cols)) if u < 0.5]
    return crop.flip(flips) if flips else crop


def _frost_side(height: int, width: int) -> int:
    # Textures a tenth larger than the image's longer side (the reference scales its photos
    # to 1.1 times the image), on a 64-pixel grid so that nearby sizes share a bank.
    return 64 * math.ceil(1.1 * max(height, width) / 64)


@functools.lru_cache(maxsize=4)
def _frost_bank(side: int, device: torch.device) -> torch.Tensor:
    # (FROST_TEXTURES, side, side) uint8. Built on the CPU with CPU generators, so every
    # device gets the same bank; a copy per device is cached besides.
    if device.type != "cpu":
        return _frost_bank(side, torch.device("cpu")).to(device)
    textures = [
        _frost_one(torch.Generator().manual_seed(_FROST_BANK_SEED + k), side, side, None, side / 1.1)
        for k in range(FROST_TEXTURES)
    ]
    return (torch.stack(textures) * 255).round_().to(torch.uint8)


def _frost_one(
    rng: torch.Generator, height: int, width: int, device: torch.device | None, scale: float
) -> torch.Tensor:
    # One texture; its crystals are sized for an image whose longer side is ``scale``.
    def uniform(*shape: int) -> torch.Tensor:
        return torch.rand(shape, generator=rng, device=device)

    def direction(angle: torch.Tensor) -> torch.Tensor:
        return torch.stack([torch.cos(angle), torch.sin(angle)], dim=-1)

    side = max(height, width)
    haze = plasma_one(next_power_of_two(side), 1.6, rng, device)[:height, :width].float()

    crystals, branches = max(4, round(height * width / 400)), 6
    origin = uniform(crystals, 2) * torch.tensor([width, height], dtype=torch.float32, device=device)
    angle = uniform(crystals) * math.pi
    arm = scale * (0.015 + 0.06 * uniform(crystals))  # half the spine
    brightness = 0.55 + 0.45 * uniform(crystals)
    # Side branches leave the spine at +/-60 degrees, shorter towards the spine's tips.
    along = (uniform(crystals, branches) * 2 - 1) * arm[:, None]
    turn = torch.where(uniform(crystals, branches) < 0.5, -math.pi / 3, math.pi / 3)
    reach = arm[:, None] * (0.3 + 0.6 * uniform(crystals, branches)) * (1 - along.abs() / (arm[:, None] + 1e-6))

    spine = direction(angle)
    canvas = torch.zeros(height * width, device=device)
    # Each spine is two arms growing out of its centre in opposite directions.
    _draw_strokes(canvas, origin.repeat(2, 1), torch.cat([spine, -spine]), arm.repeat(2), brightness.repeat(2), width)
    _draw_strokes(
        canvas,
        (origin[:, None] + spine[:, None] * along[..., None]).flatten(0, 1),
        direction(angle[:, None] + turn).flatten(0, 1),
        reach.flatten(),
        (0.8 * brightness[:, None]).expand(-1, branches).flatten(),
        width,
    )
    strokes = canvas.view(height, width)

    crisp = gaussian_filter(strokes, 0.6, Border.REFLECT)
    glow = gaussian_filter(strokes, 2.5, Border.REFLECT)
    texture = (1.5 * crisp + 1.5 * glow).clamp(0.0, 1.0)
    grain = gaussian_filter(uniform(height, width), 0.8, Border.REFLECT) - 0.5
    return (0.16 + 0.36 * haze + texture * (0.4 + 0.5 * haze) + 0.25 * grain).clamp(0.0, 1.0)


def _draw_strokes(
    canvas: torch.Tensor,
    starts: torch.Tensor,
    directions: torch.Tensor,
    lengths: torch.Tensor,
    levels: torch.Tensor,
    width: int,
) -> None:
    # Points every half pixel along each stroke, fading to the tip; overlaps keep the maximum,
    # which is exact and order-free, so the drawing is deterministic on every device.
    height = canvas.numel() // width
    points = int(math.ceil(2 * float(lengths.max()))) + 2
    t = torch.linspace(0, 1, points, device=starts.device)
    steps = lengths[:, None] * t  # (N, P)
    xi = torch.floor(starts[:, :1] + directions[:, :1] * steps + 0.5)
    yi = torch.floor(starts[:, 1:] + directions[:, 1:] * steps + 0.5)
    inside = (xi >= 0) & (xi < width) & (yi >= 0) & (yi < height)
    # Points off the canvas deposit 0 at a clamped pixel: a no-op under amax over a canvas >= 0.
    values = torch.where(inside, levels[:, None] * (1 - 0.5 * t), 0.0)
    index = yi.clamp_(0, height - 1).long() * width + xi.clamp_(0, width - 1).long()
    canvas.scatter_reduce_(0, index.flatten(), values.flatten(), reduce="amax")


def frost(images: torch.Tensor, params: FrostParams, rngs: Sequence[torch.Generator]) -> torch.Tensor:
    """ImageNet-C frost: ``clip(image_weight * x + frost_weight * frost)``, procedural frost.

    The frost is :func:`frost_layer`'s. Single-channel images get the frost's luma.

    Shape:
        images: ``(B, C, H, W)``; return: same.
    """
    height, width = images.shape[-2:]
    if images.shape[1] != 3:
        layer = luma(frost_layer(rngs, height, width, device=images.device).to(images.dtype))
        return (params.image_weight * images + params.frost_weight * layer).clamp_(0.0, 1.0)
    tint = torch.tensor(_FROST_TINT_RGB, dtype=torch.float64).view(3, 1, 1)
    colour = (params.frost_weight / 255 * tint).to(device=images.device, dtype=images.dtype)
    out = torch.empty_like(images, memory_format=torch.contiguous_format)
    # Image by image, straight into the output: the layer of the batch is never built.
    for image, rng, target in zip(images, rngs, out):
        torch.mul(_frost_crop(rng, height, width, images.device), colour, out=target)
        target.add_(image * params.image_weight).clamp_(0.0, 1.0)
    return out
