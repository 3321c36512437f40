"""Blurs after ImageNet-C (imagecorruptions 1.1.2), imgaug, and Kamann & Rother's PSF blur.

Kernels that differ per image (a random motion angle) are built on the host from numbers
drawn off that image's generator and applied to that image alone; everything else is a
fixed, per-pixel computation, so a sample's output never depends on the rest of its batch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F

from pytest_segrobust.corruptions.functional.filters import Tap, fft_shift_sum, gaussian_blur, shift_sum
from pytest_segrobust.corruptions.functional.padding import SMALL_IMAGE, Border


def glass_blur(
    images: torch.Tensor, sigma: float, max_delta: int, iterations: int, rngs: Sequence[torch.Generator]
) -> torch.Tensor:
    """ImageNet-C's frosted glass: blur, quantise to 8 bits, shuffle pixels locally, blur again.

    The reference swaps pixels one at a time, bottom-right to top-left, each with a random
    neighbour; a sequential chain of swaps cannot be vectorised exactly. Here each pass
    replaces every pixel of the same region (rows and columns ``max_delta + 1`` to
    ``size - max_delta``) by the pixel at a random offset in ``[-max_delta, max_delta)``
    per axis, drawn from the image's own generator: the same local statistics, one gather
    per pass. Unlike a swap, a source pixel may be copied twice and another dropped.

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
    for _ in range(iterations):
        # One draw per pixel codes both offsets, each uniform on [-max_delta, max_delta).
        codes = torch.stack([torch.randint(0, span * span, (h, w), generator=g, device=images.device) for g in rngs])
        offsets = torch.stack([codes // span, codes % span], dim=1) - max_delta
        levels = local_shuffle(levels, offsets, max_delta)
    return gaussian_blur(levels, sigma).clamp_(0.0, 1.0)


def local_shuffle(images: torch.Tensor, offsets: torch.Tensor, max_delta: int) -> torch.Tensor:
    """Replace each interior pixel by the one at its ``(dy, dx)`` offset; the border band stays.

    The interior is where the reference swaps: rows ``max_delta + 1 .. H - max_delta`` and
    the same for columns, so every source lies inside the image.

    Shape:
        images: ``(B, C, H, W)``; offsets: ``(B, 2, H, W)`` integer; return: same as images.
    """
    b, c, h, w = images.shape
    rows = torch.arange(h, device=images.device)
    cols = torch.arange(w, device=images.device)
    inside = ((rows > max_delta) & (rows <= h - max_delta))[:, None] & ((cols > max_delta) & (cols <= w - max_delta))
    dy = torch.where(inside, offsets[:, 0], 0)
    dx = torch.where(inside, offsets[:, 1], 0)
    source = (rows[:, None] + dy) * w + (cols[None, :] + dx)
    index = source.reshape(b, 1, h * w).expand(b, c, h * w)
    return images.reshape(b, c, h * w).gather(2, index).reshape(b, c, h, w)


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
    ``filter2D`` default. Small images take :func:`~.filters.shift_sum`, large ones
    :func:`~.filters.fft_shift_sum` (a 41-tap trail then costs what a 3-tap one does).

    Shape:
        image: ``(C, H, W)``, one image; return: same.
    """
    if image.numel() <= SMALL_IMAGE:
        return shift_sum(image, taps, border)
    return fft_shift_sum(image[None], taps, border)[0]


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

    Shape:
        images: ``(B, C, H, W)``; return: same.
    """
    h, w = images.shape[-2:]
    if images[0].numel() <= SMALL_IMAGE and images.shape[0] > 1:
        # Image by image, so that no tensor grows past torch's threading threshold.
        return torch.cat([zoom_blur(image[None], factors) for image in images])
    out = torch.zeros_like(images)
    for factor in factors:
        crop_h, crop_w = math.ceil(h / factor), math.ceil(w / factor)
        top, left = (h - crop_h) // 2, (w - crop_w) // 2
        crop = images[:, :, top : top + crop_h, left : left + crop_w]
        size = (round(crop_h * factor), round(crop_w * factor))
        zoomed = F.interpolate(crop, size=size, mode="bilinear", align_corners=True)
        # A layer short of H x W (float corner cases only) adds into the top-left, as in the reference.
        rows, cols = min(h, size[0]), min(w, size[1])
        out[:, :, :rows, :cols] += zoomed[:, :, :rows, :cols]
    return ((images + out) / (len(factors) + 1)).clamp_(0.0, 1.0)


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
