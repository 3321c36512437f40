"""Semantic segmentation test splits side by side, as SOOD-ImageNet-S ships its OOD tests.

One root folder holds one sub-folder per split (an IID test and one per degree of
distribution shift, e.g. ``ood-easy`` and ``ood-hard``), each with an ``images`` and a
``masks`` folder that mirror each other; the class names are shared::

    root/
      classes.txt                       one class name a line: line k names class id k
      ood-easy/images/<any sub-folders>/<stem>.jpg|.jpeg|.png|...
      ood-easy/masks/<same sub-folders>/<stem><mask_suffix>.png
      ood-hard/...

Masks are single-channel label maps (grayscale, palette or 16-bit) whose values are class
ids, with ``ignore_index`` for unscored pixels.

SOOD-ImageNet-S stores its OOD test masks that way: ``H x W`` PNGs of class ids, 0 for
background, named ``<synset>/<image stem>_mask.png`` in one folder per test split
(``output_test_easy_sam2/...``), for images that stay in the ImageNet-21K-P tree
(``imagenet21k_train/<synset>/<image stem>.JPEG``); its list files pair the two. Its images
come from ImageNet-21K-P, not from ImageNet-S, whose masks instead encode the class as
``R + 256 * G`` in RGB: an RGB mask is rejected here rather than guessed at. To read it,
link ``root/ood-easy/images`` to ``imagenet21k_train`` and ``root/ood-easy/masks`` to the
easy masks folder (likewise for hard), write ``root/classes.txt``, and pass
``mask_suffix="_mask", listed_by="masks"``: the samples then come from the masks and each
image is looked up by name, so the rest of ImageNet-21K-P is never listed.

Files are listed once; pixels are read one sample at a time in ``__getitem__``.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Literal, get_args

import numpy as np

from pytest_segrobust.core.errors import DatasetError
from pytest_segrobust.data.base import DEFAULT_IGNORE_INDEX, Sample, sample_position

# Shared with SemanticFolder, so both readers accept the same files in the same way.
from pytest_segrobust.data.semantic_folder import (
    IMAGE_SUFFIXES,
    MASK_SUFFIXES,
    _Pair,
    _with_suffix,
    read_label_map,
    read_pair,
)

ListedBy = Literal["images", "masks"]

CLASSES_FILE = "classes.txt"
IMAGES_FOLDER = "images"
MASKS_FOLDER = "masks"


class SplitFolders:
    """One split of a root folder of splits, each with mirrored ``images`` and ``masks``.

    Args:
        root: Folder whose sub-folders are the splits (see the module docstring).
        split: Name of the split's sub-folder, e.g. ``"ood-easy"``.
        class_names: Names of class ids ``0..K-1``; read from ``root/classes.txt`` when ``None``.
        ignore_index: Mask value of unscored pixels.
        mask_suffix: Added to an image's stem to name its mask (``"_mask"`` for SOOD-ImageNet-S).
        listed_by: Which folder decides the samples: ``"images"`` (every image needs a mask)
            or ``"masks"`` (every mask needs an image; other images are not read).
        name: Name in reports; ``<root folder name>/<split>`` by default.

    Raises:
        DatasetError: naming the file or folder at fault, when the root or the split is
            missing (listing the splits there are), the class names cannot be read, an
            image has no mask (or a mask no image), or nothing is found.
        ValueError: for an unknown ``listed_by``, no class names or an ``ignore_index``
            that is also a class id.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        split: str,
        class_names: Sequence[str] | None = None,
        ignore_index: int = DEFAULT_IGNORE_INDEX,
        mask_suffix: str = "",
        listed_by: ListedBy = "images",
        name: str | None = None,
    ) -> None:
        if listed_by not in get_args(ListedBy):
            raise ValueError(f"unknown listed_by {listed_by!r}; expected one of {', '.join(get_args(ListedBy))}")
        self.root = Path(root)
        if not self.root.is_dir():
            raise DatasetError(f"{self.root}: dataset root does not exist")
        self.split = split
        self.split_dir = self.root / split
        if not split or not self.split_dir.is_dir():
            available = ", ".join(available_splits(self.root)) or "none"
            raise DatasetError(f"{self.split_dir}: no split {split!r} in {self.root}; splits there: {available}")
        self.images_dir, self.masks_dir = self.split_dir / IMAGES_FOLDER, self.split_dir / MASKS_FOLDER
        for folder in (self.images_dir, self.masks_dir):
            if not folder.is_dir():
                raise DatasetError(f"{folder}: split {split!r} has no {folder.name} folder")
        self.class_names = tuple(class_names) if class_names is not None else read_class_names(self.root)
        if not self.class_names:
            raise ValueError("class_names is empty")
        if 0 <= ignore_index < len(self.class_names):
            raise ValueError(
                f"ignore_index {ignore_index} collides with class id of {self.class_names[ignore_index]!r}"
            )
        self.ignore_index = ignore_index
        self.mask_suffix = mask_suffix
        self.listed_by: ListedBy = listed_by
        self.name = name if name is not None else f"{self.root.name}/{split}"
        self._pairs = self._pairs_by_image() if listed_by == "images" else self._pairs_by_mask()
        if not self._pairs:
            raise DatasetError(f"{self.split_dir}: no images with masks in split {split!r}")

    def __len__(self) -> int:
        return len(self._pairs)

    def __getitem__(self, index: int) -> Sample:
        """Read sample ``index``; its id is ``<split>/<image path relative to images, no suffix>``.

        Raises:
            IndexError: When ``index`` is out of range, which also ends plain iteration.
            DatasetError: naming the file, when it cannot be read, a mask is not a label map,
                its size differs from the image's or it holds values that are no class id.
        """
        pair = self._pairs[sample_position(index, len(self), self.name)]
        image, target = read_pair(pair, self._read_mask)
        return Sample(sample_id=f"{self.split}/{pair.key}", image=image, target=target)

    def fingerprint(self) -> str:
        """Digest of split, classes, the bytes of every mask and the name and size of every image.

        Masks are small and decide the score, so a corrected annotation changes the digest
        even at the same file size; images count by name and size, as in ``SemanticFolder``.

        Raises:
            DatasetError: when a file has disappeared since the dataset was listed.
        """
        digest = hashlib.sha256(f"split-folders\x1f{self.split}\x1f{self.ignore_index}".encode())
        digest.update("\x1f".join(self.class_names).encode())
        for pair in self._pairs:
            try:
                image_size = pair.image.stat().st_size
            except OSError as error:
                raise DatasetError(f"{pair.image}: cannot read image ({error})") from error
            try:
                mask_digest = hashlib.sha256(pair.mask.read_bytes()).digest()
            except OSError as error:
                raise DatasetError(f"{pair.mask}: cannot read mask ({error})") from error
            image_name = pair.image.relative_to(self.images_dir).as_posix()
            mask_name = pair.mask.relative_to(self.masks_dir).as_posix()
            digest.update(f"\x1f{image_name}\x1f{image_size}\x1f{mask_name}\x1f".encode())
            digest.update(mask_digest)
        return digest.hexdigest()

    def __repr__(self) -> str:
        return f"SplitFolders(root={str(self.root)!r}, split={self.split!r}, size={len(self)})"

    def _pairs_by_image(self) -> list[_Pair]:
        pairs = []
        for key, image in _files_by_stem(self.images_dir, IMAGE_SUFFIXES).items():
            named = f"{self.masks_dir / key}{self.mask_suffix}.png: mask for image {image}"
            mask = _counterpart(self.masks_dir / f"{key}{self.mask_suffix}", MASK_SUFFIXES, named)
            pairs.append(_Pair(key, image, mask))
        return pairs

    def _pairs_by_mask(self) -> list[_Pair]:
        pairs = []
        for mask_stem, mask in _files_by_stem(self.masks_dir, MASK_SUFFIXES).items():
            if not mask_stem.endswith(self.mask_suffix):
                raise DatasetError(f"{mask}: mask name does not end in mask_suffix {self.mask_suffix!r}")
            key = mask_stem.removesuffix(self.mask_suffix)
            image = _counterpart(self.images_dir / key, IMAGE_SUFFIXES, f"{self.images_dir / key}.*: image for mask {mask}")
            pairs.append(_Pair(key, image, mask))
        return pairs

    def _read_mask(self, path: Path) -> np.ndarray:
        """The label map as class ids, checked against the declared classes.

        Shape:
            return: ``(H, W)``, int64.
        """
        labels = read_label_map(path, "of class ids (grayscale, palette or 16-bit)")
        allowed = ((labels >= 0) & (labels < len(self.class_names))) | (labels == self.ignore_index)
        if not bool(allowed.all()):
            bad = np.unique(labels[~allowed])[:5].tolist()
            raise DatasetError(
                f"{path}: mask values {bad} are not class ids 0..{len(self.class_names) - 1} "
                f"or the ignore index {self.ignore_index}"
            )
        return labels


