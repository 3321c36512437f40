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

A promptable task's pictures (:mod:`pytest_segrobust.pictures.prompted`) add panels, one
prediction per prompt kind, and the prompts the model was given on each (:class:`PromptMarks`):
format 2, which reads format 1's values as they were.
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

PICTURES_FORMAT = 2
# The formats read back: format 1 had no panels nor prompts, and reads as a value without them.
READABLE_FORMATS = (1, 2)
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
    if data.get("format") not in READABLE_FORMATS:
        raise PicturesFormatError(
            f"{what}: format {data.get('format')!r}, expected one of {', '.join(map(str, READABLE_FORMATS))}"
        )


# -- prompts as drawn ------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class PromptMarks:
    """The prompts one panel of a picture shows: the clicks and boxes a model was given, in pixels.

    Each click and box names the class id its instance is painted with (``owners``), so it is
    drawn in that instance's colour; a click's label (:data:`~pytest_segrobust.core.prompts.FOREGROUND`
    or :data:`~pytest_segrobust.core.prompts.BACKGROUND`) says which way it points.

    Shape:
        points: ``(N, 2)`` float32 ``(x, y)``; labels, point_owners: ``(N,)`` int64;
        boxes: ``(M, 4)`` float32 ``(x0, y0, x1, y1)``, exclusive ends; box_owners: ``(M,)`` int64.
    """

    points: torch.Tensor
    labels: torch.Tensor
    point_owners: torch.Tensor
    boxes: torch.Tensor
    box_owners: torch.Tensor

    def __eq__(self, other: object) -> bool:
        """The same prompts (values and dtypes)."""
        if not isinstance(other, PromptMarks):
            return NotImplemented
        return all(_same(getattr(self, name), getattr(other, name)) for name in _MARKS)

    __hash__ = None  # type: ignore[assignment]

    def to_json(self) -> dict[str, Any]:
        """Lists of numbers: float32 coordinates are exact as JSON floats."""
        return {name: getattr(self, name).tolist() for name in _MARKS}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PromptMarks:
        """The value of :meth:`to_json`.

        Raises:
            PicturesFormatError: for a missing list or one of the wrong shape.
        """
        try:
            points = torch.tensor(data["points"], dtype=torch.float32).reshape(-1, 2)
            boxes = torch.tensor(data["boxes"], dtype=torch.float32).reshape(-1, 4)
            labels, point_owners, box_owners = (
                torch.tensor(data[name], dtype=torch.int64).reshape(-1) for name in ("labels", "point_owners", "box_owners")
            )
        except (KeyError, TypeError, ValueError, RuntimeError) as exc:
            raise PicturesFormatError(f"not prompt marks: {type(exc).__name__}: {exc}") from None
        if not len(points) == len(labels) == len(point_owners) or len(boxes) != len(box_owners):
            raise PicturesFormatError(
                f"prompt marks: {len(points)} points, {len(labels)} labels and {len(point_owners)} owners; "
                f"{len(boxes)} boxes and {len(box_owners)} owners"
            )
        return cls(points, labels, point_owners, boxes, box_owners)


_MARKS = ("points", "labels", "point_owners", "boxes", "box_owners")


