"""Referring segmentation datasets: RefCOCO / RefCOCO+ / RefCOCOg, and a JSON-lines format.

Every expression is its own sample (``Sample.referring``): an object described by three
sentences gives three samples that share the image and the mask. Sample ids are
``image/ref/sentence`` and do not depend on the split or on the order of the files' entries
for other images, so they can seed perturbations.

* :class:`RefCoco`: the original layout of RefCOCO, RefCOCO+ and RefCOCOg (Yu et al.,
  Mao et al.): ``refs(<splitBy>).p`` (splitBy ``unc``, ``umd`` or ``google``) with COCO's
  ``instances.json`` and the COCO images. A ref's mask is its ``ann_id``'s segmentation in
  the instances file; its expressions are its ``sentences`` (the ``raw`` text as annotators
  typed it, else the normalised ``sent``). Ids are ``<image_id>/<ref_id>/<sent_id>``.
* :class:`ReferringJsonl`: users' own data, one JSON object per line with ``image`` (path
  relative to ``images_dir``), ``mask`` (COCO RLE, compressed or not, or polygons) and
  ``expressions`` (a non-empty list of strings), optionally ``ref`` (a name for the object;
  by default its position among the lines of its image). Ids are ``<image>/<ref>/<k>``.

The refs file is a Python pickle, and unpickling runs code that a pickle names. It is
therefore read by :func:`load_refs` with an unpickler that refuses every class and function
(plain pickles of dicts, lists, strings and numbers need none), or from its JSON conversion
(``segrobust convert-refs refs.p refs.json``).

Annotations are read and checked once; pixels are decoded one sample at a time (images with
Pillow, masks with pycocotools, an optional dependency: ``pip install pytest-segrobust[coco]``).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import pickle
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from pytest_segrobust.core.errors import DatasetError
from pytest_segrobust.data.base import DEFAULT_IGNORE_INDEX, ReferringTarget, Sample, sample_position
from pytest_segrobust.data.coco import _decode_segmentation, _pycocotools_mask
from pytest_segrobust.data.coco_json import CocoJson, digest_file_sizes, require
from pytest_segrobust.data.io import parse_json, read_file, read_rgb

# The splits each splitBy of the original refs files has (refer.py's datasets).
SPLITS_BY: dict[str, tuple[str, ...]] = {
    "unc": ("train", "val", "testA", "testB"),
    "umd": ("train", "val", "test"),
    "google": ("train", "val", "test"),
}
_SPLIT_BY_IN_NAME = re.compile(r"refs\((?P<split_by>[A-Za-z]+)\)")
REFERRING_CLASS_NAMES: tuple[str, ...] = ("background", "referent")


class _RefusingUnpickler(pickle.Unpickler):
    """An unpickler that builds builtin containers and scalars only: every class or function is refused."""

    def __init__(self, data: bytes, path: Path) -> None:
        # Python 2 ``str`` objects (the original refs files were written by Python 2) are UTF-8 text.
        super().__init__(io.BytesIO(data), encoding="utf-8")
        self._path = path

    def find_class(self, module: str, name: str) -> Any:
        raise DatasetError(
            f"{self._path}: the pickle asks for {module}.{name}; a refs file holds only lists, dicts, strings "
            "and numbers, so it is refused (nothing in it was run). Convert a trusted file with "
            "'segrobust convert-refs' or pass a JSON refs file"
        )

    def persistent_load(self, pid: Any) -> Any:
        raise DatasetError(f"{self._path}: the pickle holds a persistent reference; it is refused")


def load_refs(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The refs of a RefCOCO-style refs file: a pickle (read safely) or its JSON conversion (``.json``).

    Raises:
        DatasetError: naming the file when it is missing, unreadable, asks for any class or
            function, or is not a list of objects.
    """
    path = Path(path)
    data = read_file(path, "refs file")
    if path.suffix.lower() == ".json":
        refs = parse_json(path, data)
    else:
        try:
            refs = _RefusingUnpickler(data, path).load()
        except DatasetError:
            raise
        except Exception as error:  # a truncated or corrupt pickle raises any of a dozen types
            raise DatasetError(f"{path}: not a readable pickle of refs ({type(error).__name__}: {error})") from error
    if not isinstance(refs, list) or not all(isinstance(ref, dict) for ref in refs):
        raise DatasetError(f"{path}: expected a list of refs (objects), got {type(refs).__name__}")
    return refs