def available_splits(root: Path) -> list[str]:
    """Names of the sub-folders of ``root`` that hold both an images and a masks folder."""
    return sorted(
        child.name for child in root.iterdir() if (child / IMAGES_FOLDER).is_dir() and (child / MASKS_FOLDER).is_dir()
    )


def read_class_names(root: Path) -> tuple[str, ...]:
    """Class names from ``root/classes.txt``: line ``k`` names class id ``k``.

    Raises:
        DatasetError: naming the file, when it is missing, unreadable, empty or has a
            blank line among the names.
    """
    path = root / CLASSES_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DatasetError(f"{path}: no class names; write one name a line there or pass class_names") from None
    except (OSError, UnicodeDecodeError) as error:
        raise DatasetError(f"{path}: cannot read class names ({error})") from error
    names = [line.strip() for line in text.rstrip().splitlines()]
    if not names:
        raise DatasetError(f"{path}: no class names in the file")
    blank = next((number for number, name in enumerate(names, start=1) if not name), None)
    if blank is not None:
        raise DatasetError(f"{path}: line {blank} is blank; every line up to the last names one class id")
    return tuple(names)


def _counterpart(stem: Path, suffixes: Sequence[str], what: str) -> Path:
    """The file ``stem`` with one of ``suffixes`` (the partner of an image or a mask).

    Raises:
        DatasetError: when there is none, naming it as ``what`` and the suffixes looked for.
    """
    found = _with_suffix(stem, suffixes)
    if found is None:
        raise DatasetError(f"{what} does not exist (looked for {', '.join(suffixes)})")
    return found


def _files_by_stem(folder: Path, suffixes: Sequence[str]) -> dict[str, Path]:
    """Files under ``folder`` with one of ``suffixes`` (any case), by relative path without suffix.

    Keys are sorted; of two files with the same stem, the one whose suffix comes first in
    ``suffixes`` wins, so the choice does not depend on the order the file system lists them.
    """
    candidates = sorted(
        (path.relative_to(folder).with_suffix("").as_posix(), suffixes.index(path.suffix.lower()), path)
        for path in folder.rglob("*")
        if path.suffix.lower() in suffixes and path.is_file()
    )
    found: dict[str, Path] = {}
    for stem, _, path in candidates:
        found.setdefault(stem, path)
    return found
