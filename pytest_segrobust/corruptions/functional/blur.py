"""Blurs after ImageNet-C (imagecorruptions 1.1.2), imgaug, and Kamann & Rother's PSF blur.

Kernels that differ per image (a random motion angle) are built on the host from numbers
drawn off that image's random stream and applied to that image alone; everything else is a
fixed, per-pixel computation, so a sample's output never depends on the rest of its batch.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from types import ModuleType

import numpy as np
import torch
import torch.nn.functional as F

from pytest_segrobust.corruptions.functional import compiled, opencv
from pytest_segrobust.corruptions.functional.filters import (
    Tap,
    compiled_shift_sum,
    fft_shift_sum,
    gaussian_blur,
    opencv_filter2d,
    shift_sum,
    taps_kernel,
)
from pytest_segrobust.corruptions.functional.padding import SMALL_IMAGE, Border
from pytest_segrobust.randomness.seeding import SampleStreams


def glass_blur(
    images: torch.Tensor, sigma: float, max_delta: int, iterations: int, streams: SampleStreams
) -> torch.Tensor:
    """ImageNet-C's frosted glass: blur, quantise to 8 bits, move pixels locally, blur again.

    Each pass reproduces the reference's loop exactly: a cursor visits rows
    ``H - max_delta`` down to ``max_delta + 1`` and, in each, columns ``W - max_delta`` down
    to ``max_delta + 1``, and exchanges the pixel under it with the one at a random offset
    in ``[-max_delta, max_delta)`` per axis (one offset per cursor position, drawn from the
    image's own stream, one draw per pass). The reference writes the exchange as a numpy tuple swap, which
    on a colour image's ``(3,)`` pixel views copies the neighbour over the pixel and leaves
    the neighbour as it was (:func:`chained_copy_sources`); on a single-channel image the
    pixels are scalars and really swap (:func:`chained_swap_sources`). Either way a pixel
    may move several times within a pass; both are resolved without a loop over pixels.

    Shape:
        images: ``(B, C, H, W)``; return: same.
    """
    h, w = images.shape[-2:]
    blurred = gaussian_blur(images, sigma)
    # The reference casts to uint8 here, truncating. A thousandth of a level keeps float
    # rounding noise on flat regions from dropping whole levels (the reference's float64
    # does that at random too).
    levels = blurred.mul_(255.0).add_(1e-3).clamp_(0.0, 255.0).to(torch.uint8).to(images.dtype) / 255.0
    span = 2 * max_delta
    # One draw per pixel codes both offsets, each uniform on [-max_delta, max_delta): code
    # k is (k // span, k % span) - max_delta, looked up rather than divided.
    grid = torch.arange(span, device=images.device) - max_delta
    decode = torch.stack(torch.meshgrid(grid, grid, indexing="ij"), dim=-1).view(span * span, 2)
    b, c = images.shape[:2]
    for _ in range(iterations):
        codes = streams.integers(0, span * span, (h, w))
        if c == 1:
            sources = chained_swap_sources(decode[codes].permute(0, 3, 1, 2), max_delta)
        else:
            sources = _copy_sources((decode[:, 0] * w + decode[:, 1])[codes.view(b, -1)], h, w, max_delta)
        levels = levels.reshape(b, c, h * w).gather(2, sources[:, None, :].expand(b, c, h * w)).view(b, c, h, w)
    return gaussian_blur(levels, sigma).clamp_(0.0, 1.0)


def local_shuffle(images: torch.Tensor, offsets: torch.Tensor, max_delta: int, swap: bool = False) -> torch.Tensor:
    """One pass of the reference's sequential local exchanges: copies, or with ``swap`` swaps.

    See :func:`chained_copy_sources` and :func:`chained_swap_sources`.

    Shape:
        images: ``(B, C, H, W)``; offsets: ``(B, 2, H, W)`` integer ``(dy, dx)``; return: same as images.
    """
    b, c, h, w = images.shape
    sources = (chained_swap_sources if swap else chained_copy_sources)(offsets, max_delta)
    index = sources[:, None, :].expand(b, c, h * w)
    return images.reshape(b, c, h * w).gather(2, index).reshape(b, c, h, w)


def chained_copy_sources(offsets: torch.Tensor, max_delta: int) -> torch.Tensor:
    """Where each pixel's value comes from after one pass of sequential local copies.

    The pass sets, in turn, every cursor position ``p`` (rows and columns
    ``max_delta + 1 .. size - max_delta``, visited in decreasing raster order) to the value
    then at ``q = p + offsets[p]``. If ``q`` is a cursor the pass has already visited (later
    in raster order), that is the value ``q`` was given, so ``p`` takes ``q``'s source;
    otherwise it is ``q``'s original value. The chains only run forwards in raster order,
    so following them a few vectorised steps resolves the pass exactly.

    Shape:
        offsets: ``(B, 2, H, W)`` integer ``(dy, dx)``, each in ``[-max_delta, max_delta)``;
        return: ``(B, H * W)`` int64 source index (row-major) of every pixel.
    """
    h, w = offsets.shape[-2:]
    steps = (offsets[:, 0].long() * w + offsets[:, 1].long()).flatten(1)
    return _copy_sources(steps, h, w, max_delta)


def _copy_sources(steps: torch.Tensor, height: int, width: int, max_delta: int) -> torch.Tensor:
    # chained_copy_sources from raster steps (B, H * W): dy * W + dx of every pixel's offset.
    b, n = steps.shape
    device = steps.device
    rows = torch.arange(height, device=device)
    cols = torch.arange(width, device=device)
    inside = (
        ((rows > max_delta) & (rows <= height - max_delta))[:, None]
        & ((cols > max_delta) & (cols <= width - max_delta))
    ).flatten()
    steps = torch.where(inside, steps, 0)
    target = torch.arange(n, device=device) + steps
    # A copy from a visited cursor (a later raster position) inherits that cursor's source.
    inherits = (steps > 0) & inside[target]
    sources = target.clone()
    # Chains are followed in global indices over the batch; they never leave their image.
    flat_target = (target + torch.arange(b, device=device)[:, None] * n).flatten()
    flat_inherits = inherits.flatten()
    flat_sources = sources.view(-1)
    pixel = torch.nonzero(flat_inherits)[:, 0]
    via = flat_target[pixel]
    while pixel.numel():
        onward = flat_inherits[via]
        done = torch.nonzero(~onward)[:, 0]
        flat_sources[pixel[done]] = target.view(-1)[via[done]]
        going = torch.nonzero(onward)[:, 0]
        pixel, via = pixel[going], flat_target[via[going]]
    return sources


def chained_swap_sources(offsets: torch.Tensor, max_delta: int) -> torch.Tensor:
    """Where each pixel's content comes from after one pass of sequential local swaps.

    The pass swaps, in turn, the contents of every cursor position ``p`` (rows and columns
    ``max_delta + 1 .. size - max_delta``, visited in decreasing raster order) and of
    ``p + offsets[p]``. Each content is traced back through the swaps that touched it: a
    position ``c`` is touched by its own cursor's swap and by those of the cursors whose
    offset ``o`` lands on it (cursor ``c - o``), at most one per offset, and the times of
    these swaps are ordered by the offset alone (lexicographically). One bit per offset
    records, for every position, which swaps touch it; each step of the trace then finds
    the latest earlier swap with a few elementwise operations. A content moves about twice
    per pass on average, so a pass costs a few vectorised sweeps and yields exactly the
    permutation of the sequential loop. Image by image: a sample's result never depends
    on its batch.

    Shape:
        offsets: ``(B, 2, H, W)`` integer ``(dy, dx)``, each in ``[-max_delta, max_delta)``;
        return: ``(B, H * W)`` int64 source index (row-major) of every pixel.
    """
    b, _, h, w = offsets.shape
    device = offsets.device
    span = 2 * max_delta
    rows = torch.arange(h, device=device)
    cols = torch.arange(w, device=device)
    inside = ((rows > max_delta) & (rows <= h - max_delta))[:, None] & ((cols > max_delta) & (cols <= w - max_delta))
    # Bit ``slot`` of a position's mask: a swap by the offset of that slot lands there;
    # slots are lexicographic in (dy, dx), and ``own`` (the zero offset) is the position's
    # own cursor swap. A cursor's swap is earlier than another's at the same position
    # exactly when its slot is lower.
    own = max_delta * span + max_delta
    grid = torch.arange(-max_delta, max_delta, device=device)
    slot_step = (grid[:, None] * w + grid[None, :]).flatten()  # raster step of each slot
    below = [(1 << k) - 1 if k < 64 else -1 for k in range(span * span + 1)]
    below = torch.tensor([v - (1 << 64) if v >= 1 << 63 else v for v in below], device=device)
    return torch.stack(
        [
            _trace_swaps(offsets[i, 0].long(), offsets[i, 1].long(), inside, max_delta, own, slot_step, below)
            for i in range(b)
        ]
    )


def _trace_swaps(
    dy: torch.Tensor,
    dx: torch.Tensor,
    inside: torch.Tensor,
    max_delta: int,
    own: int,
    slot_step: torch.Tensor,
    below: torch.Tensor,
) -> torch.Tensor:
    # One image of chained_swap_sources: dy, dx (H, W) offsets, inside (H, W) cursor positions.
    h, w = dy.shape
    n = h * w
    span = 2 * max_delta
    slot = ((dy + max_delta) * span + (dx + max_delta)).flatten()
    cursor = (inside & (slot.view(h, w) != own)).flatten()  # zero offsets are no-ops
    step = torch.where(cursor, (dy * w + dx).flatten(), 0)
    positions = torch.arange(n, device=dy.device)
    target = positions + step
    bit = torch.ones_like(slot) << slot  # slot 63 sets the sign bit: still one distinct bit
    moving = torch.nonzero(cursor)[:, 0]
    masks = torch.zeros(n, dtype=torch.long, device=dy.device)
    masks.index_add_(0, moving, torch.full_like(moving, 1 << own))
    masks.index_add_(0, target[moving], bit[moving])  # distinct bits: the sum is the union

    # A trace is a walk over swap events, each seen from one side: node 2p is cursor p's
    # swap seen from p (the content there came from p's target), node 2p + 1 the same swap
    # seen from the target (the content came from p). From each node the walk goes on to
    # the latest earlier swap at the position the content came from, or ends there.
    def node(at: torch.Tensor, latest: torch.Tensor) -> torch.Tensor:
        # The node of the swap of slot `latest` at position `at`; -1 for none.
        other = at - slot_step[latest.clamp(min=0)]
        return torch.where(latest < 0, -1, torch.where(latest == own, 2 * at, 2 * other + 1))

    # Seen from p, earlier swaps at the target have slots below p's offset; seen from the
    # target, earlier swaps at p have slots below p's own.
    after_own = node(target, _highest_bit(masks[target] & below[slot], span * span))
    after_incoming = node(positions, _highest_bit(masks & below[own], own))
    follow = torch.stack([after_own, after_incoming], dim=1).flatten()
    origin = torch.stack([target, positions], dim=1).flatten()

    sources = positions.clone()
    start = node(positions, _highest_bit(masks, span * span))
    active = torch.nonzero(start >= 0)[:, 0]
    current = start[active]
    while active.numel():
        following = follow[current]
        ended = following < 0
        sources[active[ended]] = origin[current[ended]]
        going = torch.nonzero(~ended)[:, 0]
        active, current = active[going], following[going]
    return sources


def _highest_bit(values: torch.Tensor, bits: int) -> torch.Tensor:
    # Index of the highest set bit among the low ``bits`` of each int64, -1 where none is
    # set: a 16-bit lookup table per 16-bit chunk, the highest non-zero chunk winning.
    table = _highest_bit_table(values.device)
    highest = table[values & 0xFFFF]
    for shift in range(16, bits, 16):
        chunk = (values >> shift) & 0xFFFF
        highest = torch.where(chunk != 0, table[chunk] + shift, highest)
    return highest


@functools.lru_cache(maxsize=4)
def _highest_bit_table(device: torch.device) -> torch.Tensor:
    # Entry v: the index of v's highest set bit, -1 for 0 (bit_length - 1 of 0..65535).
    table = torch.full((1 << 16,), -1, dtype=torch.long)
    for bit in range(16):
        table[1 << bit : 1 << (bit + 1)] = bit
    return table.to(device)


def motion_trail_taps(radius: int, sigma: float, angle_deg: float, height: int, width: int) -> list[Tap]:
    """ImageNet-C's motion-blur taps (imagecorruptions' ``_motion_blur``): a one-sided Gaussian trail.

    Tap ``i`` (``0 <= i < 2 * radius + 1``) shifts the image ``i`` steps along the angle,
    rounded as the reference does, with weight ``exp(-i^2 / (2 sigma^2))`` normalised over
    all taps. Like the reference, the trail stops (without renormalising) at the first
    shift as long as the image.

    Returns:
        ``(dy, dx, weight)`` per tap, in the reference's order.
    """
    size = 2 * radius + 1
    gauss = [math.exp(-(i**2) / (2 * sigma**2)) / (math.sqrt(2 * math.pi) * sigma) for i in range(size)]
    total = math.fsum(gauss)
    theta = math.radians(angle_deg)
    point = (size * math.sin(theta), size * math.cos(theta))
    hypot = math.hypot(point[0], point[1])
    taps = []
    for i in range(size):
        dy = -math.ceil((i * point[0]) / hypot - 0.5)
        dx = -math.ceil((i * point[1]) / hypot - 0.5)
        if abs(dy) >= height or abs(dx) >= width:
            break
        taps.append((dy, dx, gauss[i] / total))
    return taps


def motion_line_kernel(size: int, angle_deg: float, direction: float) -> torch.Tensor:
    """imgaug's ``MotionBlur`` kernel: a line through the centre, rotated, normalised.

    The vertical centre column holds ``linspace(d, 1 - d)`` with ``d = (direction + 1) / 2``
    (``direction`` 0: uniform weights; +-1: a ramp, the blur points one way), stored as
    uint8 the way imgaug does (truncated), rotated clockwise on screen by ``angle_deg``
    with bilinear interpolation about the kernel centre (rounded back to uint8), then
    normalised to sum 1. OpenCV snaps the interpolation to a 1/32-pixel grid; this does not.

    Shape:
        return: ``(size, size)``, float64.
    """
    # A few hundred entries: numpy on the host is much cheaper here than tensor ops.
    d = (min(max(direction, -1.0), 1.0) + 1.0) / 2.0
    ramp = np.linspace(d, 1.0 - d, num=size).astype(np.float32)
    line = np.zeros((size + 2, size + 2))  # a zero frame: reads outside the kernel give 0
    line[1:-1, 1 + size // 2] = np.floor(ramp * np.float32(255.0))
    centre = (size - 1) / 2
    y, x = np.meshgrid(np.arange(size) - centre, np.arange(size) - centre, indexing="ij")
    theta = math.radians(angle_deg)
    cos, sin = math.cos(theta), math.sin(theta)
    # Each output pixel reads the source point the forward rotation carried onto it.
    src_x = np.clip(cos * x + sin * y + centre, -1.0, size)
    src_y = np.clip(-sin * x + cos * y + centre, -1.0, size)
    x0, y0 = np.floor(src_x), np.floor(src_y)
    fx, fy = src_x - x0, src_y - y0
    x0, y0 = x0.astype(np.int64) + 1, y0.astype(np.int64) + 1
    x1, y1 = np.minimum(x0 + 1, size + 1), np.minimum(y0 + 1, size + 1)
    rotated = (
        line[y0, x0] * (1 - fx) * (1 - fy)
        + line[y0, x1] * fx * (1 - fy)
        + line[y1, x0] * (1 - fx) * fy
        + line[y1, x1] * fx * fy
    )
    rotated = np.floor(rotated + 0.5)
    return torch.from_numpy(rotated / rotated.sum())


def motion_blur(image: torch.Tensor, taps: Sequence[Tap], border: Border) -> torch.Tensor:
    """Correlate one image with a motion kernel's taps, reading beyond the frame from ``border``.

    ``Border.NEAREST`` is the reference trail's edge handling, ``Border.MIRROR`` OpenCV's
    ``filter2D`` default. Small images take :func:`~.filters.shift_sum`, or on the CPU with
    OpenCV installed its ``filter2D`` with the taps laid out as a dense kernel
    (:func:`~.filters.taps_kernel`), several times faster. Large float32 ones on the CPU
    with numba installed take :func:`~.filters.compiled_shift_sum` up to
    :data:`COMPILED_MOTION_MAX_TAPS` taps (:func:`~.filters.shift_sum`'s bits; every motion
    kernel of the catalogue has fewer); all others :func:`~.filters.fft_shift_sum` (a
    41-tap trail then costs what a 3-tap one does, and less than OpenCV's own DFT there).
    All agree within float rounding.

    Shape:
        image: ``(C, H, W)``, one image; return: same.
    """
    if image.numel() <= SMALL_IMAGE:
        cv2 = opencv.opencv_for(image)
        if cv2 is not None:
            return opencv_filter2d(cv2, image, taps_kernel(taps), border)
        return shift_sum(image, taps, border)
    if len(taps) <= COMPILED_MOTION_MAX_TAPS and (summed := compiled_shift_sum(image, taps, border)) is not None:
        return summed
    return fft_shift_sum(image[None], taps, border)[0]


COMPILED_MOTION_MAX_TAPS = 128
"""Motion kernels with up to this many taps are summed tap by tap on large CPU images where
numba is installed; the FFT's cost does not grow with the taps, the sums' does. Measured
interleaved at 512x512 (3 channels, one thread, a busy 2-core machine): the sums took 3.9,
6.6, 10.0 and 23.4 ms at 27, 64, 128 and 256 taps, the FFT 20 to 30 ms throughout; 128
leaves a margin (the catalogue's largest kernel, COCO-P's 25x25 line, has at most 59 taps)."""


def streak_blur(field: torch.Tensor, radius: int, sigma: float, angle_deg: float) -> torch.Tensor:
    """ImageNet-C's ``_motion_blur`` of a layer: its :func:`motion_trail_taps`, ``Border.NEAREST``.

    Always shifted sums (:func:`~.filters.shift_sum`), whatever the size, as the snow layers
    were made.

    Shape:
        field: ``(..., H, W)``; return: same.
    """
    height, width = field.shape[-2:]
    return shift_sum(field, motion_trail_taps(radius, sigma, angle_deg, height, width), Border.NEAREST)


def zoom_blur(images: torch.Tensor, factors: Sequence[float]) -> torch.Tensor:
    """ImageNet-C's zoom blur: the mean of the image and its centre zooms by each factor.

    A zoom crops the centre ``ceil(H / z)`` x ``ceil(W / z)``, scales it with scipy's
    ``zoom(order=1)`` (output ``i`` reads input ``i * (n_in - 1) / (n_out - 1)``,
    ``n_out = round(n_in * z)``: bilinear with aligned corners) and keeps the top-left
    ``H`` x ``W``, as imagecorruptions 1.1.2 does.

    On the CPU, float32 planes of at least :data:`COMPILED_ZOOM_MIN_PIXELS` pixels are
    zoomed by the compiled row blends of :mod:`.zoom_kernel` where numba and OpenCV are
    installed (about 3x less CPU than ``warpAffine``); otherwise, with OpenCV 5
    (:func:`~.opencv.opencv_warps_for`), by OpenCV's ``warpAffine`` with the same
    aligned-corner map. Both compute only the kept ``H`` x ``W``, within float rounding of
    the torch path (tested within 1e-6). The path depends only on the image's size, dtype
    and device and on what is installed, never on what ran before.

    Shape:
        images: ``(B, C, H, W)``; return: same.
    """
    h, w = images.shape[-2:]
    cv2 = opencv.opencv_for(images)
    kernel = _compiled_zoom() if cv2 is not None and images.dtype == torch.float32 else None
    if kernel is not None and h * w >= COMPILED_ZOOM_MIN_PIXELS:
        return _compiled_zoom_blur(cv2, kernel, images, factors)
    cv2 = opencv.opencv_warps_for(images)
    if cv2 is not None and opencv.fits_remap((h, w)):
        return _opencv_zoom_blur(cv2, images, factors)
    if images[0].numel() <= SMALL_IMAGE and images.shape[0] > 1:
        # Image by image, so that no tensor grows past torch's threading threshold.
        return torch.cat([zoom_blur(image[None], factors) for image in images])
    # torch's CPU bilinear kernel works channels-last: given (B, C, H, W) planes it copies the
    # input to channels-last and the output back on every call (three copies per zoom). One
    # conversion up front, crops that are channels-last views and one conversion at the end
    # run that same kernel on the same values, so the result is bit for bit the same.
    layout = torch.channels_last if images.device.type == "cpu" else torch.contiguous_format
    source = images.contiguous(memory_format=layout)
    out = torch.zeros_like(source)
    for factor in factors:
        crop_h, crop_w = math.ceil(h / factor), math.ceil(w / factor)
        top, left = (h - crop_h) // 2, (w - crop_w) // 2
        crop = source[:, :, top : top + crop_h, left : left + crop_w]
        size = (round(crop_h * factor), round(crop_w * factor))
        zoomed = F.interpolate(crop, size=size, mode="bilinear", align_corners=True)
        # A layer short of H x W (float corner cases only) adds into the top-left, as in the reference.
        rows, cols = min(h, size[0]), min(w, size[1])
        # In place on the view (``out[...] += x`` would also copy the view onto itself).
        out[:, :, :rows, :cols].add_(zoomed[:, :, :rows, :cols])
    return ((source + out) / (len(factors) + 1)).clamp_(0.0, 1.0).contiguous()


COMPILED_ZOOM_MIN_PIXELS = 128 * 128
"""Planes from this size on are zoomed by :mod:`.zoom_kernel` (smaller ones do not repay loading numba)."""


_compiled_zoom = compiled.loader("zoom_kernel")


def _compiled_zoom_blur(
    cv2: ModuleType, kernel: ModuleType, images: torch.Tensor, factors: Sequence[float]
) -> torch.Tensor:
    # zoom_blur plane by plane: the plane transposed once; per zoom, its crop's columns
    # resampled as rows of the transpose (blend_rows), transposed back by OpenCV, and its
    # rows resampled and added into the total (add_blended_rows). Scratch buffers are made
    # once per call and each pass writes into a contiguous view of them.
    h, w = images.shape[-2:]
    source = images.detach().contiguous()
    planes = source.view(-1, h, w)
    total = torch.zeros_like(planes)
    sources, totals = planes.numpy(), total.numpy()
    transposed = np.empty((w, h), dtype=np.float32)
    across_buffer = np.empty(h * w, dtype=np.float32)
    along_buffer = np.empty(h * w, dtype=np.float32)
    zooms = []
    for factor in factors:
        crop_h, crop_w = math.ceil(h / factor), math.ceil(w / factor)
        out_h, out_w = round(crop_h * factor), round(crop_w * factor)
        # torch's float32 scales: (n_in - 1) / (n_out - 1), 0 for one output sample.
        scale_y = np.float32((crop_h - 1) / (out_h - 1) if out_h > 1 else 0.0)
        scale_x = np.float32((crop_w - 1) / (out_w - 1) if out_w > 1 else 0.0)
        crop = (crop_h, crop_w, (h - crop_h) // 2, (w - crop_w) // 2)
        zooms.append((*crop, min(h, out_h), min(w, out_w), (out_h, out_w) == (crop_h, crop_w), scale_y, scale_x))
    for plane, plane_total in zip(sources, totals):
        cv2.transpose(plane, transposed)
        for crop_h, crop_w, top, left, rows, cols, identity, scale_y, scale_x in zooms:
            if identity:  # a zoom by 1: every sample lands on a pixel
                plane_total[:rows, :cols] += plane[top : top + rows, left : left + cols]
                continue
            across = across_buffer[: cols * crop_h].reshape(cols, crop_h)
            kernel.blend_rows(transposed, left, crop_w, top, crop_h, scale_x, across)
            along = along_buffer[: crop_h * cols].reshape(crop_h, cols)
            cv2.transpose(across, along)
            kernel.add_blended_rows(along, crop_h, cols, scale_y, plane_total[:rows])
    return total.add_(planes).div_(len(factors) + 1).clamp_(0.0, 1.0).view(images.shape)


def _opencv_zoom_blur(cv2: ModuleType, images: torch.Tensor, factors: Sequence[float]) -> torch.Tensor:
    # zoom_blur with each zoom an inverse affine map of the crop: output (x, y) reads
    # (x (n_in - 1) / (n_out - 1), y ...), F.interpolate's align_corners=True (scale 0 for
    # one output sample). The map never leaves the crop; replicating its edge keeps the
    # last sample's rounding from reading a zero.
    h, w = images.shape[-2:]
    source = images.detach().contiguous()
    planes = source.view(-1, h, w)
    total = torch.zeros_like(planes)
    layer = torch.empty_like(planes)
    for factor in factors:
        crop_h, crop_w = math.ceil(h / factor), math.ceil(w / factor)
        top, left = (h - crop_h) // 2, (w - crop_w) // 2
        out_h, out_w = round(crop_h * factor), round(crop_w * factor)
        rows, cols = min(h, out_h), min(w, out_w)
        if (out_h, out_w) == (crop_h, crop_w):  # a zoom by 1: every sample lands on a pixel
            total[:, :rows, :cols].add_(planes[:, top : top + rows, left : left + cols])
            continue
        scale_y = (crop_h - 1) / (out_h - 1) if out_h > 1 else 0.0
        scale_x = (crop_w - 1) / (out_w - 1) if out_w > 1 else 0.0
        matrix = np.array([[scale_x, 0.0, 0.0], [0.0, scale_y, 0.0]])
        zoomed = layer[:, :rows, :cols]
        for plane, target in zip(planes.numpy(), zoomed.numpy()):
            cv2.warpAffine(
                plane[top : top + crop_h, left : left + crop_w],
                matrix,
                (cols, rows),
                dst=target,
                flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP,
                borderMode=cv2.BORDER_REPLICATE,
            )
        total[:, :rows, :cols].add_(zoomed)
    return ((planes + total) / (len(factors) + 1)).clamp_(0.0, 1.0).view(images.shape)


def psf_blur(images: torch.Tensor, centre_sigma: float, corner_sigma: float, levels: int = 4) -> torch.Tensor:
    """Spatially varying Gaussian PSF: sharpest at the image centre, blurriest in the corners.

    The blur sigma grows with the squared distance from the centre (field curvature and
    astigmatism grow with the square of the field height), from ``centre_sigma`` to
    ``corner_sigma`` in the corners. The image is blurred at ``levels`` evenly spaced
    sigmas and each pixel blends the two levels that bracket its own sigma.

    Shape:
        images: ``(B, C, H, W)``; return: same.
    """
    h, w = images.shape[-2:]
    step = (corner_sigma - centre_sigma) / (levels - 1)
    blurred = [gaussian_blur(images, centre_sigma + k * step) for k in range(levels)]
    y = torch.arange(h, device=images.device, dtype=images.dtype) - (h - 1) / 2
    x = torch.arange(w, device=images.device, dtype=images.dtype) - (w - 1) / 2
    corner = max(((h - 1) / 2) ** 2 + ((w - 1) / 2) ** 2, 1e-12)
    position = (y[:, None] ** 2 + x[None, :] ** 2) / corner * (levels - 1)
    # Truncation is floor here (position >= 0), and unlike floor() never starts threads.
    lower = position.to(torch.int64).clamp_(max=levels - 2).to(position.dtype)
    upper_weight = position - lower
    out = torch.zeros_like(images)
    for k, level in enumerate(blurred):
        weight = torch.where(lower == k, 1 - upper_weight, 0.0) + torch.where(lower == k - 1, upper_weight, 0.0)
        out += level * weight
    return out.clamp_(0.0, 1.0)