def convert_refs(source: str | os.PathLike[str], target: str | os.PathLike[str]) -> int:
    """Write the refs of ``source`` (read with :func:`load_refs`) as JSON to ``target``; the number of refs.

    Raises:
        DatasetError: for a source :func:`load_refs` refuses or refs JSON cannot hold.
        WriteError: when ``target`` cannot be written.
    """
    from pytest_segrobust.core.files import atomic_write_text

    refs = load_refs(source)
    try:
        text = json.dumps(refs, ensure_ascii=False)
    except (TypeError, ValueError) as error:
        raise DatasetError(f"{source}: the refs hold a value JSON cannot represent ({error})") from error
    atomic_write_text(Path(target), text)
    return len(refs)


@dataclass(frozen=True)
class _Entry:
    """One expression: where its image is and what its mask and text are."""

    sample_id: str
    unit: str  # the image's id, which the gate resamples its expressions by
    image: Path
    size: tuple[int, int] | None  # (height, width) the annotations state, if any
    segmentation: Any
    expression: str
    where: str  # file and entry, for messages


class _ReferringSamples:
    """What both formats share: one sample per expression, pixels decoded in ``__getitem__``."""

    class_names: tuple[str, ...] = REFERRING_CLASS_NAMES
    ignore_index: int = DEFAULT_IGNORE_INDEX
    name: str
    _entries: list[_Entry]
    _annotation_files: tuple[Path, ...]
    _kind: str

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def sample_ids(self) -> tuple[str, ...]:
        return tuple(entry.sample_id for entry in self._entries)

    def __getitem__(self, index: int) -> Sample:
        entry = self._entries[sample_position(index, len(self), self.name)]
        if not entry.image.is_file():
            raise DatasetError(f"{entry.image}: image file of {entry.where} does not exist")
        pixels = read_rgb(entry.image)
        height, width = int(pixels.shape[0]), int(pixels.shape[1])
        if entry.size is not None and entry.size != (height, width):
            raise DatasetError(
                f"{entry.image}: image is {width}x{height} (width x height) but {entry.where} says "
                f"{entry.size[1]}x{entry.size[0]}"
            )
        mask = _decode_segmentation(entry.segmentation, height, width, entry.where)
        image = torch.from_numpy(pixels.copy()).permute(2, 0, 1).contiguous()
        target = ReferringTarget(entry.expression, torch.from_numpy(mask))
        return Sample(entry.sample_id, image, referring=target, unit=entry.unit)

    def fingerprint(self) -> str:
        """Digest of the annotation files' bytes, the samples' ids and texts, and each image's name and size.

        Raises:
            DatasetError: when an image file is missing.
        """
        digest = hashlib.sha256(self._kind.encode())
        for path in self._annotation_files:
            digest.update(f"\x1f{hashlib.sha256(path.read_bytes()).hexdigest()}".encode())
        for entry in self._entries:
            digest.update(f"\x1f{entry.sample_id}\x1f{entry.expression}".encode())
        images = {entry.image: entry.where for entry in self._entries}
        digest_file_sizes(
            digest, self._annotation_files[0], (("image", str(path), path) for path in images)
        )
        return digest.hexdigest()


