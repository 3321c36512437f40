"""The demo referring model: the demo U-Net finds regions, the expression picks one (FiLM).

:class:`TinyReferringNet` reads an image with the demo
:class:`~pytest_segrobust.models.demo.TinyUNet` (its trained weights, kept frozen in
training). Every 8-connected region of one predicted object class is a candidate, described
by a token: the U-Net's last decoder features, class probabilities and colour averaged over
the region, its centroid and its size. The expression modulates the tokens FiLM-style (a
per-channel scale and shift computed from the text); two self-attention layers among the
regions of the image let it compare them ("the leftmost striped shape", "the largest dotted
shape", "the striped shape left of the smooth shape"); each region gets a logit, and every
pixel of a region takes its region's logit (background :data:`OUTSIDE_LOGIT`).

Choosing among the U-Net's regions rather than painting pixels is what makes it learn in
minutes on a CPU: the per-pixel work is the frozen U-Net's, once per image, and only the
small text and region parts train. Its masks are only as good as the U-Net's regions:
touching objects of one class are one region, and a visual corruption that breaks the U-Net
breaks the referring model with it.

Text is read by :class:`HashedTrigramText`: lower-cased, punctuation deleted, each word a
bag of hashed character trigrams (and the whole word), then a small bidirectional GRU over
the words. A misspelt or clipped word keeps most of its trigrams and so most of its
meaning; an unknown word lands on some bucket like any other; an empty text is one empty
word. Nothing depends on a vocabulary file.

The weights ship with the package (``models/weights/tiny_referring.pt``, written by
``scripts/train_demo_referring.py``). Training sees clean images and clean expressions
only, so the model is fragile under both visual corruptions and text perturbations.
"""

from __future__ import annotations

import math
import re
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn

from pytest_segrobust.data.demo import CLASS_NAMES
from pytest_segrobust.models.components import connected_components
from pytest_segrobust.models.demo import DEFAULT_WIDTHS, TinyUNet, load_weights

WEIGHTS_PATH = ("weights", "tiny_referring.pt")
TEXT_BUCKETS = 1024
TEXT_DIM = 64
MAX_REGIONS = 32
# Objects an expression names have at least 60 visible pixels; smaller regions are specks.
MIN_REGION_AREA = 16
OUTSIDE_LOGIT = -10.0
_NOT_WORD = re.compile(r"[^a-z0-9\s]")


def words_of(text: str) -> list[str]:
    """The words of ``text``: lower case, punctuation deleted (so ``d-otted`` is ``dotted``); never empty."""
    return _NOT_WORD.sub("", text.lower()).split() or [""]


def word_buckets(word: str, buckets: int = TEXT_BUCKETS) -> list[int]:
    """Hashed ids of the word itself and of its character trigrams, with ``<`` and ``>`` marking its ends."""
    marked = f"<{word}>"
    pieces = [word, *(marked[i : i + 3] for i in range(len(marked) - 2))]
    # crc32, not hash(): the same text must map to the same buckets in every process.
    return [zlib.crc32(piece.encode()) % buckets for piece in pieces]


class HashedTrigramText(nn.Module):
    """Text to one vector: hashed trigram bags per word, a bidirectional GRU over the words.

    Args:
        buckets: Size of the hashed trigram table.
        dim: Width of word vectors and of the text vector.
    """

    def __init__(self, buckets: int = TEXT_BUCKETS, dim: int = TEXT_DIM) -> None:
        super().__init__()
        self.buckets = buckets
        self.words = nn.EmbeddingBag(buckets, dim, mode="mean")
        self.gru = nn.GRU(dim, dim, batch_first=True, bidirectional=True)
        self.out = nn.Linear(2 * dim, dim)

    def forward(self, texts: Sequence[str]) -> torch.Tensor:
        """Shape: ``B`` texts -> ``(B, dim)``."""
        device = self.words.weight.device
        sentences = [words_of(text) for text in texts]
        ids: list[int] = []
        offsets: list[int] = []
        for sentence in sentences:
            for word in sentence:
                offsets.append(len(ids))
                ids.extend(word_buckets(word, self.buckets))
        vectors = self.words(torch.tensor(ids, device=device), torch.tensor(offsets, device=device))
        lengths = [len(sentence) for sentence in sentences]
        padded = nn.utils.rnn.pad_sequence(list(vectors.split(lengths)), batch_first=True)
        packed = nn.utils.rnn.pack_padded_sequence(padded, lengths, batch_first=True, enforce_sorted=False)
        _, final = self.gru(packed)  # (2 directions, B, dim)
        return self.out(torch.cat([final[0], final[1]], dim=1))


