"""The demo model: a tiny U-Net trained on the embedded demo scenes.

Its weights ship with the package (``models/weights/tiny_unet.pt``, produced by
``scripts/train_demo_model.py``), so the demo runs with no downloads. It is trained on
clean images only, so it is deliberately fragile under noise and blur.

:func:`tiny_unet_instances` turns the same network into an instance segmentation model
(one instance per connected region of a predicted class), for the demo's instance suite, and
:func:`tiny_unet_panoptic` into a panoptic one (those regions as things, the background as
stuff).
"""

from __future__ import annotations

import importlib.resources
import io
from typing import TypeVar

import torch
import torch.nn.functional as F
from torch import nn

from pytest_segrobust.corruptions.functional.filters import gaussian_blur
from pytest_segrobust.data.demo import CLASS_NAMES, STUFF_CLASSES
from pytest_segrobust.models.components import ComponentInstances, ComponentPanoptic

# Located relative to this package, so the weights folder needs no __init__.py.
WEIGHTS_PACKAGE = "pytest_segrobust.models"
WEIGHTS_PATH = ("weights", "tiny_unet.pt")
M = TypeVar("M", bound=nn.Module)
DEFAULT_WIDTHS: tuple[int, ...] = (16, 32, 48, 64)
# Regions smaller than this are mostly specks of misclassified texture, not objects. Clean AP
# is the same for 1 to 16; under noise, 4 keeps about half as many specks as 1 does.
DEMO_MIN_AREA = 4

# Rough per-channel statistics of the demo scenes; the exact values matter little, they
# only centre the inputs so the first layer trains quickly.
_MEAN = (0.5, 0.5, 0.5)
_STD = (0.25, 0.25, 0.25)


class _ConvBlock(nn.Sequential):
    """Two 3x3 convolutions, each followed by BatchNorm and ReLU; keeps the resolution."""

    def __init__(self, in_channels: int, out_channels: int) -> None:
        super().__init__(
            nn.Conv2d(in_channels, out_channels, 3, padding=1, bias=False),
            nn.BatchNorm2d(out_channels),
            nn.ReLU(inplace=True),
            nn.Conv2d(out_channels, out_channels, 3, padding=1, bias=False),
            nn.BatchNorm2d(out_channels),
            nn.ReLU(inplace=True),
        )


class TinyUNet(nn.Module):
    """A small U-Net: ``len(widths) - 1`` halvings, skip connections, BatchNorm, ReLU.

    Any input size works: the input is edge-padded up to a multiple of the total
    down-sampling factor ``2 ** (len(widths) - 1)`` (8 by default) and the logits are
    cropped back, so the output always matches the input resolution.

    Args:
        num_classes: Number of output classes.
        widths: Channel count at each resolution, finest first.
    """

    def __init__(self, num_classes: int = len(CLASS_NAMES), widths: tuple[int, ...] = DEFAULT_WIDTHS) -> None:
        super().__init__()
        if len(widths) < 2:
            raise ValueError(f"TinyUNet needs at least two widths, got {widths}")
        self.num_classes = num_classes
        self.widths = tuple(widths)
        self.downsampling = 2 ** (len(widths) - 1)
        # Not persistent: the normalisation is code, not learnt state, and keeping it out
        # of the state dict keeps the weights file independent of it.
        self.register_buffer("mean", torch.tensor(_MEAN).view(1, 3, 1, 1), persistent=False)
        self.register_buffer("std", torch.tensor(_STD).view(1, 3, 1, 1), persistent=False)
        self.encoders = nn.ModuleList(
            [_ConvBlock(c_in, c_out) for c_in, c_out in zip((3, *widths[:-1]), widths, strict=True)]
        )
        # Decoder stage i fuses the upsampled coarser features with encoder skip i.
        self.decoders = nn.ModuleList(
            [_ConvBlock(widths[i + 1] + widths[i], widths[i]) for i in reversed(range(len(widths) - 1))]
        )
        self.head = nn.Conv2d(widths[0], num_classes, 1)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """Per-pixel class logits.

        Args:
            images: Float RGB images in ``[0, 1]``.

        Shape:
            images: ``(B, 3, H, W)``; return: ``(B, num_classes, H, W)``.
        """
        height, width = images.shape[-2:]
        return self.head(self.decoded(images))[..., :height, :width]

    def decoded(self, images: torch.Tensor) -> torch.Tensor:
        """The last decoder features, before the head, at the padded size (crop to the input's).

        Shape:
            images: ``(B, 3, H, W)``; return: ``(B, widths[0], H', W')``, ``H' >= H``, ``W' >= W``.
        """
        height, width = images.shape[-2:]
        pad_bottom = -height % self.downsampling
        pad_right = -width % self.downsampling
        x = (images - self.mean) / self.std
        if pad_bottom or pad_right:
            x = F.pad(x, (0, pad_right, 0, pad_bottom), mode="replicate")

        skips: list[torch.Tensor] = []
        for level, encoder in enumerate(self.encoders):
            if level > 0:
                x = F.max_pool2d(x, 2)
            x = encoder(x)
            skips.append(x)
        for decoder, skip in zip(self.decoders, reversed(skips[:-1]), strict=True):
            x = F.interpolate(x, size=skip.shape[-2:], mode="bilinear", align_corners=False)
            x = decoder(torch.cat([x, skip], dim=1))
        return x


