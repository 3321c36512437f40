"""Real image codecs (round-trip through host memory) and resampling artefacts."""

from __future__ import annotations

import functools
import io
import os
from concurrent.futures import ThreadPoolExecutor
from types import ModuleType
from typing import IO

import numpy as np
import torch
from PIL import Image

from pytest_segrobust.core.opencv import opencv
from pytest_segrobust.corruptions.functional.color import to_uint8
from pytest_segrobust.corruptions.functional.padding import SMALL_IMAGE


def jpeg(images: torch.Tensor, quality: int) -> torch.Tensor:
    """Encode and decode each image as baseline JPEG at ``quality`` (4:2:0, libjpeg's tables).

    Real codec, so it round-trips through host memory; the only corruption that does.
    With OpenCV installed its ``imencode``/``imdecode`` code each image, otherwise Pillow
    does: both wrap libjpeg-turbo with the same defaults and give the same bytes and
    pixels (tested), OpenCV with less Python around it. Images go to the codec as three
    8-bit planes (interleaved and split again in C, far faster than a transposed copy) and
    are coded on up to ``torch.get_num_threads()`` threads: both codecs release the GIL
    while they code, and every image is coded alone, so the result does not depend on the
    threads or the batch.

    Shape:
        images: ``(B, 3, H, W)``; return: same, quantised to multiples of 1/255.
    """
    b, c, h, w = images.shape
    on_host = images.device.type == "cpu" and images.dtype in (torch.float32, torch.float64)
    if on_host:
        source = images.detach().numpy()
        out = torch.empty((b, c, h, w), dtype=images.dtype)
        target = out.numpy()
    else:
        source = np.ascontiguousarray(to_uint8(images).cpu().numpy())
        target = np.empty((b, c, h, w), dtype=np.uint8)
    cv2 = opencv()

    def code(i: int) -> None:
        planes = _quantise(source[i], cv2) if on_host else source[i]
        decoded = _jpeg_opencv(cv2, planes, quality) if cv2 is not None else _jpeg_pillow(planes, quality)
        for k, plane in enumerate(decoded):
            target[i, k] = plane  # exact: integers to float
        if on_host:
            target[i] /= 255.0  # the same IEEE division as torch's ``/ 255.0``

    workers = min(b, torch.get_num_threads())
    if workers > 1:
        # A pool per call: a pool kept across calls would not survive a fork (DataLoader workers).
        with ThreadPoolExecutor(max_workers=workers) as pool:
            list(pool.map(code, range(b)))
    else:
        for i in range(b):
            code(i)
    if on_host:
        return out
    return torch.from_numpy(target).to(device=images.device, dtype=images.dtype) / 255.0


def _jpeg_opencv(cv2: ModuleType, planes: np.ndarray | list[np.ndarray], quality: int) -> list[np.ndarray]:
    # OpenCV codes interleaved BGR: the planes go in reversed and come out reversed back.
    encoded = cv2.imencode(".jpg", cv2.merge([planes[2], planes[1], planes[0]]), (cv2.IMWRITE_JPEG_QUALITY, quality))[1]
    return cv2.split(cv2.imdecode(encoded, cv2.IMREAD_COLOR))[::-1]


def _jpeg_pillow(planes: np.ndarray | list[np.ndarray], quality: int) -> list[np.ndarray]:
    h, w = planes.shape[-2:]
    bands = [Image.frombuffer("L", (w, h), plane, "raw", "L", 0, 1) for plane in planes]
    with _scratch_file() as buffer:
        Image.merge("RGB", bands).save(buffer, format="JPEG", quality=quality)
        buffer.seek(0)
        result = Image.open(buffer)
        result.load()
    if result.mode != "RGB":
        result = result.convert("RGB")
    return [np.frombuffer(band.tobytes(), dtype=np.uint8).reshape(h, w) for band in result.split()]


def _scratch_file() -> IO[bytes]:
    # Pillow holds the GIL while it encodes into a Python buffer but releases it while it
    # writes to a real file descriptor, so the threads only code in parallel into a file:
    # an anonymous in-memory one where the OS has them. The bytes are the same either way.
    if hasattr(os, "memfd_create"):
        try:
            return os.fdopen(os.memfd_create("segrobust-jpeg", getattr(os, "MFD_CLOEXEC", 0)), "w+b")
        except OSError:
            pass
    return io.BytesIO()


def _quantise(image: np.ndarray, cv2: ModuleType | None = None) -> np.ndarray | list[np.ndarray]:
    # ``to_uint8`` on one image's planes: clip, scale, round half to even, cast. In numpy the
    # same IEEE operations in the same order, so the same bytes, without starting torch
    # threads. OpenCV's convertScaleAbs does it in one pass per plane where no value is
    # negative (it takes the absolute value of x * 255, rounds half to even in float32 and
    # saturates at 255: the same bytes, tested at every rounding boundary).
    if cv2 is not None and image.min() >= 0.0:
        return [cv2.convertScaleAbs(plane, alpha=255.0) for plane in image]
    scaled = np.clip(image, 0.0, 1.0)
    scaled *= 255.0
    np.round(scaled, out=scaled)
    return scaled.astype(np.uint8, order="C")


