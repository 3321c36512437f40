"""The filter toolkit: kernels, and the correlations every blur and weather layer runs.

* Kernels: OpenCV's and scipy's 1-D Gaussians, ImageNet-C's defocus disk, dense kernels as taps.
* :func:`shift_sum`: a sparse kernel (a few taps) as a weighted sum of shifted copies;
  :func:`compiled_shift_sum`: the same sums, bit for bit, as one compiled loop (numba);
  :func:`fft_shift_sum`: the same sum as one FFT product, for wide kernels on large images.
* :func:`filter2d`: a dense 2-D kernel (OpenCV's ``filter2D``).
* :func:`separable_filter`: two 1-D kernels, along H then W; :func:`gaussian_filter`
  (scipy) and :func:`gaussian_blur` (scikit-image) build on it.

All of them correlate (OpenCV's and scipy's sense: output ``(y, x)`` reads input
``(y + a, x + b)`` with weight ``kernel[a, b]``) and read beyond the frame from an explicit
:class:`~pytest_segrobust.corruptions.functional.padding.Border`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from types import ModuleType

import torch
import torch.nn.functional as F

from pytest_segrobust.corruptions.functional import compiled, opencv
from pytest_segrobust.corruptions.functional.padding import SMALL_IMAGE, Border, pad
from pytest_segrobust.corruptions.functional.precision import ieee_float32

Tap = tuple[int, int, float]
"""One tap of a sparse kernel: the image shifted down by ``dy`` and right by ``dx``, times a weight."""

# --------------------------------------------------------------------------- kernels


def gaussian_kernel1d(size: int, sigma: float, device: torch.device | None = None) -> torch.Tensor:
    """A normalised 1-D Gaussian of odd ``size`` (OpenCV's ``getGaussianKernel`` for sigma > 0).

    Shape:
        return: ``(size,)``, float64.
    """
    offsets = torch.arange(size, dtype=torch.float64, device=device) - (size - 1) / 2
    kernel = torch.exp(-(offsets**2) / (2 * sigma**2))
    return kernel / kernel.sum()


def truncated_gaussian_kernel1d(sigma: float, truncate: float = 4.0) -> torch.Tensor:
    """scipy.ndimage's Gaussian: radius ``int(truncate * sigma + 0.5)``, normalised to sum 1.

    Radius 0 (sigma below ``0.5 / truncate``, zero included) is the identity ``[1.0]``.

    Shape:
        return: ``(2 * radius + 1,)``, float64.
    """
    return torch.tensor(_truncated_gaussian_weights(sigma, truncate), dtype=torch.float64)


@functools.lru_cache(maxsize=256)
def _truncated_gaussian_weights(sigma: float, truncate: float) -> tuple[float, ...]:
    # Cached: every layer of a batch asks for the same few kernels.
    radius = int(truncate * sigma + 0.5)
    if radius == 0:
        return (1.0,)
    offsets = torch.arange(-radius, radius + 1, dtype=torch.float64)
    kernel = torch.exp(-0.5 / (sigma * sigma) * offsets**2)
    return tuple((kernel / kernel.sum()).tolist())


def disk_kernel(radius: float, alias_blur: float) -> torch.Tensor:
    """The defocus kernel of ImageNet-C: an aliased disk softened by a small Gaussian.

    The support is 17x17 up to radius 8 and ``2 * radius + 1`` beyond, softened with a 3x3
    (5x5 beyond radius 8) Gaussian of sigma ``alias_blur`` under ``Border.MIRROR`` (OpenCV's
    default), as in the reference implementation.

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
    return separable_filter(disk[None, None], g, g, Border.MIRROR)[0, 0]


def kernel_taps(kernel: torch.Tensor) -> list[Tap]:
    """The non-zero entries of a centred correlation kernel as shift taps, row by row.

    Correlating with ``kernel`` reads pixel ``(y + a - c, x + b - c)`` for entry ``(a, b)``,
    i.e. shifts the image by ``(c - a, c - b)``.

    Shape:
        kernel: ``(K, K)`` with K odd.
    """
    return [tap for tap in _all_taps(kernel) if tap[2] != 0]


def taps_kernel(taps: Sequence[Tap]) -> torch.Tensor:
    """The centred correlation kernel of shift taps, the inverse of :func:`kernel_taps`.

    Tap ``(dy, dx, w)`` lands on entry ``(c - dy, c - dx)`` of the smallest odd square
    holding them all; taps at the same shift add up.

    Shape:
        return: ``(K, K)``, float64, ``K = 2 * max(|dy|, |dx|) + 1``.
    """
    c = max(max(abs(dy), abs(dx)) for dy, dx, _ in taps)
    kernel = torch.zeros(2 * c + 1, 2 * c + 1, dtype=torch.float64)
    for dy, dx, weight in taps:
        kernel[c - dy, c - dx] += weight
    return kernel


def _all_taps(kernel: torch.Tensor) -> list[Tap]:
    # Every entry, zeros included, row by row.
    c = kernel.shape[-1] // 2
    rows = kernel.to(device="cpu", dtype=torch.float64).tolist()
    return [(c - a, c - b, weight) for a, row in enumerate(rows) for b, weight in enumerate(row)]


# --------------------------------------------------------------------------- correlations


def shift_sum(fields: torch.Tensor, taps: Sequence[Tap], border: Border, *, fused: bool = False) -> torch.Tensor:
    """``sum_i w_i * fields[..., y - dy_i, x - dx_i]``, in the order of ``taps``.

    Elementwise arithmetic on shifted views, so a pixel's value never depends on what else
    is in the tensor. Two ways of adding, each kept where a corruption's baselines were
    computed with it (they differ in the last bits): ``out = out + shifted * w`` (product and
    sum each rounded), or with ``fused`` torch's ``out.add_(shifted, alpha=w)``, which
    rounds once per tap where its vector loop multiplies and adds in one instruction.

    Shape:
        fields: ``(..., H, W)``; return: same.
    """
    h, w = fields.shape[-2:]
    left, _right, top, _bottom = reach = _reach(taps)
    padded = pad(fields, reach, border)

    def shifted(dy: int, dx: int) -> torch.Tensor:
        return padded[..., top - dy : top - dy + h, left - dx : left - dx + w]

    (dy, dx, weight), *rest = taps
    out = shifted(dy, dx) * weight
    if fused:
        for dy, dx, weight in rest:
            out.add_(shifted(dy, dx), alpha=weight)
    elif out.requires_grad:
        # Autograd records no ``out=`` products: fresh tensors, the same arithmetic.
        for dy, dx, weight in rest:
            out = out + shifted(dy, dx) * weight
    else:
        # Each product into one scratch buffer, then added in place: the same two roundings
        # as ``out = out + shifted * w`` without two fresh field-sized tensors per tap, whose
        # allocation costs more than the arithmetic.
        scratch = torch.empty_like(out)
        for dy, dx, weight in rest:
            out.add_(torch.mul(shifted(dy, dx), weight, out=scratch))
    return out


_compiled_shifts = compiled.loader("shifts_kernel")


def compiled_shift_sum(image: torch.Tensor, taps: Sequence[Tap], border: Border) -> torch.Tensor | None:
    """:func:`shift_sum` of one float32 CPU image as one compiled loop (:mod:`.shifts_kernel`), or None.

    Bit for bit :func:`shift_sum` (unfused): each tap's product rounded, then added, in the
    taps' order, row by row while the row is in cache, about five times less CPU than the
    tensor operations and, at 512x512 with the 27 taps of a 13x13 motion line, about eight
    times less than :func:`fft_shift_sum`. None where it does not apply: not float32 on the
    CPU, a graph to keep, or numba not installed.

    Shape:
        image: ``(C, H, W)``; return: same.
    """
    if image.device.type != "cpu" or image.dtype != torch.float32 or image.requires_grad:
        return None
    kernel = _compiled_shifts()
    if kernel is None:
        return None
    left, right, top, bottom = _reach(taps)
    padded = pad(image, (left, right, top, bottom), border).contiguous()
    rows = torch.tensor([top - dy for dy, _, _ in taps], dtype=torch.int64)
    columns = torch.tensor([left - dx for _, dx, _ in taps], dtype=torch.int64)
    # Rounded to float32 as the tensor operations round a Python float multiplying float32.
    weights = torch.tensor([weight for _, _, weight in taps], dtype=torch.float32)
    out = torch.empty(image.shape, dtype=torch.float32)
    kernel.shift_sum_into(padded.numpy(), rows.numpy(), columns.numpy(), weights.numpy(), out.numpy())
    return out


def fft_shift_sum(
    images: torch.Tensor,
    taps: Sequence[Tap],
    border: Border,
    reach: tuple[int, int, int, int] | None = None,
) -> torch.Tensor:
    """:func:`shift_sum` as one FFT product per image: a 41-tap kernel costs what a 3-tap one does.

    Each image is padded by ``reach = (left, right, top, bottom)`` (by default the taps'
    own reach) from ``border``, then on to a 5-smooth size for a fast transform, and
    correlated circularly; the rows and columns past the padding are never read back.
    Float64 images are transformed in float64, all others in float32.

    Shape:
        images: ``(B, C, H, W)``; return: same.
    """
    _, _, h, w = images.shape
    left, right, top, bottom = _reach(taps) if reach is None else reach
    hp, wp = _fast_length(h + top + bottom), _fast_length(w + left + right)
    work = torch.float64 if images.dtype == torch.float64 else torch.float32
    # The kernel is the taps placed at their shifts, wrapped around the origin.
    weights: dict[tuple[int, int], float] = {}
    for dy, dx, weight in taps:
        key = (dy % hp, dx % wp)
        weights[key] = weights[key] + weight if key in weights else weight
    kernel = torch.zeros(hp, wp, dtype=torch.float64)
    kernel[[k[0] for k in weights], [k[1] for k in weights]] = torch.tensor(list(weights.values()), dtype=torch.float64)
    spectrum = torch.fft.rfft2(kernel.to(device=images.device, dtype=work))
    out = torch.empty_like(images, memory_format=torch.contiguous_format)
    # Image by image: the same transform of the same data whatever the batch.
    for image, target in zip(images, out):
        padded = pad(image, (left, wp - w - left, top, hp - h - top), border).to(work)
        product = torch.fft.rfft2(padded).mul_(spectrum)
        target.copy_(torch.fft.irfft2(product, s=(hp, wp))[:, top : top + h, left : left + w])
    return out


def filter2d(images: torch.Tensor, kernel: torch.Tensor) -> torch.Tensor:
    """OpenCV's ``filter2D``: correlate every channel with one dense 2-D ``kernel``, ``Border.MIRROR``.

    Small images take a depthwise convolution. There a kernel reaching past the image reads
    ``Border.NEAREST`` instead (OpenCV would go on mirroring), as it always has here, so that
    results do not move; on the CPU with OpenCV installed its own ``filter2D`` does the same,
    plane by plane, several times faster (within float rounding). Large images go through
    :func:`fft_shift_sum`: on the CPU a direct 17x17 convolution costs several times more,
    and OpenCV's ``filter2D`` (a DFT there too) about a third more.

    Shape:
        images: ``(B, C, H, W)``; kernel: ``(K, K)`` with K odd; return: same as images.
    """
    c, h, w = images.shape[1:]
    reach = kernel.shape[-1] // 2
    if c * h * w <= SMALL_IMAGE:
        border = Border.MIRROR if reach < min(h, w) else Border.NEAREST
        cv2 = opencv.opencv_for(images)
        if cv2 is not None:
            return opencv_filter2d(cv2, images, kernel, border)
        padded = pad(images, (reach,) * 4, border)
        return _conv2d(padded, kernel.to(images).expand(c, 1, -1, -1), groups=c)
    # Every entry, zeros too, and the kernel's full reach: the transform size stays K's.
    return fft_shift_sum(images, _all_taps(kernel), Border.MIRROR, (reach,) * 4)


def separable_filter(
    fields: torch.Tensor, kernel_y: torch.Tensor, kernel_x: torch.Tensor, border: Border, *, fused: bool = False
) -> torch.Tensor:
    """Correlate every ``(H, W)`` plane with ``kernel_y`` along H, then ``kernel_x`` along W.

    On the CPU, with OpenCV installed, float planes go through its ``sepFilter2D`` with the
    same weights (in the fields' dtype) and border, plane by plane: several times faster than
    any torch path here, and equal to it within float rounding (the sums run in another
    order). Elsewhere, batches ``(B, C, H, W)`` of images larger than :data:`SMALL_IMAGE`
    values take a depthwise convolution, channels-last (about 7x faster than shifted sums
    at 512x512, and still a per-pixel sum in a fixed order, so a sample's result does not
    depend on its batch); all else takes one :func:`shift_sum` per axis, batches image by
    image, so that no intermediate grows past torch's threading threshold; there a 1-tap
    identity kernel ``[1.0]`` skips its axis. ``fused`` selects :func:`shift_sum`'s fused
    adding, always with shifted sums, on every device (those sums are bit-for-bit what
    baselines were computed with).

    Shape:
        fields: ``(..., H, W)``, ``(B, C, H, W)`` for the convolution; kernels: ``(K,)``; return: same as fields.
    """
    cv2 = None if fused else opencv.opencv_for(fields)
    if cv2 is not None:
        return _opencv_separable(cv2, fields, kernel_y, kernel_x, border)
    if fields.dim() == 4 and not fused and math.prod(fields.shape[1:]) > SMALL_IMAGE:
        return _depthwise_separable(fields, kernel_y, kernel_x, border)
    if fields.dim() == 4:
        return torch.stack([separable_filter(image, kernel_y, kernel_x, border, fused=fused) for image in fields])
    out = fields
    for kernel, dim in ((kernel_y, -2), (kernel_x, -1)):
        weights = kernel.tolist()
        if weights == [1.0]:
            continue
        radius = len(weights) // 2
        shifts = [radius - k for k in range(len(weights))]
        taps = [(s, 0, wk) if dim == -2 else (0, s, wk) for s, wk in zip(shifts, weights)]
        out = shift_sum(out, taps, border, fused=fused)
    return out


def opencv_filter2d(cv2: ModuleType, fields: torch.Tensor, kernel: torch.Tensor, border: Border) -> torch.Tensor:
    """OpenCV's ``filter2D`` of every ``(H, W)`` plane: a correlation with a centred ``(K, K)`` kernel.

    ``cv2`` is :func:`~.opencv.opencv_for` of ``fields``. The kernel is cast to the fields'
    dtype, as the torch paths cast it.

    Shape:
        fields: ``(..., H, W)`` float on the CPU; kernel: ``(K, K)`` with K odd; return: same as fields.
    """
    weights = opencv.as_kernel(kernel, fields.dtype)
    flag = opencv.border_flag(cv2, border)
    out, planes = opencv.plane_pairs(fields)
    for source, target in planes:
        cv2.filter2D(source, -1, weights, dst=target, borderType=flag)
    return out


def _opencv_separable(
    cv2: ModuleType, fields: torch.Tensor, kernel_y: torch.Tensor, kernel_x: torch.Tensor, border: Border
) -> torch.Tensor:
    # sepFilter2D correlates (no kernel flip) and reads the border from the flag, as we do.
    ky, kx = opencv.as_kernel(kernel_y, fields.dtype), opencv.as_kernel(kernel_x, fields.dtype)
    flag = opencv.border_flag(cv2, border)
    out, planes = opencv.plane_pairs(fields)
    for source, target in planes:
        cv2.sepFilter2D(source, -1, kx, ky, dst=target, borderType=flag)
    return out


def _depthwise_separable(
    images: torch.Tensor, kernel_y: torch.Tensor, kernel_x: torch.Tensor, border: Border
) -> torch.Tensor:
    c = images.shape[1]
    ky, kx = kernel_y.to(images), kernel_x.to(images)
    py, px = ky.numel() // 2, kx.numel() // 2
    padded = pad(images, (0, 0, py, py), border).contiguous(memory_format=torch.channels_last)
    out = _conv2d(padded, ky.view(1, 1, -1, 1).expand(c, 1, -1, 1), groups=c)
    padded = pad(out, (px, px, 0, 0), border).contiguous(memory_format=torch.channels_last)
    out = _conv2d(padded, kx.view(1, 1, 1, -1).expand(c, 1, 1, -1), groups=c)
    return out.contiguous()


# --------------------------------------------------------------------------- Gaussians


def gaussian_filter(
    fields: torch.Tensor,
    sigma: float | tuple[float, float],
    border: Border,
    truncate: float = 4.0,
    *,
    opencv_on_cpu: bool = False,
) -> torch.Tensor:
    """``scipy.ndimage.gaussian_filter`` over the last two axes, ``sigma`` one or ``(sigma_y, sigma_x)``.

    The kernel is :func:`truncated_gaussian_kernel1d` per axis; sums are :func:`shift_sum`'s
    fused ones, whatever the size (the weather layers were made so). With ``opencv_on_cpu``,
    fields that OpenCV can filter (:func:`~.opencv.opencv_for`) take its ``sepFilter2D``
    instead: the same weights and border, summed in another order (a few float32 ulps
    apart), several times faster on wide kernels; the rest keep the fused sums.

    Shape:
        fields: ``(..., H, W)`` float; return: same shape and dtype.
    """
    sigma_y, sigma_x = (sigma, sigma) if isinstance(sigma, (int, float)) else sigma
    kernel_y = truncated_gaussian_kernel1d(float(sigma_y), truncate)
    kernel_x = truncated_gaussian_kernel1d(float(sigma_x), truncate)
    fused = not opencv_on_cpu or opencv.opencv_for(fields) is None
    return separable_filter(fields, kernel_y, kernel_x, border, fused=fused)


def gaussian_blur(images: torch.Tensor, sigma: float, truncate: float = 4.0) -> torch.Tensor:
    """``skimage.filters.gaussian(image, sigma, channel_axis=-1)``: scipy's Gaussian, ``Border.NEAREST``.

    Each channel is blurred over H and W only (truncate 4.0), by :func:`separable_filter`.

    Shape:
        images: ``(B, C, H, W)``; return: same.
    """
    if sigma <= 0:
        return images.clone()
    kernel = truncated_gaussian_kernel1d(sigma, truncate)
    return separable_filter(images, kernel, kernel, Border.NEAREST)


# --------------------------------------------------------------------------- helpers


def _conv2d(inputs: torch.Tensor, weight: torch.Tensor, groups: int) -> torch.Tensor:
    # In IEEE float32 on every device (cuDNN's default TF32 moved a blur's sums by 4e-4).
    with ieee_float32(inputs.device):
        return F.conv2d(inputs, weight, groups=groups)


def _reach(taps: Sequence[Tap]) -> tuple[int, int, int, int]:
    # How far the taps read beyond each edge: (left, right, top, bottom).
    dys, dxs = [t[0] for t in taps], [t[1] for t in taps]
    return max(0, *dxs), max(0, *(-d for d in dxs)), max(0, *dys), max(0, *(-d for d in dys))


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