def tiny_unet(weights: str | None = None, device: str = "cpu") -> TinyUNet:
    """Build the demo model with trained weights, in eval mode.

    Args:
        weights: Path of a state dict file; ``None`` loads the weights shipped with
            the package.
        device: Device to put the model on.

    Returns:
        The model, ready for inference.

    Raises:
        FileNotFoundError: When the weights file does not exist.
    """
    return load_weights(TinyUNet(), weights, WEIGHTS_PATH, device)


def load_weights(model: M, weights: str | None, shipped: tuple[str, str], device: str) -> M:
    """``model`` with the state dict of the file ``weights``, or of the file ``shipped`` (folder,
    name) in the package when ``weights`` is ``None``; in eval mode, on ``device``.

    Raises:
        FileNotFoundError: When the weights file does not exist.
    """
    if weights is None:
        folder, filename = shipped
        resource = importlib.resources.files(WEIGHTS_PACKAGE) / folder / filename
        # Read through the resource API so that zipped installs work too.
        state = torch.load(io.BytesIO(resource.read_bytes()), map_location="cpu", weights_only=True)
    else:
        state = torch.load(weights, map_location="cpu", weights_only=True)
    model.load_state_dict(state)
    # Channels-last convolutions: 1.1-1.6x less CPU per sample for these networks (oneDNN),
    # equal within 1e-7 (benchmarks/demo_models.py).
    return model.eval().to(device, memory_format=torch.channels_last)


def tiny_unet_instances(
    weights: str | None = None, device: str = "cpu", min_area: int = DEMO_MIN_AREA
) -> ComponentInstances:
    """The demo model as an instance segmentation model: one instance per predicted region.

    Args:
        weights: Path of a state dict file; ``None`` loads the weights shipped with
            the package.
        device: Device to put the model on.
        min_area: Predicted regions of fewer pixels are dropped.

    Returns:
        The model, ready for inference.

    Raises:
        FileNotFoundError: When the weights file does not exist.
    """
    return ComponentInstances(tiny_unet(weights, device), min_area=min_area).eval()


def tiny_unet_panoptic(weights: str | None = None, device: str = "cpu", min_area: int = DEMO_MIN_AREA) -> ComponentPanoptic:
    """The demo model as a panoptic segmentation module (the panoptic task's adapter wraps it).

    Each 8-connected region of a predicted object class is a thing segment, the predicted
    background one stuff segment (see :class:`ComponentPanoptic`), matching the demo data's
    panoptic targets.

    Args:
        weights: Path of a state dict file; ``None`` loads the weights shipped with
            the package.
        device: Where inference runs.
        min_area: Predicted object regions of fewer pixels are left void.

    Returns:
        The model, ready for inference.

    Raises:
        FileNotFoundError: When the weights file does not exist.
    """
    return ComponentPanoptic(tiny_unet(weights, device), stuff=STUFF_CLASSES, min_area=min_area).eval()


class InputSmoothing(nn.Module):
    """A model behind a Gaussian pre-filter: the classic test-time defence against noise.

    It trades detail for noise robustness, which makes it the demo's second model: next to
    the bare network, the report shows corruption degradation both below and above 100.

    Args:
        module: The network that sees the smoothed images.
        sigma: Standard deviation of the Gaussian in pixels.
    """

    def __init__(self, module: nn.Module, sigma: float) -> None:
        super().__init__()
        self.module = module
        self.sigma = sigma

    def extra_repr(self) -> str:
        return f"sigma={self.sigma}"

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """Shape: images ``(B, 3, H, W)`` -> the module's output."""
        return self.module(gaussian_blur(images, self.sigma))


def tiny_unet_smoothed(sigma: float = 1.0, weights: str | None = None, device: str = "cpu") -> InputSmoothing:
    """The demo model behind a Gaussian pre-filter of ``sigma`` pixels (see :class:`InputSmoothing`)."""
    return InputSmoothing(tiny_unet(weights, device), sigma).eval()
