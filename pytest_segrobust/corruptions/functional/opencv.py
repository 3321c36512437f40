"""OpenCV's kernels on CPU tensors, where OpenCV computes the operation the torch code does.

The module itself comes from :func:`pytest_segrobust.opencv.opencv`, the one way in to ``cv2``.

OpenCV (``opencv-python-headless``, the ``opencv`` extra) is optional: it is imported on
first use, only for float images on the CPU, and every caller keeps its torch path for
other devices and for installs without it. The two paths agree within float rounding (the
same weights and borders, summed in another order); random draws never come from here.
Images are handed over plane by plane as numpy views of the tensors' memory, so nothing is
transposed or copied on the way in or out.
"""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType

import numpy as np
import torch

from pytest_segrobust.corruptions.functional.padding import Border
from pytest_segrobust.opencv import opencv


def opencv_for(fields: torch.Tensor) -> ModuleType | None:
    """``cv2`` when it can filter ``fields``: installed, float32 or float64, on the CPU, no autograd."""
    if fields.device.type != "cpu" or fields.dtype not in (torch.float32, torch.float64) or fields.requires_grad:
        return None
    return opencv()


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
