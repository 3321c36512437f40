"""Weather: fog, frost, snow and spatter layers, after ImageNet-C (imagecorruptions 1.1.2).

Each layer is drawn per sample from that sample's generator and built from that sample alone
(one small loop over the batch, never over pixels; frost crops a cached bank of fixed
textures), so a sample's layer is bitwise the same whatever batch it travels in. The image is then blended with its layer elementwise.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Literal

import torch
import torch.nn.functional as F

from pytest_segrobust.corruptions.functional.blur import motion_trail_taps
from pytest_segrobust.corruptions.functional.color import luma

BorderMode = Literal["nearest", "reflect", "mirror"]

# Spatter colours, 8-bit RGB. The reference's water colour is written as BGR (175, 238, 238)
# but added to an RGB image without swapping channels, so red gets 175 and green/blue 238:
# pale turquoise (#AFEEEE) in RGB. We add exactly that. Mud is added in RGB order as written.
_WATER_RGB = (175, 238, 238)
_MUD_RGB = (63, 42, 20)
# A cool white for the procedural frost: photos of window frost are slightly blue.
_FROST_TINT_RGB = (0.86, 0.94, 1.0)


# --------------------------------------------------------------------------- filters


def gaussian_filter(
    fields: torch.Tensor, sigma: float | tuple[float, float], truncate: float = 4.0, mode: BorderMode = "nearest"
) -> torch.Tensor:
    """``scipy.ndimage.gaussian_filter`` over the last two axes (what ``skimage.filters.gaussian`` runs).

    The kernel radius is ``int(truncate * sigma + 0.5)`` per axis. Border modes use scipy's
    names: ``"nearest"`` repeats the edge, ``"reflect"`` mirrors including the edge pixel
    (``d c b a | a b c d``), ``"mirror"`` mirrors about it (OpenCV's reflect-101).

    Shape:
        fields: ``(..., H, W)`` float; return: same shape and dtype.
    """
    sigma_y, sigma_x = (sigma, sigma) if isinstance(sigma, (int, float)) else sigma
    out = fields
    for dim, s in ((-2, float(sigma_y)), (-1, float(sigma_x))):
        radius = int(truncate * s + 0.5)
        if radius == 0:
            continue
        weights = [math.exp(-0.5 * k**2 / s**2) for k in range(-radius, radius + 1)]
        total = math.fsum(weights)
        padded = pad_axis(out, dim, radius, radius, mode)
        n = out.shape[dim]
        # A weighted sum of shifted views: elementwise, so exactly the same for a sample
        # whatever else is in the tensor, and faster than conv2d for one-channel maps.
        acc = padded.narrow(dim, 0, n) * (weights[0] / total)
        for k in range(1, 2 * radius + 1):
            acc.add_(padded.narrow(dim, k, n), alpha=weights[k] / total)
        out = acc
    return out


def pad_axis(fields: torch.Tensor, dim: int, before: int, after: int, mode: BorderMode) -> torch.Tensor:
    """Pad one axis by index arithmetic, so any pad width works, even wider than the axis.

    Shape:
        fields: any; return: ``fields`` with ``before + after`` more entries along ``dim``.
    """
    n = fields.shape[dim]
    index = torch.arange(-before, n + after, device=fields.device)
    if mode == "nearest" or n == 1:
        index = index.clamp(0, n - 1)
    elif mode == "reflect":
        index = index.remainder(2 * n)
        index = torch.where(index >= n, 2 * n - 1 - index, index)
    else:
        index = index.remainder(2 * n - 2)
        index = torch.where(index >= n, 2 * n - 2 - index, index)
    return fields.index_select(dim, index)


def _correlate3x3(field: torch.Tensor, kernel: tuple[tuple[float, ...], ...]) -> torch.Tensor:
    # OpenCV's filter2D with a 3x3 kernel under its default reflect-101 border, as shifted sums.
    height, width = field.shape[-2:]
    padded = pad_axis(pad_axis(field, -2, 1, 1, "mirror"), -1, 1, 1, "mirror")
    out = torch.zeros_like(field)
    for dy in range(3):
        for dx in range(3):
            if kernel[dy][dx] != 0:
                out.add_(padded[..., dy : dy + height, dx : dx + width], alpha=kernel[dy][dx])
    return out


_ONES3 = ((1.0,) * 3,) * 3


def _box3(field: torch.Tensor) -> torch.Tensor:
    # OpenCV's blur(ksize=(3, 3)): the sum first, then one scaling, so flat areas stay exact.
    return _correlate3x3(field, _ONES3) * (1 / 9)


def streak_blur(field: torch.Tensor, radius: int, sigma: float, angle_deg: float) -> torch.Tensor:
    """ImageNet-C's ``_motion_blur``: a one-sided Gaussian-weighted streak of shifted copies.

    Tap ``i`` (``0 <= i < 2 * radius + 1``, weight ``exp(-i^2 / (2 sigma^2))``, normalised) is
    the field shifted by ``(-ceil(i cos a - 0.5), -ceil(i sin a - 0.5))`` pixels with edge
    replication; taps stop, unrenormalised, once a shift leaves the frame, as in the reference.

    Shape:
        field: ``(..., H, W)``; return: same.
    """
    height, width = field.shape[-2:]
    # One definition of the reference's taps (shift rounding, weights, early stop) serves both.
    shifts = [(weight, dy, dx) for dy, dx, weight in motion_trail_taps(radius, sigma, angle_deg, height, width)]
    reach = max(max(abs(dy), abs(dx)) for _, dy, dx in shifts)
    padded = pad_axis(pad_axis(field, -2, reach, reach, "nearest"), -1, reach, reach, "nearest")
    blurred = torch.zeros_like(field)
    for weight, dy, dx in shifts:
        # Output (y, x) reads the source at (y - dy, x - dx), edges repeated.
        blurred += weight * padded[..., reach - dy : reach - dy + height, reach - dx : reach - dx + width]
    return blurred


# --------------------------------------------------------------------------- fog


def next_power_of_two(n: int) -> int:
    """The smallest power of two ``>= n`` (1 for ``n <= 1``)."""
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def plasma_fractal(
    mapsize: int, wibble_decay: float, rngs: Sequence[torch.Generator], device: torch.device | None = None
) -> torch.Tensor:
    """ImageNet-C's diamond-square height map, one per generator, normalised to ``[0, 1]``.

    Starting from a zero corner, each level sets square centres, then diamond centres, to the
    mean of their four (toroidally wrapped) neighbours plus ``wibble * U(-wibble, wibble)``
    noise — the reference multiplies the noise by ``wibble`` twice, so the amplitude of level
    ``k`` is ``100^2 / wibble_decay^(2k)`` — then halves the step and divides ``wibble`` by
    ``wibble_decay``, until the step drops below 2. Each level is one vectorised update.

    Shape:
        return: ``(B, mapsize, mapsize)``, float64.
    """
    if mapsize & (mapsize - 1):
        raise ValueError(f"mapsize must be a power of two, got {mapsize}")
    return torch.stack([_plasma_one(mapsize, wibble_decay, g, device) for g in rngs])


def _plasma_one(mapsize: int, wibble_decay: float, rng: torch.Generator, device: torch.device | None) -> torch.Tensor:
    heights = torch.zeros(mapsize, mapsize, dtype=torch.float64, device=device)
    step, wibble = mapsize, 100.0

    def wibbled_mean(total: torch.Tensor) -> torch.Tensor:
        noise = torch.rand(total.shape, generator=rng, dtype=torch.float64, device=device) * (2 * wibble) - wibble
        return total / 4 + wibble * noise

    while step >= 2:
        half = step // 2
        corners = heights[0::step, 0::step]
        square = corners + corners.roll(-1, 0)
        square = square + square.roll(-1, 1)
        heights[half::step, half::step] = wibbled_mean(square)
        centres = heights[half::step, half::step]
        corners = heights[0::step, 0::step]
        heights[0::step, half::step] = wibbled_mean(centres + centres.roll(1, 0) + corners + corners.roll(-1, 1))
        heights[half::step, 0::step] = wibbled_mean(centres + centres.roll(1, 1) + corners + corners.roll(-1, 0))
        step //= 2
        wibble /= wibble_decay
    heights -= heights.min()
    peak = heights.max()
    return heights / peak if peak > 0 else heights


def fog(images: torch.Tensor, strength: float, wibble_decay: float, rngs: Sequence[torch.Generator]) -> torch.Tensor:
    """ImageNet-C fog: add a plasma fractal, then rescale by the image's own maximum.

    ``out = clip((x + strength * plasma) * max(x) / (max(x) + strength))`` with one plasma
    layer per image (shared by its channels) cut from a power-of-two map.

    Shape:
        images: ``(B, C, H, W)``; return: same.
    """
    height, width = images.shape[-2:]
    mapsize = next_power_of_two(max(height, width))
    plasma = plasma_fractal(mapsize, wibble_decay, rngs, images.device)[:, None, :height, :width].to(images.dtype)
    peak = images.amax(dim=(1, 2, 3), keepdim=True)
    return ((images + strength * plasma) * (peak / (peak + strength))).clamp_(0.0, 1.0)


# --------------------------------------------------------------------------- frost


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
    haze = _plasma_one(next_power_of_two(side), 1.6, rng, device)[:height, :width].float()

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

    crisp = gaussian_filter(strokes, 0.6, mode="reflect")
    glow = gaussian_filter(strokes, 2.5, mode="reflect")
    texture = (1.5 * crisp + 1.5 * glow).clamp(0.0, 1.0)
    grain = gaussian_filter(uniform(height, width), 0.8, mode="reflect") - 0.5
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


def frost(
    images: torch.Tensor, image_weight: float, frost_weight: float, rngs: Sequence[torch.Generator]
) -> torch.Tensor:
    """ImageNet-C frost: ``clip(image_weight * x + frost_weight * frost)``, procedural frost.

    The frost is :func:`frost_layer`'s. Single-channel images get the frost's luma.

    Shape:
        images: ``(B, C, H, W)``; return: same.
    """
    height, width = images.shape[-2:]
    if images.shape[1] != 3:
        layer = luma(frost_layer(rngs, height, width, device=images.device).to(images.dtype))
        return (image_weight * images + frost_weight * layer).clamp_(0.0, 1.0)
    tint = torch.tensor(_FROST_TINT_RGB, dtype=torch.float64).view(3, 1, 1)
    colour = (frost_weight / 255 * tint).to(device=images.device, dtype=images.dtype)
    out = torch.empty_like(images, memory_format=torch.contiguous_format)
    # Image by image, straight into the output: the layer of the batch is never built.
    for image, rng, target in zip(images, rngs, out):
        torch.mul(_frost_crop(rng, height, width, images.device), colour, out=target)
        target.add_(image * image_weight).clamp_(0.0, 1.0)
    return out


# --------------------------------------------------------------------------- snow


def clipped_zoom(field: torch.Tensor, zoom: float) -> torch.Tensor:
    """ImageNet-C's ``clipped_zoom`` of one map: centre crop, linear upscale, top-left trim.

    The crop is ``ceil(H / zoom)`` by ``ceil(W / zoom)``; scipy's ``zoom(order=1)`` maps
    output index ``i`` to input ``i * (n_in - 1) / (n_out - 1)`` with
    ``n_out = round(n_in * zoom)``; the first ``H`` rows and ``W`` columns are kept.

    Shape:
        field: ``(H, W)``; return: same.
    """
    height, width = field.shape
    crop_h, crop_w = math.ceil(height / zoom), math.ceil(width / zoom)
    top, left = (height - crop_h) // 2, (width - crop_w) // 2
    crop = field[top : top + crop_h, left : left + crop_w]
    rows = _linear_resampler(crop_h, round(crop_h * zoom), height, field)
    cols = _linear_resampler(crop_w, round(crop_w * zoom), width, field)
    return rows @ crop @ cols.T


def _linear_resampler(n_in: int, n_out: int, keep: int, like: torch.Tensor) -> torch.Tensor:
    # Row i holds the linear-interpolation weights of output sample i over the inputs.
    scale = (n_in - 1) / (n_out - 1) if n_out > 1 else 1.0
    position = torch.arange(keep, dtype=torch.float64, device=like.device) * scale
    lower = position.floor().long().clamp(0, n_in - 1)
    upper = (lower + 1).clamp(max=n_in - 1)
    frac = position - lower
    weights = torch.zeros(keep, n_in, dtype=torch.float64, device=like.device)
    rows = torch.arange(keep, device=like.device)
    weights.index_put_((rows, lower), 1 - frac, accumulate=True)
    weights.index_put_((rows, upper), frac, accumulate=True)
    return weights.to(like.dtype)


def snow_layer(
    rng: torch.Generator,
    height: int,
    width: int,
    loc: float,
    scale: float,
    zoom: float,
    threshold: float,
    motion_radius: int,
    motion_sigma: float,
    device: torch.device | None = None,
) -> torch.Tensor:
    """One image's ImageNet-C snow layer: zoomed, thresholded Gaussian flakes, streaked.

    The streak angle is drawn from ``U(-135, -45)`` degrees after the flakes; the result is
    quantised to 8-bit steps like the reference.

    Shape:
        return: ``(H, W)``, float32.
    """
    flakes = torch.randn(height, width, generator=rng, device=device) * scale + loc
    flakes = clipped_zoom(flakes, zoom)
    flakes = torch.where(flakes < threshold, torch.zeros_like(flakes), flakes).clamp(0.0, 1.0)
    angle = float(torch.rand(1, generator=rng, dtype=torch.float64, device=device)) * 90 - 135
    streaks = streak_blur(flakes, motion_radius, motion_sigma, angle)
    return (streaks * 255).round() / 255


def snow(
    images: torch.Tensor,
    loc: float,
    scale: float,
    zoom: float,
    threshold: float,
    motion_radius: int,
    motion_sigma: float,
    blend: float,
    rngs: Sequence[torch.Generator],
) -> torch.Tensor:
    """ImageNet-C snow: whiten the scene towards ``1.5 * luma + 0.5``, add flakes twice.

    ``x' = blend * x + (1 - blend) * max(x, 1.5 * gray + 0.5)``, then
    ``clip(x' + snow + rot180(snow))``. Gray is ITU-R 601 luma (the image itself if it is
    not RGB).

    Shape:
        images: ``(B, C, H, W)``; return: same.
    """
    height, width = images.shape[-2:]
    layers = torch.stack(
        [
            snow_layer(g, height, width, loc, scale, zoom, threshold, motion_radius, motion_sigma, images.device)
            for g in rngs
        ]
    )[:, None].to(images.dtype)
    gray = luma(images) if images.shape[1] == 3 else images
    whitened = blend * images + (1 - blend) * torch.maximum(images, gray * 1.5 + 0.5)
    return (whitened + layers + layers.flip(-2, -1)).clamp_(0.0, 1.0)


# --------------------------------------------------------------------------- spatter


def _truncated_distance(edges: torch.Tensor, cap: int) -> torch.Tensor:
    # Exact Euclidean distance to the nearest edge pixel, capped: squared distance is
    # separable (min over rows of k^2 + column distance^2), and a cap bounds both windows.
    height, width = edges.shape
    far = float(2 * (cap + 1) ** 2)
    costs = torch.where(edges, 0.0, far)
    for dim, n in ((0, height), (1, width)):
        padded = F.pad(costs, (0, 0, cap, cap) if dim == 0 else (cap, cap), value=far)
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


_EMBOSS = ((-2.0, -1.0, 0.0), (-1.0, 1.0, 1.0), (0.0, 1.0, 2.0))


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
    padded = F.pad(wet[None, None].float(), (1, 1, 1, 1), mode="replicate")[0, 0]
    dry_neighbour = (padded[:-2, 1:-1] + padded[2:, 1:-1] + padded[1:-1, :-2] + padded[1:-1, 2:]) < 4
    edges = wet & dry_neighbour
    distance = _box3(_truncated_distance(edges, cap=20)).floor()
    equalised = _equalize_hist(distance)
    embossed = _correlate3x3(equalised, _EMBOSS).round().clamp(0, 255)
    return _box3(embossed)


def spatter_layer(
    rng: torch.Generator,
    height: int,
    width: int,
    loc: float,
    scale: float,
    sigma: float,
    threshold: float,
    intensity: float,
    liquid: Literal["water", "mud"],
    device: torch.device | None = None,
) -> torch.Tensor:
    """One image's spatter opacity: water drops (shaded relief) or mud splashes.

    Water: ``liquid * shading``, normalised to its maximum, times ``intensity``. Mud: the
    liquid mask blurred by sigma ``intensity`` and cut below 0.8.

    Shape:
        return: ``(H, W)``, float32.
    """
    layer = torch.randn(height, width, generator=rng, device=device) * scale + loc
    layer = gaussian_filter(layer, sigma, mode="nearest")
    layer = torch.where(layer < threshold, torch.zeros_like(layer), layer)
    if liquid == "water":
        # The reference casts to uint8 (truncation); values above 1 would wrap there, we saturate.
        wet = (layer * 255).floor().clamp(0, 255)
        opacity = wet * water_shading(wet)
        peak = opacity.max()
        return opacity / peak * intensity if peak > 0 else opacity
    mask = (layer > threshold).float()
    mask = gaussian_filter(mask, intensity, mode="nearest")
    return torch.where(mask < 0.8, torch.zeros_like(mask), mask)


def spatter(
    images: torch.Tensor,
    loc: float,
    scale: float,
    sigma: float,
    threshold: float,
    intensity: float,
    liquid: Literal["water", "mud"],
    rngs: Sequence[torch.Generator],
) -> torch.Tensor:
    """ImageNet-C spatter: add pale-turquoise water, or paint mud brown over the image.

    Water: ``clip(x + m * (175, 238, 238) / 255)``. Mud: ``clip(x * (1 - m) + m * (63, 42, 20) / 255)``.
    Single-channel images get the colour's luma.

    Shape:
        images: ``(B, C, H, W)``; return: same.
    """
    height, width = images.shape[-2:]
    opacity = torch.stack(
        [
            spatter_layer(g, height, width, loc, scale, sigma, threshold, intensity, liquid, images.device)
            for g in rngs
        ]
    )[:, None].to(images.dtype)
    rgb = _WATER_RGB if liquid == "water" else _MUD_RGB
    colour = torch.tensor(rgb, dtype=images.dtype, device=images.device).view(1, 3, 1, 1) / 255
    if images.shape[1] != 3:
        colour = luma(colour)
    if liquid == "water":
        return (images + opacity * colour).clamp_(0.0, 1.0)
    return (images * (1 - opacity) + opacity * colour).clamp_(0.0, 1.0)
