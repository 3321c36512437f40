"""Referring video object segmentation datasets: Ref-YouTube-VOS and Ref-DAVIS17.

One sample per (clip, expression), its id ``<clip>/<expression id>``; ``objects`` holds the
clip's objects and ``expression`` (:class:`~pytest_segrobust.data.clips.ClipExpression`) the
words and the object they name, which the clip must show on a frame read.

* :class:`RefYouTubeVos` (Seo et al. 2020): YouTube-VOS frames and masks with
  ``meta_expressions/<split>/meta_expressions.json``:
  ``{"videos": {<video>: {"expressions": {"0": {"exp", "obj_id"}}, "frames": [...]}}}``.
  The clip is the listed frames (in name order); the objects are those ``<split>/meta.json``
  lists where it exists (as :mod:`~pytest_segrobust.data.youtube_vos` reads them), else every
  id the masks show. Expression ids are the file's keys.
* :class:`RefDavis17` (Khoreva et al. 2018): DAVIS 2017 with the published
  ``davis_text_annotations/`` files, one line per object, ``<sequence> <object id> "<expression>"``:
  ``Davis17_annot1.txt`` and ``Davis17_annot2.txt`` (two annotators, describing the first
  frame), ``Davis17_annot1_full_video.txt`` and ``Davis17_annot2_full_video.txt`` (the whole
  video). The second annotator's files are Latin-1, the first's UTF-8; three lines name a
  sequence misspelt (``clasic-car``, ``dog-scale``, ``motor-bike``) and are read as the
  sequence meant. The masks are ``Annotations_unsupervised`` by default, the objects those
  expressions describe, as the published Ref-DAVIS17 evaluations read them (ReferFormer's
  conversion). Expression ids are ``<annotation>-<object id>`` (``annot1-2``,
  ``annot2_full_video-1``), with ``-2``, ``-3`` ... where a file describes an object again.
  Lines of sequences outside the split are skipped (the files cover train and val).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_segrobust.core.errors import DatasetError
from pytest_segrobust.data.base import Sample
from pytest_segrobust.data.clip_folders import (
    FRAME_SUFFIXES,
    MASK_SUFFIX,
    ClipFolderDataset,
    DecodedClip,
    FrameSelection,
    decode_named,
    field_object,
    field_of,
    object_id_of,
    ordered_keys,
    read_json_object,
    read_lines,
    selected_files,
)
from pytest_segrobust.data.clips import ClipExpression, ClipObjects
from pytest_segrobust.data.davis import Davis2017
from pytest_segrobust.data.referring import REFERRING_CLASS_NAMES
from pytest_segrobust.data.youtube_vos import MetaObject, check_first_frames, objects_from_meta, read_meta

DAVIS17_EXPRESSION_FILES: tuple[str, ...] = (
    "Davis17_annot1.txt",
    "Davis17_annot1_full_video.txt",
    "Davis17_annot2.txt",
    "Davis17_annot2_full_video.txt",
)
# Sequence names the published text annotations misspell, and the DAVIS sequences they mean.
DAVIS17_MISSPELT_SEQUENCES: dict[str, str] = {
    "clasic-car": "classic-car",
    "dog-scale": "dogs-scale",
    "motor-bike": "motorbike",
}


@dataclass(frozen=True)
class _Expression:
    sample_id: str
    clip: str
    text: str
    object_id: int
    where: str  # file and field or line, for messages


def _expression_sample(
    expression: _Expression, clip: DecodedClip, ids: tuple[int, ...], firsts: tuple[int, ...]
) -> Sample:
    """The sample of ``expression`` on ``clip``, whose objects are ``ids``.

    Raises:
        DatasetError: naming the expression's file and field when its object is not among ``ids``.
    """
    if expression.object_id not in ids:
        raise DatasetError(
            f"{expression.where}: the expression names object {expression.object_id}, which clip {expression.clip} "
            f"lacks (objects on the frames read: {', '.join(map(str, ids)) or 'none'})"
        )
    objects = ClipObjects(clip.masks, clip.annotated, ids, firsts, (False,) * len(ids))
    return Sample.of(
        expression.sample_id,
        unit=expression.clip,
        video=clip.video,
        objects=objects,
        expression=ClipExpression(expression.text, expression.object_id),
    )


def _objects_shown(clip: DecodedClip) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Every id the clip's masks show, and the first annotated frame showing each."""
    ids = tuple(clip.ids_shown())
    firsts = tuple(clip.first_showing(object_id) for object_id in ids)
    assert None not in firsts  # every id is shown somewhere
    return ids, firsts  # type: ignore[return-value]


