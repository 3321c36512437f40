"""OpenCV's kernels on CPU tensors, where OpenCV computes the operation the torch code does.

The module itself comes from :func:`pytest_segrobust.core.opencv.opencv`, the one way in to ``cv2``.

OpenCV (``opencv-python-headless``, the ``opencv`` extra) is optional: it is imported on
first use, only for float images on the CPU, and every caller keeps its torch path for
other devices and for installs without it. The two paths agree within float rounding (the
same weights and borders, summed in another order); random draws never come from here.
Images are handed over plane by plane as numpy views of the tensors' memory, so nothing is
transposed or copied on the way in or out.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from types import ModuleType

import numpy as np
import torch

from pytest_segrobust.core.opencv import opencv
from pytest_segrobust.corruptions.functional.padding import Border


def opencv_for(fields: torch.Tensor) -> ModuleType | None:
    """``cv2`` when it can filter ``fields``: installed, float32 or float64, on the CPU, no autograd."""
    if fields.device.type != "cpu" or fields.dtype not in (torch.float32, torch.float64) or fields.requires_grad:
        return None
    return opencv()


def opencv_warps_for(images: torch.Tensor) -> ModuleType | None:
    """``cv2`` when it can warp ``images`` as ``grid_sample`` does: float32 on the CPU, OpenCV >= 5.

    Only float32: even OpenCV 5.0 snaps the coordinates of float64 planes to 1/32 pixel.
    """
    if images.dtype != torch.float32:
        return None
    cv2 = opencv_for(images)
    return cv2 if cv2 is not None and exact_bilinear(cv2) else None


def exact_bilinear(cv2: ModuleType) -> bool:
    """Whether OpenCV interpolates float32 planes bilinearly at the exact coordinates.

    OpenCV 4.x ``warpAffine`` and ``remap`` snap every coordinate to 1/32 pixel
    (``INTER_BITS``) even on float32, errors up to 1.5e-2 on a photo; OpenCV 5.0 weighs
    float32 planes with the coordinates' own fractions, as ``grid_sample`` does (float64
    ones it still snaps).
    """
    major = str(getattr(cv2, "__version__", "0")).split(".", 1)[0]
    return major.isdigit() and int(major) >= 5


SHRT_MAX = 32767
"""``remap`` and ``warpAffine`` take planes with sides below this."""


def fits_remap(size: Sequence[int]) -> bool:
    """Whether OpenCV's ``remap`` and ``warpAffine`` take an ``(H, W)`` plane: not empty, sides below 32767."""
    return all(0 < side < SHRT_MAX for side in size)


def border_flag(cv2: ModuleType, border: Border) -> int:
    """OpenCV's ``BORDER_*`` constant for ``border`` (a constant border reads 0)."""
    return {
        Border.CONSTANT: cv2.BORDER_CONSTANT,
        Border.NEAREST: cv2.BORDER_REPLICATE,
        Border.REFLECT: cv2.BORDER_REFLECT,
        Border.MIRROR: cv2.BORDER_REFLECT_101,
    }[border]


def plane_pairs(fields: torch.Tensor) -> tuple[torch.Tensor, Iterator[tuple[np.ndarray, np.ndarray]]]:
    """A new tensor shaped like ``fields``, and every ``(H, W)`` plane of both as numpy views.

    The caller writes each output plane from its input plane; the tensor then holds the
    result. Input planes are views of ``fields`` itself when it is contiguous.

    Shape:
        fields: ``(..., H, W)``; return: a tensor of the same shape, and pairs of ``(H, W)`` arrays.
    """
    h, w = fields.shape[-2:]
    source = fields.detach().contiguous().view(-1, h, w).numpy()
    out = torch.empty(fields.shape, dtype=fields.dtype)
    target = out.view(-1, h, w).numpy()
    return out, zip(source, target)


def as_kernel(kernel: torch.Tensor, dtype: torch.dtype) -> np.ndarray:
    """A kernel as a contiguous numpy array in the images' ``dtype`` (the torch path's weights too)."""
    return np.ascontiguousarray(kernel.detach().to(device="cpu", dtype=dtype).numpy())
