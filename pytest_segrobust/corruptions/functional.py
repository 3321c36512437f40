"""Pure tensor operations behind the corruptions.

Every function works on a batch ``(B, C, H, W)`` of float images in ``[0, 1]`` on any
device and touches each sample independently, so a sample's output does not depend on the
rest of its batch. Randomness comes in as per-sample ``torch.Generator`` objects or as
tensors already drawn from them; these functions hold no random state of their own.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image

# ITU-R 601-2 luma, the weights PIL uses for ``convert("L")``.
_LUMA = (0.299, 0.587, 0.114)


def standard_normal_like(images: torch.Tensor, rngs: Sequence[torch.Generator]) -> torch.Tensor:
    """Draw one standard normal field per sample from that sample's generator.

    Shape:
        images: ``(B, C, H, W)``; return: same shape and dtype.
    """
    return torch.stack(
        [torch.randn(images.shape[1:], generator=g, device=images.device, dtype=images.dtype) for g in rngs]
    )


def uniform_like(images: torch.Tensor, rngs: Sequence[torch.Generator], channels: int | None = None) -> torch.Tensor:
    """Draw one ``U[0, 1)`` field per sample; ``channels`` overrides the channel count.

    Shape:
        images: ``(B, C, H, W)``; return: ``(B, channels or C, H, W)``.
    """
    _, c, h, w = images.shape
    shape = (channels if channels is not None else c, h, w)
    return torch.stack([torch.rand(shape, generator=g, device=images.device, dtype=images.dtype) for g in rngs])


def additive_gaussian_noise(images: torch.Tensor, noise: torch.Tensor, std: float) -> torch.Tensor:
    """Add ``std``-scaled standard normal ``noise`` and clip to ``[0, 1]``.

    Shape:
        images, noise: ``(B, C, H, W)``; return: same.
    """
    return (images + std * noise).clamp_(0.0, 1.0)


def shot_noise(images: torch.Tensor, photons: float, rngs: Sequence[torch.Generator]) -> torch.Tensor:
    """Poisson photon noise: ``poisson(x * photons) / photons``, clipped.

    Shape:
        images: ``(B, C, H, W)``; return: same.
    """
    rate = images * photons
    counts = torch.stack([torch.poisson(rate[i], generator=g) for i, g in enumerate(rngs)])
    return (counts / photons).clamp_(0.0, 1.0)


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


def to_uint8(images: torch.Tensor) -> torch.Tensor:
    """Round float images in ``[0, 1]`` to ``uint8``.

    Shape:
        images: any; return: same.
    """
    return (images.clamp(0.0, 1.0) * 255.0).round_().to(torch.uint8)


def luma(images: torch.Tensor) -> torch.Tensor:
    """ITU-R 601-2 luma of RGB images.

    Shape:
        images: ``(B, 3, H, W)``; return: ``(B, 1, H, W)``.
    """
    weights = torch.tensor(_LUMA, device=images.device, dtype=images.dtype).view(1, 3, 1, 1)
    return (images * weights).sum(dim=1, keepdim=True)


def enhance_contrast(images: torch.Tensor, factor: float) -> torch.Tensor:
    """PIL's ``ImageEnhance.Contrast``: blend with the mean grey level by ``factor``.

    Factors above 1 increase contrast; the mean is each image's own mean luma.

    Shape:
        images: ``(B, 3, H, W)``; return: same.
    """
    mean = luma(images).mean(dim=(1, 2, 3), keepdim=True)
    return (mean + factor * (images - mean)).clamp_(0.0, 1.0)


def rotation_about_centre(angles_deg: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """Inverse maps of rotations about the image centre, in pixel coordinates.

    The returned matrix takes an output pixel ``(x, y, 1)`` to the source location it is
    sampled from. Positive angles turn the content counter-clockwise on screen.

    Shape:
        angles_deg: ``(B,)``; return: ``(B, 2, 3)``, same dtype and device.
    """
    theta = torch.deg2rad(angles_deg)
    cos, sin = torch.cos(theta), torch.sin(theta)
    cx, cy = (width - 1) / 2, (height - 1) / 2
    # Rows are y-down, so a counter-clockwise turn on screen is a clockwise one in (x, y).
    matrix = torch.stack(
        [
            torch.stack([cos, -sin, cx - cos * cx + sin * cy], dim=-1),
            torch.stack([sin, cos, cy - sin * cx - cos * cy], dim=-1),
        ],
        dim=-2,
    )
    return matrix


def affine_coordinates(matrices: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """Source coordinates of every output pixel under per-sample affine inverse maps.

    Shape:
        matrices: ``(B, 2, 3)``; return: ``(B, H, W, 2)`` holding ``(x, y)`` in pixels,
        pixel centres at integers.
    """
    device, dtype = matrices.device, matrices.dtype
    ys, xs = torch.meshgrid(
        torch.arange(height, device=device, dtype=dtype),
        torch.arange(width, device=device, dtype=dtype),
        indexing="ij",
    )
    grid = torch.stack([xs, ys, torch.ones_like(xs)], dim=-1)  # (H, W, 3)
    return torch.einsum("bij,hwj->bhwi", matrices, grid)


def sample_bilinear(images: torch.Tensor, coords: torch.Tensor, fill: float = 0.0) -> torch.Tensor:
    """Resample images at pixel ``coords`` bilinearly; outside the frame becomes ``fill``.

    Shape:
        images: ``(B, C, H, W)``; coords: ``(B, H', W', 2)``; return: ``(B, C, H', W')``.
    """
    h, w = images.shape[-2:]
    grid = _normalise(coords, height=h, width=w).to(images.dtype)
    out = F.grid_sample(images - fill, grid, mode="bilinear", padding_mode="zeros", align_corners=False)
    return out + fill


def sample_nearest(labels: torch.Tensor, coords: torch.Tensor, fill: int) -> torch.Tensor:
    """Resample integer maps at pixel ``coords`` by nearest neighbour; outside is ``fill``.

    Works on label maps and stacked instance masks alike: values are copied, never mixed.

    Shape:
        labels: ``(B, H, W)`` or ``(B, N, H, W)``; coords: ``(B, H', W', 2)``;
        return: ``(B, H', W')`` or ``(B, N, H', W')``, dtype of ``labels``.
    """
    h, w = labels.shape[-2:]
    # floor(x + 0.5) rounds halves up, the same on every device.
    xi = torch.floor(coords[..., 0] + 0.5).long()
    yi = torch.floor(coords[..., 1] + 0.5).long()
    inside = (xi >= 0) & (xi < w) & (yi >= 0) & (yi < h)
    flat = (yi.clamp(0, h - 1) * w + xi.clamp(0, w - 1)).flatten(1)  # (B, H'W')
    squeeze = labels.dim() == 3
    source = labels.unsqueeze(1) if squeeze else labels
    index = flat[:, None, :].expand(-1, source.shape[1], -1)
    out = torch.gather(source.flatten(2), 2, index).view(*source.shape[:2], *coords.shape[1:3])
    out = torch.where(inside[:, None], out, torch.full_like(out, fill))
    return out[:, 0] if squeeze else out


def _normalise(coords: torch.Tensor, height: int, width: int) -> torch.Tensor:
    # grid_sample with align_corners=False puts -1 and +1 on the outer pixel edges.
    x = (2 * coords[..., 0] + 1) / width - 1
    y = (2 * coords[..., 1] + 1) / height - 1
    return torch.stack([x, y], dim=-1)


def random_signs(rngs: Sequence[torch.Generator], device: torch.device) -> torch.Tensor:
    """One random sign (+1 or -1) per sample, drawn from its generator.

    Shape:
        return: ``(B,)``, float32.
    """
    draws = torch.stack([torch.randint(0, 2, (1,), generator=g, device=device) for g in rngs])[:, 0]
    return draws.to(torch.float32) * 2 - 1


