"""Semantic segmentation as a folder of images and a folder of label maps.

Images and masks pair up by their path relative to the two folders, without the suffix
(``images/a/b.jpg`` with ``masks/a/b.png``). Layouts cover the public datasets, whose
masks store classes in their own way and are mapped here to train ids ``0..K-1`` plus the
ignore index:

* ``generic``: mask values are class ids; ``ignore_index`` marks unscored pixels.
* ``ade20k`` (SceneParsing, 150 classes): 0 is "other" and is ignored, class ``k`` is stored as ``k + 1``.
* ``voc``: palette PNGs whose indices are class ids, 255 the boundary band (ignored). The
  set is driven by the masks, since ``JPEGImages`` holds many more images than
  ``SegmentationClass``; pass ``split_file`` (e.g. ``ImageSets/Segmentation/val.txt``) to pick a split.
* ``cityscapes``: ``<city>/<name>_leftImg8bit.png`` with ``<city>/<name>_gtFine_labelIds.png``,
  label ids mapped to the 19 train ids of the official table, all other ids ignored.

Files are listed once; pixels are read one sample at a time in ``__getitem__``.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

import numpy as np
import torch
from PIL import Image

from pytest_segrobust.core.errors import DatasetError
from pytest_segrobust.data.base import DEFAULT_IGNORE_INDEX, Sample, SemanticTarget, sample_position
from pytest_segrobust.data.io import file_size, read_rgb

Layout = Literal["generic", "ade20k", "voc", "cityscapes"]

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".webp")
# Label maps must be lossless, so JPEG is not among them.
MASK_SUFFIXES = (".png", ".tif", ".tiff", ".bmp")
# Single-channel modes whose values are class ids; RGB masks are colour renderings, not labels.
_LABEL_MODES = frozenset({"1", "L", "P", "I", "I;16", "I;16L", "I;16B"})

CITYSCAPES_CLASS_NAMES: tuple[str, ...] = (
    "road", "sidewalk", "building", "wall", "fence", "pole", "traffic light", "traffic sign", "vegetation",
    "terrain", "sky", "person", "rider", "car", "truck", "bus", "train", "motorcycle", "bicycle",
)  # fmt: skip
VOC_CLASS_NAMES: tuple[str, ...] = (
    "background", "aeroplane", "bicycle", "bird", "boat", "bottle", "bus", "car", "cat", "chair", "cow",
    "diningtable", "dog", "horse", "motorbike", "person", "pottedplant", "sheep", "sofa", "train", "tvmonitor",
)  # fmt: skip
# cityscapesScripts' labels.py: label id -> train id of the 19 evaluated classes. Ids 0..33
# not listed here (void, parking, rail track, guard rail, bridge, tunnel, polegroup, caravan,
# trailer, ...) are ignored in evaluation; license plate (-1) cannot occur in a uint8 PNG.
CITYSCAPES_LABEL_TO_TRAIN_ID: dict[int, int] = {
    7: 0, 8: 1, 11: 2, 12: 3, 13: 4, 17: 5, 19: 6, 20: 7, 21: 8, 22: 9,
    23: 10, 24: 11, 25: 12, 26: 13, 27: 14, 28: 15, 31: 16, 32: 17, 33: 18,
}  # fmt: skip
_CITYSCAPES_MAX_LABEL_ID = 33
_VOC_BOUNDARY = 255
_CITYSCAPES_IMAGE_TAG = "_leftImg8bit"
_CITYSCAPES_MASK_TAG = "_gtFine_labelIds"


@dataclass(frozen=True)
class _Pair:
    key: str  # relative path without suffix (and without the Cityscapes tag): the sample id
    image: Path
    mask: Path


def read_pair(pair: _Pair, read_mask: Callable[[Path], np.ndarray]) -> tuple[torch.Tensor, SemanticTarget]:
    """Decode an image ``(3, H, W)`` uint8 and its label map, checking that their sizes agree.

    Raises:
        DatasetError: naming both files when the mask's size differs from the image's.
    """
    image = read_rgb(pair.image)
    mask = read_mask(pair.mask)
    if mask.shape != image.shape[:2]:
        raise DatasetError(
            f"{pair.mask}: mask is {mask.shape[1]}x{mask.shape[0]} (width x height) but its image "
            f"{pair.image} is {image.shape[1]}x{image.shape[0]}"
        )
    return torch.from_numpy(image.copy()).permute(2, 0, 1).contiguous(), SemanticTarget(torch.from_numpy(mask))


def read_label_map(path: Path, modes: str) -> np.ndarray:
    """A single-channel mask's values as stored.

    Args:
        path: The mask file.
        modes: The modes a dataset takes, in its words, for the message on a colour image
            (``"(palette, grayscale or integer)"``).

    Shape:
        return: ``(H, W)``, int64.

    Raises:
        DatasetError: naming the file when it cannot be read or is not a single-channel label map.
    """
    try:
        with Image.open(path) as opened:
            if opened.mode not in _LABEL_MODES:
                raise DatasetError(
                    f"{path}: mask has mode {opened.mode}; expected a single-channel label map {modes}, "
                    "not a colour image"
                )
            return np.asarray(opened).astype(np.int64)
    except DatasetError:
        raise
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as error:
        raise DatasetError(f"{path}: cannot read mask ({error})") from error


class SemanticFolder:
    """Images with per-pixel label maps, in one of the common folder layouts.

    Args:
        images_dir: Folder of images (searched recursively).
        masks_dir: Folder of label maps mirroring ``images_dir``.
        class_names: Names of train ids ``0..K-1`` (see ``CITYSCAPES_CLASS_NAMES``, ``VOC_CLASS_NAMES``).
        ignore_index: Label of unscored pixels in the samples (and in ``generic`` masks).
        layout: How masks store classes and how files are named (see the module docstring).
        name: Name in reports; the images folder's name by default.
        limit: Use only the first ``limit`` pairs in sorted order.
        split_file: Text file of sample keys (relative paths without suffix), one a line.

    Raises:
        DatasetError: when a folder is missing, an image has no mask, or nothing is found.
        ValueError: for an unknown layout or class names that do not fit it.
    """

    def __init__(
        self,
        images_dir: str | os.PathLike[str],
        masks_dir: str | os.PathLike[str],
        class_names: Sequence[str],
        ignore_index: int = DEFAULT_IGNORE_INDEX,
        layout: Layout = "generic",
        name: str | None = None,
        limit: int | None = None,
        split_file: str | os.PathLike[str] | None = None,
    ) -> None:
        if layout not in get_args(Layout):
            raise ValueError(f"unknown layout {layout!r}; expected one of {', '.join(get_args(Layout))}")
        self.class_names = tuple(class_names)
        if not self.class_names:
            raise ValueError("class_names is empty")
        if layout == "cityscapes" and len(self.class_names) != len(CITYSCAPES_CLASS_NAMES):
            raise ValueError(
                f"Cityscapes has {len(CITYSCAPES_CLASS_NAMES)} train ids, got {len(self.class_names)} names"
            )
        if 0 <= ignore_index < len(self.class_names):
            raise ValueError(
                f"ignore_index {ignore_index} collides with class id of {self.class_names[ignore_index]!r}"
            )
        self.images_dir, self.masks_dir = Path(images_dir), Path(masks_dir)
        self.ignore_index = ignore_index
        self.layout: Layout = layout
        self.name = name if name is not None else self.images_dir.name
        for folder in (self.images_dir, self.masks_dir):
            if not folder.is_dir():
                raise DatasetError(f"{folder}: dataset folder does not exist")
        pairs = self._pairs_from_split(Path(split_file)) if split_file is not None else self._discover_pairs()
        if not pairs:
            raise DatasetError(f"{self.images_dir}: no images with masks in {self.masks_dir} ({layout} layout)")
        self._pairs = pairs if limit is None else pairs[: max(limit, 0)]
        self._lookup = self._label_lookup()

    def __len__(self) -> int:
        return len(self._pairs)

    def __getitem__(self, index: int) -> Sample:
        pair = self._pairs[sample_position(index, len(self), self.name)]
        image, target = read_pair(pair, self._read_mask)
        return Sample(sample_id=pair.key, image=image, target=target)

    def fingerprint(self) -> str:
        """Digest of layout, classes and the relative name and size of every file used.

        Raises:
            DatasetError: when a file has disappeared since the dataset was listed.
        """
        digest = hashlib.sha256(f"semantic-folder\x1f{self.layout}\x1f{self.ignore_index}".encode())
        digest.update("\x1f".join(self.class_names).encode())
        for pair in self._pairs:
            for root, path in ((self.images_dir, pair.image), (self.masks_dir, pair.mask)):
                digest.update(f"\x1f{path.relative_to(root).as_posix()}\x1f{file_size(path)}".encode())
        return digest.hexdigest()

    def _discover_pairs(self) -> list[_Pair]:
        if self.layout == "voc":
            # VOC annotates a subset of JPEGImages: the masks say which images belong.
            return [self._pair_for_key(key) for key in self._keys(self.masks_dir, MASK_SUFFIXES)]
        if self.layout == "cityscapes":
            keys = [
                key.removesuffix(_CITYSCAPES_IMAGE_TAG)
                for key in self._keys(self.images_dir, (".png",))
                if key.endswith(_CITYSCAPES_IMAGE_TAG)
            ]
        else:
            keys = self._keys(self.images_dir, IMAGE_SUFFIXES)
        return [self._pair_for_key(key) for key in keys]

    def _pairs_from_split(self, split_file: Path) -> list[_Pair]:
        try:
            lines = split_file.read_text().splitlines()
        except (OSError, UnicodeDecodeError) as error:
            raise DatasetError(f"{split_file}: cannot read split file ({error})") from error
        return [self._pair_for_key(line.strip()) for line in lines if line.strip()]

    @staticmethod
    def _keys(root: Path, suffixes: Sequence[str]) -> list[str]:
        keys = {
            path.relative_to(root).with_suffix("").as_posix()
            for path in root.rglob("*")
            if path.suffix.lower() in suffixes and path.is_file()
        }
        return sorted(keys)

    def _pair_for_key(self, key: str) -> _Pair:
        if self.layout == "cityscapes":
            image = self.images_dir / f"{key}{_CITYSCAPES_IMAGE_TAG}.png"
            mask = self.masks_dir / f"{key}{_CITYSCAPES_MASK_TAG}.png"
            if not image.is_file():
                raise DatasetError(f"{image}: image of sample {key} does not exist")
            if not mask.is_file():
                raise DatasetError(f"{mask}: mask for image {image} does not exist")
            return _Pair(key, image, mask)
        image_found = _with_suffix(self.images_dir / key, IMAGE_SUFFIXES)
        mask_found = _with_suffix(self.masks_dir / key, MASK_SUFFIXES)
        if image_found is None:
            raise DatasetError(f"{self.images_dir / key}.*: image of sample {key} does not exist")
        if mask_found is None:
            raise DatasetError(
                f"{self.masks_dir / key}.png: mask for image {image_found} does not exist "
                f"(looked for {', '.join(MASK_SUFFIXES)})"
            )
        return _Pair(key, image_found, mask_found)

    def _label_lookup(self) -> np.ndarray | None:
        """Table from stored mask value to train id (-1: not allowed); ``None`` for identity.

        Shape:
            return: ``(256,)``, int64 (the layouts with a table store 8-bit masks).
        """
        if self.layout == "generic":
            return None
        lookup = np.full(256, -1, dtype=np.int64)
        if self.layout == "ade20k":
            lookup[0] = self.ignore_index
            classes = min(len(self.class_names), 255)
            lookup[1 : classes + 1] = np.arange(classes)
        elif self.layout == "voc":
            classes = min(len(self.class_names), 255)
            lookup[:classes] = np.arange(classes)
            lookup[_VOC_BOUNDARY] = self.ignore_index
        else:  # cityscapes
            lookup[: _CITYSCAPES_MAX_LABEL_ID + 1] = self.ignore_index
            for label_id, train_id in CITYSCAPES_LABEL_TO_TRAIN_ID.items():
                lookup[label_id] = train_id
        return lookup

    def _read_mask(self, path: Path) -> np.ndarray:
        """The label map in train ids, checked against the declared classes.

        Shape:
            return: ``(H, W)``, int64.
        """
        stored = read_label_map(path, "(palette, grayscale or integer)")
        if self._lookup is None:
            labels = stored
            allowed = ((labels >= 0) & (labels < len(self.class_names))) | (labels == self.ignore_index)
        else:
            in_table = (stored >= 0) & (stored < len(self._lookup))
            labels = self._lookup[np.where(in_table, stored, 0)]
            allowed = in_table & (labels >= 0)
            labels = np.where(allowed, labels, -1)
        if not bool(allowed.all()):
            bad = np.unique(stored[~allowed])[:5].tolist()
            raise DatasetError(f"{path}: mask values {bad} are not {self._declared_values()}")
        return labels

    def _declared_values(self) -> str:
        classes = len(self.class_names)
        if self.layout == "ade20k":
            return f"ADE20K classes 1..{classes} or 0 (other)"
        if self.layout == "voc":
            return f"VOC classes 0..{classes - 1} or {_VOC_BOUNDARY} (boundary)"
        if self.layout == "cityscapes":
            return f"Cityscapes label ids 0..{_CITYSCAPES_MAX_LABEL_ID}"
        return f"class ids 0..{classes - 1} or the ignore index {self.ignore_index}"


def _with_suffix(stem_path: Path, suffixes: Sequence[str]) -> Path | None:
    """The first existing file ``stem_path + suffix`` (either case), if any."""
    for suffix in suffixes:
        for candidate in (suffix, suffix.upper()):
            path = stem_path.with_name(stem_path.name + candidate)
            if path.is_file():
                return path
    return None
