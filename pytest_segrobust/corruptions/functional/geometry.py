"""Sampling fields and resampling of images (bilinear) and labels (nearest).

Coordinates are pixel positions ``(x, y)`` with pixel centres at integers."""

from __future__ import annotations

import torch
import torch.nn.functional as F


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
