"""saturate's and brightness's HSV arithmetic as compiled loops (numba), for the CPU path of :mod:`.color`
(and contrast's blend, darkness's scale, and the additive and multiplicative noises' clipped sums for :mod:`.noise`).

Imported only by :func:`pytest_segrobust.corruptions.functional.color._compiled_color`, and
only where numba is installed. Each loop makes, pixel by pixel, the IEEE operations of the
numpy path (:func:`~.color._scale_saturation_numpy`, :func:`~.color._shift_value_numpy`) in
the same order and the images' own float type (no fast-math: nothing is contracted or
reordered), so the same bits, in one pass over the image instead of about fifteen over its
planes. The loops have no branches (a grey or black pixel's other side is computed, as NaN
or inf, and not selected) and numpy's error model (a division by zero gives inf or NaN
instead of raising), so LLVM vectorises them: 5-6x less CPU than the numpy planes. Scalars arrive as the images' float type, ``zero`` and ``one`` included, so that no
operation is promoted to another precision.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _hsv_into(
    images: np.ndarray, saturate: bool, a: float, b: float, remaining: float, zero: float, one: float, out: np.ndarray
) -> None:  # pragma: no cover - compiled
    # The pixel loop of both HSV kernels: ``saturate`` picks saturation (a = scale, b = shift)
    # or value (a = amount). It is the same for every pixel, so LLVM takes the test out of the
    # loop and each side stays a branch-free, vectorised loop.
    batch, _, height, width = images.shape
    for n in range(batch):
        for y in range(height):
            red, green, blue = images[n, 0, y], images[n, 1, y], images[n, 2, y]
            out_red, out_green, out_blue = out[n, 0, y], out[n, 1, y], out[n, 2, y]
            for x in range(width):
                # Branch-free (both sides computed, one selected) so that LLVM vectorises the
                # loop; a grey pixel's coloured side, a black pixel's scale, is NaN or inf and
                # is never selected.
                r, g, u = red[x], green[x], blue[x]
                value = max(max(r, g), u)
                if saturate:
                    delta = value - min(min(r, g), u)
                    grey = delta == zero
                    saturation = delta / value
                    saturated = saturation * a + b
                    saturated = min(max(saturated, zero), one)
                    ratio = saturated / saturation
                    r = value if grey else value - (value - r) * ratio
                    g = value * remaining if grey else value - (value - g) * ratio
                    u = value * remaining if grey else value - (value - u) * ratio
                    out_red[x] = min(max(r, zero), one)
                    out_green[x] = min(max(g, zero), one)
                    out_blue[x] = min(max(u, zero), one)
                else:
                    brighter = min(max(value + a, zero), one)
                    black = value == zero
                    scale = brighter / value
                    out_red[x] = brighter if black else min(max(r * scale, zero), one)
                    out_green[x] = brighter if black else min(max(g * scale, zero), one)
                    out_blue[x] = brighter if black else min(max(u * scale, zero), one)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def scale_saturation_into(
    images: np.ndarray, scale: float, shift: float, remaining: float, zero: float, one: float, out: np.ndarray
) -> None:  # pragma: no cover - compiled
    """HSV saturation ``S -> clip(S scale + shift)`` of ``(B, 3, H, W)`` images, into ``out``.

    A grey pixel (maximum equal to minimum) takes the red tint: red keeps ``V``, green and
    blue become ``V * remaining`` (``remaining = 1 - clip(shift)``, computed by the caller).
    """
    _hsv_into(images, True, scale, shift, remaining, zero, one, out)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def shift_value_into(
    images: np.ndarray, amount: float, zero: float, one: float, out: np.ndarray
) -> None:  # pragma: no cover - compiled
    """HSV value ``V -> clip(V + amount)`` of ``(B, 3, H, W)`` images, into ``out``; black becomes grey ``V'``."""
    _hsv_into(images, False, amount, zero, zero, zero, one, out)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def blend_into(
    images: np.ndarray, means: np.ndarray, factor: float, zero: float, one: float, out: np.ndarray
) -> None:  # pragma: no cover - compiled
    """``clip((x - m) factor + m)`` of ``(B, C, H, W)`` images with ``m = means[b, c]``, into ``out``.

    The contrast blends' ``(images - means).mul_(factor).add_(means).clamp_(0, 1)`` in one pass.
    """
    batch, channels, height, width = images.shape
    for b in range(batch):
        for c in range(channels):
            mean = means[b, c]
            for y in range(height):
                source, target = images[b, c, y], out[b, c, y]
                for x in range(width):
                    target[x] = min(max((source[x] - mean) * factor + mean, zero), one)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def scale_into(
    images: np.ndarray, factor: float, zero: float, one: float, out: np.ndarray
) -> None:  # pragma: no cover - compiled
    """``clip(x factor)`` (darkness) of ``(B, C, H, W)`` images, into ``out``: ``(images * factor).clamp_(0, 1)`` in one pass."""
    batch, channels, height, width = images.shape
    for b in range(batch):
        for c in range(channels):
            for y in range(height):
                source, target = images[b, c, y], out[b, c, y]
                for x in range(width):
                    target[x] = min(max(source[x] * factor, zero), one)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def add_noise_into(
    images: np.ndarray, noise: np.ndarray, std: float, zero: float, one: float, out: np.ndarray
) -> None:  # pragma: no cover - compiled
    """``clip(x + std * n)`` (Gaussian noise) of C-contiguous arrays of one shape, into ``out``:
    ``(images + std * noise).clamp_(0, 1)`` in one pass."""
    source, drawn, target = images.reshape(-1), noise.reshape(-1), out.reshape(-1)
    for i in range(source.size):
        target[i] = min(max(source[i] + std * drawn[i], zero), one)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def add_scaled_noise_into(
    images: np.ndarray, noise: np.ndarray, std: float, zero: float, one: float, out: np.ndarray
) -> None:  # pragma: no cover - compiled
    """``clip(x + x * (n * std))`` (speckle noise) of C-contiguous arrays of one shape, into ``out``:
    ``(images + images * (noise * std)).clamp_(0, 1)`` in one pass."""
    source, drawn, target = images.reshape(-1), noise.reshape(-1), out.reshape(-1)
    for i in range(source.size):
        value = source[i]
        target[i] = min(max(value + value * (drawn[i] * std), zero), one)
