"""Tone and colour operations."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from types import ModuleType

import numpy as np
import torch

from pytest_segrobust.core.opencv import opencv
from pytest_segrobust.corruptions.functional import compiled

# ITU-R 601-2 luma, the weights PIL uses for ``convert("L")``.
_LUMA = (0.299, 0.587, 0.114)


def luma(images: torch.Tensor) -> torch.Tensor:
    """ITU-R 601-2 luma of RGB images.

    Shape:
        images: ``(B, 3, H, W)``; return: ``(B, 1, H, W)``.
    """
    r, g, b = images.unbind(1)
    # ((r w_r + g w_g) + b w_b) in channel order: the sum over channels adds in that order
    # too (same bits), without a three-plane product and a strided reduction.
    return (r * _LUMA[0]).add_(g * _LUMA[1]).add_(b * _LUMA[2]).unsqueeze(1)


def enhance_contrast(images: torch.Tensor, factor: float) -> torch.Tensor:
    """PIL's ``ImageEnhance.Contrast``: blend with the mean grey level by ``factor``.

    Factors above 1 increase contrast; the mean is each image's own mean luma.

    Shape:
        images: ``(B, 3, H, W)``; return: same.
    """
    # The mean luma is the luma of the channel means (a weighted sum commutes with the mean):
    # from the float64 means, without a luma image.
    weights = torch.tensor(_LUMA, dtype=torch.float64, device=images.device)
    mean = (_channel_means64(images) @ weights).to(images.dtype)[:, None, None, None]
    # mean + factor * (images - mean), in place on the one temporary: the same roundings,
    # since IEEE sums and products are commutative.
    return _blend(images, mean.expand(-1, images.shape[1], -1, -1), factor)


def to_uint8(images: torch.Tensor) -> torch.Tensor:
    """Round float images in ``[0, 1]`` to ``uint8``.

    Shape:
        images: any; return: same.
    """
    return (images.clamp(0.0, 1.0) * 255.0).round_().to(torch.uint8)


def enhance_brightness(images: torch.Tensor, factor: float) -> torch.Tensor:
    """PIL's ``ImageEnhance.Brightness``: blend with black, i.e. scale every value by ``factor``.

    On the CPU in one compiled pass where numba is installed (:mod:`.color_kernel`), bit for
    bit what the tensor operations give.

    Shape:
        images: ``(B, C, H, W)``; return: same.
    """
    if images.device.type == "cpu" and images.dtype in _NUMPY_FLOATS and not images.requires_grad:
        kernel = _compiled_color_for(images)
        if kernel is not None:
            # One compiled pass (the product and the clip, the same IEEE steps: the same bits)
            # instead of a product and an in-place clip.
            out = torch.empty_like(images, memory_format=torch.contiguous_format)
            scalars = (_scalar(images, factor), _scalar(images, 0.0), _scalar(images, 1.0))
            kernel.scale_into(images.detach().numpy(), *scalars, out.numpy())
            return out
    return (images * factor).clamp_(0.0, 1.0)


def reduce_contrast(images: torch.Tensor, factor: float) -> torch.Tensor:
    """ImageNet-C's contrast: pull each channel toward its own mean, ``(x - m) * factor + m``.

    Shape:
        images: ``(B, C, H, W)``; return: same.
    """
    cv2 = _opencv_means_for(images)
    if cv2 is not None and not images.requires_grad and (kernel := _compiled_color_for(images)) is not None:
        # Plane by plane: each plane's mean, then its blend while the plane is still in
        # cache (at 512x512 from memory, 1.8x less CPU than every mean first). The same
        # means and operations as below, so the same bits.
        source = images.numpy()
        out = torch.empty_like(images, memory_format=torch.contiguous_format)
        target = out.numpy()
        scalars = (_scalar(images, factor), _scalar(images, 0.0), _scalar(images, 1.0))
        for b, c in itertools.product(range(images.shape[0]), range(images.shape[1])):
            mean = np.full((1, 1), cv2.mean(np.ascontiguousarray(source[b, c]))[0], dtype=source.dtype)
            kernel.blend_into(source[b : b + 1, c : c + 1], mean, *scalars, target[b : b + 1, c : c + 1])
        return out
    return _blend(images, channel_means(images), factor)


def channel_means(images: torch.Tensor) -> torch.Tensor:
    """Each image's per-channel mean, summed in float64 and rounded to the images' type.

    float64 sums make the mean the correctly rounded one but for a tie in a few 1e-16, so
    it is the same on every device and whatever the summation order (a float32 sum's last
    bits depend on both); on the CPU OpenCV's ``mean`` sums each plane in float64, in half
    the time of torch's float32 reduction on a 512x512 image.

    Shape:
        images: ``(B, C, H, W)``; return: ``(B, C, 1, 1)``, images' dtype.
    """
    return _channel_means64(images).to(images.dtype)[..., None, None]


def _channel_means64(images: torch.Tensor) -> torch.Tensor:
    # (B, C) float64 means of (B, C, H, W) images, on their device.
    if not len(images):
        return torch.zeros(images.shape[:2], dtype=torch.float64, device=images.device)
    cv2 = _opencv_means_for(images)
    if cv2 is not None and not images.requires_grad:
        planes = images.detach().contiguous().numpy()
        return torch.tensor([[cv2.mean(plane)[0] for plane in image] for image in planes], dtype=torch.float64)
    # One reduction per image: a batched sum may split a large image across threads
    # differently depending on the batch size.
    return torch.stack([image.mean(dim=(-2, -1), dtype=torch.float64) for image in images])


def _blend(images: torch.Tensor, means: torch.Tensor, factor: float) -> torch.Tensor:
    # clip((x - m) factor + m) with ``means`` (B, C, 1, 1): on the CPU in one compiled pass
    # where numba is installed (:mod:`.color_kernel`, the same operations in the same
    # order, so the same bits), else in place on the first result.
    on_cpu = images.device.type == "cpu" and images.dtype in (torch.float32, torch.float64)
    if on_cpu and not images.requires_grad and (kernel := _compiled_color_for(images)) is not None:
        out = torch.empty_like(images, memory_format=torch.contiguous_format)
        kernel.blend_into(
            images.detach().numpy(),
            means.detach().reshape(means.shape[0], means.shape[1]).numpy(),
            _scalar(images, factor),
            _scalar(images, 0.0),
            _scalar(images, 1.0),
            out.numpy(),
        )
        return out
    return (images - means).mul_(factor).add_(means).clamp_(0.0, 1.0)


def rgb_to_hsv(images: torch.Tensor) -> torch.Tensor:
    """``skimage.color.rgb2hsv``: hue, saturation, value, each in ``[0, 1]``.

    Where channels tie for the maximum, blue's hue formula wins over green's over red's,
    as in scikit-image. Grey pixels get hue 0 and black ones saturation 0.

    Shape:
        images: ``(B, 3, H, W)``; return: same.
    """
    r, g, b = images.unbind(1)
    value = images.amax(dim=1)
    delta = value - images.amin(dim=1)
    grey = delta == 0
    safe_delta = torch.where(grey, torch.ones_like(delta), delta)
    saturation = torch.where(grey, torch.zeros_like(delta), delta / torch.where(grey, torch.ones_like(value), value))
    hue = torch.where(
        b == value,
        4.0 + (r - g) / safe_delta,
        torch.where(g == value, 2.0 + (b - r) / safe_delta, (g - b) / safe_delta),
    )
    hue = torch.where(grey, torch.zeros_like(hue), torch.remainder(hue / 6.0, 1.0))
    return torch.stack([hue, saturation, value], dim=1)


def hsv_to_rgb(hsv: torch.Tensor) -> torch.Tensor:
    """``skimage.color.hsv2rgb``, the inverse of :func:`rgb_to_hsv`.

    Shape:
        hsv: ``(B, 3, H, W)``; return: same.
    """
    hue, saturation, value = hsv.unbind(1)
    sector = torch.floor(hue * 6.0)
    f = hue * 6.0 - sector
    p = value * (1.0 - saturation)
    q = value * (1.0 - f * saturation)
    t = value * (1.0 - (1.0 - f) * saturation)
    index = torch.remainder(sector, 6).long().unsqueeze(1)
    # Per sector, which of (v, t, p, q) each channel takes.
    red = torch.stack([value, q, p, p, t, value], dim=1).gather(1, index)
    green = torch.stack([t, value, value, q, p, p], dim=1).gather(1, index)
    blue = torch.stack([p, p, t, value, value, q], dim=1).gather(1, index)
    return torch.cat([red, green, blue], dim=1)


def shift_value(images: torch.Tensor, amount: float) -> torch.Tensor:
    """ImageNet-C's brightness: add ``amount`` to the HSV value, clip, convert back.

    Hue and saturation stay, so every channel of a pixel scales by ``V' / V`` with
    ``V' = min(V + amount, 1)``: the same result as the round trip through
    :func:`rgb_to_hsv` and :func:`hsv_to_rgb`, in a few elementwise operations (on the CPU
    compiled or as :func:`_shift_value_numpy`, bit for bit: :func:`_hsv_on_cpu`). Black
    (hue and saturation 0) becomes grey ``V'``.

    Shape:
        images: ``(B, 3, H, W)``; return: same.
    """
    on_cpu = _hsv_on_cpu(
        images,
        lambda kernel, source, out: kernel.shift_value_into(
            source, _scalar(images, amount), _scalar(images, 0.0), _scalar(images, 1.0), out
        ),
        lambda planes: _shift_value_numpy(images, planes, amount),
    )
    if on_cpu is not None:
        return on_cpu
    value = images.amax(dim=1, keepdim=True)
    brighter = (value + amount).clamp_(0.0, 1.0)
    black = value == 0
    scale = brighter / torch.where(black, torch.ones_like(value), value)
    return torch.where(black, brighter, images * scale).clamp_(0.0, 1.0)


def scale_saturation(images: torch.Tensor, scale: float, shift: float) -> torch.Tensor:
    """ImageNet-C's saturate: HSV saturation becomes ``clip(s * scale + shift)``.

    Hue and value stay, so each channel's distance below the pixel's maximum scales by
    ``S' / S``: the same result as the round trip through :func:`rgb_to_hsv` and
    :func:`hsv_to_rgb`, in a few elementwise operations (on the CPU compiled or as
    :func:`_scale_saturation_numpy`, bit for bit: :func:`_hsv_on_cpu`). Grey pixels have
    hue 0 (red) in scikit-image, so a positive ``shift`` tints them red, as in the reference.

    Shape:
        images: ``(B, 3, H, W)``; return: same.
    """
    on_cpu = _hsv_on_cpu(
        images,
        lambda kernel, source, out: kernel.scale_saturation_into(
            source, _scalar(images, scale), _scalar(images, shift), _tint_remaining(images, scale, shift),
            _scalar(images, 0.0), _scalar(images, 1.0), out,
        ),
        lambda planes: _scale_saturation_numpy(images, planes, scale, shift),
    )
    if on_cpu is not None:
        return on_cpu
    value = images.amax(dim=1, keepdim=True)
    delta = value - images.amin(dim=1, keepdim=True)
    grey = delta == 0
    saturation = delta / torch.where(grey, torch.ones_like(value), value)
    saturated = (saturation * scale + shift).clamp_(0.0, 1.0)
    ratio = saturated / torch.where(grey, torch.ones_like(saturation), saturation)
    # value - (value - x) * ratio, in place on the one full-size temporary (negating and
    # adding in the other order are exact, so the bits are the same).
    coloured = (value - images).mul_(ratio).neg_().add_(value)
    # Asking whether any pixel is grey would stall an accelerator's queue: only on the CPU.
    if images.device.type != "cpu" or bool(grey.any()):
        # Hue 0 at saturation S': red keeps V, green and blue drop to V (1 - S').
        red_tint = torch.cat([value, value * (1.0 - saturated), value * (1.0 - saturated)], dim=1)
        coloured = torch.where(grey, red_tint, coloured)
    return coloured.clamp_(0.0, 1.0)


# The HSV corruptions on the CPU. The same IEEE operations as the tensor code above, in the
# same order, so the same bits (tested), but on whole (H, W) planes with numpy's ``out=``:
# torch's channel reductions (``amax(dim=1)``) are strided, and its boolean masks and
# ``where`` run several times slower than the arithmetic on one thread. Values that the
# tensor code replaces with ``where`` (black or grey pixels) are computed here too, as
# NaN or inf, and overwritten.


def _hsv_on_cpu(
    images: torch.Tensor,
    compiled: Callable[[ModuleType, np.ndarray, np.ndarray], None],
    planewise: Callable[[tuple[np.ndarray, np.ndarray, np.ndarray]], torch.Tensor],
) -> torch.Tensor | None:
    """An HSV corruption on CPU float images, else None (the tensor code's case).

    Pixel by pixel in one compiled pass where numba is installed (:mod:`.color_kernel`, for
    images of :data:`COMPILED_COLOR_MIN_VALUES` values or more): ``compiled(kernel, images,
    out)`` writes into a fresh contiguous ``out``. Else plane by plane in numpy:
    ``planewise(planes)`` on :func:`_numpy_planes`. Both give the same bits.
    """
    planes = _numpy_planes(images)
    if planes is None:
        return None
    kernel = _compiled_color_for(images)
    if kernel is None:
        return planewise(planes)
    out = torch.empty_like(images, memory_format=torch.contiguous_format)
    compiled(kernel, images.detach().numpy(), out.numpy())
    return out


def _numpy_planes(images: torch.Tensor) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The red, green and blue ``(B, H, W)`` planes of CPU float images as numpy views, else None."""
    if images.device.type != "cpu" or images.dtype not in (torch.float32, torch.float64) or images.requires_grad:
        return None
    array = images.detach().numpy()
    return array[:, 0], array[:, 1], array[:, 2]


COMPILED_COLOR_MIN_VALUES = 3 * 128 * 128
"""Images from this many values on load numba's kernels (:mod:`.color_kernel`), if not loaded yet.

The kernels give the numpy path's bits, so which path an image takes changes no value;
small images alone do not repay loading numba (about half a second once per process).
"""


def _opencv_means_for(images: torch.Tensor) -> ModuleType | None:
    """``cv2`` where it sums ``images``' planes (float32 on the CPU), else None."""
    return opencv() if images.device.type == "cpu" and images.dtype == torch.float32 else None


def _compiled_color_for(images: torch.Tensor) -> ModuleType | None:
    """:mod:`.color_kernel` for CPU ``images`` where numba is installed and loading it pays, else None."""
    return compiled.if_it_pays(_compiled_color, images.numel() >= COMPILED_COLOR_MIN_VALUES)


_compiled_color = compiled.loader("color_kernel")


def _tint_remaining(images: torch.Tensor, scale: float, shift: float) -> np.generic:
    # 1 - clip(0 * scale + shift): what green and blue keep of a grey pixel's value, in its float type.
    tinted = torch.zeros((), dtype=images.dtype).mul(scale).add(shift).clamp(0.0, 1.0)
    return (1.0 - tinted).numpy()[()]


def _scalar(images: torch.Tensor, value: float) -> np.generic:
    # The Python number as the images' float type, as torch's CPU kernels use it (both round
    # a double to nearest).
    return _NUMPY_FLOATS[images.dtype](value)


_NUMPY_FLOATS = {torch.float32: np.float32, torch.float64: np.float64}


def _output_and_value(
    images: torch.Tensor, planes: tuple[np.ndarray, np.ndarray, np.ndarray]
) -> tuple[torch.Tensor, np.ndarray, np.ndarray]:
    # A fresh contiguous output (and its numpy view), and HSV's value: the largest channel.
    out = torch.empty_like(images, memory_format=torch.contiguous_format)
    value = np.maximum(planes[0], planes[1])
    np.maximum(value, planes[2], out=value)
    return out, out.numpy(), value


def _shift_value_numpy(
    images: torch.Tensor, planes: tuple[np.ndarray, np.ndarray, np.ndarray], amount: float
) -> torch.Tensor:
    out, target, value = _output_and_value(images, planes)
    brighter = np.add(value, _scalar(images, amount))
    np.clip(brighter, 0.0, 1.0, out=brighter)
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = np.divide(brighter, value)  # inf or NaN on black pixels, replaced below
        for k, plane in enumerate(planes):
            np.multiply(plane, scale, out=target[:, k])
    black = value == 0
    if black.any():
        for k in range(3):
            np.copyto(target[:, k], brighter, where=black)
    np.clip(target, 0.0, 1.0, out=target)
    return out


def _scale_saturation_numpy(
    images: torch.Tensor, planes: tuple[np.ndarray, np.ndarray, np.ndarray], scale: float, shift: float
) -> torch.Tensor:
    red, green, blue = planes
    out, target, value = _output_and_value(images, planes)
    delta = np.minimum(red, green)
    np.minimum(delta, blue, out=delta)
    np.subtract(value, delta, out=delta)
    grey = delta == 0
    with np.errstate(divide="ignore", invalid="ignore"):
        # Grey pixels have saturation 0 in the tensor code; here black ones get NaN, and
        # everything derived from it is overwritten below.
        saturation = np.divide(delta, value, out=delta)
        saturated = np.multiply(saturation, _scalar(images, scale))
        np.add(saturated, _scalar(images, shift), out=saturated)
        np.clip(saturated, 0.0, 1.0, out=saturated)
        ratio = np.divide(saturated, saturation, out=saturation)
        for k, plane in enumerate(planes):
            # value - (value - x) * ratio: -(d r) + v is v - d r exactly.
            np.subtract(value, plane, out=target[:, k])
            np.multiply(target[:, k], ratio, out=target[:, k])
            np.subtract(value, target[:, k], out=target[:, k])
    if grey.any():
        # Saturation 0 becomes clip(0 * scale + shift): the red tint of every grey pixel.
        remaining = _tint_remaining(images, scale, shift)
        np.copyto(target[:, 0], value, where=grey)
        np.multiply(value, remaining, out=target[:, 1], where=grey)
        np.multiply(value, remaining, out=target[:, 2], where=grey)
    np.clip(target, 0.0, 1.0, out=target)
    return out
