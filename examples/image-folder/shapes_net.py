"""The example's own segmentation model: a small fully convolutional network, and its factory.

The suite names the factory as ``shapes_net:shapes_net``: this module sits in the project's
rootdir, so pytest-segrobust imports it with no ``pythonpath`` setting. ``train.py`` trained the
shipped weights (``shapes_net.pt``) on the package's procedural training scenes.

Set ``SEGROBUST_EXAMPLE_DEGRADE=1`` to load the weights rounded to a few bits, as a careless
low-precision export would: the model the gate must catch.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

CLASS_NAMES: tuple[str, ...] = ("background", "striped", "checkered", "dotted", "smooth")
WEIGHTS = Path(__file__).resolve().parent / "shapes_net.pt"
DEGRADE_VARIABLE = "SEGROBUST_EXAMPLE_DEGRADE"
DEGRADED_BITS = 3  # signed levels per weight tensor when degraded: -3..3 times its scale


class ShapesNet(nn.Module):
    """Three strided stages down to a quarter of the resolution, one skip back up, a 1x1 head.

    Args:
        num_classes: Output channels, one per class.
        width: Channels of the finest stage (the coarser ones have twice as many).
    """

    def __init__(self, num_classes: int = len(CLASS_NAMES), width: int = 12) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, padding=1), nn.ReLU())
        self.down = nn.Sequential(
            nn.Conv2d(width, 2 * width, 3, stride=2, padding=1),
            nn.ReLU(),
            nn.Conv2d(2 * width, 2 * width, 3, stride=2, padding=1),
            nn.ReLU(),
            nn.Conv2d(2 * width, 2 * width, 3, padding=2, dilation=2),
            nn.ReLU(),
        )
        self.fuse = nn.Sequential(nn.Conv2d(3 * width, width, 3, padding=1), nn.ReLU())
        self.head = nn.Conv2d(width, num_classes, 1)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """Per-pixel class logits.

        Args:
            images: RGB images with values in ``[0, 1]``, as pytest-segrobust passes them.

        Shape:
            images: ``(B, 3, H, W)``; return: ``(B, num_classes, H, W)``.
        """
        fine = self.stem((images - 0.5) / 0.25)
        coarse = F.interpolate(self.down(fine), size=fine.shape[-2:], mode="bilinear", align_corners=False)
        return self.head(self.fuse(torch.cat([fine, coarse], dim=1)))


def rounded(state: dict[str, torch.Tensor], bits: int) -> dict[str, torch.Tensor]:
    """Every weight tensor rounded to ``2 ** (bits - 1) - 1`` signed levels of its largest magnitude."""
    levels = 2 ** (bits - 1) - 1
    out = {}
    for name, tensor in state.items():
        scale = tensor.abs().max().clamp_min(1e-12) / levels
        out[name] = torch.round(tensor / scale) * scale
    return out


def shapes_net(weights: str | None = None) -> ShapesNet:
    """The trained model in eval mode (degraded where ``SEGROBUST_EXAMPLE_DEGRADE`` is set to 1).

    Args:
        weights: A state dict file; the shipped ``shapes_net.pt`` by default.

    Raises:
        ValueError: When ``SEGROBUST_EXAMPLE_DEGRADE`` is set to anything but 0 or 1.
    """
    state = torch.load(weights or WEIGHTS, map_location="cpu", weights_only=True)
    degrade = os.environ.get(DEGRADE_VARIABLE, "0")
    if degrade not in ("0", "1"):
        raise ValueError(f"environment variable {DEGRADE_VARIABLE}: expected 0 or 1, got {degrade!r}")
    if degrade == "1":
        state = rounded(state, DEGRADED_BITS)
    model = ShapesNet()
    model.load_state_dict({name: tensor.float() for name, tensor in state.items()})
    return model.eval()
