"""The demo promptable model: the demo U-Net's features and a small head that reads the prompts.

:class:`TinyPromptableNet` reads an image once with the demo
:class:`~pytest_segrobust.models.demo.TinyUNet` (its trained weights, frozen) and, for every
prompt set, runs a small dilated convolutional head at half resolution on the U-Net's last
decoder features and two prompt maps: the clicks (a Gaussian bump of +1 per foreground click,
-1 per background click) and the box (1 inside it). The head's logits are upsampled to the
image's size; a pixel is in the mask where its logit is above 0.

The head's weights ship with the package (``models/weights/tiny_promptable.pt``, a few tens of
KB, written by ``scripts/train_demo_promptable.py``); the U-Net's are ``tiny_unet.pt``. Training
sees clean images and clean prompts (one to three clicks, or the tight box), so the model is
fragile under image corruptions that break the U-Net and under prompts a user gets wrong.

:func:`tiny_promptable` returns a :class:`~pytest_segrobust.models.base.PromptableSegmentationModel`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from pytest_segrobust.core.prompts import FOREGROUND, PromptSet
from pytest_segrobust.models.demo import WEIGHTS_PATH as UNET_WEIGHTS_PATH
from pytest_segrobust.models.demo import TinyUNet, load_weights

WEIGHTS_PATH = ("weights", "tiny_promptable.pt")
FEATURES = 16  # the U-Net's finest width
WIDTH = 8
CLICK_SIGMA = 1.5  # pixels of the half-resolution maps


class PromptHead(nn.Module):
    """Logits of one mask from an image's features and one prompt set's two maps, at half resolution."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.Sequential(
            nn.Conv2d(FEATURES + 2, WIDTH, 3, padding=1),
            nn.ReLU(inplace=True),
            nn.Conv2d(WIDTH, WIDTH, 3, padding=2, dilation=2),
            nn.ReLU(inplace=True),
            nn.Conv2d(WIDTH, WIDTH, 3, padding=4, dilation=4),
            nn.ReLU(inplace=True),
            nn.Conv2d(WIDTH, WIDTH, 3, padding=8, dilation=8),
            nn.ReLU(inplace=True),
            nn.Conv2d(WIDTH, 1, 1),
        )

    def forward(self, features: torch.Tensor, maps: torch.Tensor) -> torch.Tensor:
        """Shape: features ``(N, FEATURES, h, w)``, maps ``(N, 2, h, w)``; return ``(N, h, w)``."""
        return self.layers(torch.cat([features, maps], dim=1))[:, 0]


def prompt_maps(sets: Sequence[PromptSet], height: int, width: int, device: torch.device) -> torch.Tensor:
    """The click and box maps of each prompt set at half resolution (``ceil(H / 2)``, ``ceil(W / 2)``).

    Shape:
        return: ``(len(sets), 2, h, w)``, float32.
    """
    h, w = (height + 1) // 2, (width + 1) // 2
    maps = torch.zeros(len(sets), 2, h, w, device=device)
    ys = torch.arange(h, device=device, dtype=torch.float32)[:, None]
    xs = torch.arange(w, device=device, dtype=torch.float32)[None, :]
    for i, prompt_set in enumerate(sets):
        for (x, y), label in zip(prompt_set.points.tolist(), prompt_set.labels.tolist()):
            bump = torch.exp(-((xs - x / 2) ** 2 + (ys - y / 2) ** 2) / (2 * CLICK_SIGMA**2))
            maps[i, 0] += bump if label == FOREGROUND else -bump
        if prompt_set.box is not None:
            x0, y0, x1, y1 = (float(v) / 2 for v in prompt_set.box)
            maps[i, 1] = ((xs + 0.5 > x0) & (xs + 0.5 < x1) & (ys + 0.5 > y0) & (ys + 0.5 < y1)).float()
    return maps


class TinyPromptableNet(nn.Module):
    """The frozen demo U-Net and a :class:`PromptHead` (see the module)."""

    def __init__(self) -> None:
        super().__init__()
        self.unet = TinyUNet()
        self.head = PromptHead()

    def features(self, images: torch.Tensor) -> torch.Tensor:
        """The U-Net's last decoder features, cropped to the images and halved.

        Shape:
            images: ``(B, 3, H, W)``; return: ``(B, FEATURES, ceil(H / 2), ceil(W / 2))``.
        """
        height, width = images.shape[-2:]
        decoded = self.unet.decoded(images)[..., :height, :width]
        return F.avg_pool2d(decoded, 2, ceil_mode=True)

    def forward(self, features: torch.Tensor, maps: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
        """Logits at ``size`` of each prompt set, from its image's features and its maps.

        Shape:
            features, maps: ``(N, ., h, w)``; return: ``(N, *size)``.
        """
        logits = self.head(features, maps)
        return F.interpolate(logits[:, None], size=size, mode="bilinear", align_corners=False)[:, 0]


class TinyPromptable:
    """:class:`TinyPromptableNet` as a :class:`~pytest_segrobust.models.base.PromptableSegmentationModel`."""

    task = "promptable"

    def __init__(self, net: TinyPromptableNet, device: str | torch.device = "cpu") -> None:
        self.net = net.eval().to(device)
        self.device = torch.device(device)

    def fingerprint(self) -> str:
        digest = hashlib.blake2b(digest_size=12)
        for name, value in sorted(self.net.state_dict().items()):
            digest.update(name.encode())
            digest.update(value.detach().cpu().contiguous().numpy().tobytes())
        return f"tiny-promptable:{digest.hexdigest()}"

    def predict(self, images: torch.Tensor, prompts: Sequence[Sequence[PromptSet]]) -> list[torch.Tensor]:
        """Per image, ``(P, H, W)`` float logits, one per prompt set."""
        height, width = int(images.shape[-2]), int(images.shape[-1])
        with torch.inference_mode():
            features = self.net.features(images.to(self.device))
            counts = [len(sets) for sets in prompts]
            flat = [s for sets in prompts for s in sets]
            if not flat:
                return [torch.zeros(0, height, width, device=self.device) for _ in prompts]
            owner = torch.repeat_interleave(torch.arange(len(counts), device=self.device), torch.tensor(counts, device=self.device))
            maps = prompt_maps(flat, height, width, self.device)
            logits = self.net(features[owner], maps, (height, width))
        return list(logits.split(counts))


def tiny_promptable(weights: str | None = None, device: str = "cpu") -> TinyPromptable:
    """Build the demo promptable model: the shipped U-Net and head (or the head of ``weights``), in eval mode.

    Raises:
        FileNotFoundError: When the weights file does not exist.
    """
    net = TinyPromptableNet()
    load_weights(net.unet, None, UNET_WEIGHTS_PATH, "cpu")
    load_weights(net.head, weights, WEIGHTS_PATH, "cpu")
    return TinyPromptable(net, device)


def tiny_promptable_boxblind(weights: str | None = None, device: str = "cpu") -> TinyPromptable:
    """The demo model blind to boxes (the head's weights on the box map zeroed): a degraded model for
    tests and for trying the gate, whose box prompt sets answer as if nothing were asked."""
    model = tiny_promptable(weights, device)
    with torch.no_grad():
        model.net.head.layers[0].weight[:, FEATURES + 1].zero_()
    return model