class RefYouTubeVos(ClipFolderDataset):
    """Ref-YouTube-VOS expressions of one split.

    Args:
        root: The folder holding ``meta_expressions/<split>/`` and ``<split>/JPEGImages``,
            ``<split>/Annotations`` (and optionally ``<split>/meta.json``).
        split: ``train``, ``valid`` or ``test``.
        videos: Read only the expressions of these videos.
        stride: Read every ``stride``-th frame.
        max_frames: Read at most this many frames of each clip (after the stride).
        name: Name in reports; ``ref-youtube-vos-<split>`` by default.

    Raises:
        DatasetError: naming the file and field: a missing folder or file, missing fields, an
            empty expression, an expression naming an object ``meta.json`` does not list for
            its video (or, when reading, one the clip does not show), a listed frame that does
            not exist.
        ValueError: for a stride or frame count below 1.
    """

    class_names = REFERRING_CLASS_NAMES
    _kind = "ref-youtube-vos"

    def __init__(
        self,
        root: str | os.PathLike[str],
        split: str = "valid",
        *,
        videos: Sequence[str] | None = None,
        stride: int = 1,
        max_frames: int | None = None,
        name: str | None = None,
    ) -> None:
        if isinstance(videos, str):
            raise TypeError(f"videos must be a list of names, got the string {videos!r}")
        self.root = Path(root)
        self.split = split
        self.selection = FrameSelection(stride, max_frames)
        self.name = name if name is not None else f"ref-youtube-vos-{split}"
        self.expressions_file = self.root / "meta_expressions" / split / "meta_expressions.json"
        self.frames_root = self.root / split / "JPEGImages"
        self.masks_root = self.root / split / "Annotations"
        for folder, what in ((self.frames_root, "frames"), (self.masks_root, "annotations")):
            if not folder.is_dir():
                raise DatasetError(f"{folder}: Ref-YouTube-VOS {what} folder does not exist")
        self.meta_file = self.root / split / "meta.json"
        self._meta = read_meta(self.meta_file) if self.meta_file.is_file() else None
        document = read_json_object(self.expressions_file, "expressions file")
        listed = field_object(
            self.expressions_file, field_of(self.expressions_file, document, "videos", "(top level)"), "videos"
        )
        if videos is not None:
            unknown = [video for video in videos if video not in listed]
            if unknown:
                raise DatasetError(
                    f"{self.expressions_file}: videos {', '.join(unknown)} are not listed under 'videos'"
                )
        wanted = set(listed) if videos is None else set(videos)
        self._frames: dict[str, tuple[str, ...]] = {}
        self._expressions: list[_Expression] = []
        for video in sorted(wanted):
            self._read_video(video, listed[video])
        self._sample_ids = [expression.sample_id for expression in self._expressions]
        self._options = f"{split}\x1f{self.selection.describe()}"
        self._annotation_files = (self.expressions_file,) + ((self.meta_file,) if self._meta is not None else ())

    def _read_video(self, video: str, entry: object) -> None:
        path, where = self.expressions_file, f"videos[{video!r}]"
        described = field_object(path, entry, where)
        frames = field_of(path, described, "frames", where)
        if not isinstance(frames, list) or not frames or not all(isinstance(name, str) for name in frames):
            raise DatasetError(f"{path}: field {where}.frames must be a non-empty list of frame names")
        if len(set(frames)) != len(frames):
            raise DatasetError(f"{path}: field {where}.frames lists a frame more than once")
        if not (self.frames_root / video).is_dir():
            raise DatasetError(
                f"{self.frames_root / video}: frames folder of video {video} (listed in {path}) does not exist"
            )
        objects = None
        if self._meta is not None:
            if video not in self._meta:
                raise DatasetError(f"{self.meta_file}: video {video} (listed in {path}) is not under 'videos'")
            objects = self._meta[video]
        self._frames[video] = tuple(sorted(frames))
        expressions = field_object(path, field_of(path, described, "expressions", where), f"{where}.expressions")
        for key in ordered_keys(expressions):
            at = f"{where}.expressions[{key!r}]"
            expression = field_object(path, expressions[key], at)
            text = field_of(path, expression, "exp", at)
            if not isinstance(text, str) or not text.strip():
                raise DatasetError(f"{path}: field {at}.exp must be a non-empty expression, got {text!r}")
            object_id = object_id_of(path, field_of(path, expression, "obj_id", at), f"{at}.obj_id")
            if objects is not None and object_id not in objects:
                raise DatasetError(
                    f"{path}: field {at}.obj_id names object {object_id}, which video {video} lacks in "
                    f"{self.meta_file} (objects: {', '.join(map(str, objects)) or 'none'})"
                )
            if "/" in key:
                raise DatasetError(f"{path}: field {at}: an expression id must hold no '/'")
            self._expressions.append(
                _Expression(f"{video}/{key}", video, text.strip(), object_id, f"{path}: field {at}")
            )

    def _files(self, video: str) -> tuple[dict[str, Path], dict[str, Path]]:
        frames: dict[str, Path] = {}
        for frame_name in self._frames[video]:
            found = [self.frames_root / video / f"{frame_name}{suffix}" for suffix in FRAME_SUFFIXES]
            existing = [path for path in found if path.is_file()]
            if not existing:
                raise DatasetError(
                    f"{found[0]}: frame {frame_name} of video {video} does not exist (listed in "
                    f"{self.expressions_file}, field videos[{video!r}].frames)"
                )
            frames[frame_name] = existing[0]
        masks_dir = self.masks_root / video
        masks = {name: masks_dir / f"{name}{MASK_SUFFIX}" for name in self._frames[video]}
        return frames, {name: path for name, path in masks.items() if path.is_file()}

    def _read(self, index: int) -> Sample:
        expression = self._expressions[index]
        video = expression.clip
        frames, masks = self._files(video)
        kept = self.selection.apply(list(frames))
        objects: dict[int, MetaObject] | None = self._meta[video] if self._meta is not None else None
        if objects is not None:
            check_first_frames(
                objects, frames, masks, kept, self.meta_file, self.frames_root / video, self.masks_root / video
            )
        clip = decode_named(frames, masks, kept)
        if objects is not None:
            ids, firsts = objects_from_meta(clip, kept, objects, self.meta_file, video)
        else:
            ids, firsts = _objects_shown(clip)
        return _expression_sample(expression, clip, ids, firsts)

    def _used_files(self) -> Iterable[Path]:
        return selected_files(self._frames, self._files, self.selection)


