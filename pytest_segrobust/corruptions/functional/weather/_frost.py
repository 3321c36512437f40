"""Frost: procedural ice crystals over a haze, with the statistics of ImageNet-C's frost photographs."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch

from pytest_segrobust.corruptions.functional.color import luma
from pytest_segrobust.corruptions.functional.filters import gaussian_filter
from pytest_segrobust.corruptions.functional.padding import Border
from pytest_segrobust.corruptions.functional.weather._fog import next_power_of_two, plasma_fractal
from pytest_segrobust.randomness.seeding import SampleStreams


@dataclass(frozen=True)
class FrostLook:
    """Statistics one frost texture is made to have: those of one of ImageNet-C's photographs.

    Measured on the photographs as the reference uses them (scaled by 1.1, RGB, ``[0, 1]``,
    each pixel weighted by how many of the reference's random 256 x 256 crops hold it); the
    photographs themselves are neither shipped nor copied. ``quantiles`` are the
    texture's brightness (mean of the channels) at probabilities :data:`_QUANTILE_LEVELS`;
    ``mix`` weighs the haze, the crystals and the fine grain (each of unit spread) so that
    the texture's spatial spectrum has the photograph's share of coarse and fine detail.
    """

    mean_rgb: tuple[float, float, float]
    std_rgb: tuple[float, float, float]
    quantiles: tuple[float, ...]
    mix: tuple[float, float, float]


_QUANTILE_LEVELS = (0.0, 0.02, 0.1, 0.25, 0.5, 0.75, 0.9, 0.98, 1.0)
"""Probabilities of :attr:`FrostLook.quantiles`; the ends hold the 0.05% and 99.95% quantiles."""

# The reference draws ``randint(5)``: only its first five photographs are ever used, and
# the second and third have the same statistics (the same photograph, twice).
FROST_LOOKS = (
    FrostLook((0.302, 0.579, 0.643), (0.110, 0.064, 0.058),
              (0.356, 0.390, 0.424, 0.455, 0.499, 0.552, 0.609, 0.676, 0.774), (1.0, 0.35, 0.94)),
    FrostLook((0.776, 0.793, 0.829), (0.079, 0.082, 0.086),
              (0.387, 0.590, 0.689, 0.754, 0.813, 0.859, 0.892, 0.925, 0.965), (0.71, 1.0, 0.84)),
    FrostLook((0.776, 0.793, 0.829), (0.079, 0.082, 0.086),
              (0.387, 0.590, 0.689, 0.754, 0.813, 0.859, 0.892, 0.925, 0.965), (0.71, 1.0, 0.84)),
    FrostLook((0.569, 0.627, 0.678), (0.104, 0.104, 0.109),
              (0.203, 0.383, 0.494, 0.563, 0.630, 0.689, 0.745, 0.847, 0.987), (0.4, 0.62, 1.0)),
    FrostLook((0.395, 0.440, 0.486), (0.147, 0.145, 0.141),
              (0.125, 0.193, 0.263, 0.335, 0.426, 0.532, 0.631, 0.780, 0.979), (0.6, 1.0, 0.8)),
)

FROST_TEXTURES = len(FROST_LOOKS)
"""Frost textures in a bank, one per photograph the reference draws from."""

_FROST_BANK_SEED = 20_190_401
"""Seeds the bank's textures (``_FROST_BANK_SEED + k`` for texture ``k``): fixed, so the bank
is the same in every process, on every device, whatever the samples' seeds."""


def frost_layer(streams: SampleStreams, height: int, width: int) -> torch.Tensor:
    """Procedural frost with the statistics of ImageNet-C's frost photographs.

    Stands in for the photographs, which we neither ship nor copy, and is used the same
    way: a bank of :data:`FROST_TEXTURES` square RGB textures a tenth larger than the image
    and at least as large as the photographs (built once per size and device, from fixed
    seeds, and cached), of which each image takes one at random, flipped at random along
    either axis, and a random crop, all drawn from that image's stream (one draw of five uniforms). Texture ``k``
    has the brightness histogram, the per-channel mean and spread, and the coarse-to-fine
    balance of photograph ``k`` (see :class:`FrostLook`): a plasma haze, ice crystals
    (straight spines with side branches at +/-60 degrees, antialiased, with a soft glow)
    and a fine grain are mixed, the mix is given the photograph's brightness quantiles by
    rank, and each channel its mean and spread. Stored, like the photographs, with 8 bits.

    Shape:
        return: ``(B, 3, H, W)``, float32, on the streams' device.
    """
    draws = _frost_draws(streams)
    return torch.stack([_frost_crop(d, height, width, streams.device).float() / 255 for d in draws])


def _frost_draws(streams: SampleStreams) -> list[list[float]]:
    # Per image: which texture, the crop's top and left, and the two flips (one draw).
    return streams.uniform((5,)).tolist()


def _frost_crop(draws: list[float], height: int, width: int, device: torch.device) -> torch.Tensor:
    # One image's frost, uint8 (3, H, W): a texture of the bank, flips and crop offsets
    # given by the image's five uniforms.
    bank = _frost_bank(_frost_side(height, width), device)
    side = bank.shape[-1]
    pick, top, left, flip_rows, flip_cols = draws
    # int(u * n) < n for u < 1 in float32 and n < 2^24.
    texture = bank[int(pick * len(bank))]
    top, left = int(top * (side - height + 1)), int(left * (side - width + 1))
    crop = texture[:, top : top + height, left : left + width]
    flips = [dim for dim, u in ((-2, flip_rows), (-1, flip_cols)) if u < 0.5]
    return crop.flip(flips) if flips else crop


_FROST_MIN_SIDE = 640
"""The reference's photographs, scaled by 1.1 as it uses them, are 350 to 990 pixels a side:
a smaller image sees a crop of a larger frost texture, with less of its coarse variation."""


def _frost_side(height: int, width: int) -> int:
    # Textures a tenth larger than the image's longer side (the reference scales its photos
    # up to 1.1 times a larger image), and no smaller than the photographs; on a 64-pixel
    # grid so that nearby sizes share a bank.
    return max(_FROST_MIN_SIDE, 64 * math.ceil(1.1 * max(height, width) / 64))


@functools.lru_cache(maxsize=4)
def _frost_bank(side: int, device: torch.device) -> torch.Tensor:
    # (FROST_TEXTURES, 3, side, side) uint8. Built on the CPU from fixed Philox seeds, so
    # every device gets the same bank; a copy per device is cached besides.
    if device.type != "cpu":
        return _frost_bank(side, torch.device("cpu")).to(device)
    textures = [
        _styled(_frost_parts(SampleStreams([_FROST_BANK_SEED + k], "cpu"), side, side, side / 1.1), look)
        for k, look in enumerate(FROST_LOOKS)
    ]
    return (torch.stack(textures) * 255).round_().to(torch.uint8)


def _styled(parts: torch.Tensor, look: FrostLook) -> torch.Tensor:
    # (3, H, W) parts of unit spread -> (3, H, W) RGB texture in [0, 1] with the look's statistics.
    mix = torch.tensor(look.mix, dtype=torch.float32).view(3, 1, 1)
    field = (parts * mix).sum(0)
    # Rank -> probability -> the photograph's brightness quantile, linearly between levels.
    ranks = torch.empty_like(field).view(-1)
    ranks[field.flatten().argsort(stable=True)] = torch.linspace(0.0, 1.0, field.numel())
    levels = torch.tensor(_QUANTILE_LEVELS)
    upper = torch.searchsorted(levels, ranks.clamp(max=1.0 - 1e-7), right=True).clamp(1, len(levels) - 1)
    quantiles = torch.tensor(look.quantiles)
    low, high = levels[upper - 1], levels[upper]
    weight = (ranks - low) / (high - low)
    gray = (quantiles[upper - 1] * (1 - weight) + quantiles[upper] * weight).view_as(field)
    standard = (gray - gray.mean()) / gray.std().clamp(min=1e-6)
    mean = torch.tensor(look.mean_rgb).view(3, 1, 1)
    spread = torch.tensor(look.std_rgb).view(3, 1, 1)
    return (mean + spread * standard).clamp(0.0, 1.0)


def _frost_parts(streams: SampleStreams, height: int, width: int, scale: float) -> torch.Tensor:
    # A texture's parts, (3, H, W), each of zero mean and unit spread: haze, crystals, grain.
    # The crystals are sized for an image whose longer side is ``scale``. ``streams`` holds
    # the texture's one seed.
    device = streams.device

    def uniform(*shape: int) -> torch.Tensor:
        return streams.uniform(shape)[0]

    def direction(angle: torch.Tensor) -> torch.Tensor:
        return torch.stack([torch.cos(angle), torch.sin(angle)], dim=-1)

    side = max(height, width)
    haze = plasma_fractal(next_power_of_two(side), 1.6, streams)[0, :height, :width].float()

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
    # Crystals grow brighter where the haze is thick.
    ice = (1.5 * crisp + 1.5 * glow).clamp(0.0, 1.0) * (0.4 + 0.5 * haze)
    grain = gaussian_filter(uniform(height, width), 0.8, Border.REFLECT)
    parts = torch.stack([haze, ice, grain])
    centred = parts - parts.mean(dim=(1, 2), keepdim=True)
    return centred / centred.std(dim=(1, 2), keepdim=True).clamp(min=1e-6)


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
    points = math.ceil(2 * float(lengths.max())) + 2
    t = torch.linspace(0, 1, points, device=starts.device)
    steps = lengths[:, None] * t  # (N, P)
    xi = torch.floor(starts[:, :1] + directions[:, :1] * steps + 0.5)
    yi = torch.floor(starts[:, 1:] + directions[:, 1:] * steps + 0.5)
    inside = (xi >= 0) & (xi < width) & (yi >= 0) & (yi < height)
    # Points off the canvas deposit 0 at a clamped pixel: a no-op under amax over a canvas >= 0.
    values = torch.where(inside, levels[:, None] * (1 - 0.5 * t), 0.0)
    index = yi.clamp_(0, height - 1).long() * width + xi.clamp_(0, width - 1).long()
    canvas.scatter_reduce_(0, index.flatten(), values.flatten(), reduce="amax")


@dataclass(frozen=True)
class FrostParams:
    """Weights of the image and of the frost layer in their (unnormalised) sum."""

    image_weight: float
    frost_weight: float


def frost(images: torch.Tensor, params: FrostParams, streams: SampleStreams) -> torch.Tensor:
    """ImageNet-C frost: ``clip(image_weight * x + frost_weight * frost)``, procedural frost.

    The frost is :func:`frost_layer`'s. Single-channel images get the frost's luma.

    Shape:
        images: ``(B, C, H, W)``; return: same.
    """
    height, width = images.shape[-2:]
    if images.shape[1] != 3:
        layer = luma(frost_layer(streams, height, width).to(images.dtype))
        return (params.image_weight * images + params.frost_weight * layer).clamp_(0.0, 1.0)
    scale = params.frost_weight / 255
    out = torch.empty_like(images, memory_format=torch.contiguous_format)
    # Image by image, straight into the output: the layer of the batch is never built.
    for image, draws, target in zip(images, _frost_draws(streams), out):
        torch.mul(_frost_crop(draws, height, width, images.device).to(images.dtype), scale, out=target)
        target.add_(image * params.image_weight).clamp_(0.0, 1.0)
    return out
