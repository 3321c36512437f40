"""The demo referring model: the demo U-Net's encoder, steered by the expression (FiLM).

:class:`TinyReferringUNet` reads an image with the encoder of the demo
:class:`~pytest_segrobust.models.demo.TinyUNet` (same blocks and widths, initialised from
its trained weights and kept frozen in training) and decodes one mask per expression with a
light decoder whose features the expression modulates, FiLM-style (a per-channel scale and
shift computed from the text). Two self-attention layers over the coarsest features, which
carry their position, let the model compare objects across the whole image ("the leftmost
striped shape", "the striped shape left of the smooth shape").

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

import importlib.resources
import io
import re
import zlib
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from pytest_segrobust.models.demo import _MEAN, _STD, DEFAULT_WIDTHS, WEIGHTS_PACKAGE, _ConvBlock

WEIGHTS_PATH = ("weights", "tiny_referring.pt")
TEXT_BUCKETS = 1024
TEXT_DIM = 64
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
        """Shape: features ``(B, C, H, W)``, text ``(B, D)`` -> ``(B, C, H, W)``."""
        scale, shift = self.project(text)[:, :, None, None].chunk(2, dim=1)
        return features * (1.0 + scale) + shift


class _GlobalAttention(nn.Module):
    """Pre-norm self-attention over all positions of a feature map, with a residual."""

    def __init__(self, channels: int, heads: int = 4) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(channels)
        self.attention = nn.MultiheadAttention(channels, heads, batch_first=True)
        self.feed = nn.Sequential(nn.LayerNorm(channels), nn.Linear(channels, 2 * channels), nn.ReLU(), nn.Linear(2 * channels, channels))

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Shape: ``(B, N, C)`` -> same."""
        normed = self.norm(tokens)
        tokens = tokens + self.attention(normed, normed, normed, need_weights=False)[0]
        return tokens + self.feed(tokens)


class _Fuse(nn.Sequential):
    """A 1x1 convolution that fuses upsampled features with a skip, then a 3x3 one; ReLU after each."""

    def __init__(self, in_channels: int, out_channels: int) -> None:
        super().__init__(
            nn.Conv2d(in_channels, out_channels, 1),
            nn.ReLU(inplace=True),
            nn.Conv2d(out_channels, out_channels, 3, padding=1),
            nn.ReLU(inplace=True),
        )


