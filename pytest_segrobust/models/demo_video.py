"""The video demo models: a tiny mask-propagation network (VOS) and a referring variant (R-VOS).

:class:`TinyVOSNet` is an offline semi-supervised VOS model (the task's ``VideoObjectModel``:
``forward(clips, reference)`` gives an object id per pixel of every frame). Each object of a
clip is followed on its own, frame by frame from the frame it is given in:

* a small encoder reads every frame once (features at 1/2 and 1/4 resolution);
* the object's *prototype* is its mean quarter-resolution feature in the reference frame
  under its reference mask, the background's the mean outside it; their cosine
  similarity to the current frame's features says where the object's look is;
* a decoder reads the current features, both similarity maps and the object's mask in the
  previous frame (its probability after the objects of the clip compete) and paints the
  object's logits, refined at full resolution with the frame's pixels;
* the objects' logits and a background logit of 0 go through a softmax per pixel: the
  probabilities are the next frame's previous masks, and the ids are their argmax.

An object is nothing before its reference frame, and exactly its reference mask at it.
Because each frame leans on the previous one, broken motion (frames frozen, skipped, reversed
or shuffled) and frames it cannot read (noise, blur) both cost it, which is what the demo's
static, dynamic and temporal cells show.

:class:`TinyRVOSNet` is the referring variant (``ReferringVideoModel``: ``forward(clips,
texts)`` gives mask logits per frame): the same encoder and decoder, the encoder's features
modulated by the expression (FiLM; the text read as a bag of hashed character trigrams,
:class:`BagOfTrigrams`) and the previous frame's mask probability as an input; the decoder
paints a pixel embedding, and the expression gives the weights that turn it into logits (a
dynamic head), so nothing is segmented that the words do not pick.

Both run on any device (every tensor is made on the input's device) and cost a few
milliseconds per clip frame on a CPU at 64x64. Their weights ship with the package
(``models/weights/tiny_vos.pt``, ``tiny_rvos.pt``; ``scripts/train_demo_vos.py`` and
``scripts/train_demo_rvos.py`` write them), trained on clean clips only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from pytest_segrobust.data.base import DEFAULT_IGNORE_INDEX
from pytest_segrobust.models.demo import load_weights
from pytest_segrobust.models.demo_referring import TEXT_BUCKETS, FiLM, word_buckets, words_of

VOS_WEIGHTS_PATH = ("weights", "tiny_vos.pt")
RVOS_WEIGHTS_PATH = ("weights", "tiny_rvos.pt")
FINE, COARSE = 16, 32
TEXT_DIM = 48
# Channels of the R-VOS pixel embedding that the expression's dynamic head reads.
EMBEDDING = 8
# The logit of an object's reference pixels (and minus it elsewhere) in its reference frame.
REFERENCE_LOGIT = 10.0
# The logit of an object before its reference frame: it takes part in no softmax.
ABSENT_LOGIT = -1.0e4
_MEAN, _STD = 0.5, 0.25


def _conv(in_channels: int, out_channels: int, stride: int = 1) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(in_channels, out_channels, 3, stride=stride, padding=1), nn.ReLU(inplace=True))


class FrameEncoder(nn.Module):
    """Features of frames at half and quarter resolution.

    Shape:
        frames: ``(N, 3, H, W)`` in ``[0, 1]``; return: ``(N, 16, ceil(H/2), ceil(W/2))`` and
        ``(N, 32, ceil(H/4), ceil(W/4))``.
    """

    def __init__(self) -> None:
        super().__init__()
        self.fine = nn.Sequential(_conv(3, FINE, 2), _conv(FINE, FINE))
        self.coarse = nn.Sequential(_conv(FINE, COARSE, 2), _conv(COARSE, COARSE))

    def forward(self, frames: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        fine = self.fine((frames - _MEAN) / _STD)
        return fine, self.coarse(fine)


class MaskDecoder(nn.Module):
    """Per-pixel outputs (one object's logits, or an embedding) from quarter-resolution
    inputs, half-resolution features, the previous mask and the frame.

    Args:
        coarse_inputs: Channels of the quarter-resolution input.
        channels: Channels of the output.

    Shape:
        coarse: ``(N, coarse_inputs, h, w)``; fine: ``(N, 16, 2h', 2w')``; previous:
        ``(N, 1, H, W)``; frame: ``(N, 3, H, W)``; return: ``(N, channels, H, W)``.
    """

    def __init__(self, coarse_inputs: int, channels: int = 1) -> None:
        super().__init__()
        self.coarse = nn.Sequential(_conv(coarse_inputs, COARSE), _conv(COARSE, COARSE))
        self.fine = nn.Sequential(_conv(COARSE + FINE + 1, FINE), _conv(FINE, FINE), nn.Conv2d(FINE, channels, 1))
        self.refine = nn.Sequential(_conv(channels + 3 + 1, 8), nn.Conv2d(8, channels, 3, padding=1))

    def forward(
        self, coarse: torch.Tensor, fine: torch.Tensor, previous: torch.Tensor, frame: torch.Tensor
    ) -> torch.Tensor:
        x = F.interpolate(self.coarse(coarse), size=fine.shape[-2:], mode="bilinear", align_corners=False)
        x = self.fine(torch.cat([x, fine, F.adaptive_avg_pool2d(previous, fine.shape[-2:])], dim=1))
        x = F.interpolate(x, size=frame.shape[-2:], mode="bilinear", align_corners=False)
        return x + self.refine(torch.cat([x, (frame - _MEAN) / _STD, previous], dim=1))


@dataclass(frozen=True)
class ObjectLayout:
    """The objects of a batch of clips, one row each, as the reference gives them.

    Attributes:
        clip: The clip each object belongs to.
        ids: Its object id.
        first: The frame it is given in (the first where the reference shows it).
        slot: Its place among its clip's objects, from 1 (0 is the background).
        slots: One more than the most objects of any clip.
        id_of_slot: ``(B, slots)``: the object id of each clip's slot, 0 for the background and
            unused slots.

    Shape:
        clip, ids, first, slot: ``(N,)`` int64.
    """

    clip: torch.Tensor
    ids: torch.Tensor
    first: torch.Tensor
    slot: torch.Tensor
    slots: int
    id_of_slot: torch.Tensor

    @classmethod
    def of(cls, reference: torch.Tensor, ignore_index: int = DEFAULT_IGNORE_INDEX) -> ObjectLayout:
        """The objects of ``reference`` ``(B, T, H, W)``: every id other than 0 and ``ignore_index``."""
        device = reference.device
        rows: list[tuple[int, int, int, int]] = []
        for b, clip in enumerate(reference):
            present = clip.flatten(1)
            ids = [int(i) for i in present.unique().tolist() if i not in (0, ignore_index)]
            for slot, object_id in enumerate(ids, start=1):
                shown = (present == object_id).any(dim=1).nonzero()
                rows.append((b, object_id, int(shown[0, 0]), slot))
        slots = 1 + max((row[3] for row in rows), default=0)
        id_of_slot = torch.zeros(reference.shape[0], slots, dtype=torch.int64, device=device)
        columns = torch.tensor(rows, dtype=torch.int64, device=device).view(-1, 4).T
        id_of_slot[columns[0], columns[3]] = columns[1]
        return cls(columns[0], columns[1], columns[2], columns[3], slots, id_of_slot)


class TinyVOSNet(nn.Module):
    """Semi-supervised VOS by mask propagation (see the module docstring)."""

    task = "vos"
    reference = "masks"  # its objects are started by masks: a suite's prompt reference refuses it

    def __init__(self) -> None:
        super().__init__()
        self.encoder = FrameEncoder()
        self.decoder = MaskDecoder(COARSE + 3)

    def forward(self, clips: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
        """An object id per pixel of every frame (0 background).

        Args:
            clips: Float RGB frames in ``[0, 1]``.
            reference: Each object's mask in the frame it is given in, 0 elsewhere.

        Shape:
            clips: ``(B, T, 3, H, W)``; reference: ``(B, T, H, W)`` int64; return: ``(B, T, H, W)`` int64.
        """
        layout = ObjectLayout.of(reference)
        scores = self.slot_logits(clips, reference, layout)
        slots = scores.argmax(dim=1)  # (B, T, H, W)
        return torch.gather(layout.id_of_slot, 1, slots.flatten(1)).view_as(slots)

    def slot_logits(self, clips: torch.Tensor, reference: torch.Tensor, layout: ObjectLayout) -> torch.Tensor:
        """Per clip, the background's logit (0) and each object slot's, every frame.

        Shape:
            return: ``(B, slots, T, H, W)``; unused slots hold :data:`ABSENT_LOGIT`.
        """
        batch, frames, _, height, width = clips.shape
        fine, coarse = self.encoder(clips.flatten(0, 1))
        fine = fine.unflatten(0, (batch, frames))
        coarse = nn.functional.normalize(coarse, dim=1).unflatten(0, (batch, frames))
        empty = torch.full((batch, layout.slots, height, width), ABSENT_LOGIT, device=clips.device)
        empty[:, 0] = 0.0
        count = len(layout.ids)
        if count == 0:
            return empty[:, :, None].expand(-1, -1, frames, -1, -1).clone()
        # Prototypes: mean features of the reference frame inside and outside the reference mask.
        given = reference[layout.clip, layout.first] == layout.ids.view(-1, 1, 1)  # (N, H, W)
        inside = F.adaptive_avg_pool2d(given[:, None].float(), coarse.shape[-2:])
        reference_features = coarse[layout.clip, layout.first]  # (N, C, h, w)
        prototypes = torch.stack(
            [
                (reference_features * inside).sum(dim=(2, 3)) / inside.sum(dim=(2, 3)).clamp(min=1e-6),
                (reference_features * (1 - inside)).sum(dim=(2, 3)) / (1 - inside).sum(dim=(2, 3)).clamp(min=1e-6),
            ],
            dim=1,
        )
        prototypes = nn.functional.normalize(prototypes, dim=2)  # (N, 2, C)
        given_logits = torch.where(given, REFERENCE_LOGIT, -REFERENCE_LOGIT)
        previous = torch.zeros(count, 1, height, width, device=clips.device)
        out: list[torch.Tensor] = []
        for t in range(frames):
            features = coarse[layout.clip, t]
            similarity = torch.einsum("nchw,nkc->nkhw", features, prototypes)
            decoded = self.decoder(
                torch.cat([features, similarity, F.adaptive_avg_pool2d(previous, features.shape[-2:])], dim=1),
                fine[layout.clip, t],
                previous,
                clips[layout.clip, t],
            )[:, 0]
            logits = torch.where((layout.first == t).view(-1, 1, 1), given_logits, decoded)
            logits = torch.where((layout.first > t).view(-1, 1, 1), torch.full_like(logits, ABSENT_LOGIT), logits)
            frame_logits = empty.clone()
            frame_logits[layout.clip, layout.slot] = logits
            out.append(frame_logits)
            previous = frame_logits.softmax(dim=1)[layout.clip, layout.slot][:, None]
        return torch.stack(out, dim=2)


class BagOfTrigrams(nn.Module):
    """Text to one vector: the mean of its words' hashed character trigrams (and whole words), then an MLP.

    The demo's expressions are attribute words in any order ("the blue dotted shape"), so a
    bag is enough, and it learns in minutes where a recurrent reader takes far longer. A
    misspelt or clipped word keeps most of its trigrams and so most of its meaning.

    Args:
        buckets: Size of the hashed trigram table.
        dim: Width of the text vector.
    """

    def __init__(self, buckets: int = TEXT_BUCKETS, dim: int = TEXT_DIM) -> None:
        super().__init__()
        self.buckets = buckets
        self.pieces = nn.EmbeddingBag(buckets, dim, mode="mean")
        self.out = nn.Sequential(nn.ReLU(), nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, dim))

    def forward(self, texts: Sequence[str]) -> torch.Tensor:
        """Shape: ``B`` texts -> ``(B, dim)``."""
        device = self.pieces.weight.device
        ids: list[int] = []
        offsets: list[int] = []
        for text in texts:
            offsets.append(len(ids))
            for word in words_of(text):
                ids.extend(word_buckets(word, self.buckets))
        vectors = self.pieces(torch.tensor(ids, device=device), torch.tensor(offsets, device=device))
        return self.out(vectors)


class TinyRVOSNet(nn.Module):
    """Referring VOS: the expression modulates the frame features, the previous mask carries over.

    Args:
        text_dim: Width of the text vector.
    """

    task = "rvos"

    def __init__(self, text_dim: int = TEXT_DIM) -> None:
        super().__init__()
        self.text = BagOfTrigrams(dim=text_dim)
        self.encoder = FrameEncoder()
        self.film_fine = FiLM(text_dim, FINE)
        self.film_coarse = FiLM(text_dim, COARSE)
        self.decoder = MaskDecoder(COARSE + 1, EMBEDDING)
        # A dynamic head: the words give the weights and bias that turn pixel embeddings into logits.
        self.head = nn.Linear(text_dim, EMBEDDING + 1)

    def forward(self, clips: torch.Tensor, texts: Sequence[str]) -> torch.Tensor:
        """Mask logits of the named object in every frame.

        Shape:
            clips: ``(B, T, 3, H, W)`` in ``[0, 1]``; ``B`` texts; return: ``(B, T, H, W)``.
        """
        batch, frames, _, height, width = clips.shape
        if len(texts) != batch:
            raise ValueError(f"got {batch} clips but {len(texts)} expressions")
        text = self.text(list(texts))
        fine, coarse = self.encoder(clips.flatten(0, 1))
        repeated = text.repeat_interleave(frames, dim=0)
        fine = _film_map(self.film_fine, fine, repeated).unflatten(0, (batch, frames))
        coarse = _film_map(self.film_coarse, coarse, repeated).unflatten(0, (batch, frames))
        weights, bias = self.head(text).split([EMBEDDING, 1], dim=1)
        previous = torch.zeros(batch, 1, height, width, device=clips.device)
        logits = []
        for t in range(frames):
            pooled = F.adaptive_avg_pool2d(previous, coarse.shape[-2:])
            embedding = self.decoder(torch.cat([coarse[:, t], pooled], dim=1), fine[:, t], previous, clips[:, t])
            frame_logits = torch.einsum("nchw,nc->nhw", embedding, weights) + bias.view(-1, 1, 1)
            logits.append(frame_logits)
            previous = frame_logits.sigmoid()[:, None]
        return torch.stack(logits, dim=1)


def _film_map(film: FiLM, features: torch.Tensor, text: torch.Tensor) -> torch.Tensor:
    """FiLM over a feature map (channels first). Shape: ``(N, C, h, w)``, ``(N, D)`` -> ``(N, C, h, w)``."""
    return film(features.flatten(2).transpose(1, 2), text).transpose(1, 2).reshape(features.shape)


def tiny_vos(weights: str | None = None, device: str = "cpu") -> TinyVOSNet:
    """The demo VOS model with trained weights, in eval mode.

    Args:
        weights: Path of a state dict file; ``None`` loads the weights shipped with the package.
        device: Device to put the model on.

    Raises:
        FileNotFoundError: When the weights file does not exist.
    """
    return load_weights(TinyVOSNet(), weights, VOS_WEIGHTS_PATH, device)


def tiny_rvos(weights: str | None = None, device: str = "cpu") -> TinyRVOSNet:
    """The demo R-VOS model with trained weights, in eval mode; ``weights`` and ``device`` as for :func:`tiny_vos`."""
    return load_weights(TinyRVOSNet(), weights, RVOS_WEIGHTS_PATH, device)