class FiLM(nn.Module):
    """Per-channel scale and shift from the text vector; starts as the identity.

    Args:
        text_dim: Width of the text vector.
        channels: Channels of the features it modulates.
    """

    def __init__(self, text_dim: int, channels: int) -> None:
        super().__init__()
        self.project = nn.Linear(text_dim, 2 * channels)
        nn.init.zeros_(self.project.weight)
        nn.init.zeros_(self.project.bias)

    def forward(self, features: torch.Tensor, text: torch.Tensor) -> torch.Tensor:
        """Shape: features ``(B, N, C)`` (channels last), text ``(B, D)`` -> ``(B, N, C)``."""
        scale, shift = self.project(text)[:, None, :].chunk(2, dim=2)
        return features * (1.0 + scale) + shift


class _SetAttention(nn.Module):
    """Pre-norm self-attention among the regions of one image (padding masked), with a residual."""

    def __init__(self, channels: int, heads: int = 4) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(channels)
        self.attention = nn.MultiheadAttention(channels, heads, batch_first=True)
        self.feed = nn.Sequential(
            nn.LayerNorm(channels), nn.Linear(channels, 2 * channels), nn.ReLU(), nn.Linear(2 * channels, channels)
        )

    def forward(self, tokens: torch.Tensor, padding: torch.Tensor) -> torch.Tensor:
        """Shape: tokens ``(B, N, C)``, padding ``(B, N)`` bool (True: no region) -> ``(B, N, C)``."""
        normed = self.norm(tokens)
        tokens = tokens + self.attention(normed, normed, normed, key_padding_mask=padding, need_weights=False)[0]
        return tokens + self.feed(tokens)


@dataclass(frozen=True)
class Regions:
    """What the image side reads of a batch of images: its candidate regions.

    Attributes:
        features: Per region: the mean TinyUNet decoder features, class probabilities and
            colour over its pixels, its centroid (``x``, ``y`` in ``[-1, 1]``) and log area
            (a fraction of the image's log pixel count); zeros where there is no region.
        padding: True where a slot holds no region.
        region_map: Per pixel, the slot of its region, -1 for background and dropped regions.

    Shape:
        features: ``(B, N, F)``; padding: ``(B, N)``; region_map: ``(B, H, W)`` int64.
    """

    features: torch.Tensor
    padding: torch.Tensor
    region_map: torch.Tensor