# -- a cell's worst images -----------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class ImageLoss:
    """One image clean and corrupted: its own scores, pictures and class views.

    Attributes:
        drop: How much worse the corrupted score is, in the metric's direction (positive: worse).
        panels: The names of the predictions' panels, where a view draws several (a promptable
            image's ``points`` and ``box``: one prediction per prompt kind); ``()``: one class map.
        clean_prompts: Per panel, the prompts the model was given clean (``()``: none drawn).
        corrupted_prompts: Per panel, the prompts as a corruption left them.

    Shape:
        clean_image, corrupted_image: ``(3, H, W)``, uint8; the predictions: ``(H, W)``, int64, or
        ``(len(panels), H, W)`` with panels; truth, moved_truth: ``(H, W)``, int64.
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
    panels: tuple[str, ...] = ()
    clean_prompts: tuple[PromptMarks, ...] = ()
    corrupted_prompts: tuple[PromptMarks, ...] = ()

    def __post_init__(self) -> None:
        panels = max(len(self.panels), 1)
        for name in ("clean_prediction", "corrupted_prediction"):
            shape = tuple(getattr(self, name).shape)
            if len(shape) != (3 if self.panels else 2) or (self.panels and shape[0] != panels):
                raise ValueError(f"{name} of shape {shape} for {panels} panel(s) {self.panels}")
        for name in ("clean_prompts", "corrupted_prompts"):
            if getattr(self, name) and len(getattr(self, name)) != panels:
                raise ValueError(f"{len(getattr(self, name))} {name} for {panels} panel(s) {self.panels}")

    def __eq__(self, other: object) -> bool:
        """The same numbers, texts, panels, prompts and arrays (of the same dtype)."""
        if not isinstance(other, ImageLoss):
            return NotImplemented
        return (
            self.summary() == other.summary()
            and (self.panels, self.clean_prompts, self.corrupted_prompts)
            == (other.panels, other.clean_prompts, other.corrupted_prompts)
            and all(_same(getattr(self, name), getattr(other, name)) for name in _ARRAYS)
        )

    def predictions(self, clean: bool) -> tuple[torch.Tensor, ...]:
        """The clean (or corrupted) prediction's class map of each panel, in order.

        Shape:
            return: ``max(len(panels), 1)`` tensors of ``(H, W)``, int64.
        """
        maps = self.clean_prediction if clean else self.corrupted_prediction
        return tuple(maps) if self.panels else (maps,)

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
        """The numbers and the pictures (lossless PNGs, base64); with panels, a list of maps per
        prediction and the prompts of each panel."""
        pictures: dict[str, Any] = {
            "clean_image": pack_image(self.clean_image.permute(1, 2, 0).numpy()),
            "corrupted_image": pack_image(self.corrupted_image.permute(1, 2, 0).numpy()),
            "clean_prediction": self._pack_prediction(self.clean_prediction),
            "corrupted_prediction": self._pack_prediction(self.corrupted_prediction),
            "truth": None if self.truth is None else pack_classes(self.truth.numpy()),
            "moved_truth": None if self.moved_truth is None else pack_classes(self.moved_truth.numpy()),
        }
        if self.panels:
            pictures["panels"] = list(self.panels)
        if self.clean_prompts or self.corrupted_prompts:
            pictures["clean_prompts"] = [marks.to_json() for marks in self.clean_prompts]
            pictures["corrupted_prompts"] = [marks.to_json() for marks in self.corrupted_prompts]
        return self.summary() | {"pictures": pictures}

    def _pack_prediction(self, maps: torch.Tensor) -> Any:
        return [pack_classes(panel.numpy()) for panel in maps] if self.panels else pack_classes(maps.numpy())

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ImageLoss:
        """The value of :meth:`to_json` (format 1's, without panels, too).

        Raises:
            PicturesFormatError: for pictures that do not decode, or panels that do not fit them.
        """
        pictures = data["pictures"]
        panels = tuple(str(name) for name in pictures.get("panels", ()))

        def prediction(packed: Any) -> torch.Tensor:
            if not panels:
                return _classes_tensor(packed)  # type: ignore[return-value]
            if not isinstance(packed, list) or len(packed) != len(panels) or not packed:
                raise PicturesFormatError(f"{len(panels)} panels {panels} but {len(packed)} packed maps")
            return torch.stack([torch.from_numpy(unpack_classes(panel).copy()) for panel in packed])

        try:
            return cls(
                sample_id=str(data["sample_id"]),
                clean_score=float(data["clean"]),
                corrupted_score=float(data["corrupted"]),
                drop=float(data["drop"]),
                clean_image=_image_tensor(pictures["clean_image"]),
                corrupted_image=_image_tensor(pictures["corrupted_image"]),
                clean_prediction=prediction(pictures["clean_prediction"]),
                corrupted_prediction=prediction(pictures["corrupted_prediction"]),
                truth=_classes_tensor(pictures["truth"]),
                moved_truth=_classes_tensor(pictures["moved_truth"]),
                clean_text=data.get("clean_text"),
                corrupted_text=data.get("corrupted_text"),
                panels=panels,
                clean_prompts=tuple(PromptMarks.from_json(m) for m in pictures.get("clean_prompts", ())),
                corrupted_prompts=tuple(PromptMarks.from_json(m) for m in pictures.get("corrupted_prompts", ())),
            )
        except ValueError as exc:
            if isinstance(exc, PicturesFormatError):
                raise
            raise PicturesFormatError(f"image {data.get('sample_id')!r}: {exc}") from None


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