class RefCoco(_ReferringSamples):
    """RefCOCO, RefCOCO+ or RefCOCOg in the original layout, one split.

    Args:
        refs_file: ``refs(unc).p``, ``refs(umd).p`` or ``refs(google).p`` (a pickle, read
            safely), or its JSON conversion.
        instances_file: The dataset's COCO ``instances.json`` (images and annotations).
        images_dir: Folder the ``file_name`` of every image is relative to (COCO ``train2014``).
        split: ``train``, ``val``, ``testA``, ``testB`` (unc) or ``test`` (umd, google).
        name: Name in reports; by default the refs folder's name and the split.
        limit: Use only the first ``limit`` expressions (in ref id order).

    Raises:
        DatasetError: naming the file and entry for a missing file, an unknown split, a ref
            whose ``ann_id`` or ``image_id`` is not in the instances file, an empty
            expression or a missing field.
        ImportError: when pycocotools is missing.
    """

    _kind = "refcoco"

    def __init__(
        self,
        refs_file: str | os.PathLike[str],
        instances_file: str | os.PathLike[str],
        images_dir: str | os.PathLike[str],
        split: str = "val",
        name: str | None = None,
        limit: int | None = None,
    ) -> None:
        _pycocotools_mask()
        self.refs_file, self.instances_file, self.images_dir = Path(refs_file), Path(instances_file), Path(images_dir)
        self.split = split
        self.name = name if name is not None else f"{self.refs_file.resolve().parent.name}-{split}"
        refs = load_refs(self.refs_file)
        self._check_split(refs)
        document = CocoJson.read(self.instances_file)
        images = {image["id"]: image for image in document.sorted_images()}
        annotations: dict[Any, tuple[int, dict[str, Any]]] = {}
        for position, annotation in enumerate(document.annotations):
            require(self.instances_file, annotation, ("id", "image_id", "segmentation"), f"annotations[{position}]")
            annotations[annotation["id"]] = (position, annotation)
        chosen = [(position, ref) for position, ref in enumerate(refs) if ref.get("split") == split]
        entries: list[_Entry] = []
        for position, ref in sorted(chosen, key=lambda item: _order(item[1].get("ref_id"))):
            entries.extend(self._entries_of(ref, f"refs[{position}]", images, annotations))
        self._entries = entries if limit is None else entries[: max(limit, 0)]
        self._annotation_files = (self.refs_file, self.instances_file)

    def _check_split(self, refs: list[dict[str, Any]]) -> None:
        found = _SPLIT_BY_IN_NAME.search(self.refs_file.name)
        known = SPLITS_BY.get(found["split_by"]) if found else None
        if known is None:  # a renamed file: the splits it holds are the ones there are
            known = tuple(sorted({str(ref.get("split")) for ref in refs}))
        if self.split not in known:
            raise DatasetError(
                f"{self.refs_file}: split {self.split!r} is not one of its splits ({', '.join(known)})"
            )

    def _entries_of(
        self,
        ref: dict[str, Any],
        where: str,
        images: dict[Any, dict[str, Any]],
        annotations: dict[Any, tuple[int, dict[str, Any]]],
    ) -> list[_Entry]:
        require(self.refs_file, ref, ("ref_id", "ann_id", "image_id", "sentences"), where)
        where = f"{where} (ref_id {ref['ref_id']})"
        if ref["ann_id"] not in annotations:
            raise DatasetError(
                f"{self.refs_file}: {where}: ann_id {ref['ann_id']} is not in the annotations of {self.instances_file}"
            )
        position, annotation = annotations[ref["ann_id"]]
        if ref["image_id"] not in images:
            raise DatasetError(
                f"{self.refs_file}: {where}: image_id {ref['image_id']} is not in the images of {self.instances_file}"
            )
        if annotation["image_id"] != ref["image_id"]:
            raise DatasetError(
                f"{self.refs_file}: {where}: ann_id {ref['ann_id']} belongs to image {annotation['image_id']} in "
                f"{self.instances_file}, the ref to image {ref['image_id']}"
            )
        image = images[ref["image_id"]]
        sentences = ref["sentences"]
        if not isinstance(sentences, list) or not sentences:
            raise DatasetError(f"{self.refs_file}: {where}: 'sentences' must be a non-empty list")
        entries = []
        for index, sentence in enumerate(sentences):
            at = f"{where}.sentences[{index}]"
            if not isinstance(sentence, dict) or "sent_id" not in sentence:
                raise DatasetError(f"{self.refs_file}: {at}: expected an object with sent_id and raw or sent")
            text = sentence.get("raw", sentence.get("sent"))
            if not isinstance(text, str) or not text.strip():
                raise DatasetError(f"{self.refs_file}: {at}: expected a non-empty expression, got {text!r}")
            entries.append(
                _Entry(
                    sample_id=f"{ref['image_id']}/{ref['ref_id']}/{sentence['sent_id']}",
                    unit=str(ref["image_id"]),
                    image=self.images_dir / str(image["file_name"]),
                    size=(int(image["height"]), int(image["width"])),
                    segmentation=annotation["segmentation"],
                    expression=text.strip(),
                    where=f"{self.instances_file}: annotations[{position}] (id {ref['ann_id']}, {at} of {self.refs_file})",
                )
            )
        return entries