def pixelate(images: torch.Tensor, factor: float) -> torch.Tensor:
    """ImageNet-C's pixelate: Pillow ``BOX`` down to ``int(size * factor)``, ``NEAREST`` back up.

    Pillow's box filter averages, with equal weights, the source pixels whose centres fall
    in each output pixel's footprint; its nearest upscale reads source
    ``floor((i + 0.5) * in / out)``, accumulated step by step as Pillow does. The result
    equals Pillow's on 8-bit images to within one level (Pillow rounds between its two
    passes) and is not quantised.

    Where both sides shrink by whole ratios (``H / h`` and ``W / w`` integers, as at
    factors 0.5 and 0.25 of an even side), Pillow's windows are the aligned ``k`` x ``k``
    blocks, OpenCV's ``INTER_AREA`` averages exactly those, and CPU images go down through
    it (within float rounding: it sums a block, then scales once). At other ratios
    ``INTER_AREA`` weighs the pixels a window cuts by their covered fraction, which
    Pillow's box does not, so the box sums below stay.

    Shape:
        images: ``(B, C, H, W)``; return: same.
    """
    h, w = images.shape[-2:]
    small_h, small_w = max(int(h * factor), 1), max(int(w * factor), 1)
    cv2 = _opencv_area_for(images)
    if cv2 is not None and _aligned_blocks(h, small_h) and _aligned_blocks(w, small_w):
        small = _opencv_area(cv2, images, small_h, small_w)
    else:
        # Horizontally first, as Pillow does (and on the CPU the faster pass: it shrinks
        # the image before the rows are summed).
        small = _box_mean(images, w, small_w, dim=-1)
        small = _box_mean(small, h, small_h, dim=-2)
    rows = _nearest_index_tensor(small_h, h).to(images.device)
    cols = _nearest_index_tensor(small_w, w).to(images.device)
    # Columns first, on the short image; the rows are then whole-row copies.
    return _take_columns(small, cols).index_select(-2, rows)


def _opencv_area_for(images: torch.Tensor) -> ModuleType | None:
    """``cv2`` where it can shrink ``images``: installed, float32 or float64 on the CPU, no autograd."""
    if images.device.type != "cpu" or images.dtype not in (torch.float32, torch.float64) or images.requires_grad:
        return None
    return opencv()


@functools.lru_cache(maxsize=256)
def _aligned_blocks(in_size: int, out_size: int) -> bool:
    """Whether Pillow's box windows from ``in_size`` to ``out_size`` are the aligned blocks of ``in_size / out_size``."""
    if in_size % out_size:
        return False
    ratio = in_size // out_size
    first, last = _box_windows(in_size, out_size)
    return first == list(range(0, in_size, ratio)) and last == list(range(ratio - 1, in_size, ratio))


def _opencv_area(cv2: ModuleType, images: torch.Tensor, small_h: int, small_w: int) -> torch.Tensor:
    # INTER_AREA plane by plane, each written into its place in the output.
    h, w = images.shape[-2:]
    planes = images.detach().contiguous().view(-1, h, w)
    small = images.new_empty((*images.shape[:-2], small_h, small_w))
    for plane, target in zip(planes.numpy(), small.view(-1, small_h, small_w).numpy()):
        cv2.resize(plane, (small_w, small_h), dst=target, interpolation=cv2.INTER_AREA)
    return small


def _take_columns(images: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    # A gather with the index broadcast over the other axes takes columns several times
    # faster than index_select or advanced indexing on large images, but starts worker
    # threads, which costs milliseconds on small ones on a busy machine. All copy exactly
    # the same values.
    if images.numel() <= SMALL_IMAGE:
        return images.index_select(-1, index)
    return images.gather(-1, index.expand(*images.shape[:-1], -1))


def _box_mean(images: torch.Tensor, in_size: int, out_size: int, dim: int) -> torch.Tensor:
    # Pillow's box windows do not overlap, so on the CPU one index_add sums every window,
    # each output value accumulated serially in pixel order whatever the batch or the
    # threads, then scaled by 1 / its pixel count. Pixels that float rounding leaves out of
    # every window (Pillow drops them too) go to one extra output slot, cut off after. On
    # an accelerator index_add accumulates with atomics, in no fixed order: gathers there.
    first, last = _box_windows(in_size, out_size)
    if images.device.type != "cpu" or any(f <= previous for f, previous in zip(first[1:], last[:-1])):
        return _box_average(images, first, last, dim)
    segment, weight = _box_segments(in_size, out_size)
    shape = list(images.shape)
    shape[dim] = out_size + 1
    source = images.narrow(dim, first[0], last[-1] - first[0] + 1)
    sums = images.new_zeros(shape).index_add_(dim, segment, source).narrow(dim, 0, out_size)
    return sums.mul_(weight.to(images.dtype).view((-1, 1) if dim == -2 else (-1,)))


@functools.lru_cache(maxsize=256)
def _box_segments(in_size: int, out_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    # The window of each pixel from the first window's first pixel to the last one's last
    # (``out_size`` for pixels in none), and 1 / pixel count of each window, in float64.
    first, last = _box_windows(in_size, out_size)
    segment = torch.full((last[-1] - first[0] + 1,), out_size, dtype=torch.int64)
    for window, (lo, hi) in enumerate(zip(first, last)):
        segment[lo - first[0] : hi - first[0] + 1] = window
    count = torch.tensor(last) - torch.tensor(first) + 1
    return segment, 1.0 / count.to(torch.float64)


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
def _nearest_index_tensor(in_size: int, out_size: int) -> torch.Tensor:
    # Built once per size: a Python list of a few hundred indices costs more to convert
    # than the upscale that reads it.
    return torch.tensor(_nearest_index(in_size, out_size))


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
