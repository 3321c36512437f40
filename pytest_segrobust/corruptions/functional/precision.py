"""Float32 held to IEEE precision inside the corruptions, whatever the process set for models.

cuDNN convolves float32 in TF32 by default (10-bit mantissas), and users turn TF32 on for
matrix products (``torch.backends.cuda.matmul``, ``torch.set_float32_matmul_precision``) to
speed their models up. Inside a corruption either one moves the corrupted pixels away from
the CPU's: a blur's sums came out up to 4e-4 off on an H200 (psf_blur at severity 1, a
quarter of its values more than 1e-4 apart), where pixels must not depend on the device.
:func:`ieee_float32` holds the convolutions and products inside it to IEEE float32 and gives
the settings back as they were, so the model's own precision stays the user's choice.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch


@contextlib.contextmanager
def ieee_float32(device: torch.device) -> Iterator[None]:
    """Within the block, CUDA convolutions and matrix products run in IEEE float32; elsewhere a no-op."""
    if device.type != "cuda":
        yield
        return
    with contextlib.ExitStack() as stack:
        # torch >= 2.9 has a setting per backend and refuses to read the legacy flags once the
        # two disagree: use the new one where it exists, never both.
        for backend in (torch.backends.cudnn.conv, torch.backends.cuda.matmul) if _new_api() else ():
            stack.enter_context(_set(backend, "fp32_precision", "ieee"))
        if not _new_api():
            stack.enter_context(_set(torch.backends.cudnn, "allow_tf32", False))
            stack.enter_context(_set(torch.backends.cuda.matmul, "allow_tf32", False))
        yield


def _new_api() -> bool:
    conv = getattr(torch.backends.cudnn, "conv", None)
    return (
        conv is not None and hasattr(conv, "fp32_precision") and hasattr(torch.backends.cuda.matmul, "fp32_precision")
    )


@contextlib.contextmanager
def _set(owner: Any, name: str, value: object) -> Iterator[None]:
    before = getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, before)
