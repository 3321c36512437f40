"""COCO panoptic annotations, read as semantic label maps and as panoptic segments.

The panoptic format is a json (``images``, ``categories``, one entry in ``annotations`` per
image) and a folder of RGB PNGs in which each pixel stores its segment id as
``R + 256 * G + 256 ** 2 * B``; id 0 is unlabeled. ``segments_info`` gives each segment's
category.

:class:`CocoPanopticSemantic` yields label maps. Semantic evaluation of panoptic data forgets
the instances: every pixel takes the class of its segment's category, so all instances of a
thing class merge into one region. Classes are numbered contiguously: label ``k`` (0-based) is
the ``k``-th category in id order, things and stuff alike. There is no background class;
unlabeled pixels are ``ignore_index``. Crowd segments keep the label of their category: a
crowd of people is people, and scoring it tests the model where the class is; this follows
panopticapi's ``panoptic2semantic_segmentation`` converter. (Instance metrics ignore crowds
because they cannot be matched to single instances, a reason that has no meaning for a label
map.)

:class:`CocoPanoptic` yields the same label maps and also each image's segments as a
:class:`~pytest_segrobust.core.types.PanopticTarget`: the PNG's segment ids as stored (0 is void),
each segment's label in the numbering above (the one ``class_names`` gives) and its
``iscrowd``. Whether a class is a thing or stuff is its category's ``isthing``, which panoptic
quality reads from ``categories``.

The json is read, checked and indexed once; the image and the PNG are decoded one sample at a
time in ``__getitem__``, where the checks that need pixels run. Every error names the file
and entry at fault. Each class is its own factory in a suite file::

    dataset:
      factory: pytest_segrobust.data.coco_panoptic:CocoPanoptic  # or CocoPanopticSemantic
      kwargs:
        images_dir: coco/val2017
        annotation_file: coco/annotations/panoptic_val2017.json
        panoptic_dir: coco/annotations/panoptic_val2017
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image

from pytest_segrobust.core.errors import DatasetError
from pytest_segrobust.data.base import DEFAULT_IGNORE_INDEX, PanopticTarget, Sample, SemanticTarget, sample_position
from pytest_segrobust.data.coco_json import CocoJson, digest_file_sizes, require
from pytest_segrobust.data.io import read_rgb

VOID_SEGMENT_ID = 0
# Three 8-bit channels hold a segment id.
_MAX_SEGMENT_ID = 256**3 - 1
# Unknown ids named in an error message; the count of the rest follows.
_IDS_IN_MESSAGE = 5


@dataclass(frozen=True)
class _PanopticImage:
    """What ``__getitem__`` needs of one image, taken from the json."""

    image_id: int
    file_name: str
    height: int
    width: int
    panoptic_file_name: str
    annotation_position: int  # index in the json's annotations, for messages
    segment_ids: tuple[int, ...]  # ascending
    segment_labels: tuple[int, ...]
    segment_crowd: tuple[bool, ...]


class CocoPanopticSemantic:
    """Semantic label maps of a COCO panoptic dataset (see the module docstring for the numbering).

    Args:
        images_dir: Folder that the ``file_name`` of every image is relative to.
        annotation_file: Panoptic json with ``images``, ``annotations`` and ``categories``.
        panoptic_dir: Folder that the ``file_name`` of every annotation (its PNG) is relative to.
        name: Name in reports; the json's stem by default.
        limit: Use only the first ``limit`` images (in id order).

    Attributes:
        categories: COCO category dicts in id order, as given (with ``supercategory``, ``isthing``).
        class_names: Category names in id order: ``class_names[k] == categories[k]["name"]``.
        label_to_category_id: Contiguous label ``0..K-1`` to COCO category id.
        image_ids: COCO image id of each sample, in sample order.

    Raises:
        DatasetError: when the json cannot be read, lacks a field, or is inconsistent (an image
            without annotation, an unknown category, a repeated segment id, an ``iscrowd``
            other than 0 or 1), naming file and entry.
    """

    ignore_index: int = DEFAULT_IGNORE_INDEX

    def __init__(
        self,
        images_dir: str | os.PathLike[str],
        annotation_file: str | os.PathLike[str],
        panoptic_dir: str | os.PathLike[str],
        name: str | None = None,
        limit: int | None = None,
    ) -> None:
        self.images_dir = Path(images_dir)
        self.annotation_file = Path(annotation_file)
        self.panoptic_dir = Path(panoptic_dir)
        self.name = name if name is not None else self.annotation_file.stem
        document = CocoJson.read(self.annotation_file)
        self._annotation_digest = document.digest

        labelled = document.labelled_categories(0, self.ignore_index)
        self.categories: tuple[dict[str, Any], ...] = tuple(labelled.values())
        self.class_names: tuple[str, ...] = tuple(str(category["name"]) for category in self.categories)
        self.label_to_category_id: dict[int, int] = {label: category["id"] for label, category in labelled.items()}
        label_of_category = {category_id: label for label, category_id in self.label_to_category_id.items()}

        images = document.sorted_images()
        annotation_of_image: dict[Any, tuple[int, dict[str, Any]]] = {}
        for position, where, annotation in document.checked_annotations(
            ("image_id", "file_name", "segments_info"), images
        ):
            image_id = annotation["image_id"]
            if image_id in annotation_of_image:
                earlier = annotation_of_image[image_id][0]
                raise DatasetError(
                    f"{self.annotation_file}: {where}: image {image_id} is already annotated by annotations[{earlier}]"
                )
            annotation_of_image[image_id] = (position, annotation)

        entries = []
        for image in images:
            if image["id"] not in annotation_of_image:
                raise DatasetError(
                    f"{self.annotation_file}: image {image['id']} ({image['file_name']}) has no panoptic annotation"
                )
            position, annotation = annotation_of_image[image["id"]]
            segment_ids, segment_labels, segment_crowd = self._segments(
                annotation["segments_info"], label_of_category, position
            )
            entries.append(
                _PanopticImage(
                    image_id=image["id"],
                    file_name=str(image["file_name"]),
                    height=int(image["height"]),
                    width=int(image["width"]),
                    panoptic_file_name=str(annotation["file_name"]),
                    annotation_position=position,
                    segment_ids=segment_ids,
                    segment_labels=segment_labels,
                    segment_crowd=segment_crowd,
                )
            )
        self._images: list[_PanopticImage] = entries if limit is None else entries[: max(limit, 0)]
        self.image_ids: tuple[int, ...] = tuple(entry.image_id for entry in self._images)

    def __len__(self) -> int:
        return len(self._images)

    def __getitem__(self, index: int) -> Sample:
        entry = self._images[sample_position(index, len(self), self.name)]
        image = self._load_image(entry)
        segment_ids = self._segment_id_map(entry)
        return self._sample(entry, image, segment_ids)

    def fingerprint(self) -> str:
        """Digest of the annotation file's bytes and of the name and size of every image and PNG used.

        Raises:
            DatasetError: when an image or PNG file is missing.
        """
        digest = hashlib.sha256(f"coco-panoptic\x1f{self._annotation_digest}".encode())
        files = (
            file
            for entry in self._images
            for file in (
                ("image", entry.file_name, self._image_path(entry)),
                ("panoptic PNG", entry.panoptic_file_name, self._panoptic_path(entry)),
            )
        )
        digest_file_sizes(digest, self.annotation_file, files)
        return digest.hexdigest()

    def _sample(self, entry: _PanopticImage, image: np.ndarray, segment_ids: np.ndarray) -> Sample:
        """The sample of ``entry`` from its decoded image and checked segment-id map.

        Shape:
            image: ``(height, width, 3)``, uint8; segment_ids: ``(height, width)``, int64.
        """
        return Sample(
            sample_id=entry.file_name,
            image=torch.from_numpy(image.copy()).permute(2, 0, 1).contiguous(),
            target=SemanticTarget(torch.from_numpy(self._label_map(entry, segment_ids))),
        )

    def _segments(
        self, segments_info: Any, label_of_category: dict[int, int], position: int
    ) -> tuple[tuple[int, ...], tuple[int, ...], tuple[bool, ...]]:
        """Segment ids of one annotation, sorted, with the contiguous label and crowd flag of each.

        ``iscrowd`` may be left out (not crowd), as COCO allows.
        """
        where = f"annotations[{position}].segments_info"
        if not isinstance(segments_info, list) or not all(isinstance(segment, dict) for segment in segments_info):
            raise DatasetError(f"{self.annotation_file}: {where} must be a list of objects")
        label_of_segment: dict[int, int] = {}
        crowd_of_segment: dict[int, bool] = {}
        for row, segment in enumerate(segments_info):
            require(self.annotation_file, segment, ("id", "category_id"), f"{where}[{row}]")
            segment_id, category_id = segment["id"], segment["category_id"]
            if (
                not isinstance(segment_id, int)
                or isinstance(segment_id, bool)
                or not VOID_SEGMENT_ID < segment_id <= _MAX_SEGMENT_ID
            ):
                raise DatasetError(
                    f"{self.annotation_file}: {where}[{row}]: segment id {segment_id!r} is not an integer in "
                    f"1..{_MAX_SEGMENT_ID} (0 marks unlabeled pixels)"
                )
            if category_id not in label_of_category:
                raise DatasetError(
                    f"{self.annotation_file}: {where}[{row}]: category_id {category_id} is not in categories"
                )
            if segment_id in label_of_segment:
                raise DatasetError(f"{self.annotation_file}: {where}[{row}]: segment id {segment_id} appears twice")
            iscrowd = segment.get("iscrowd", 0)
            # bool is an int: True and False pass as 1 and 0, as json writers may emit them.
            if not isinstance(iscrowd, int) or iscrowd not in (0, 1):
                raise DatasetError(f"{self.annotation_file}: {where}[{row}]: iscrowd {iscrowd!r} is not 0 or 1")
            label_of_segment[segment_id] = label_of_category[category_id]
            crowd_of_segment[segment_id] = bool(iscrowd)
        ordered = sorted(label_of_segment)
        return (
            tuple(ordered),
            tuple(label_of_segment[segment_id] for segment_id in ordered),
            tuple(crowd_of_segment[segment_id] for segment_id in ordered),
        )

    def _image_path(self, entry: _PanopticImage) -> Path:
        return self.images_dir / entry.file_name

    def _panoptic_path(self, entry: _PanopticImage) -> Path:
        return self.panoptic_dir / entry.panoptic_file_name

    def _load_image(self, entry: _PanopticImage) -> np.ndarray:
        """The image as ``uint8`` RGB, checked against the json's size.

        Shape:
            return: ``(height, width, 3)``.
        """
        path = self._image_path(entry)
        if not path.is_file():
            raise DatasetError(f"{path}: image file listed in {self.annotation_file} does not exist")
        pixels = read_rgb(path)
        if pixels.shape[:2] != (entry.height, entry.width):
            raise DatasetError(
                f"{path}: image is {pixels.shape[1]}x{pixels.shape[0]} (width x height) but "
                f"{self.annotation_file} says {entry.width}x{entry.height}"
            )
        return pixels

    def _segment_id_map(self, entry: _PanopticImage) -> np.ndarray:
        """The segment id of every pixel of ``entry``'s PNG, each checked against its segments_info.

        Shape:
            return: ``(height, width)``, int64; ``VOID_SEGMENT_ID`` on unlabeled pixels.
        """
        path = self._panoptic_path(entry)
        segment_ids = decode_segment_ids(self._read_panoptic_png(path, entry))
        known = np.asarray((VOID_SEGMENT_ID, *entry.segment_ids), dtype=np.int64)  # sorted: ids are positive
        slot = np.minimum(np.searchsorted(known, segment_ids), len(known) - 1)
        found = known[slot] == segment_ids
        if not bool(found.all()):
            unknown = np.unique(segment_ids[~found])
            shown = ", ".join(str(v) for v in unknown[:_IDS_IN_MESSAGE].tolist())
            more = f" and {len(unknown) - _IDS_IN_MESSAGE} more" if len(unknown) > _IDS_IN_MESSAGE else ""
            raise DatasetError(
                f"{path}: segment ids {shown}{more} are not in the segments_info of "
                f"annotations[{entry.annotation_position}] in {self.annotation_file}"
            )
        return segment_ids

    def _label_map(self, entry: _PanopticImage, segment_ids: np.ndarray) -> np.ndarray:
        """Contiguous class labels of a checked segment-id map of ``entry``, void as ``ignore_index``.

        Shape:
            segment_ids: ``(height, width)``, int64; return: same.
        """
        known = np.asarray((VOID_SEGMENT_ID, *entry.segment_ids), dtype=np.int64)  # sorted: ids are positive
        labels = np.asarray((self.ignore_index, *entry.segment_labels), dtype=np.int64)
        return labels[np.searchsorted(known, segment_ids)]

    def _read_panoptic_png(self, path: Path, entry: _PanopticImage) -> np.ndarray:
        """The stored RGB pixels of a panoptic PNG, checked against the json's image size.

        Shape:
            return: ``(height, width, 3)``, uint8.
        """
        if not path.is_file():
            raise DatasetError(
                f"{path}: panoptic PNG of image {entry.file_name} (annotations[{entry.annotation_position}] "
                f"in {self.annotation_file}) does not exist"
            )
        try:
            with Image.open(path) as opened:
                # A grey or palette rendering would decode to wrong ids without complaint.
                if opened.mode != "RGB":
                    raise DatasetError(
                        f"{path}: panoptic PNG has mode {opened.mode}; expected RGB "
                        f"(segment id = R + 256 * G + 256 ** 2 * B)"
                    )
                pixels = np.asarray(opened)
        except DatasetError:
            raise
        except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as error:
            raise DatasetError(f"{path}: cannot read panoptic PNG ({error})") from error
        if pixels.shape[:2] != (entry.height, entry.width):
            raise DatasetError(
                f"{path}: panoptic PNG is {pixels.shape[1]}x{pixels.shape[0]} (width x height) but its image "
                f"{entry.file_name} is {entry.width}x{entry.height} in {self.annotation_file}"
            )
        return pixels


def decode_segment_ids(rgb: np.ndarray) -> np.ndarray:
    """Segment ids of a panoptic PNG's pixels: ``R + 256 * G + 256 ** 2 * B``.

    Shape:
        rgb: ``(H, W, 3)``, uint8; return: ``(H, W)``, int64.
    """
    channels = rgb.astype(np.int64)
    return channels[..., 0] + 256 * channels[..., 1] + 256 * 256 * channels[..., 2]


class CocoPanoptic(CocoPanopticSemantic):
    """Segments of a COCO panoptic dataset, with the semantic label maps of :class:`CocoPanopticSemantic`.

    Every sample's ``panoptic`` holds the PNG's segment ids as stored (``VOID_SEGMENT_ID`` on
    unlabeled pixels) and, for each segment of the image's ``segments_info`` in id order, its
    contiguous label (``class_names[label]`` is its category's name) and ``iscrowd``. A
    segment listed without a pixel stays listed; panoptic quality counts it as absent. The
    json, its checks, ``categories`` (with ``isthing``), ``class_names`` and the fingerprint
    are those of :class:`CocoPanopticSemantic`: the files are the same, more is read from them.

    Args:
        Those of :class:`CocoPanopticSemantic`.

    Raises:
        DatasetError: as :class:`CocoPanopticSemantic`, naming file and entry.
    """

    def _sample(self, entry: _PanopticImage, image: np.ndarray, segment_ids: np.ndarray) -> Sample:
        panoptic = PanopticTarget(
            segments=torch.from_numpy(segment_ids),
            ids=torch.tensor(entry.segment_ids, dtype=torch.int64),
            labels=torch.tensor(entry.segment_labels, dtype=torch.int64),
            iscrowd=torch.tensor(entry.segment_crowd, dtype=torch.bool),
        )
        return replace(super()._sample(entry, image, segment_ids), panoptic=panoptic)