class TinyReferringNet(nn.Module):
    """Regions of the demo TinyUNet, chosen by the expression: ``forward(images, texts)`` -> mask logits.

    Args:
        widths: Widths of the TinyUNet.
        text_dim: Width of the text vector and of the region tokens.
        max_regions: Regions kept per image, the largest first.
        min_area: Regions of fewer pixels are dropped (specks of misread texture).
    """

    def __init__(
        self,
        widths: Sequence[int] = DEFAULT_WIDTHS,
        text_dim: int = TEXT_DIM,
        max_regions: int = MAX_REGIONS,
        min_area: int = MIN_REGION_AREA,
    ) -> None:
        super().__init__()
        self.semantic = TinyUNet(num_classes=len(CLASS_NAMES), widths=widths)
        self.max_regions = max_regions
        self.min_area = min_area
        region_features = widths[0] + len(CLASS_NAMES) + 3 + 3
        self.text = HashedTrigramText(dim=text_dim)
        self.embed = nn.Sequential(nn.Linear(region_features, text_dim), nn.LayerNorm(text_dim))
        self.film_in = FiLM(text_dim, text_dim)
        self.attention = nn.ModuleList([_SetAttention(text_dim), _SetAttention(text_dim)])
        self.film_out = FiLM(text_dim, text_dim)
        self.score = nn.Sequential(nn.ReLU(), nn.Linear(text_dim, 1))

    def extra_repr(self) -> str:
        return f"max_regions={self.max_regions}, min_area={self.min_area}"

    def encode(self, images: torch.Tensor) -> Regions:
        """The candidate regions of every image: 8-connected regions of one predicted object class.

        Shape:
            images: ``(B, 3, H, W)`` in ``[0, 1]``.
        """
        net = self.semantic
        batch, _, height, width = images.shape
        x = net.decoded(images)[..., :height, :width]
        probabilities = net.head(x).softmax(dim=1)
        regions = connected_components(probabilities.argmax(dim=1))
        pixels = torch.cat([x, probabilities, images], dim=1).flatten(2)  # (B, C, H*W)
        ys, xs = torch.meshgrid(
            torch.linspace(-1.0, 1.0, height, device=images.device),
            torch.linspace(-1.0, 1.0, width, device=images.device),
            indexing="ij",
        )
        log_pixels = math.log(height * width)
        features = torch.zeros(batch, self.max_regions, self.embed[0].in_features, device=images.device)
        padding = torch.ones(batch, self.max_regions, dtype=torch.bool, device=images.device)
        region_map = torch.full((batch, height, width), -1, dtype=torch.int64, device=images.device)
        for image in range(batch):
            flat = regions[image].flatten()
            ids, inverse, area = torch.unique(flat, return_inverse=True, return_counts=True)
            # Largest first (ties: raster order of the region's last pixel), background and specks out.
            eligible = (ids > 0) & (area >= self.min_area)
            order = sorted(torch.nonzero(eligible)[:, 0].tolist(), key=lambda r: (-int(area[r]), int(ids[r])))
            slot_of = torch.full((len(ids),), -1, dtype=torch.int64, device=images.device)
            kept = order[: self.max_regions]
            if not kept:
                continue
            slot_of[kept] = torch.arange(len(kept), device=images.device)
            slots = slot_of[inverse]
            region_map[image] = slots.view(height, width)
            inside = slots >= 0
            count = torch.zeros(len(kept), device=images.device).index_add_(
                0, slots[inside], torch.ones(int(inside.sum()), device=images.device)
            )
            sums = torch.zeros(len(kept), pixels.shape[1] + 2, device=images.device).index_add_(
                0,
                slots[inside],
                torch.cat([pixels[image][:, inside], xs.flatten()[inside][None], ys.flatten()[inside][None]]).T,
            )
            means = sums / count[:, None]
            features[image, : len(kept)] = torch.cat([means, (count.log() / log_pixels)[:, None]], dim=1)
            padding[image, : len(kept)] = False
        return Regions(features, padding, region_map)

    def score_regions(self, features: torch.Tensor, padding: torch.Tensor, texts: Sequence[str]) -> torch.Tensor:
        """One logit per region: is it (part of) what the expression names.

        Shape:
            features: ``(B, N, F)``; padding: ``(B, N)``; ``B`` texts; return ``(B, N)``.
        """
        text = self.text(texts)
        tokens = self.film_in(self.embed(features), text)
        # A row of padding only would make attention undefined; such an image has no region to score.
        padding = padding & ~padding.all(dim=1, keepdim=True)
        for layer in self.attention:
            tokens = layer(tokens, padding)
        return self.score(self.film_out(tokens, text))[..., 0]

    def forward(self, images: torch.Tensor, texts: Sequence[str]) -> torch.Tensor:
        """Mask logits, one map per (image, expression) pair: each pixel has its region's logit.

        Pixels of no region (background, specks) get :data:`OUTSIDE_LOGIT`.

        Args:
            images: Float RGB images in ``[0, 1]``.
            texts: One expression per image.

        Shape:
            images: ``(B, 3, H, W)``; return: ``(B, H, W)``.
        """
        if len(texts) != images.shape[0]:
            raise ValueError(f"got {images.shape[0]} images but {len(texts)} expressions")
        regions = self.encode(images)
        logits = self.score_regions(regions.features, regions.padding, list(texts))
        painted = torch.gather(logits, 1, regions.region_map.clamp(min=0).flatten(1)).view(regions.region_map.shape)
        return torch.where(regions.region_map >= 0, painted, torch.full_like(painted, OUTSIDE_LOGIT))


def tiny_referring(weights: str | None = None, device: str = "cpu") -> TinyReferringNet:
    """Build the demo referring model with trained weights, in eval mode.

    Args:
        weights: Path of a state dict file; ``None`` loads the weights shipped with the package.
        device: Device to put the model on.

    Returns:
        The model (an ``nn.Module`` with ``forward(images, texts)``, adapted by
        :class:`~pytest_segrobust.models.torch_module.TorchModuleReferringSegmenter`).

    Raises:
        FileNotFoundError: When the weights file does not exist.
    """
    return load_weights(TinyReferringNet(), weights, WEIGHTS_PATH, device)
