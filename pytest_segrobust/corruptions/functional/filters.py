"""Convolution kernels and per-channel filtering with reflect-101 borders."""

from __future__ import annotations

import torch
import torch.nn.functional as F


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

    Shape:
        images: ``(B, C, H, W)``; kernel: ``(K, K)`` with K odd; return: same as images.
    """
    c = images.shape[1]
    k = kernel.to(images)
    pad = k.shape[-1] // 2
    return F.conv2d(_pad(images, (pad, pad, pad, pad)), k.expand(c, 1, -1, -1), groups=c)


def _pad(images: torch.Tensor, pad: tuple[int, int, int, int]) -> torch.Tensor:
    # torch's reflect padding cannot exceed the image size; tiny images fall back to
    # edge replication, which is what reflection converges to on them anyway.
    left, right, top, bottom = pad
    h, w = images.shape[-2:]
    mode = "reflect" if max(left, right) < w and max(top, bottom) < h else "replicate"
    return F.pad(images, pad, mode=mode)
