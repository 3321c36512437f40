"""The example's audio-visual model: the package's tiny audio-visual network, and its factory.

The suite names the factory as ``listener:listener``. An audio-visual segmentation model is
given the frames and the (perturbed) sound and returns, per frame, where the sounding object
is; it runs its own audio front end (here a log-mel spectrogram in torch) on the waveform.

Set ``SEGROBUST_EXAMPLE_DEGRADE=1`` to load the weights rounded to a few bits, as a careless
low-precision export would: the model the gate must catch.
"""

from __future__ import annotations

import os

import torch
from torch import nn

from pytest_segrobust.models.demo_avs import TinyAVSNet, tiny_avs

DEGRADE_VARIABLE = "SEGROBUST_EXAMPLE_DEGRADE"
DEGRADED_BITS = 3  # signed levels per weight tensor when degraded: -3..3 times its scale


def rounded(module: nn.Module, bits: int) -> None:
    """Round every parameter of ``module`` to ``2 ** (bits - 1) - 1`` signed levels of its largest magnitude."""
    levels = 2 ** (bits - 1) - 1
    with torch.no_grad():
        for parameter in module.parameters():
            scale = parameter.abs().max().clamp_min(1e-12) / levels
            parameter.copy_(torch.round(parameter / scale) * scale)


def listener() -> TinyAVSNet:
    """The trained network in eval mode (degraded where ``SEGROBUST_EXAMPLE_DEGRADE`` is set to 1).

    Its ``predict(clips, audio)`` takes ``clips`` float RGB in ``[0, 1]`` ``(B, T, 3, H, W)`` and
    the batch's ``Audio`` (waveform ``(B, C, S)``, sample rate, the samples heard with each frame)
    and returns per-pixel logits ``(B, T, H, W)``, thresholded at 0 (a bare ``nn.Module`` whose
    ``forward(clips, waveform, frame_bounds, sample_rate)`` returns the same works too).

    Raises:
        ValueError: When ``SEGROBUST_EXAMPLE_DEGRADE`` is set to anything but 0 or 1.
    """
    degrade = os.environ.get(DEGRADE_VARIABLE, "0")
    if degrade not in ("0", "1"):
        raise ValueError(f"environment variable {DEGRADE_VARIABLE}: expected 0 or 1, got {degrade!r}")
    model = tiny_avs()
    if degrade == "1":
        rounded(model, DEGRADED_BITS)
    return model
