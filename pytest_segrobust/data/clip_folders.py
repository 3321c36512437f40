"""What the video object segmentation readers share: frame folders, palette masks, streamed clips.

DAVIS and YouTube-VOS store a clip as a folder of JPEG frames and a folder of palette PNGs
whose palette indices are object ids (``0`` background, ``255`` void, which is the ignore
index). A frame and its mask pair up by name (``00005.jpg`` with ``00005.png``); frames play
in the order of their names, sorted (never in the order a directory listing happens to give).

A reader lists names and checks folders when it is made, and decodes a clip only when a
sample is asked for (:meth:`ClipFolderDataset.__getitem__`): it never holds more than the
clip being read.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
from PIL import Image

from pytest_segrobust.core.errors import DatasetError
from pytest_segrobust.data.base import DEFAULT_IGNORE_INDEX, Sample, sample_position
from pytest_segrobust.data.clips import ClipFrames
from pytest_segrobust.data.io import file_size, parse_json, read_file, read_rgb

VOS_CLASS_NAMES: tuple[str, ...] = ("background", "object")
FRAME_SUFFIXES = (".jpg", ".jpeg")
MASK_SUFFIX = ".png"
VOID_INDEX = 255
"""The palette index DAVIS and YouTube-VOS give to pixels that are not scored (the ignore index)."""


@dataclass(frozen=True)
class FrameSelection:
    """Which frames of a clip to read: every ``stride``-th, then the first ``max_frames`` of those.

    Raises:
        ValueError: for a stride or a frame count below 1.
    """

    stride: int = 1
    max_frames: int | None = None

    def __post_init__(self) -> None:
        if self.stride < 1:
            raise ValueError(f"stride must be at least 1, got {self.stride}")
        if self.max_frames is not None and self.max_frames < 1:
            raise ValueError(f"max_frames must be at least 1, got {self.max_frames}")

    def apply(self, names: Sequence[str]) -> list[str]:
        """The names kept, in play order."""
        return list(names[:: self.stride][: self.max_frames])

    def describe(self) -> str:
        return f"stride={self.stride},max_frames={self.max_frames}"


def files_by_name(folder: Path, suffixes: Sequence[str], what: str) -> dict[str, Path]:
    """The files of ``folder`` with one of ``suffixes`` (either case), by name without suffix, sorted by name.

    Raises:
        DatasetError: naming the folder when it does not exist, or two files sharing a name.
    """
    if not folder.is_dir():
        raise DatasetError(f"{folder}: {what} folder does not exist")
    found: dict[str, Path] = {}
    for path in sorted(folder.iterdir()):
        if path.suffix.lower() in suffixes and path.is_file():
            if path.stem in found:
                raise DatasetError(f"{path}: {what} {path.stem} is also {found[path.stem].name}")
            found[path.stem] = path
    return dict(sorted(found.items()))


def clip_folder_files(
    frames_root: Path, masks_root: Path, clip: str, what: str
) -> tuple[dict[str, Path], dict[str, Path]]:
    """A clip's frames and masks by frame name, from its folders ``<frames_root>/<clip>`` and ``<masks_root>/<clip>``.

    Args:
        frames_root: The folder of every clip's frames folder.
        masks_root: The folder of every clip's masks folder.
        clip: The clip's folder name.
        what: What a clip is called in the dataset's words (``"sequence"``, ``"video"``), for messages.

    Raises:
        DatasetError: naming the folder or file: a missing folder, no frames, a mask without a frame.
    """
    frames = files_by_name(frames_root / clip, FRAME_SUFFIXES, f"frames of {what} {clip}")
    if not frames:
        raise DatasetError(f"{frames_root / clip}: {what} {clip} has no frames (*.jpg)")
    masks_dir = masks_root / clip
    masks = files_by_name(masks_dir, (MASK_SUFFIX,), f"masks of {what} {clip}")
    check_masks_have_frames(frames, masks, masks_dir)
    return frames, masks


def read_palette_mask(path: Path) -> np.ndarray:
    """A palette PNG's indices (object ids).

    Shape:
        return: ``(H, W)``, ``uint8``.

    Raises:
        DatasetError: naming the file when it cannot be read or is not a palette image (an
            RGB rendering of a mask has colours, not object ids).
    """
    try:
        with Image.open(path) as opened:
            if opened.mode != "P":
                raise DatasetError(
                    f"{path}: mask has mode {opened.mode}; expected a palette PNG (mode P) whose indices are object ids"
                )
            return np.asarray(opened)
    except DatasetError:
        raise
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as error:
        raise DatasetError(f"{path}: cannot read mask ({error})") from error


@dataclass(frozen=True)
class DecodedClip:
    """A clip's frames and masks as read, before its objects are chosen.

    Shape:
        masks: ``(T, H, W)``, ``int64``, ``ignore_index`` on frames without a mask;
        annotated: ``(T,)``, ``bool``.
    """

    video: ClipFrames
    masks: torch.Tensor
    annotated: torch.Tensor
    mask_paths: tuple[Path | None, ...]

    def first_showing(self, object_id: int) -> int | None:
        """The first annotated frame whose mask shows ``object_id``, if any."""
        shown = (self.masks == object_id).flatten(1).any(dim=1) & self.annotated
        positions = shown.nonzero()
        return int(positions[0, 0]) if len(positions) else None

    def ids_shown(self) -> list[int]:
        """Every object id on an annotated frame (not background, not void), ascending."""
        return ids_in(self.masks[self.annotated])


def ids_in(masks: torch.Tensor) -> list[int]:
    """The object ids (not background, not void) among mask values read from 8-bit PNGs, ascending.

    A histogram rather than ``unique()``, which sorts every pixel: the values are below 256.
    """
    counts = torch.bincount(masks.flatten(), minlength=VOID_INDEX + 1)
    return [value for value in counts.nonzero().flatten().tolist() if value not in (0, VOID_INDEX)]


def decode_clip(frames: Sequence[Path], masks: Sequence[Path | None]) -> DecodedClip:
    """Decode ``frames`` and, where given, their ``masks``, checking that every size agrees.

    Raises:
        DatasetError: naming the file whose size differs from the clip's first frame, or a
            mask that is unreadable or not a palette PNG.
    """
    if not frames:
        raise ValueError("a clip needs at least one frame")
    first = read_rgb(frames[0])
    height, width = int(first.shape[0]), int(first.shape[1])
    pixels = torch.empty((len(frames), 3, height, width), dtype=torch.uint8)
    labels = torch.empty((len(frames), height, width), dtype=torch.int64)
    annotated = torch.zeros(len(frames), dtype=torch.bool)
    # Copy each decoded frame straight into the clip's tensor: one copy, no list of frames.
    pixels_view, labels_view = pixels.numpy(), labels.numpy()
    for position, (frame_path, mask_path) in enumerate(zip(frames, masks, strict=True)):
        rgb = first if position == 0 else read_rgb(frame_path)
        if rgb.shape[:2] != (height, width):
            raise DatasetError(
                f"{frame_path}: frame is {rgb.shape[1]}x{rgb.shape[0]} (width x height) but the clip's first "
                f"frame {frames[0]} is {width}x{height}"
            )
        np.copyto(pixels_view[position], rgb.transpose(2, 0, 1))
        if mask_path is None:
            labels[position] = DEFAULT_IGNORE_INDEX
            continue
        mask = read_palette_mask(mask_path)
        if mask.shape != (height, width):
            raise DatasetError(
                f"{mask_path}: mask is {mask.shape[1]}x{mask.shape[0]} (width x height) but its frame "
                f"{frame_path} is {width}x{height}"
            )
        np.copyto(labels_view[position], mask)
        annotated[position] = True
    names = tuple(path.stem for path in frames)
    return DecodedClip(ClipFrames(pixels, names), labels, annotated, tuple(masks))


def decode_named(frames: Mapping[str, Path], masks: Mapping[str, Path], kept: Sequence[str]) -> DecodedClip:
    """Decode the frames named ``kept`` (in that order) and the masks of those that have one."""
    return decode_clip([frames[name] for name in kept], [masks.get(name) for name in kept])


def read_json_object(path: Path, what: str) -> dict[str, Any]:
    """A JSON file holding an object.

    Raises:
        DatasetError: naming the file when it is missing, unreadable, not JSON or not an object.
    """
    document = parse_json(path, read_file(path, what))
    if not isinstance(document, dict):
        raise DatasetError(f"{path}: expected a JSON object, got {type(document).__name__}")
    return document


def field_object(path: Path, value: Any, where: str) -> dict[str, Any]:
    """``value`` when it is a JSON object; else an error naming the file and field ``where``."""
    if not isinstance(value, dict):
        raise DatasetError(f"{path}: field {where} must be an object, got {type(value).__name__}")
    return value


def field_of(path: Path, entry: dict[str, Any], key: str, where: str) -> Any:
    """``entry[key]``; an error naming the file and field ``where.key`` when it is missing."""
    if key not in entry:
        raise DatasetError(f"{path}: field {where} lacks {key!r}")
    return entry[key]


def object_id_of(path: Path, value: Any, where: str) -> int:
    """An object id written as an integer or a string of digits, within ``1..254``.

    Raises:
        DatasetError: naming the file and field for anything else.
    """
    if isinstance(value, bool) or not isinstance(value, (int, str)) or not str(value).strip().isdigit():
        raise DatasetError(f"{path}: field {where} must be an object id (1..254), got {value!r}")
    object_id = int(str(value))
    if not 0 < object_id < VOID_INDEX:
        raise DatasetError(f"{path}: field {where} must be an object id (1..254), got {value!r}")
    return object_id


def read_lines(path: Path, what: str) -> list[str]:
    """The non-blank lines of a text file, stripped; UTF-8, else Latin-1 (Ref-DAVIS17's second annotator).

    Raises:
        DatasetError: naming the file when it cannot be read.
    """
    raw = read_file(path, what)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = raw.decode("latin-1")  # decodes any bytes; the published annot2 files are Latin-1
    return [line.strip() for line in text.splitlines() if line.strip()]


def ordered_keys(keys: Iterable[str]) -> list[str]:
    """Keys in numeric order where they are numbers, then the others as text."""
    return sorted(keys, key=lambda key: (0, int(key), key) if key.isdigit() else (1, 0, key))


def selected_files(
    clips: Iterable[str], files: Callable[[str], tuple[dict[str, Path], dict[str, Path]]], selection: FrameSelection
) -> Iterator[Path]:
    """The files a reader reads of ``clips``: each selected frame, then its mask where it has one.

    ``files(clip)`` gives a clip's frames and masks by frame name.
    """
    for clip in clips:
        frames, masks = files(clip)
        for frame_name in selection.apply(list(frames)):
            yield frames[frame_name]
            if frame_name in masks:
                yield masks[frame_name]


class ClipFolderDataset:
    """What the clip readers share: a list of sample ids, bounds-checked indexing, a fingerprint.

    A subclass sets ``name``, ``root``, ``_sample_ids``, ``_kind``, ``_options`` and
    ``_annotation_files``, and implements :meth:`_read` and :meth:`_used_files`.
    """

    class_names: tuple[str, ...] = VOS_CLASS_NAMES
    ignore_index: int = DEFAULT_IGNORE_INDEX
    name: str
    root: Path
    _sample_ids: list[str]
    _kind: str
    _options: str
    _annotation_files: tuple[Path, ...]

    def __len__(self) -> int:
        return len(self._sample_ids)

    @property
    def sample_ids(self) -> tuple[str, ...]:
        return tuple(self._sample_ids)

    def __getitem__(self, index: int) -> Sample:
        return self._read(sample_position(index, len(self), self.name))

    def fingerprint(self) -> str:
        """Digest of the reader's options, its annotation files' bytes and the name and size of every file read.

        Raises:
            DatasetError: when a file has disappeared since the dataset was listed.
        """
        digest = hashlib.sha256(f"{self._kind}\x1f{self._options}".encode())
        for path in self._annotation_files:
            try:
                content = path.read_bytes()
            except OSError as error:
                raise DatasetError(f"{path}: cannot read file ({error})") from error
            digest.update(f"\x1f{path.name}\x1f{hashlib.sha256(content).hexdigest()}".encode())
        digest.update("\x1f".join(self._sample_ids).encode())
        for path in self._used_files():
            digest.update(f"\x1f{path.relative_to(self.root).as_posix()}\x1f{file_size(path)}".encode())
        return digest.hexdigest()

    def _read(self, index: int) -> Sample:
        raise NotImplementedError

    def _used_files(self) -> Iterable[Path]:
        raise NotImplementedError


class FrameFolderDataset(ClipFolderDataset):
    """A clip reader whose clips are folders: ``<frames_root>/<clip>`` of frames, ``<masks_root>/<clip>`` of masks.

    A subclass sets ``frames_root``, ``masks_root`` and ``selection`` besides what
    :class:`ClipFolderDataset` asks for, and names a clip in its dataset's words
    (:attr:`_clip_word`, for messages); the files of a clip and the files read follow.
    """

    frames_root: Path
    masks_root: Path
    selection: FrameSelection
    _clip_word: ClassVar[str] = "clip"

    def _files(self, clip: str) -> tuple[dict[str, Path], dict[str, Path]]:
        """A clip's frames and masks by frame name (:func:`clip_folder_files`)."""
        return clip_folder_files(self.frames_root, self.masks_root, clip, self._clip_word)

    def _used_files(self) -> Iterable[Path]:
        return selected_files(self._sample_ids, self._files, self.selection)


def check_masks_have_frames(frames: Mapping[str, Path], masks: Mapping[str, Path], masks_dir: Path) -> None:
    """Check that every mask of a clip has a frame of its name (a mask of a missing frame is a broken copy).

    Raises:
        DatasetError: naming the first mask without a frame.
    """
    for frame_name, path in masks.items():
        if frame_name not in frames:
            raise DatasetError(f"{path}: mask has no frame {frame_name} in the clip's frames (masks in {masks_dir})")
