"""Real image codecs (round-trip through host memory) and resampling artefacts."""

from __future__ import annotations

import functools
import io

import numpy as np
import torch
from PIL import Image

from pytest_segrobust.corruptions.functional.color import to_uint8
from pytest_segrobust.corruptions.functional.filters import SMALL_IMAGE


def jpeg(images: torch.Tensor, quality: int) -> torch.Tensor:
    """Encode and decode each image as baseline JPEG with Pillow at ``quality``.

    Real codec, so it round-trips through host memory; the only corruption that does.

    Shape:
        images: ``(B, 3, H, W)``; return: same, quantised to multiples of 1/255.
    """
    host = to_uint8(images).permute(0, 2, 3, 1).cpu().numpy()
    decoded = []
    for pixels in host:
        buffer = io.BytesIO()
        Image.fromarray(pixels).save(buffer, format="JPEG", quality=quality)
        buffer.seek(0)
        decoded.append(np.asarray(Image.open(buffer).convert("RGB")))
    batch = torch.from_numpy(np.stack(decoded)).permute(0, 3, 1, 2)
    return batch.to(device=images.device, dtype=images.dtype) / 255.0


def pixelate(images: torch.Tensor, factor: float) -> torch.Tensor:
    """ImageNet-C's pixelate: Pillow ``BOX`` down to ``int(size * factor)``, ``NEAREST`` back up.

    Pillow's box filter averages, with equal weights, the source pixels whose centres fall
    in each output pixel's footprint; its nearest upscale reads source
    ``floor((i + 0.5) * in / out)``, accumulated step by step as Pillow does. The result
    equals Pillow's on 8-bit images to within one level (Pillow rounds between its two
    passes) and is not quantised.

    Shape:
        images: ``(B, C, H, W)``; return: same.
    """
    h, w = images.shape[-2:]
    small_h, small_w = max(int(h * factor), 1), max(int(w * factor), 1)
    # Pillow filters horizontally first; rows first is the same average, and shrinks the
    # image before the slower column pass.
    small = _box_average(images, *_box_windows(h, small_h), dim=-2)
    small = _box_average(small, *_box_windows(w, small_w), dim=-1)
    rows = torch.tensor(_nearest_index(small_h, h), device=images.device)
    cols = torch.tensor(_nearest_index(small_w, w), device=images.device)
    # Columns first, on the small image: gathers along the last axis are the slow ones.
    return _take_columns(small, cols).index_select(-2, rows)


def _take_columns(images: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    # Advanced indexing gathers columns faster than index_select on large images but
    # always starts worker threads, which costs milliseconds on small ones on a busy
    # machine. Both copy exactly the same values.
    return images[..., index] if images.numel() > SMALL_IMAGE else images.index_select(-1, index)


def _box_average(images: torch.Tensor, first: list[int], last: list[int], dim: int) -> torch.Tensor:
    # Sum the k-th pixel of every window for k = 0, 1, ...: a gather and an elementwise
    # product per k, so each sample is computed the same way whatever its batch. Windows
    # shorter than the longest repeat their first pixel with weight 0.
    start = torch.tensor(first, device=images.device)
    count = torch.tensor(last, device=images.device) - start + 1
    shape = (-1, 1) if dim == -2 else (-1,)
    weight = (1.0 / count.to(torch.float64)).to(images.dtype)

    def kth(k: int) -> torch.Tensor:
        index = torch.where(k < count, start + k, start)
        taken = images.index_select(-2, index) if dim == -2 else _take_columns(images, index)
        return taken * torch.where(k < count, weight, 0.0).view(shape)

    out = kth(0)
    for k in range(1, int(count.max())):
        out = out + kth(k)
    return out


@functools.lru_cache(maxsize=256)
def _box_windows(in_size: int, out_size: int) -> tuple[list[int], list[int]]:
    # Pillow's precompute_coeffs (Resample.c) with the box filter (support 0.5): output
    # pixel ``o`` averages the inputs whose weight box((x + 0.5 - centre) / scale) is 1,
    # always a contiguous run. Returns the first and last input of each run.
    scale = in_size / out_size
    filter_scale = max(scale, 1.0)
    support = 0.5 * filter_scale
    inverse = 1.0 / filter_scale
    firsts, lasts = [], []
    for out in range(out_size):
        centre = (out + 0.5) * scale
        lower = max(int(centre - support + 0.5), 0)
        upper = min(int(centre + support + 0.5), in_size)
        inside = [x for x in range(lower, upper) if -0.5 < (x - centre + 0.5) * inverse <= 0.5]
        firsts.append(inside[0])
        lasts.append(inside[-1])
    return firsts, lasts


@functools.lru_cache(maxsize=256)
def _nearest_index(in_size: int, out_size: int) -> list[int]:
    # Pillow's ImagingScaleAffine: the source position is accumulated step by step, not
    # multiplied out, and the last bit of that sum decides ties.
    step = in_size / out_size
    position = step * 0.5
    index = []
    for _ in range(out_size):
        index.append(min(int(position), in_size - 1))
        position += step
    return index
