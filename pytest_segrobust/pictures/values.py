"""What the report's pictures show, as values: measured where the models run, drawn by the report.

:class:`WorstImages` is one cell's evidence: the images whose score fell most, with their
numbers and the arrays a picture of them needs (the clean and corrupted image, the class views
of both predictions and of the ground truth, moved with the image where the corruption moved
it). :class:`GalleryTiles` is a suite's first image under its corruptions, already corrupted
and shrunk to the report's tile size; :class:`SuitePictures` holds it with the table of how
much of the frame each geometric corruption keeps. The code that measures them is in
:mod:`pytest_segrobust.engine.worst_images` and :mod:`pytest_segrobust.engine.suite_pictures`; the report
(:mod:`pytest_segrobust.report.overlays`, :mod:`pytest_segrobust.report.gallery`) draws them
and never runs a model or a corruption.

Each value is JSON-safe through ``to_json`` / ``from_json`` (with a format version), so it can
cross a process (an xdist worker's payload) or a file (a shard) and come back exactly: images
and class views travel as lossless PNGs in base64.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from PIL import Image as PILImage

PICTURES_FORMAT = 1
# Longest side of a tile in the report's gallery: corrupted at full size, shown at this one.
REPORT_TILE = 256


class PicturesFormatError(ValueError):
    """A pictures value in an unknown format, or arrays that do not decode."""


# -- packing arrays ------------------------------------------------------------------------


def pack_image(image: np.ndarray) -> str:
    """An ``(H, W, 3)`` uint8 image as a base64 PNG (lossless)."""
    if image.dtype != np.uint8 or image.ndim != 3 or image.shape[-1] != 3:
        raise ValueError(f"expected an (H, W, 3) uint8 image, got {image.dtype} {tuple(image.shape)}")
    return _png(PILImage.fromarray(np.ascontiguousarray(image)))


def unpack_image(text: str) -> np.ndarray:
    """The image of :func:`pack_image`."""
    return np.asarray(_unpng(text).convert("RGB"))


def pack_classes(classes: np.ndarray) -> dict[str, str]:
    """An ``(H, W)`` map of class ids (``-1``: no class) as a base64 PNG of the ids plus one.

    8 bits where the ids fit (below 255), else 16 bits; ids beyond 16 bits travel as an
    ``.npy`` (base64), which no real class list reaches.
    """
    shifted = classes.astype(np.int64) + 1
    if shifted.size and (shifted.min() < 0 or shifted.max() > np.iinfo(np.uint16).max):
        buffer = io.BytesIO()
        np.save(buffer, np.ascontiguousarray(classes.astype(np.int64)), allow_pickle=False)
        return {"npy": base64.b64encode(buffer.getvalue()).decode("ascii")}
    small = not shifted.size or shifted.max() <= np.iinfo(np.uint8).max
    return {"png": _png(PILImage.fromarray(np.ascontiguousarray(shifted.astype(np.uint8 if small else np.uint16))))}


def unpack_classes(packed: Mapping[str, str]) -> np.ndarray:
    """The int64 class map of :func:`pack_classes`."""
    if "npy" in packed:
        try:
            return np.load(io.BytesIO(base64.b64decode(packed["npy"], validate=True)), allow_pickle=False)
        except (ValueError, OSError, EOFError) as exc:
            raise PicturesFormatError(f"not a packed class map: {exc}") from None
    return np.asarray(_unpng(packed["png"])).astype(np.int64) - 1


def _png(picture: PILImage.Image) -> str:
    buffer = io.BytesIO()
    picture.save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _unpng(text: str) -> PILImage.Image:
    try:
        picture = PILImage.open(io.BytesIO(base64.b64decode(text, validate=True)), formats=["PNG"])
        picture.load()
    except (ValueError, OSError) as exc:
        raise PicturesFormatError(f"not a packed PNG: {exc}") from None
    return picture


def _image_tensor(text: str) -> torch.Tensor:
    return torch.from_numpy(unpack_image(text).copy()).permute(2, 0, 1).contiguous()


def _classes_tensor(packed: Mapping[str, str] | None) -> torch.Tensor | None:
    return None if packed is None else torch.from_numpy(unpack_classes(packed).copy())


def _check_format(data: Mapping[str, Any], what: str) -> None:
    if data.get("format") != PICTURES_FORMAT:
        raise PicturesFormatError(f"{what}: format {data.get('format')!r}, expected {PICTURES_FORMAT}")


# -- a cell's worst images -----------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class ImageLoss:
    """One image clean and corrupted: its own scores, pictures and class views.

    Attributes:
        drop: How much worse the corrupted score is, in the metric's direction (positive: worse).

    Shape:
        clean_image, corrupted_image: ``(3, H, W)``, uint8; the maps: ``(H, W)``, int64.
    """

    sample_id: str
    clean_score: float
    corrupted_score: float
    drop: float
    clean_image: torch.Tensor
    corrupted_image: torch.Tensor
    clean_prediction: torch.Tensor
    corrupted_prediction: torch.Tensor
    truth: torch.Tensor | None
    moved_truth: torch.Tensor | None
    clean_text: str | None = None
    corrupted_text: str | None = None

    def __eq__(self, other: object) -> bool:
        """The same numbers, texts and arrays (of the same dtype)."""
        if not isinstance(other, ImageLoss):
            return NotImplemented
        return self.summary() == other.summary() and all(
            _same(getattr(self, name), getattr(other, name)) for name in _ARRAYS
        )

    __hash__ = None  # type: ignore[assignment]

    def summary(self) -> dict[str, Any]:
        """The numbers the report's JSON shows, without the pictures (and a referring sample's
        clean and perturbed expression)."""
        out: dict[str, Any] = {
            "sample_id": self.sample_id,
            "clean": self.clean_score,
            "corrupted": self.corrupted_score,
            "drop": self.drop,
        }
        if self.clean_text is not None:
            out |= {"clean_text": self.clean_text, "corrupted_text": self.corrupted_text}
        return out

    def to_json(self) -> dict[str, Any]:
        """The numbers and the pictures (lossless PNGs, base64)."""
        return self.summary() | {
            "pictures": {
                "clean_image": pack_image(self.clean_image.permute(1, 2, 0).numpy()),
                "corrupted_image": pack_image(self.corrupted_image.permute(1, 2, 0).numpy()),
                "clean_prediction": pack_classes(self.clean_prediction.numpy()),
                "corrupted_prediction": pack_classes(self.corrupted_prediction.numpy()),
                "truth": None if self.truth is None else pack_classes(self.truth.numpy()),
                "moved_truth": None if self.moved_truth is None else pack_classes(self.moved_truth.numpy()),
            }
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ImageLoss:
        pictures = data["pictures"]
        return cls(
            sample_id=str(data["sample_id"]),
            clean_score=float(data["clean"]),
            corrupted_score=float(data["corrupted"]),
            drop=float(data["drop"]),
            clean_image=_image_tensor(pictures["clean_image"]),
            corrupted_image=_image_tensor(pictures["corrupted_image"]),
            clean_prediction=_classes_tensor(pictures["clean_prediction"]),  # type: ignore[arg-type]
            corrupted_prediction=_classes_tensor(pictures["corrupted_prediction"]),  # type: ignore[arg-type]
            truth=_classes_tensor(pictures["truth"]),
            moved_truth=_classes_tensor(pictures["moved_truth"]),
            clean_text=data.get("clean_text"),
            corrupted_text=data.get("corrupted_text"),
        )


_ARRAYS = ("clean_image", "corrupted_image", "clean_prediction", "corrupted_prediction", "truth", "moved_truth")


def _same(first: torch.Tensor | None, second: torch.Tensor | None) -> bool:
    if first is None or second is None:
        return first is second
    return first.dtype == second.dtype and first.shape == second.shape and torch.equal(first, second)


@dataclass(frozen=True)
class WorstImages:
    """One cell's images whose score fell most, worst first: the report's evidence of that cell.

    Attributes:
        corruption: The cell's corruption.
        severity: The cell's severity.
        gamma_r: The cell's relative robustness, as the report shows it.
        considered: How many of the first images were looked at.
        metric_label: The headline metric's name as the report writes it (``mIoU``).
        class_names: The dataset's classes, for the pictures' colours and legend.
        images: The images that lost most, worst first (none: see ``note``).
        note: Why there are no pictures, when there are none.
    """

    corruption: str
    severity: int
    gamma_r: float | None
    considered: int
    metric_label: str
    class_names: tuple[str, ...]
    images: tuple[ImageLoss, ...] = ()
    note: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "format": PICTURES_FORMAT,
            "corruption": self.corruption,
            "severity": self.severity,
            "gamma_r": self.gamma_r,
            "considered": self.considered,
            "metric_label": self.metric_label,
            "class_names": list(self.class_names),
            "images": [loss.to_json() for loss in self.images],
            "note": self.note,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> WorstImages:
        """The value of :meth:`to_json`.

        Raises:
            PicturesFormatError: for another format, or pictures that do not decode.
        """
        _check_format(data, "worst images")
        gamma_r = data["gamma_r"]
        return cls(
            corruption=str(data["corruption"]),
            severity=int(data["severity"]),
            gamma_r=None if gamma_r is None else float(gamma_r),
            considered=int(data["considered"]),
            metric_label=str(data["metric_label"]),
            class_names=tuple(str(name) for name in data["class_names"]),
            images=tuple(ImageLoss.from_json(image) for image in data["images"]),
            note=data.get("note"),
        )


# -- a suite's pictures --------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class GalleryTiles:
    """One image under each corruption at some severities, as the gallery shows it.

    Each tile was corrupted at the image's own size, as a model sees it, and only then shrunk
    to the shown size: pixel-sized parameters (a translation, a blur radius) look as strong as
    they are.

    Shape:
        clean and each tile: ``(h, w, 3)``, uint8, the shown size.
    """

    corruptions: tuple[str, ...]
    severities: tuple[int, ...]
    clean: np.ndarray
    tiles: tuple[tuple[np.ndarray, ...], ...]  # per corruption, per severity

    def to_json(self) -> dict[str, Any]:
        return {
            "format": PICTURES_FORMAT,
            "corruptions": list(self.corruptions),
            "severities": list(self.severities),
            "clean": pack_image(self.clean),
            "tiles": [[pack_image(tile) for tile in row] for row in self.tiles],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> GalleryTiles:
        _check_format(data, "gallery")
        return cls(
            corruptions=tuple(str(name) for name in data["corruptions"]),
            severities=tuple(int(s) for s in data["severities"]),
            clean=unpack_image(data["clean"]),
            tiles=tuple(tuple(unpack_image(tile) for tile in row) for row in data["tiles"]),
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, GalleryTiles):
            return NotImplemented
        return (
            (self.corruptions, self.severities) == (other.corruptions, other.severities)
            and np.array_equal(self.clean, other.clean)
            and len(self.tiles) == len(other.tiles)
            and all(len(a) == len(b) and all(map(np.array_equal, a, b)) for a, b in zip(self.tiles, other.tiles))
        )

    __hash__ = None  # type: ignore[assignment]


@dataclass(frozen=True)
class SuitePictures:
    """What the report shows of a suite's corruptions on its first image.

    Attributes:
        gallery: The first image under every visual corruption at severities 1, 3, 5
            (``None``: it could not be made, see ``warnings``).
        frame_kept: How much of the frame each geometric corruption keeps
            (:func:`pytest_segrobust.engine.suite_pictures.describe_frames`; ``None``: no geometric
            corruption, or it could not be measured).
        warnings: What could not be made and why, as the report says it.
    """

    gallery: GalleryTiles | None
    frame_kept: dict[str, Any] | None
    warnings: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "format": PICTURES_FORMAT,
            "gallery": None if self.gallery is None else self.gallery.to_json(),
            "frame_kept": self.frame_kept,
            "warnings": list(self.warnings),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SuitePictures:
        _check_format(data, "suite pictures")
        return cls(
            gallery=None if data["gallery"] is None else GalleryTiles.from_json(data["gallery"]),
            frame_kept=data["frame_kept"],
            warnings=tuple(str(w) for w in data["warnings"]),
        )


# -- a run's pictures ----------------------------------------------------------------------


@dataclass
class RunPictures:
    """The pictures a process made for the report, measured where the models and data were warm.

    Attributes:
        suites: Each measured suite's gallery and frame table, by suite name.
        worst: The worst images of cells that may be their model's worst, by cell node id.
        failures: Why a cell's worst images could not be made, by cell node id.
        left_out: Cells whose pictures were not made on purpose, by cell node id: the shard that
            measured them (``2/3``), run with ``--segrobust-figures=none``. The report names
            those shards once instead of warning of each missing picture.
    """

    suites: dict[str, SuitePictures] = field(default_factory=dict)
    worst: dict[str, WorstImages] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)
    left_out: dict[str, str] = field(default_factory=dict)

    def absorb(self, other: RunPictures) -> None:
        """Add another process's pictures; what this one has already stays (any copy is the same
        cell's), but a suite's gallery replaces a copy without one (a process that left it out or
        could not make it), whichever process came first."""
        for name, pictures in other.suites.items():
            mine = self.suites.get(name)
            if mine is None or (mine.gallery is None and pictures.gallery is not None):
                self.suites[name] = pictures
        for nodeid, worst in other.worst.items():
            self.worst.setdefault(nodeid, worst)
        for nodeid, reason in other.failures.items():
            self.failures.setdefault(nodeid, reason)
        for nodeid, shard in other.left_out.items():
            self.left_out.setdefault(nodeid, shard)

    def to_json(self) -> dict[str, Any]:
        return {
            "format": PICTURES_FORMAT,
            "suites": {name: pictures.to_json() for name, pictures in self.suites.items()},
            "worst": {nodeid: worst.to_json() for nodeid, worst in self.worst.items()},
            "failures": dict(self.failures),
            "left_out": dict(self.left_out),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunPictures:
        """The value of :meth:`to_json`.

        Raises:
            PicturesFormatError: for another format, or pictures that do not decode.
        """
        _check_format(data, "run pictures")
        return cls(
            suites={str(name): SuitePictures.from_json(p) for name, p in data["suites"].items()},
            worst={str(nodeid): WorstImages.from_json(w) for nodeid, w in data["worst"].items()},
            failures={str(nodeid): str(reason) for nodeid, reason in data["failures"].items()},
            left_out={str(nodeid): str(shard) for nodeid, shard in data.get("left_out", {}).items()},
        )
