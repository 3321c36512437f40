"""COCO-format instance segmentation: an annotation json and a folder of images.

The json is read and indexed by image once; pixels are decoded one sample at a time in
``__getitem__`` (image with Pillow, masks with pycocotools), so a dataset costs the memory
of its annotations, not of its pixels. Checks that need pixels (bounds of a polygon, sums
of RLE counts, image sizes) run there too, and each names the file and annotation at fault.

Classes are numbered contiguously: label ``k`` (1-based) is the ``k``-th category in id
order and 0 is background, the numbering :class:`pytest_segrobust.metrics.coco_map.CocoMAP`
expects. pycocotools is an optional dependency (``pip install pytest-segrobust[coco]``).
"""

from __future__ import annotations

import hashlib
import os
import warnings
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import torch

from pytest_segrobust.core.errors import DatasetError
from pytest_segrobust.data.base import DEFAULT_IGNORE_INDEX, InstanceTarget, Sample, SemanticTarget, sample_position
from pytest_segrobust.data.coco_json import CocoJson, digest_file_sizes
from pytest_segrobust.data.io import read_rgb

# Polygon vertices are continuous coordinates on pixel edges and annotation tools round them,
# so a vertex may sit a little outside the frame; beyond this it belongs to another image.
_POLYGON_SLACK_PX = 1.0


def _pycocotools_mask() -> ModuleType:
    try:
        from pycocotools import mask as mask_utils
    except ImportError as error:
        raise ImportError(f"COCO datasets need pycocotools: install pytest-segrobust[coco] ({error})") from error
    return mask_utils


class CocoInstances:
    """Instance (and derived semantic) annotations of a COCO-format dataset.

    Each :class:`Sample` holds the image as ``uint8`` RGB, the instances with contiguous
    labels and crowd flags, and a semantic label map painted from them in annotation order
    (a later annotation covers an earlier one; crowd regions are ``ignore_index``).

    Args:
        images_dir: Folder that the ``file_name`` of every image is relative to.
        annotation_file: COCO json with ``images``, ``annotations`` and ``categories``.
        name: Name in reports; the json's stem by default.
        limit: Use only the first ``limit`` images (in id order).

    Attributes:
        categories: COCO category dicts in id order (with ``supercategory``).
        class_names: ``("background", *category names in id order)``.
        label_to_category_id: Contiguous label ``1..K`` to COCO category id.
        image_ids: COCO image id of each sample, in sample order.

    Raises:
        DatasetError: when the json cannot be read or lacks a field (naming file and field).
        ImportError: when pycocotools is missing.
    """

    ignore_index: int = DEFAULT_IGNORE_INDEX

    def __init__(
        self,
        images_dir: str | os.PathLike[str],
        annotation_file: str | os.PathLike[str],
        name: str | None = None,
        limit: int | None = None,
    ) -> None:
        _pycocotools_mask()
        self.images_dir = Path(images_dir)
        self.annotation_file = Path(annotation_file)
        self.name = name if name is not None else self.annotation_file.stem
        document = CocoJson.read(self.annotation_file)
        self._annotation_digest = document.digest

        labelled = document.labelled_categories(1, self.ignore_index)  # label 0 is the background
        self.categories: tuple[dict[str, Any], ...] = tuple(labelled.values())
        self.class_names: tuple[str, ...] = ("background", *(str(c["name"]) for c in self.categories))
        self.label_to_category_id: dict[int, int] = {label: category["id"] for label, category in labelled.items()}
        self._label_of_category = {category_id: label for label, category_id in self.label_to_category_id.items()}

        images = document.sorted_images()
        self._images: list[dict[str, Any]] = images if limit is None else images[: max(limit, 0)]
        self.image_ids: tuple[int, ...] = tuple(image["id"] for image in self._images)

        # Each annotation keeps its position in the json, so that a message can point at it.
        self._annotations_by_image: dict[int, list[tuple[int, dict[str, Any]]]] = {}
        for position, where, annotation in document.checked_annotations(
            ("image_id", "category_id", "segmentation"), images
        ):
            if annotation["category_id"] not in self._label_of_category:
                raise DatasetError(
                    f"{self.annotation_file}: {where}: category_id {annotation['category_id']} is not in categories"
                )
            self._annotations_by_image.setdefault(annotation["image_id"], []).append((position, annotation))

    def __len__(self) -> int:
        return len(self._images)

    def __getitem__(self, index: int) -> Sample:
        info = self._images[sample_position(index, len(self), self.name)]
        height, width = int(info["height"]), int(info["width"])
        image = self._load_image(info, height, width)
        annotations = self._annotations_by_image.get(info["id"], [])
        masks = np.zeros((len(annotations), height, width), dtype=bool)
        labels = torch.zeros(len(annotations), dtype=torch.int64)
        crowd = torch.zeros(len(annotations), dtype=torch.bool)
        semantic = torch.zeros(height, width, dtype=torch.int64)
        for row, (position, annotation) in enumerate(annotations):
            where = (
                f"{self.annotation_file}: annotations[{position}] "
                f"(id {annotation.get('id')}, image {info['file_name']})"
            )
            masks[row] = _decode_segmentation(annotation["segmentation"], height, width, where)
            labels[row] = self._label_of_category[annotation["category_id"]]
            crowd[row] = bool(annotation.get("iscrowd", 0))
        instance_masks = torch.from_numpy(masks)
        # Paint in annotation order so that where instances overlap the later one wins.
        for mask, label, is_crowd in zip(instance_masks, labels, crowd):
            semantic[mask] = self.ignore_index if bool(is_crowd) else label
        return Sample(
            sample_id=str(info["file_name"]),
            image=image,
            target=SemanticTarget(semantic),
            instances=InstanceTarget.from_masks(instance_masks, labels, crowd),
        )

    def fingerprint(self) -> str:
        """Digest of the annotation file's bytes and of the name and size of every image used.

        Raises:
            DatasetError: when an image file is missing.
        """
        digest = hashlib.sha256(f"coco\x1f{self._annotation_digest}".encode())
        files = (("image", info["file_name"], self.images_dir / info["file_name"]) for info in self._images)
        digest_file_sizes(digest, self.annotation_file, files)
        return digest.hexdigest()

    def _load_image(self, info: dict[str, Any], height: int, width: int) -> torch.Tensor:
        """The image as ``uint8`` RGB, checked against the json's size.

        Shape:
            return: ``(3, height, width)``.
        """
        path = self.images_dir / info["file_name"]
        if not path.is_file():
            raise DatasetError(f"{path}: image file listed in {self.annotation_file} does not exist")
        # COCO sizes refer to the stored pixels, which is what read_rgb returns.
        pixels = read_rgb(path)
        if pixels.shape[:2] != (height, width):
            raise DatasetError(
                f"{path}: image is {pixels.shape[1]}x{pixels.shape[0]} (width x height) but "
                f"{self.annotation_file} says {width}x{height}"
            )
        return torch.from_numpy(pixels.copy()).permute(2, 0, 1).contiguous()


