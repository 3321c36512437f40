"""Spatter: ImageNet-C's water drops (with a shaded relief) or mud splashes on the lens."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import torch

from pytest_segrobust.corruptions.functional.color import luma
from pytest_segrobust.corruptions.functional.filters import gaussian_filter, kernel_taps, shift_sum
from pytest_segrobust.corruptions.functional.padding import Border, pad


@dataclass(frozen=True)
class SpatterParams:
    """Liquid field ``N(loc, scale)`` blurred by ``sigma`` and cut at ``threshold``.

    ``intensity`` is the peak opacity for water and the mask blur sigma for mud.
    """

    loc: float
    scale: float
    sigma: float
    threshold: float
    intensity: float
    liquid: Literal["water", "mud"]


# Spatter colours, 8-bit RGB. The reference's water colour is written as BGR (175, 238, 238)
# but added to an RGB image without swapping channels, so red gets 175 and green/blue 238:
# pale turquoise (#AFEEEE) in RGB. We add exactly that. Mud is added in RGB order as written.
_WATER_RGB = (175, 238, 238)
_MUD_RGB = (63, 42, 20)

# OpenCV's 3x3 kernels of the water relief, applied by filter2D/blur under their default
# border (Border.MIRROR); the fused sums are the ones the baselines were computed with.
_BOX3 = kernel_taps(torch.ones(3, 3, dtype=torch.float64))
_EMBOSS = kernel_taps(torch.tensor(((-2.0, -1.0, 0.0), (-1.0, 1.0, 1.0), (0.0, 1.0, 2.0)), dtype=torch.float64))


def _box3(field: torch.Tensor) -> torch.Tensor:
    # OpenCV's blur(ksize=(3, 3)): the sum first, then one scaling, so flat areas stay exact.
    return shift_sum(field, _BOX3, Border.MIRROR, fused=True) * (1 / 9)


def _truncated_distance(edges: torch.Tensor, cap: int) -> torch.Tensor:
    # Exact Euclidean distance to the nearest edge pixel, capped: squared distance is
    # separable (min over rows of k^2 + column distance^2), and a cap bounds both windows.
    height, width = edges.shape
    far = float(2 * (cap + 1) ** 2)
    costs = torch.where(edges, 0.0, far)
    for dim, n in ((0, height), (1, width)):
        padded = pad(costs, (0, 0, cap, cap) if dim == 0 else (cap, cap, 0, 0), Border.CONSTANT, value=far)
        best = torch.full_like(costs, far)
        for k in range(-cap, cap + 1):
            torch.minimum(best, padded.narrow(dim, cap + k, n) + k * k, out=best)
        costs = best
    return costs.sqrt().clamp_(max=cap)


def _equalize_hist(levels: torch.Tensor) -> torch.Tensor:
    # OpenCV's equalizeHist on 8-bit levels: the lowest occupied level maps to 0, level v to
    # round(255 * (pixels in (lowest, v]) / (pixels above the lowest level)).
    flat = levels.flatten().long()
    hist = torch.bincount(flat, minlength=256)
    lowest = int(torch.nonzero(hist)[0])
    total = flat.numel()
    if int(hist[lowest]) == total:
        return torch.full_like(levels, float(lowest))
    scale = torch.tensor(255.0 / (total - int(hist[lowest])), dtype=torch.float32)
    cumulative = hist.cumsum(0) - hist[: lowest + 1].sum()
    lut = (cumulative.float() * scale.to(levels.device)).round().clamp(0, 255)
    lut[: lowest + 1] = 0
    return lut[flat].view_as(levels).to(levels.dtype)


def water_shading(liquid: torch.Tensor) -> torch.Tensor:
    """The relief ImageNet-C paints on water drops, approximated without OpenCV.

    The reference takes Canny edges of the 8-bit liquid layer, a distance transform capped
    at 20, a 3x3 box blur, histogram equalisation, a 3x3 emboss kernel (saturated to 8 bit)
    and another box blur. All but the first step are reproduced exactly (the distance is the
    exact Euclidean one; OpenCV's 5x5 mask approximates it). Canny is replaced by the inner
    boundary of the liquid mask: the thresholded layer jumps from 0 to at least 0.65 there,
    far above Canny's thresholds, while the blurred interior stays below them.

    Shape:
        liquid: ``(H, W)`` thresholded liquid layer; return: ``(H, W)`` shading in ``[0, 255]``.
    """
    wet = liquid > 0
    padded = pad(wet.float(), (1, 1, 1, 1), Border.NEAREST)
    dry_neighbour = (padded[:-2, 1:-1] + padded[2:, 1:-1] + padded[1:-1, :-2] + padded[1:-1, 2:]) < 4
    edges = wet & dry_neighbour
    distance = _box3(_truncated_distance(edges, cap=20)).floor()
    equalised = _equalize_hist(distance)
    embossed = shift_sum(equalised, _EMBOSS, Border.MIRROR, fused=True).round().clamp(0, 255)
    return _box3(embossed)


def spatter_layer(
    rng: torch.Generator, height: int, width: int, params: SpatterParams, device: torch.device | None = None
) -> torch.Tensor:
    """One image's spatter opacity: water drops (shaded relief) or mud splashes.

    Water: ``liquid * shading``, normalised to its maximum, times ``intensity``. Mud: the
    liquid mask blurred by sigma ``intensity`` and cut below 0.8. Both Gaussians read
    ``Border.NEAREST`` beyond the frame, as scikit-image's ``gaussian`` does in the reference.

    Shape:
        return: ``(H, W)``, float32.
    """
    p = params
    layer = torch.randn(height, width, generator=rng, device=device) * p.scale + p.loc
    layer = gaussian_filter(layer, p.sigma, Border.NEAREST)
    layer = torch.where(layer < p.threshold, torch.zeros_like(layer), layer)
    if p.liquid == "water":
        # The reference casts to uint8 (truncation); values above 1 would wrap there, we saturate.
        wet = (layer * 255).floor().clamp(0, 255)
        opacity = wet * water_shading(wet)
        peak = opacity.max()
        return opacity / peak * p.intensity if peak > 0 else opacity
    mask = (layer > p.threshold).float()
    mask = gaussian_filter(mask, p.intensity, Border.NEAREST)
    return torch.where(mask < 0.8, torch.zeros_like(mask), mask)


def spatter(images: torch.Tensor, params: SpatterParams, rngs: Sequence[torch.Generator]) -> torch.Tensor:
    """ImageNet-C spatter: add pale-turquoise water, or paint mud brown over the image.

    Water: ``clip(x + m * (175, 238, 238) / 255)``. Mud: ``clip(x * (1 - m) + m * (63, 42, 20) / 255)``.
    Single-channel images get the colour's luma.

    Shape:
        images: ``(B, C, H, W)``; return: same.
    """
    height, width = images.shape[-2:]
    opacity = torch.stack([spatter_layer(g, height, width, params, images.device) for g in rngs])
    opacity = opacity[:, None].to(images.dtype)
    rgb = _WATER_RGB if params.liquid == "water" else _MUD_RGB
    colour = torch.tensor(rgb, dtype=images.dtype, device=images.device).view(1, 3, 1, 1) / 255
    if images.shape[1] != 3:
        colour = luma(colour)
    if params.liquid == "water":
        return (images + opacity * colour).clamp_(0.0, 1.0)
    return (images * (1 - opacity) + opacity * colour).clamp_(0.0, 1.0)
