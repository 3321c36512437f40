"""The example's VOS model: the package's tiny mask-propagation network, and its factory.

The suite names the factory as ``tracker:tracker``. A video object segmentation model is given
the clip and a ``reference``: per frame, the ids of the objects given there (here every object
in frame 0, DAVIS's protocol) and 0 elsewhere; it returns an object id per pixel and frame.
Your own model takes the same two tensors (see the docstring of :func:`tracker`).

Set ``SEGROBUST_EXAMPLE_DEGRADE=1`` to load the weights rounded to a few bits, as a careless
low-precision export would: the model the gate must catch.
"""

from __future__ import annotations

import os

import torch
from torch import nn

from pytest_segrobust.models.demo_video import TinyVOSNet, tiny_vos

DEGRADE_VARIABLE = "SEGROBUST_EXAMPLE_DEGRADE"
DEGRADED_BITS = 3  # signed levels per weight tensor when degraded: -3..3 times its scale


def rounded(module: nn.Module, bits: int) -> None:
    """Round every parameter of ``module`` to ``2 ** (bits - 1) - 1`` signed levels of its largest magnitude."""
    levels = 2 ** (bits - 1) - 1
    with torch.no_grad():
        for parameter in module.parameters():
            scale = parameter.abs().max().clamp_min(1e-12) / levels
            parameter.copy_(torch.round(parameter / scale) * scale)


def tracker() -> TinyVOSNet:
    """The trained tracker in eval mode (degraded where ``SEGROBUST_EXAMPLE_DEGRADE`` is set to 1).

    Its ``forward(clips, reference)`` takes ``clips`` float RGB in ``[0, 1]`` ``(B, T, 3, H, W)``
    and ``reference`` int64 ``(B, T, H, W)`` (object ids where each is given, else 0), and
    returns an object id per pixel and frame, int64 ``(B, T, H, W)`` (an offline model; online
    trackers with ``start``/``step`` work too).

    Raises:
        ValueError: When ``SEGROBUST_EXAMPLE_DEGRADE`` is set to anything but 0 or 1.
    """
    degrade = os.environ.get(DEGRADE_VARIABLE, "0")
    if degrade not in ("0", "1"):
        raise ValueError(f"environment variable {DEGRADE_VARIABLE}: expected 0 or 1, got {degrade!r}")
    model = tiny_vos()
    if degrade == "1":
        rounded(model, DEGRADED_BITS)
    return model
