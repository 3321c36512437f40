"""Binary masks as COCO run-length encodings, with COCO's area and box of each.

:func:`encode_masks` is the one way masks become RLEs here: one column-major ``uint8`` copy
of the masks (pycocotools reads them column by column), one ``pycocotools.mask.encode`` call
for all of them, and the areas and boxes read off the RLEs (``mask.area``, ``mask.toBbox``,
what COCO itself computes), so no full-mask reduction runs twice over the pixels.

:class:`EncodingCache` keeps the encodings of ground truth across evaluations. Every cell of
a model scores the same images, and a photometric corruption passes the ground truth through
untouched, so its masks are encoded once per process instead of once per cell. An encoding
is found by the masks' content (a cryptographic digest of their bits and shape), never by
where the masks came from: a geometric corruption that moves them, another sample or another
dataset has other bits, hence another key, and is encoded anew.

pycocotools is an optional dependency (the ``coco`` extra); callers hand its ``mask`` module in.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np
import torch

from pytest_segrobust.core.opencv import opencv
from pytest_segrobust.runtime.budgeted_cache import BudgetedCache

MEBIBYTE = 2**20
# Held by the process's cache by default: COCO's 5000 validation images take about 40 MiB.
DEFAULT_BUDGET = 64 * MEBIBYTE
# What an entry costs besides its RLE strings (the key, the tuples, the numbers), roughly.
_ENTRY_OVERHEAD = 200
_INSTANCE_OVERHEAD = 120


@dataclass(frozen=True)
class EncodedMasks:
    """Masks of one image as COCO compressed RLEs, with their areas and tight boxes.

    Immutable, so that one encoding can serve many evaluations: :meth:`rles` hands out fresh
    dicts each time.

    Attributes:
        size: ``(H, W)`` of the masks.
        counts: Each mask's compressed RLE counts, ASCII.
        areas: Each mask's pixel count (COCO's area of a segmentation).
        boxes: Each mask's tight box ``(x, y, w, h)`` in pixels, zeros for an empty mask.
    """

    size: tuple[int, int]
    counts: tuple[str, ...]
    areas: tuple[int, ...]
    boxes: tuple[tuple[float, float, float, float], ...]

    def __len__(self) -> int:
        return len(self.counts)

    def rles(self) -> list[dict[str, Any]]:
        """COCO RLE dicts (``size``, ``counts`` as ``str``, so they serialise as JSON), new ones per call."""
        height, width = self.size
        return [{"size": [height, width], "counts": counts} for counts in self.counts]

    def nbytes(self) -> int:
        """About what the entry holds in memory."""
        return _ENTRY_OVERHEAD + sum(len(counts) + _INSTANCE_OVERHEAD for counts in self.counts)


def encode_masks(mask_utils: ModuleType, masks: torch.Tensor) -> EncodedMasks:
    """Compressed RLEs, areas and boxes of binary masks (any nonzero value is foreground).

    Args:
        mask_utils: ``pycocotools.mask``.
        masks: The masks, on any device.

    Shape:
        masks: ``(N, H, W)``.
    """
    return _encode_planes(mask_utils, _uint8_planes(masks))


def _encode_planes(mask_utils: ModuleType, planes: np.ndarray) -> EncodedMasks:
    """:func:`encode_masks` of ``(N, H, W)`` C-ordered ``uint8`` 0/1 planes."""
    count, height, width = planes.shape
    if count == 0:
        return EncodedMasks((height, width), (), (), ())
    rles = mask_utils.encode(column_major(planes))
    return EncodedMasks(
        (height, width),
        tuple(rle["counts"].decode("ascii") for rle in rles),
        tuple(int(area) for area in mask_utils.area(rles)),
        tuple(tuple(box) for box in mask_utils.toBbox(rles).tolist()),
    )


def column_major(planes: np.ndarray) -> np.ndarray:
    """Masks as pycocotools reads them: ``(H, W, N)`` ``uint8`` in Fortran order, one copy.

    That layout is each ``(H, W)`` mask transposed. OpenCV's transpose (when installed)
    is several times faster than numpy's strided copy; both give the same bytes.

    Shape:
        planes: ``(N, H, W)``, ``uint8``, C order; return: ``(H, W, N)``.
    """
    cv2 = opencv()
    if cv2 is None:
        return np.asfortranarray(planes.transpose(1, 2, 0))
    transposed = np.empty((planes.shape[0], planes.shape[2], planes.shape[1]), dtype=np.uint8)  # (N, W, H)
    for plane, out in zip(planes, transposed):
        cv2.transpose(plane, out)
    return transposed.transpose(2, 1, 0)  # (H, W, N), Fortran order: a view


def _uint8_planes(masks: torch.Tensor) -> np.ndarray:
    """``(N, H, W)`` C-ordered ``uint8`` 0/1 of masks: a view of a CPU bool tensor's memory, else a copy."""
    masks = masks.detach()
    if masks.dtype != torch.bool:
        masks = masks != 0
    return masks.cpu().contiguous().numpy().view(np.uint8)


class EncodingCache(BudgetedCache):
    """Encodings of masks by content, within ``budget`` bytes, shared by the evaluations of a process.

    Nothing is evicted: once the budget is spent, masks that did not fit are encoded each
    time they come (no thrashing), and those that fit stay. The key is a BLAKE2b digest of
    the masks' shape and packed bits, so only masks equal bit for bit share an encoding.

    Args:
        budget: Bytes of encodings the cache may hold; 0 keeps nothing (and digests nothing).

    Attributes:
        used: Bytes held (as :meth:`EncodedMasks.nbytes` counts them).
        hits: Encodings served from memory.
        misses: Encodings computed.
    """

    def __init__(self, budget: int = DEFAULT_BUDGET) -> None:
        super().__init__(budget, "encoding")
        self.hits = 0
        self.misses = 0
        self._kept: dict[bytes, EncodedMasks] = {}

    def encode(self, mask_utils: ModuleType, masks: torch.Tensor) -> EncodedMasks:
        """:func:`encode_masks` of ``masks``, from memory when these very bits were encoded before
        (kept for the next time if it fits the budget).

        Shape:
            masks: ``(N, H, W)``.
        """
        planes = _uint8_planes(masks)
        if self.budget == 0 or planes.shape[0] == 0:
            self.misses += 1
            return _encode_planes(mask_utils, planes)
        key = digest(planes)
        found = self._kept.get(key)
        if found is not None:
            self.hits += 1
            return found
        self.misses += 1
        encoded = _encode_planes(mask_utils, planes)
        if self._spend(encoded.nbytes()):
            self._kept[key] = encoded
        return encoded

    def __len__(self) -> int:
        return len(self._kept)


def digest(planes: np.ndarray) -> bytes:
    """BLAKE2b of binary masks' shape and bits: equal digests, equal masks.

    Shape:
        planes: ``(N, H, W)``, ``uint8`` 0/1, C order.
    """
    hasher = hashlib.blake2b(digest_size=20)
    hasher.update(np.asarray(planes.shape, dtype=np.int64).tobytes())
    hasher.update(np.packbits(planes).data)
    return hasher.digest()


# The process's cache of ground-truth encodings (see the module's docstring).
GROUND_TRUTH = EncodingCache()