class ReferringJsonl(_ReferringSamples):
    """Referring annotations as JSON lines: ``{"image", "mask", "expressions"[, "ref"]}`` per line.

    Example line::

        {"image": "scenes/0001.png", "mask": {"size": [64, 64], "counts": "..."},
         "expressions": ["the striped square", "the square right of the dotted circle"]}

    Args:
        annotation_file: The ``.jsonl`` file; blank lines are skipped.
        images_dir: Folder the ``image`` paths are relative to; the annotation file's folder by default.
        name: Name in reports; the file's stem by default.
        limit: Use only the first ``limit`` expressions (in file order).

    Raises:
        DatasetError: naming the file, line and field for a missing file, a line that is not
            a JSON object, a missing or wrongly typed field, an empty expression, or a ``ref``
            that repeats one of its image's.
        ImportError: when pycocotools is missing.
    """

    _kind = "referring-jsonl"

    def __init__(
        self,
        annotation_file: str | os.PathLike[str],
        images_dir: str | os.PathLike[str] | None = None,
        name: str | None = None,
        limit: int | None = None,
    ) -> None:
        _pycocotools_mask()
        self.annotation_file = Path(annotation_file)
        self.images_dir = self.annotation_file.parent if images_dir is None else Path(images_dir)
        self.name = name if name is not None else self.annotation_file.stem
        try:
            lines = self.annotation_file.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as error:
            raise DatasetError(f"{self.annotation_file}: cannot read the annotation file ({error})") from error
        entries: list[_Entry] = []
        refs_of_image: dict[str, set[str]] = {}
        for number, line in enumerate(lines, 1):
            if line.strip():
                entries.extend(self._entries_of(line, f"{self.annotation_file}: line {number}", refs_of_image))
        self._entries = entries if limit is None else entries[: max(limit, 0)]
        self._annotation_files = (self.annotation_file,)

    def _entries_of(self, line: str, where: str, refs_of_image: dict[str, set[str]]) -> list[_Entry]:
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise DatasetError(f"{where}: not valid JSON ({error})") from error
        if not isinstance(record, dict):
            raise DatasetError(f"{where}: expected a JSON object with image, mask and expressions")
        missing = [key for key in ("image", "mask", "expressions") if key not in record]
        if missing:
            raise DatasetError(f"{where}: lacks {', '.join(missing)}")
        image = record["image"]
        if not isinstance(image, str) or not image:
            raise DatasetError(f"{where}: field 'image' must be a path relative to {self.images_dir}, got {image!r}")
        if not isinstance(record["mask"], (dict, list)):
            raise DatasetError(f"{where}: field 'mask' must be a COCO RLE object or a list of polygons")
        expressions = record["expressions"]
        if not isinstance(expressions, list) or not expressions:
            raise DatasetError(f"{where}: field 'expressions' must be a non-empty list of strings")
        taken = refs_of_image.setdefault(image, set())
        ref = str(record.get("ref", len(taken)))
        if ref in taken or "/" in ref or not ref:
            raise DatasetError(f"{where}: field 'ref' {ref!r} must be unique among the lines of {image} and hold no '/'")
        taken.add(ref)
        entries = []
        for index, text in enumerate(expressions):
            if not isinstance(text, str) or not text.strip():
                raise DatasetError(f"{where}: expressions[{index}] must be a non-empty string, got {text!r}")
            entries.append(
                _Entry(f"{image}/{ref}/{index}", image, self.images_dir / image, None, record["mask"], text.strip(), where)
            )
        return entries


def _order(ref_id: Any) -> tuple[int, Any]:
    """Ref ids sort numerically where they are numbers, and as text otherwise."""
    return (0, ref_id) if isinstance(ref_id, int) and not isinstance(ref_id, bool) else (1, str(ref_id))
