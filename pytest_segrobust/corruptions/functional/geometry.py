"""Sampling fields and resampling of images (bilinear) and labels (nearest).

Coordinates are pixel positions ``(x, y)`` with pixel centres at integers."""

from __future__ import annotations

import math
from collections.abc import Callable
from types import ModuleType

import numpy as np
import torch
import torch.nn.functional as F

from pytest_segrobust.corruptions.functional import compiled, opencv
from pytest_segrobust.corruptions.functional.filters import gaussian_filter
from pytest_segrobust.corruptions.functional.padding import Border
from pytest_segrobust.randomness.seeding import SampleStreams


def rotation_about_centre(angles_deg: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """Inverse maps of rotations about the image centre, in pixel coordinates.

    The returned matrix takes an output pixel ``(x, y, 1)`` to the source location it is
    sampled from. Positive angles turn the content counter-clockwise on screen. Computed on
    the host in float64 (the same maps for every device), then cast to the angles' dtype.

    Shape:
        angles_deg: ``(B,)``; return: ``(B, 2, 3)``, same dtype and device.
    """
    cx, cy = (width - 1) / 2, (height - 1) / 2
    matrices = []
    for angle in angles_deg.tolist():
        theta = math.radians(angle)
        cos, sin = math.cos(theta), math.sin(theta)
        # Rows are y-down, so a counter-clockwise turn on screen is a clockwise one in (x, y).
        matrices.append([[cos, -sin, cx - cos * cx + sin * cy], [sin, cos, cy - sin * cx - cos * cy]])
    return _host_matrices(matrices, angles_deg)


def affine_coordinates(
    matrices: torch.Tensor, height: int, width: int, dtype: torch.dtype | None = None
) -> torch.Tensor:
    """Source coordinates of every output pixel under per-sample affine inverse maps.

    Each coordinate is ``m[0] * x + m[1] * y + m[2]``, summed in the matrices' dtype from a
    row of ``x`` terms and a column of ``y`` terms (no ``(H, W, 3)`` grid, no contraction)
    and rounded once to ``dtype`` (by default the matrices' own) as it is written out.
    Every value is computed on its own, so a sample's grid does not depend on its batch.

    Shape:
        matrices: ``(B, 2, 3)``; return: ``(B, H, W, 2)`` holding ``(x, y)`` in pixels,
        pixel centres at integers.
    """
    device, work = matrices.device, matrices.dtype
    xs = torch.arange(width, device=device, dtype=work)
    ys = torch.arange(height, device=device, dtype=work)
    out = torch.empty((len(matrices), height, width, 2), device=device, dtype=dtype or work)
    for axis in range(2):
        m = matrices[:, axis, :, None, None]  # (B, 3, 1, 1)
        out[..., axis].copy_((m[:, 0] * xs + m[:, 1] * ys[:, None]).add_(m[:, 2]))
    return out


def sample_bilinear(images: torch.Tensor, coords: torch.Tensor, fill: float = 0.0) -> torch.Tensor:
    """Resample images at pixel ``coords`` bilinearly; outside the frame becomes ``fill``.

    Each of the four neighbours outside the frame reads ``fill`` (``grid_sample``'s zero
    padding, shifted by ``fill``). On the CPU with OpenCV 5 (:func:`~.opencv.opencv_warps_for`)
    and float32 coordinates, OpenCV's ``remap`` samples every plane at the coordinates
    themselves, with the same weights and border, about twice as fast; ``grid_sample``
    recomputes each coordinate from its normalised form, so the two differ by float rounding
    (a few 1e-5 on [0, 1] images of 512 pixels).

    Shape:
        images: ``(B, C, H, W)``; coords: ``(B, H', W', 2)``; return: ``(B, C, H', W')``.
    """
    cv2 = opencv.opencv_warps_for(images) if coords.dtype == torch.float32 else None
    if cv2 is not None and opencv.fits_remap(images.shape[-2:]) and opencv.fits_remap(coords.shape[1:3]):
        return _opencv_remap(cv2, images, coords, fill)
    h, w = images.shape[-2:]
    grid = _normalise(coords, height=h, width=w).to(images.dtype)
    if fill == 0.0:  # the same values without two passes over the images
        return F.grid_sample(images, grid, mode="bilinear", padding_mode="zeros", align_corners=False)
    out = F.grid_sample(images - fill, grid, mode="bilinear", padding_mode="zeros", align_corners=False)
    return out + fill


def sample_affine_bilinear(
    images: torch.Tensor, matrices: torch.Tensor, coords: Callable[[], torch.Tensor], fill: float = 0.0
) -> torch.Tensor:
    """:func:`sample_bilinear` at the coordinates of per-sample inverse affine maps.

    ``coords()`` gives those coordinates (:func:`affine_coordinates` of ``matrices``, in
    float32); it is called only where they are needed. On the CPU with OpenCV 5
    (:func:`~.opencv.opencv_warps_for`) they are not: OpenCV's ``warpAffine`` applies the
    float64 maps itself, plane by plane, with the same weights and border, within float
    rounding of the coordinates (a few 1e-5 on [0, 1] images of 512 pixels); a map that
    shifts by whole pixels is a copy there (:func:`_shift_copy`, the same values), and one
    that keeps rows rows (an x-shear) blends each row's two neighbours with one weight per
    row where numba is installed (:mod:`.rows_kernel`, within the same rounding).

    Shape:
        images: ``(B, C, H, W)``; matrices: ``(B, 2, 3)``, output ``(x, y, 1)`` to source
        ``(x, y)``; coords: returns ``(B, H, W, 2)``; return: same as images.
    """
    cv2 = opencv.opencv_warps_for(images)
    if cv2 is None or not opencv.fits_remap(images.shape[-2:]):
        return sample_bilinear(images, coords(), fill)
    h, w = images.shape[-2:]
    # No autograd on the images here (opencv_warps_for): they are handed over as they are.
    source = images.contiguous().numpy()
    maps = matrices.detach().to(device="cpu", dtype=torch.float64).numpy()
    out = torch.empty_like(images, memory_format=torch.contiguous_format)
    target = out.numpy()
    rows = _compiled_rows_for(images)
    for i, matrix in enumerate(maps):
        if _shift_copy(source[i], matrix, fill, target[i]):
            continue
        if rows is not None and _shift_rows(rows, source[i], matrix, fill, target[i]):
            continue
        for channel in range(images.shape[1]):
            cv2.warpAffine(
                source[i, channel],
                matrix,
                (w, h),
                dst=target[i, channel],
                flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP,
                borderMode=cv2.BORDER_CONSTANT,
                borderValue=fill,
            )
    return out


def _shift_copy(image: np.ndarray, matrix: np.ndarray, fill: float, out: np.ndarray) -> bool:
    """Write ``image`` shifted by whole pixels into ``out`` if ``matrix`` is such a shift; say whether it was.

    Bilinear sampling at whole-pixel offsets reads each output pixel from one source pixel
    with weight 1 (and its neighbours with weight 0): a copy of the overlap, ``fill``
    elsewhere, which is what ``warpAffine`` computes for it, without computing any weights
    (integer translations: ``translate``'s every map). ``image``, ``out``: ``(C, H, W)``.
    """
    (a, b, shift_x), (c, d, shift_y) = matrix
    if (a, b, c, d) != (1.0, 0.0, 0.0, 1.0) or not (float(shift_x).is_integer() and float(shift_y).is_integer()):
        return False
    dx, dy = int(shift_x), int(shift_y)
    h, w = image.shape[-2:]
    # Output (x, y) reads (x + dx, y + dy): the overlap's rows and columns on both sides.
    top, bottom = max(0, -dy), min(h, h - dy)
    left, right = max(0, -dx), min(w, w - dx)
    out.fill(fill)
    if top < bottom and left < right:
        out[:, top:bottom, left:right] = image[:, top + dy : bottom + dy, left + dx : right + dx]
    return True


def _shift_rows(kernel: ModuleType, image: np.ndarray, matrix: np.ndarray, fill: float, out: np.ndarray) -> bool:
    """Warp ``image`` into ``out`` row by row if ``matrix`` keeps rows rows; say whether it did.

    That is ``(x, y) -> (x + b y + e, y + f)`` with a whole ``f``: each output row reads one
    source row shifted along itself (:func:`.rows_kernel.shift_rows_into`). ``image``,
    ``out``: ``(C, H, W)`` float32, contiguous.
    """
    (a, b, e), (c, d, f) = matrix
    if (a, c, d) != (1.0, 0.0, 1.0) or not float(f).is_integer():
        return False
    kernel.shift_rows_into(image, float(b), float(e), int(f), np.float32(fill), out)
    return True


COMPILED_ROWS_MIN_PIXELS = 128 * 128
"""Pixels per image from which an affine warp that keeps rows loads numba's loop (about 0.7 s
once per process, where it is not loaded yet): smaller images take ``warpAffine`` before it."""


def _compiled_rows_for(images: torch.Tensor) -> ModuleType | None:
    """:mod:`.rows_kernel` for float32 CPU ``images``, where numba is installed and loading it pays."""
    return compiled.if_it_pays(_compiled_rows, images.shape[-2] * images.shape[-1] >= COMPILED_ROWS_MIN_PIXELS)


_compiled_rows = compiled.loader("rows_kernel")


def _opencv_remap(cv2: ModuleType, images: torch.Tensor, coords: torch.Tensor, fill: float) -> torch.Tensor:
    # remap reads a (H', W', 2) float32 map of (x, y) with pixel centres at integers: our
    # coordinates as they are, a view per sample (of a field shared by the batch too). No
    # autograd on the images here (opencv_warps_for).
    b, c = images.shape[:2]
    source = images.contiguous().numpy()
    out = torch.empty((b, c, *coords.shape[1:3]), dtype=images.dtype)
    target = out.numpy()
    for i in range(b):
        grid = coords[i].detach().contiguous().numpy()
        if c in (3, 4):
            # The map read once for every channel, not once a plane: the planes interleaved
            # (cv2.merge), remapped as one image and split back into the output's planes.
            # OpenCV weighs each channel as it does a plane (the same values, tested), at
            # 8-10% less CPU. The border value is given for every channel.
            warped = cv2.remap(
                cv2.merge(list(source[i])),
                grid,
                None,
                cv2.INTER_LINEAR,
                borderMode=cv2.BORDER_CONSTANT,
                borderValue=(fill,) * 4,
            )
            planes = cv2.split(warped, list(target[i]))
            if planes[0].ctypes.data != target[i, 0].ctypes.data:  # not written in place after all
                target[i] = np.stack(planes)
            continue
        for channel in range(c):
            cv2.remap(
                source[i, channel],
                grid,
                None,
                cv2.INTER_LINEAR,
                dst=target[i, channel],
                borderMode=cv2.BORDER_CONSTANT,
                borderValue=fill,
            )
    return out


def sample_nearest(labels: torch.Tensor, coords: torch.Tensor, fill: int) -> torch.Tensor:
    """Resample integer maps at pixel ``coords`` by nearest neighbour; outside is ``fill``.

    Works on label maps and stacked instance masks alike: values are copied, never mixed.

    Shape:
        labels: ``(B, H, W)`` or ``(B, N, H, W)``; coords: ``(B, H', W', 2)``;
        return: ``(B, H', W')`` or ``(B, N, H', W')``, dtype of ``labels``.
    """
    h, w = labels.shape[-2:]
    squeeze = labels.dim() == 3
    source = labels.unsqueeze(1) if squeeze else labels
    kernel = _compiled_nearest_for(source, coords)
    if kernel is not None:
        out = torch.empty((*source.shape[:2], *coords.shape[1:3]), dtype=labels.dtype)
        grid = coords.detach().numpy()
        rows = np.empty(coords.shape[:3], dtype=np.int32)
        columns = np.empty_like(rows)
        kernel.source_pixels(grid, grid.dtype.type(0.5), h, w, rows, columns)
        # The fill as the labels' type, converted (and refused where it does not fit) as torch.full_like would.
        kernel.gather_into(source.numpy(), rows, columns, torch.tensor(fill, dtype=labels.dtype).item(), out.numpy())
        return out[:, 0] if squeeze else out
    # floor(x + 0.5) rounds halves up, the same on every device.
    xi = torch.floor(coords[..., 0] + 0.5).long()
    yi = torch.floor(coords[..., 1] + 0.5).long()
    inside = (xi >= 0) & (xi < w) & (yi >= 0) & (yi < h)
    flat = (yi.clamp(0, h - 1) * w + xi.clamp(0, w - 1)).flatten(1)  # (B, H'W')
    index = flat[:, None, :].expand(-1, source.shape[1], -1)
    out = torch.gather(source.flatten(2), 2, index).view(*source.shape[:2], *coords.shape[1:3])
    out = torch.where(inside[:, None], out, torch.full_like(out, fill))
    return out[:, 0] if squeeze else out


COMPILED_NEAREST_MIN_PIXELS = 128 * 128
"""Output pixels from which a CPU resampling loads numba's loop (about 0.7 s once per
process, where it is not loaded yet): smaller ones take the tensor path before it."""


def _compiled_nearest_for(labels: torch.Tensor, coords: torch.Tensor) -> ModuleType | None:
    """:mod:`.nearest_kernel` for CPU ``labels`` and float ``coords``, where numba is installed and loading it pays."""
    on_cpu = labels.device.type == coords.device.type == "cpu" and coords.dtype in (torch.float32, torch.float64)
    if not on_cpu or labels.dtype.is_floating_point or labels.dtype.is_complex:
        return None
    return compiled.if_it_pays(_compiled_nearest, coords.shape[1] * coords.shape[2] >= COMPILED_NEAREST_MIN_PIXELS)


_compiled_nearest = compiled.loader("nearest_kernel")


def _normalise(coords: torch.Tensor, height: int, width: int) -> torch.Tensor:
    # grid_sample with align_corners=False puts -1 and +1 on the outer pixel edges:
    # (2 c + 1) / n - 1, in place after the first product. Each axis is worked on as a
    # contiguous plane and interleaved once at the end: the four passes over every other
    # value of the grid took about twice as long, for the same values.
    out = torch.empty_like(coords, memory_format=torch.contiguous_format)
    for axis, n in ((0, width), (1, height)):
        out[..., axis].copy_(torch.mul(coords[..., axis], 2).add_(1).div_(n).sub_(1))
    return out


def shear_x_about_centre(angles_deg: torch.Tensor, height: int, width: int, squeeze_rows: bool = False) -> torch.Tensor:
    """Inverse maps of horizontal shears about the image centre, in pixel coordinates.

    A shear by ``a`` degrees tilts vertical lines by ``a`` (``x' = x - tan(a) * (y - cy)``);
    the returned matrix takes an output pixel ``(x, y, 1)`` to its source
    ``(x + tan(a) * (y - cy), y)``. With ``squeeze_rows``, scikit-image's shear before 0.21
    (what imgaug 0.4.0 used then): ``x' = x - sin(a) * (y - cy)`` and
    ``y' = cy + cos(a) * (y - cy)``, rows drawn together towards the centre row by
    ``cos(a)``; the source is then ``(x + tan(a) * (y - cy), cy + (y - cy) / cos(a))``.
    Computed on the host in float64, as :func:`rotation_about_centre`.

    Shape:
        angles_deg: ``(B,)``; return: ``(B, 2, 3)``, same dtype and device.
    """
    cy = (height - 1) / 2
    matrices = []
    for angle in angles_deg.tolist():
        radians = math.radians(angle)
        slope = math.tan(radians)
        stretch = 1 / math.cos(radians) if squeeze_rows else 1.0
        matrices.append([[1.0, slope, -slope * cy], [0.0, stretch, cy - stretch * cy]])
    return _host_matrices(matrices, angles_deg)


def _host_matrices(matrices: list[list[list[float]]], like: torch.Tensor) -> torch.Tensor:
    # Per-sample maps are a few numbers each: made on the host in float64 (Python's math,
    # the same values as torch's float64 CPU ops), one tensor copied to ``like``'s device,
    # so every device warps through the same maps; each entry is rounded once to ``like``'s
    # dtype, as a cast of the float64 tensor would be. A few dozen tensor ops on (B,) tensors
    # cost more than the whole warp of a small image.
    if not matrices:
        return torch.empty((0, 2, 3), dtype=like.dtype, device=like.device)
    return torch.tensor(matrices, dtype=like.dtype, device=like.device)


def translation(offsets: torch.Tensor) -> torch.Tensor:
    """Inverse maps of translations by ``(dx, dy)`` pixels: output ``(x, y)`` reads ``(x - dx, y - dy)``.

    Shape:
        offsets: ``(B, 2)`` holding ``(dx, dy)``; return: ``(B, 2, 3)``, same dtype and device.
    """
    return _host_matrices([[[1.0, 0.0, -dx], [0.0, 1.0, -dy]] for dx, dy in offsets.tolist()], offsets)


def pixel_grid(height: int, width: int, device: torch.device | None = None) -> torch.Tensor:
    """Every pixel's own ``(x, y)`` coordinates.

    Shape:
        return: ``(H, W, 2)``, float64.
    """
    ys, xs = torch.meshgrid(
        torch.arange(height, dtype=torch.float64, device=device),
        torch.arange(width, dtype=torch.float64, device=device),
        indexing="ij",
    )
    return torch.stack([xs, ys], dim=-1)


def elastic_coordinates(
    streams: SampleStreams,
    height: int,
    width: int,
    alpha: float,
    device: torch.device | None = None,
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """ImageNet-C's (imagecorruptions 1.1.2) elastic field, one per sample, unreflected.

    Per image, ``dx`` then ``dy`` are ``U(-0.005 H, 0.005 H)`` fields smoothed by a Gaussian
    of sigma ``(0.01 H, 0.01 W)`` (``Border.REFLECT``, truncate 3) and scaled by
    ``alpha``; the output pixel ``(x, y)`` reads ``(x + dx, y + dy)``. Each field is built
    from its own image's draws alone, with elementwise operations only, so it is the same
    whatever batch it is computed in; float32 keeps it well below a thousandth of a pixel
    and three times faster than float64. On the CPU with OpenCV the smoothing is its
    ``sepFilter2D`` (a few float32 ulps from the torch sums, a millionth of a pixel here).

    Shape:
        return: ``(B, H, W, 2)``, ``dtype``, possibly outside the frame (see :func:`reflect_coordinates`).
    """
    max_shift = 0.005 * height
    sigma = (0.01 * height, 0.01 * width)
    coords = pixel_grid(height, width, device).to(dtype).expand(len(streams), -1, -1, -1).clone()
    # One draw for the batch (dx then dy per sample); the smoothing stays per sample.
    draws = streams.uniform((2, height, width)).to(dtype)
    for i, uniform in enumerate(draws):
        raw = uniform * (2 * max_shift) - max_shift
        smooth = gaussian_filter(raw, sigma, Border.REFLECT, truncate=3.0, opencv_on_cpu=True)
        coords[i] += smooth.permute(1, 2, 0) * alpha
    return coords


def reflect_coordinates(coords: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """Fold source coordinates back into the frame by half-sample mirroring, then clamp.

    This is scipy's ``mode="reflect"`` (``d c b a | a b c d``, ``Border.REFLECT`` applied to
    coordinates): a point beyond an edge reads its mirror image. The final clamp to
    ``[0, n - 1]`` changes no bilinear value, because that extension repeats the edge pixel
    across the half pixel beyond it, and it keeps every coordinate inside the frame so
    annotations never meet "outside".

    Shape:
        coords: ``(..., 2)`` holding ``(x, y)``; return: same.
    """
    folded = []
    for axis, n in ((0, width), (1, height)):
        c = torch.remainder(coords[..., axis] + 0.5, 2 * n)
        c = torch.where(c >= n, 2 * n - c, c) - 0.5
        folded.append(c.clamp(0, n - 1))
    return torch.stack(folded, dim=-1)


def radial_distortion_coordinates(
    k1: float, k2: float, height: int, width: int, device: torch.device | None = None
) -> torch.Tensor:
    """Source coordinates of a radially symmetric polynomial lens distortion of grade 4.

    With ``r`` the distance from the image centre over the half-diagonal (so corner pixel
    centres sit at ``r = 1``), the output pixel at ``r`` reads the source at
    ``r * (1 + k1 r^2 + k2 r^4)``: positive coefficients give barrel distortion, the outer
    content is squeezed inwards and the corners read from beyond the frame.

    Shape:
        return: ``(H, W, 2)``, float64.
    """
    grid = pixel_grid(height, width, device)
    centre = torch.tensor([(width - 1) / 2, (height - 1) / 2], dtype=torch.float64, device=device)
    half_diagonal = math.hypot((width - 1) / 2, (height - 1) / 2)
    if half_diagonal == 0:
        return grid
    offset = grid - centre
    r2 = (offset**2).sum(dim=-1, keepdim=True) / half_diagonal**2
    return centre + offset * (1 + k1 * r2 + k2 * r2**2)
