"""Convolution kernels and per-channel filtering with reflect-101 or edge-replicated borders."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

SMALL_IMAGE = 16384
"""Values per image (C x H x W) up to which filters work image by image with plain
elementwise sums: a multithreaded convolution or FFT costs more than it saves there, and
stalls badly when the CPU is shared. The choice depends on one image's size only, never on
the batch, so a sample takes the same path in any batch."""


def gaussian_kernel1d(size: int, sigma: float, device: torch.device | None = None) -> torch.Tensor:
    """A normalised 1-D Gaussian of odd ``size`` (OpenCV's ``getGaussianKernel`` for sigma > 0).

    Shape:
        return: ``(size,)``, float64.
    """
    offsets = torch.arange(size, dtype=torch.float64, device=device) - (size - 1) / 2
    kernel = torch.exp(-(offsets**2) / (2 * sigma**2))
    return kernel / kernel.sum()


def disk_kernel(radius: float, alias_blur: float) -> torch.Tensor:
    """The defocus kernel of ImageNet-C: an aliased disk softened by a small Gaussian.

    The support is 17x17 up to radius 8 and ``2 * radius + 1`` beyond, softened with a 3x3
    (5x5 beyond radius 8) Gaussian of sigma ``alias_blur`` under reflect-101 borders, as in
    the reference implementation.

    Shape:
        return: ``(K, K)``, float64, sums to 1.
    """
    half = 8 if radius <= 8 else int(radius)
    soften = 3 if radius <= 8 else 5
    axis = torch.arange(-half, half + 1, dtype=torch.float64)
    y, x = torch.meshgrid(axis, axis, indexing="ij")
    disk = (x**2 + y**2 <= radius**2).to(torch.float64)
    disk /= disk.sum()
    g = gaussian_kernel1d(soften, alias_blur)
    return separable_filter(disk[None, None], g, g)[0, 0]


def separable_filter(images: torch.Tensor, kernel_y: torch.Tensor, kernel_x: torch.Tensor) -> torch.Tensor:
    """Correlate every channel with ``kernel_y`` along H then ``kernel_x`` along W.

    Borders are reflect-101 (OpenCV's default, torch's ``"reflect"``).

    Shape:
        images: ``(B, C, H, W)``; kernels: ``(K,)``; return: same as images.
    """
    c = images.shape[1]
    ky, kx = kernel_y.to(images), kernel_x.to(images)
    py, px = ky.numel() // 2, kx.numel() // 2
    out = F.conv2d(_pad(images, (0, 0, py, py)), ky.view(1, 1, -1, 1).expand(c, 1, -1, 1), groups=c)
    return F.conv2d(_pad(out, (px, px, 0, 0)), kx.view(1, 1, 1, -1).expand(c, 1, 1, -1), groups=c)


def filter2d(images: torch.Tensor, kernel: torch.Tensor) -> torch.Tensor:
    """Correlate every channel with one 2-D ``kernel`` under reflect-101 borders.

    Large images go through the FFT, one image at a time (the same transform of the same
    data whatever the batch): on the CPU a direct 17x17 convolution costs several times
    more. Small ones take a depthwise convolution.

    Shape:
        images: ``(B, C, H, W)``; kernel: ``(K, K)`` with K odd; return: same as images.
    """
    c, h, w = images.shape[1:]
    pad = kernel.shape[-1] // 2
    if c * h * w <= SMALL_IMAGE:
        k = kernel.to(images)
        return F.conv2d(_pad(images, (pad, pad, pad, pad)), k.expand(c, 1, -1, -1), groups=c)
    # The padded image is correlated circularly on a 5-smooth size; the rows and columns
    # past the reflect-101 border are never read back, so they need no particular content.
    hp, wp = _fast_length(h + 2 * pad), _fast_length(w + 2 * pad)
    work = torch.float64 if images.dtype == torch.float64 else torch.float32
    # Correlation: output (y, x) reads input (y + a, x + b) with weight kernel[a, b], so the
    # kernel goes in flipped, wrapped around the origin.
    offsets = torch.arange(-pad, pad + 1)
    wrapped = torch.zeros(hp, wp, dtype=torch.float64)
    wrapped[((-offsets) % hp)[:, None], ((-offsets) % wp)[None, :]] = kernel.to(torch.float64).cpu()
    spectrum = torch.fft.rfft2(wrapped.to(device=images.device, dtype=work))
    out = torch.empty_like(images, memory_format=torch.contiguous_format)
    for image, target in zip(images, out):
        padded = pad_edges(image, (pad, wp - w - pad, pad, hp - h - pad), "reflect").to(work)
        product = torch.fft.rfft2(padded).mul_(spectrum)
        target.copy_(torch.fft.irfft2(product, s=(hp, wp))[:, pad : pad + h, pad : pad + w])
    return out


def _fast_length(n: int) -> int:
    # The smallest m >= n with no prime factor above 5 (fast FFT sizes).
    m = n
    while True:
        k = m
        for p in (2, 3, 5):
            while k % p == 0:
                k //= p
        if k == 1:
            return m
        m += 1


def _pad(images: torch.Tensor, pad: tuple[int, int, int, int]) -> torch.Tensor:
    # torch's reflect padding cannot exceed the image size; tiny images fall back to
    # edge replication, which is what reflection converges to on them anyway.
    left, right, top, bottom = pad
    h, w = images.shape[-2:]
    mode = "reflect" if max(left, right) < w and max(top, bottom) < h else "replicate"
    return F.pad(images, pad, mode=mode)


def pad_edges(images: torch.Tensor, pad: tuple[int, int, int, int], mode: str) -> torch.Tensor:
    """Pad the last two axes by ``(left, right, top, bottom)``, any width, even wider than the image.

    ``mode`` is ``"replicate"`` (scipy's ``"nearest"``: repeat the edge pixel) or
    ``"reflect"`` (reflect-101: mirror about the edge pixel, OpenCV's default border).

    Shape:
        images: ``(..., H, W)``; return: ``(..., H + top + bottom, W + left + right)``.
    """
    left, right, top, bottom = pad
    h, w = images.shape[-2:]
    fits = mode == "replicate" or (max(left, right) < w and max(top, bottom) < h)
    # F.pad is faster on large images, but always starts worker threads, which costs
    # milliseconds on a busy machine; index arithmetic also handles pads wider than the image.
    if fits and images.dim() in (3, 4) and images.numel() > SMALL_IMAGE:
        return F.pad(images, pad, mode=mode)
    rows = _border_index(h, top, bottom, mode, images.device)
    cols = _border_index(w, left, right, mode, images.device)
    return images.index_select(-2, rows).index_select(-1, cols)


def _border_index(n: int, before: int, after: int, mode: str, device: torch.device) -> torch.Tensor:
    index = torch.arange(-before, n + after, device=device)
    if mode == "replicate" or n == 1:
        return index.clamp(0, n - 1)
    period = 2 * n - 2
    index = index.remainder(period)
    return torch.where(index >= n, period - index, index)


def truncated_gaussian_kernel1d(sigma: float, truncate: float = 4.0) -> torch.Tensor:
    """scipy.ndimage's Gaussian: radius ``int(truncate * sigma + 0.5)``, normalised to sum 1.

    Shape:
        return: ``(2 * radius + 1,)``, float64.
    """
    radius = int(truncate * sigma + 0.5)
    offsets = torch.arange(-radius, radius + 1, dtype=torch.float64)
    kernel = torch.exp(-0.5 / (sigma * sigma) * offsets**2)
    return kernel / kernel.sum()


def gaussian_blur(images: torch.Tensor, sigma: float, truncate: float = 4.0) -> torch.Tensor:
    """``skimage.filters.gaussian(image, sigma, channel_axis=-1)``: scipy's Gaussian, edge-replicated borders.

    Each channel is blurred over H and W only (truncate 4.0, mode ``"nearest"``).

    Shape:
        images: ``(B, C, H, W)``; return: same.
    """
    if sigma <= 0:
        return images.clone()
    if math.prod(images.shape[1:]) <= SMALL_IMAGE:
        weights = truncated_gaussian_kernel1d(sigma, truncate).tolist()
        # Image by image, so that no intermediate grows past torch's threading threshold.
        return torch.stack([_separable_shift_sum(image, weights) for image in images])
    kernel = truncated_gaussian_kernel1d(sigma, truncate).to(device=images.device, dtype=images.dtype)
    radius = kernel.numel() // 2
    c = images.shape[1]
    # Depthwise conv is far faster channels-last on CPU (about 7x at 512x512), and it stays
    # a per-pixel sum in a fixed order, so a sample's result does not depend on its batch.
    padded = pad_edges(images, (0, 0, radius, radius), "replicate").contiguous(memory_format=torch.channels_last)
    out = F.conv2d(padded, kernel.view(1, 1, -1, 1).expand(c, 1, -1, 1), groups=c)
    padded = pad_edges(out, (radius, radius, 0, 0), "replicate").contiguous(memory_format=torch.channels_last)
    out = F.conv2d(padded, kernel.view(1, 1, 1, -1).expand(c, 1, 1, -1), groups=c)
    return out.contiguous()


def _separable_shift_sum(images: torch.Tensor, weights: list[float]) -> torch.Tensor:
    # Weighted sums of shifted views, one multiply and one add per tap (never fused, so
    # every element rounds the same way wherever it sits in the tensor).
    radius = len(weights) // 2
    out = images
    for dim, pad in ((-2, (0, 0, radius, radius)), (-1, (radius, radius, 0, 0))):
        padded = pad_edges(out, pad, "replicate")
        n = out.shape[dim]
        acc = padded.narrow(dim, 0, n) * weights[0]
        for k in range(1, len(weights)):
            acc = acc + padded.narrow(dim, k, n) * weights[k]
        out = acc
    return out
