"""Snow: ImageNet-C's zoomed, thresholded and streaked flakes over a whitened scene."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch

from pytest_segrobust.corruptions.functional.blur import streak_blur
from pytest_segrobust.corruptions.functional.color import luma
from pytest_segrobust.corruptions.functional.precision import ieee_float32
from pytest_segrobust.corruptions.functional.weather._threshold import zero_below
from pytest_segrobust.randomness.seeding import SampleStreams


@dataclass(frozen=True)
class SnowParams:
    """Flake field ``N(loc, scale)``, its zoom and cut-off, streak blur, and scene whitening.

    ``blend`` is the weight kept by the original scene against its whitened version.
    """

    loc: float
    scale: float
    zoom: float
    threshold: float
    motion_radius: int
    motion_sigma: float
    blend: float


def clipped_zoom(field: torch.Tensor, zoom: float, trim: bool = True) -> torch.Tensor:
    """ImageNet-C's ``clipped_zoom`` of one map: centre crop, linear upscale, top-left trim.

    The crop is ``ceil(H / zoom)`` by ``ceil(W / zoom)``; scipy's ``zoom(order=1)`` maps
    output index ``i`` to input ``i * (n_in - 1) / (n_out - 1)`` with
    ``n_out = round(n_in * zoom)``; the first ``H`` rows and ``W`` columns are kept, or,
    with ``trim=False``, the whole upscaled crop (the reference's snow trims it only after
    the streak blur).

    Shape:
        field: ``(H, W)``; return: same, or at least that (``round(ceil(H / zoom) * zoom)`` rows) untrimmed.
    """
    height, width = field.shape
    return _upscale_crop(field[_centre_crop(height, width, zoom)], height, width, zoom, trim)


def _centre_crop(height: int, width: int, zoom: float) -> tuple[slice, slice]:
    # The rows and columns of an H x W map that clipped_zoom reads.
    crop_h, crop_w = math.ceil(height / zoom), math.ceil(width / zoom)
    top, left = (height - crop_h) // 2, (width - crop_w) // 2
    return slice(top, top + crop_h), slice(left, left + crop_w)


def _upscale_crop(crop: torch.Tensor, height: int, width: int, zoom: float, trim: bool) -> torch.Tensor:
    # clipped_zoom's upscale of its centre crop of an H x W map.
    crop_h, crop_w = crop.shape
    out_h, out_w = round(crop_h * zoom), round(crop_w * zoom)
    rows = _linear_resampler(crop_h, out_h, height if trim else max(out_h, height), crop.dtype, crop.device)
    cols = _linear_resampler(crop_w, out_w, width if trim else max(out_w, width), crop.dtype, crop.device)
    with ieee_float32(crop.device):  # no TF32 products, whatever the model runs with
        return rows @ crop @ cols.T


@functools.lru_cache(maxsize=32)
def _linear_resampler(n_in: int, n_out: int, keep: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    # Row i holds the linear-interpolation weights of output sample i over the inputs.
    # Cached (every layer of a run asks for the same few): callers only read it.
    scale = (n_in - 1) / (n_out - 1) if n_out > 1 else 1.0
    position = torch.arange(keep, dtype=torch.float64, device=device) * scale
    lower = position.floor().long().clamp(0, n_in - 1)
    upper = (lower + 1).clamp(max=n_in - 1)
    frac = position - lower
    weights = torch.zeros(keep, n_in, dtype=torch.float64, device=device)
    rows = torch.arange(keep, device=device)
    weights.index_put_((rows, lower), 1 - frac, accumulate=True)
    weights.index_put_((rows, upper), frac, accumulate=True)
    return weights.to(dtype)


def snow_layer(streams: SampleStreams, height: int, width: int, params: SnowParams) -> torch.Tensor:
    """Each image's ImageNet-C snow layer: zoomed, thresholded Gaussian flakes, streaked.

    The flakes (one normal draw) come before the streak angle (one uniform draw, mapped to
    ``U(-135, -45)`` degrees); each layer is then built from its image's draws alone. As in the
    reference, the streaks are blurred over the whole zoomed layer (which may overhang the
    image by a few pixels) and trimmed to ``H`` x ``W`` afterwards, so the blur's edge
    replication happens at the zoomed layer's border; the result is quantised to 8-bit
    steps like the reference. ``params.blend`` is not used here.

    Shape:
        return: ``(B, H, W)``, float32, on the streams' device.
    """
    p = params
    noise = streams.normal((height, width))
    angles = (streams.uniform((1,), dtype=torch.float64)[:, 0] * 90 - 135).tolist()
    crop = _centre_crop(height, width, p.zoom)
    layers = torch.empty(len(noise), height, width, dtype=noise.dtype, device=noise.device)
    for sample_noise, angle, layer in zip(noise, angles, layers):
        # Only the crop is ever read: the affine map of it alone gives the same values.
        flakes = _upscale_crop(sample_noise[crop] * p.scale + p.loc, height, width, p.zoom, trim=False)
        flakes = zero_below(flakes, p.threshold).clamp_(0.0, 1.0)
        streaks = streak_blur(flakes, p.motion_radius, p.motion_sigma, angle)[:height, :width]
        torch.mul(streaks, 255, out=layer).round_().div_(255)
    return layers


def snow(images: torch.Tensor, params: SnowParams, streams: SampleStreams) -> torch.Tensor:
    """ImageNet-C snow: whiten the scene towards ``1.5 * luma + 0.5``, add flakes twice.

    ``x' = blend * x + (1 - blend) * max(x, 1.5 * gray + 0.5)``, then
    ``clip(x' + snow + rot180(snow))``. Gray is ITU-R 601 luma (the image itself if it is
    not RGB).

    Shape:
        images: ``(B, C, H, W)``; return: same.
    """
    height, width = images.shape[-2:]
    layers = snow_layer(streams, height, width, params)
    layers = layers[:, None].to(images.dtype)
    gray = luma(images) if images.shape[1] == 3 else images
    blend = params.blend
    # blend * x + (1 - blend) * max(x, 1.5 * gray + 0.5) + snow + rot180(snow), each step
    # rounded as written, in place on two image-sized buffers.
    out = torch.maximum(images, gray.mul(1.5).add_(0.5)).mul_(1 - blend)
    out.add_(images * blend).add_(layers).add_(layers.flip(-2, -1))
    return out.clamp_(0.0, 1.0)
