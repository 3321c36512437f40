"""Reading a COCO-style annotation json: what the instance and panoptic formats share.

Both formats are a JSON object with ``images``, ``annotations`` and ``categories`` lists of
objects; every error names the file and the entry at fault.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_segrobust.core.errors import DatasetError
from pytest_segrobust.data.io import parse_json, read_file


@dataclass(frozen=True)
class CocoJson:
    """The three lists of a COCO annotation file, and a digest of its bytes.

    Attributes:
        path: The json file, named in every error.
        digest: sha256 of the file's bytes (for dataset fingerprints).
    """

    path: Path
    digest: str
    images: list[dict[str, Any]]
    annotations: list[dict[str, Any]]
    categories: list[dict[str, Any]]

    @classmethod
    def read(cls, path: Path) -> CocoJson:
        """Read and parse ``path``.

        Raises:
            DatasetError: when the file cannot be read, is not JSON, or lacks one of the lists.
        """
        raw = read_file(path, "annotation file")
        document = parse_json(path, raw)
        if not isinstance(document, dict):
            raise DatasetError(f"{path}: expected a JSON object with images, annotations, categories")

        def objects(field: str) -> list[dict[str, Any]]:
            value = document.get(field)
            if not isinstance(value, list) or not all(isinstance(entry, dict) for entry in value):
                raise DatasetError(f"{path}: field {field!r} must be a list of objects")
            return value

        return cls(
            path, hashlib.sha256(raw).hexdigest(), objects("images"), objects("annotations"), objects("categories")
        )

    def sorted_categories(self) -> list[dict[str, Any]]:
        """Copies of the categories in id order, each with an id and a name; ids are unique.

        Raises:
            DatasetError: naming the entry without id or name, or the repeated id.
        """
        for position, category in enumerate(self.categories):
            require(self.path, category, ("id", "name"), f"categories[{position}]")
        return self._sorted_by_id([dict(category) for category in self.categories], "category", "categories")

    def labelled_categories(self, first_label: int, ignore_index: int) -> dict[int, dict[str, Any]]:
        """The categories of :meth:`sorted_categories` by their labels: ``first_label`` and up, in id order.

        Args:
            first_label: The first category's label (1 where label 0 is the background).
            ignore_index: The label of unscored pixels, which no category may reach.

        Raises:
            DatasetError: naming the file when the last label would reach ``ignore_index``.
        """
        categories = self.sorted_categories()
        if first_label + len(categories) > ignore_index:
            raise DatasetError(
                f"{self.path}: {len(categories)} categories do not fit below ignore index {ignore_index}"
            )
        return dict(enumerate(categories, first_label))

    def sorted_images(self) -> list[dict[str, Any]]:
        """The images in id order, each with id, file name and size; ids are unique.

        Raises:
            DatasetError: naming the entry without a field, or the repeated id.
        """
        for position, image in enumerate(self.images):
            require(self.path, image, ("id", "file_name", "height", "width"), f"images[{position}]")
        return self._sorted_by_id(self.images, "image", "images")

    def checked_annotations(
        self, keys: Sequence[str], images: Iterable[dict[str, Any]]
    ) -> Iterator[tuple[int, str, dict[str, Any]]]:
        """Each annotation with its position and its place for messages (``annotations[3]``), checked
        to hold ``keys`` and to name one of ``images`` by its ``image_id``.

        Raises:
            DatasetError: naming the file and the annotation, as the iteration reaches it.
        """
        known_images = {image["id"] for image in images}
        for position, annotation in enumerate(self.annotations):
            where = f"annotations[{position}]"
            require(self.path, annotation, keys, where)
            if annotation["image_id"] not in known_images:
                raise DatasetError(f"{self.path}: {where}: image_id {annotation['image_id']} is not in images")
            yield position, where, annotation

    def _sorted_by_id(self, entries: list[dict[str, Any]], kind: str, field: str) -> list[dict[str, Any]]:
        ordered = sorted(entries, key=lambda entry: entry["id"])
        for before, after in itertools.pairwise(ordered):
            if before["id"] == after["id"]:
                raise DatasetError(f"{self.path}: {kind} id {after['id']} appears twice in {field}")
        return ordered


def require(path: Path, entry: dict[str, Any], keys: Sequence[str], where: str) -> None:
    """Fail naming the file and ``where`` (e.g. ``images[3]``) unless ``entry`` has every key."""
    missing = [key for key in keys if key not in entry]
    if missing:
        raise DatasetError(f"{path}: {where} lacks {', '.join(missing)}")


def digest_file_sizes(digest: Any, annotation_file: Path, files: Iterable[tuple[str, str, Path]]) -> None:
    """Add the name and size of every ``(kind, file name, path)`` to ``digest`` (a hashlib object).

    Raises:
        DatasetError: naming a file that cannot be read, of ``kind`` (``image``, ``panoptic PNG``).
    """
    for kind, file_name, path in files:
        try:
            size = path.stat().st_size
        except OSError as error:
            raise DatasetError(f"{path}: {kind} listed in {annotation_file} cannot be read ({error})") from error
        digest.update(f"\x1f{file_name}\x1f{size}".encode())