class TinyReferringUNet(nn.Module):
    """A demo U-Net encoder with a text-modulated decoder: ``forward(images, texts)`` -> mask logits.

    Any input size works (edge-padded to a multiple of 8, logits cropped back).

    Args:
        widths: Encoder widths, as in :class:`~pytest_segrobust.models.demo.TinyUNet`.
        text_dim: Width of the text vector.
    """

    def __init__(self, widths: Sequence[int] = DEFAULT_WIDTHS, text_dim: int = TEXT_DIM) -> None:
        super().__init__()
        if len(widths) != 4:
            raise ValueError(f"TinyReferringUNet needs four widths, got {widths}")
        self.widths = tuple(widths)
        self.downsampling = 2 ** (len(widths) - 1)
        self.register_buffer("mean", torch.tensor(_MEAN).view(1, 3, 1, 1), persistent=False)
        self.register_buffer("std", torch.tensor(_STD).view(1, 3, 1, 1), persistent=False)
        # Same names and shapes as TinyUNet.encoders, so its trained weights load into them.
        self.encoders = nn.ModuleList(
            [_ConvBlock(c_in, c_out) for c_in, c_out in zip((3, *widths[:-1]), widths, strict=True)]
        )
        self.text = HashedTrigramText(dim=text_dim)
        coarse = widths[-1]
        self.position = nn.Conv2d(2, coarse, 1)
        self.film_coarse = FiLM(text_dim, coarse)
        self.attention = nn.ModuleList([_GlobalAttention(coarse), _GlobalAttention(coarse)])
        self.film_attended = FiLM(text_dim, coarse)
        # The decoder is light (1x1 fusions, one 3x3 convolution per level, no BatchNorm): it
        # runs once per expression, where the encoder runs once per image.
        self.decode_quarter = _Fuse(coarse + widths[2], 32)
        self.film_quarter = FiLM(text_dim, 32)
        self.decode_half = _Fuse(32 + widths[1], 16)
        self.film_half = FiLM(text_dim, 16)
        # Logits at half resolution, upsampled: a full-resolution stage per expression would
        # cost more than the rest of the decoder for a pixel or so of edge.
        self.head = nn.Conv2d(16, 1, 1)

    def encode(self, images: torch.Tensor) -> list[torch.Tensor]:
        """The encoder's features at full, 1/2, 1/4 and 1/8 resolution (of the padded input).

        Shape:
            images: ``(B, 3, H, W)`` in ``[0, 1]``; return: ``(B, widths[i], H' / 2**i, W' / 2**i)``.
        """
        height, width = images.shape[-2:]
        x = (images - self.mean) / self.std
        pad_bottom, pad_right = -height % self.downsampling, -width % self.downsampling
        if pad_bottom or pad_right:
            x = F.pad(x, (0, pad_right, 0, pad_bottom), mode="replicate")
        features: list[torch.Tensor] = []
        for level, encoder in enumerate(self.encoders):
            if level > 0:
                x = F.max_pool2d(x, 2)
            x = encoder(x)
            features.append(x)
        return features

    def decode(self, features: Sequence[torch.Tensor], texts: Sequence[str], size: tuple[int, int]) -> torch.Tensor:
        """Mask logits of each expression from its image's encoder features below full resolution.

        Args:
            features: The 1/2, 1/4 and 1/8 resolution features of :meth:`encode` (its first
                level may be included; it is not used), one image per expression.
            texts: One expression per image.
            size: ``(H, W)`` of the images.

        Shape:
            features: as :meth:`encode` returns, batch ``B``; return ``(B, H, W)``.
        """
        half, quarter, coarse = features[-3:]
        text = self.text(texts)
        batch, channels, rows, columns = coarse.shape
        ys = torch.linspace(-1.0, 1.0, rows, device=coarse.device).view(1, 1, rows, 1).expand(1, 1, rows, columns)
        xs = torch.linspace(-1.0, 1.0, columns, device=coarse.device).view(1, 1, 1, columns).expand(1, 1, rows, columns)
        x = self.film_coarse(coarse, text) + self.position(torch.cat([xs, ys], dim=1))
        tokens = x.flatten(2).transpose(1, 2)
        for layer in self.attention:
            tokens = layer(tokens)
        x = self.film_attended(tokens.transpose(1, 2).reshape(batch, channels, rows, columns), text)
        x = F.interpolate(x, size=quarter.shape[-2:], mode="bilinear", align_corners=False)
        x = self.film_quarter(self.decode_quarter(torch.cat([x, quarter], dim=1)), text)
        x = F.interpolate(x, size=half.shape[-2:], mode="bilinear", align_corners=False)
        x = self.film_half(self.decode_half(torch.cat([x, half], dim=1)), text)
        padded = (2 * half.shape[-2], 2 * half.shape[-1])
        logits = F.interpolate(self.head(x), size=padded, mode="bilinear", align_corners=False)[:, 0]
        return logits[:, : size[0], : size[1]]

    def forward(self, images: torch.Tensor, texts: Sequence[str]) -> torch.Tensor:
        """Mask logits, one map per (image, expression) pair; a pixel is in the mask where > 0.

        Args:
            images: Float RGB images in ``[0, 1]``.
            texts: One expression per image.

        Shape:
            images: ``(B, 3, H, W)``; return: ``(B, H, W)``.
        """
        if len(texts) != images.shape[0]:
            raise ValueError(f"got {images.shape[0]} images but {len(texts)} expressions")
        height, width = images.shape[-2:]
        return self.decode(self.encode(images), list(texts), (height, width))


def tiny_referring(weights: str | None = None, device: str = "cpu") -> TinyReferringUNet:
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
    model = TinyReferringUNet()
    if weights is None:
        folder, filename = WEIGHTS_PATH
        resource = importlib.resources.files(WEIGHTS_PACKAGE) / folder / filename
        state = torch.load(io.BytesIO(resource.read_bytes()), map_location="cpu", weights_only=True)
    else:
        state = torch.load(weights, map_location="cpu", weights_only=True)
    model.load_state_dict(state)
    return model.eval().to(device)