def _decode_segmentation(segmentation: Any, height: int, width: int, where: str) -> np.ndarray:
    """Binary mask of a COCO segmentation: polygons, uncompressed RLE or compressed RLE.

    Shape:
        return: ``(height, width)``, bool.

    Raises:
        DatasetError: when the segmentation is malformed or does not fit the image.
    """
    mask_utils = _pycocotools_mask()
    if isinstance(segmentation, list):
        _check_polygons(segmentation, height, width, where)
        rle = mask_utils.merge(mask_utils.frPyObjects(segmentation, height, width))
    elif isinstance(segmentation, dict):
        size, counts = segmentation.get("size"), segmentation.get("counts")
        if size != [height, width]:
            raise DatasetError(f"{where}: RLE size {size} differs from the image's [height, width] [{height}, {width}]")
        if isinstance(counts, list):
            _check_counts(counts, height * width, where)
            rle = mask_utils.frPyObjects({"size": [height, width], "counts": counts}, height, width)
        elif isinstance(counts, (str, bytes)):
            text = counts.decode("ascii", errors="replace") if isinstance(counts, bytes) else counts
            # pycocotools trusts compressed counts and writes past the mask if they are wrong.
            _check_counts(_compressed_counts(text, where), height * width, where)
            rle = {"size": [height, width], "counts": text.encode("ascii")}
        else:
            raise DatasetError(f"{where}: RLE counts must be a list of ints or a compressed string")
    else:
        raise DatasetError(f"{where}: segmentation must be a list of polygons or an RLE object")
    with warnings.catch_warnings():
        # pycocotools' decode trips NumPy 2's __array__(copy=...) deprecation; it is theirs, not the user's.
        warnings.simplefilter("ignore", DeprecationWarning)
        return mask_utils.decode(rle).astype(bool)


def _check_polygons(polygons: list[Any], height: int, width: int, where: str) -> None:
    if not polygons:
        raise DatasetError(f"{where}: segmentation holds no polygon")
    for polygon in polygons:
        # pycocotools reads a first "polygon" of 4 numbers as a box: insist on 3 vertices.
        if (
            not isinstance(polygon, list)
            or len(polygon) < 6
            or len(polygon) % 2
            or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in polygon)
        ):
            raise DatasetError(f"{where}: a polygon must be a flat list of at least 3 (x, y) numbers")
        xs, ys = np.asarray(polygon[0::2], dtype=np.float64), np.asarray(polygon[1::2], dtype=np.float64)
        if not (np.isfinite(xs).all() and np.isfinite(ys).all()):
            raise DatasetError(f"{where}: polygon has non-finite coordinates")
        slack = _POLYGON_SLACK_PX
        if xs.min() < -slack or ys.min() < -slack or xs.max() > width + slack or ys.max() > height + slack:
            raise DatasetError(
                f"{where}: polygon spans x {xs.min():g}..{xs.max():g}, y {ys.min():g}..{ys.max():g}, "
                f"outside the {width}x{height} image"
            )


def _check_counts(counts: list[Any], pixels: int, where: str) -> None:
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in counts):
        raise DatasetError(f"{where}: RLE counts must be non-negative integers")
    if sum(counts) != pixels:
        raise DatasetError(f"{where}: RLE counts cover {sum(counts)} pixels, the image has {pixels}")


def _compressed_counts(text: str, where: str) -> list[int]:
    """Run lengths of a compressed COCO RLE string (the inverse of pycocotools' ``rleToString``).

    Each count is written in 5-bit groups, least significant first, as characters from ``0``
    (48); bit 0x20 says another group follows, bit 0x10 of the last group is the sign. From
    the fourth count on, the string stores the difference to the count two places before.
    """
    counts: list[int] = []
    position = 0
    while position < len(text):
        value, shift, more = 0, 0, True
        while more:
            if position >= len(text):
                raise DatasetError(f"{where}: compressed RLE counts end in the middle of a number")
            group = ord(text[position]) - 48
            if not 0 <= group < 64:
                raise DatasetError(f"{where}: compressed RLE counts hold an invalid character {text[position]!r}")
            value |= (group & 0x1F) << shift
            more = bool(group & 0x20)
            position += 1
            shift += 5
            if not more and group & 0x10:
                value |= -1 << shift
        if len(counts) > 2:
            value += counts[-2]
        counts.append(value)
    return counts