class RefDavis17(ClipFolderDataset):
    """Ref-DAVIS17 expressions of one DAVIS 2017 split.

    Args:
        root: The ``DAVIS`` folder (as :class:`~pytest_segrobust.data.davis.Davis2017` reads it).
        split: ``train`` or ``val`` (a DAVIS split file).
        text_annotations: The folder of the expression files; ``<root>/davis_text_annotations`` by default.
        expression_files: Which of its files to read (all four published ones by default).
        annotations: The masks folder: ``Annotations_unsupervised`` (default) or ``Annotations``.
        resolution: ``480p`` or ``Full-Resolution``.
        sequences: Read only these sequences of the split.
        stride: Read every ``stride``-th frame.
        max_frames: Read at most this many frames of each clip (after the stride).
        name: Name in reports; ``ref-davis17-<split>`` by default.

    Raises:
        DatasetError: naming the file and line: a missing file or folder, a line that is not
            ``<sequence> <object id> "<expression>"``, an empty expression; when reading, an
            expression naming an object the clip does not show.
        ValueError: for a stride or frame count below 1.
    """

    class_names = REFERRING_CLASS_NAMES
    _kind = "ref-davis17"

    def __init__(
        self,
        root: str | os.PathLike[str],
        split: str = "val",
        *,
        text_annotations: str | os.PathLike[str] | None = None,
        expression_files: Sequence[str] = DAVIS17_EXPRESSION_FILES,
        annotations: str = "Annotations_unsupervised",
        resolution: str = "480p",
        sequences: Sequence[str] | None = None,
        stride: int = 1,
        max_frames: int | None = None,
        name: str | None = None,
    ) -> None:
        if isinstance(expression_files, str):
            raise TypeError(f"expression_files must be a list of file names, got the string {expression_files!r}")
        self.root = Path(root)
        self.split = split
        self.name = name if name is not None else f"ref-davis17-{split}"
        self._davis = Davis2017(
            root, split, resolution, sequences, annotations=annotations, stride=stride, max_frames=max_frames
        )
        self.text_annotations = (
            Path(text_annotations) if text_annotations is not None else self.root / "davis_text_annotations"
        )
        if not self.text_annotations.is_dir():
            raise DatasetError(f"{self.text_annotations}: Ref-DAVIS17 text annotations folder does not exist")
        files = [self.text_annotations / file_name for file_name in expression_files]
        by_sequence: dict[str, list[_Expression]] = {sequence: [] for sequence in self._davis.sample_ids}
        for path in files:
            for expression in self._read_expression_file(path, set(by_sequence)):
                by_sequence[expression.clip].append(expression)
        self._expressions = [expression for expressions in by_sequence.values() for expression in expressions]
        self._sample_ids = [expression.sample_id for expression in self._expressions]
        self._options = f"{split}\x1f{annotations}\x1f{resolution}\x1f{self._davis.selection.describe()}"
        self._annotation_files = (self._davis.split_file, *files)

    @staticmethod
    def _read_expression_file(path: Path, sequences: set[str]) -> list[_Expression]:
        tag = path.stem.removeprefix("Davis17_")
        expressions: list[tuple[int, int, _Expression]] = []
        seen: dict[tuple[str, int], int] = {}
        for number, line in enumerate(read_lines(path, "expression file"), 1):
            where = f"{path}: line {number}"
            parts = line.split(maxsplit=2)
            if len(parts) < 3:
                raise DatasetError(f'{where}: expected <sequence> <object id> "<expression>", got {line!r}')
            sequence = DAVIS17_MISSPELT_SEQUENCES.get(parts[0], parts[0])
            object_id = object_id_of(path, parts[1], f"line {number} (object id)")
            text = parts[2].strip()
            if len(text) >= 2 and text[0] == text[-1] == '"':
                text = text[1:-1].strip()
            if not text:
                raise DatasetError(f"{where}: the expression of object {object_id} in {sequence} is empty")
            if sequence not in sequences:
                continue  # a sequence of another split
            repeat = seen.get((sequence, object_id), 0) + 1
            seen[(sequence, object_id)] = repeat
            suffix = "" if repeat == 1 else f"-{repeat}"
            sample_id = f"{sequence}/{tag}-{object_id}{suffix}"
            expressions.append((object_id, number, _Expression(sample_id, sequence, text, object_id, where)))
        return [expression for _, _, expression in sorted(expressions, key=lambda item: item[:2])]

    def _read(self, index: int) -> Sample:
        expression = self._expressions[index]
        clip = self._davis.read_sequence(expression.clip)
        ids, firsts = _objects_shown(clip)
        return _expression_sample(expression, clip, ids, firsts)

    def _used_files(self) -> Iterable[Path]:
        return self._davis._used_files()


#: Ref-YouTube-VOS for a suite's ``dataset.factory``: the class under the name suites use.
ref_youtube_vos = RefYouTubeVos


#: Ref-DAVIS17 for a suite's ``dataset.factory``: the class under the name suites use.
ref_davis17 = RefDavis17
