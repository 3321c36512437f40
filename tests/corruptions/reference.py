"""Independent numpy ports of reference (imagecorruptions 1.1.2) code, shared by the tests."""

from __future__ import annotations

import math

import numpy as np


def reference_motion_blur(x: np.ndarray, radius: int, sigma: float, angle: float) -> np.ndarray:
    """imagecorruptions' _motion_blur and shift, ported as written."""

    def shift(image: np.ndarray, dx: int, dy: int) -> np.ndarray:
        if dx < 0:
            shifted = np.roll(image, shift=image.shape[1] + dx, axis=1)
            shifted[:, dx:] = shifted[:, dx - 1 : dx]
        elif dx > 0:
            shifted = np.roll(image, shift=dx, axis=1)
            shifted[:, :dx] = shifted[:, dx : dx + 1]
        else:
            shifted = image
        if dy < 0:
            shifted = np.roll(shifted, shift=image.shape[0] + dy, axis=0)
            shifted[dy:, :] = shifted[dy - 1 : dy, :]
        elif dy > 0:
            shifted = np.roll(shifted, shift=dy, axis=0)
            shifted[:dy, :] = shifted[dy : dy + 1, :]
        return shifted

    width = radius * 2 + 1
    k = np.exp(-(np.arange(width) ** 2) / (2 * sigma**2)) / (np.sqrt(2 * np.pi) * sigma)
    kernel = k / k.sum()
    point = (width * np.sin(np.deg2rad(angle)), width * np.cos(np.deg2rad(angle)))
    hypot = math.hypot(point[0], point[1])
    blurred = np.zeros_like(x, dtype=np.float64)
    for i in range(width):
        dy = -math.ceil(((i * point[0]) / hypot) - 0.5)
        dx = -math.ceil(((i * point[1]) / hypot) - 0.5)
        if np.abs(dy) >= x.shape[0] or np.abs(dx) >= x.shape[1]:
            break
        blurred = blurred + kernel[i] * shift(x, dx, dy)
    return blurred
