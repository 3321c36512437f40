"""YouTube-VOS 2018 / 2019 (semi-supervised video object segmentation) in its published layout.

::

    <root>/<split>/JPEGImages/<video>/00000.jpg 00005.jpg ...   frames (every fifth of the video)
    <root>/<split>/Annotations/<video>/00000.png ...             palette PNGs, where annotated
    <root>/<split>/meta.json        {"videos": {<video>: {"objects": {"1": {"category", "frames"}}}}}
    <root>/<split>_all_frames/JPEGImages/<video>/...             every frame (``all_frames=True``)

One sample per video (its id is the video's name). Its objects are the ones ``meta.json``
lists, by id; an object may appear late, and is given to a model at its first frame: the
first of the frames ``meta.json`` lists for it (whose mask must show it), or, where those are
not listed or not read (``stride``, ``max_frames``), the first annotated frame whose mask shows
it. An object no frame read shows is left out. A frame is annotated where its PNG exists.

Seen / unseen: an object is unseen when its category is not among the training categories,
read from the train split's ``meta.json`` (``train_meta``) or given (``seen_categories``).

The public ``valid`` masks label each object only at its first frame (a later PNG leaves
objects it does not introduce at 0): they are references, not ground truth to score against.
Scoring needs full annotations (the train split, or the valid ground truth where you have it).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_segrobust.core.errors import DatasetError
from pytest_segrobust.data.base import Sample
from pytest_segrobust.data.clip_folders import (
    MASK_SUFFIX,
    DecodedClip,
    FrameFolderDataset,
    FrameSelection,
    decode_named,
    field_object,
    field_of,
    object_id_of,
    read_json_object,
)
from pytest_segrobust.data.clips import ClipObjects


@dataclass(frozen=True)
class MetaObject:
    """One object of a video as ``meta.json`` describes it.

    Attributes:
        category: Its category, if given.
        first_frame: The earliest frame name listed under its ``frames``, if any are.
        where: Its field in ``meta.json``, for messages (``videos['abc'].objects['1']``).
    """

    object_id: int
    category: str | None
    first_frame: str | None
    where: str


def read_meta(meta_file: Path) -> dict[str, dict[int, MetaObject]]:
    """The objects of every video of a YouTube-VOS ``meta.json``, by video and object id (ascending).

    Raises:
        DatasetError: naming the file and field: a missing ``videos`` or ``objects``, an
            object key that is not an id, a ``category`` that is not text, ``frames`` that are
            not a non-empty list of frame names.
    """
    document = read_json_object(meta_file, "meta.json")
    videos = field_object(meta_file, field_of(meta_file, document, "videos", "(top level)"), "videos")
    meta: dict[str, dict[int, MetaObject]] = {}
    for video in sorted(videos):
        where = f"videos[{video!r}]"
        entry = field_object(meta_file, videos[video], where)
        objects = field_object(meta_file, field_of(meta_file, entry, "objects", where), f"{where}.objects")
        parsed: dict[int, MetaObject] = {}
        for key, value in objects.items():
            at = f"{where}.objects[{key!r}]"
            object_id = object_id_of(meta_file, key, f"{at} (its key)")
            described = field_object(meta_file, value, at)
            category = described.get("category")
            if category is not None and not isinstance(category, str):
                raise DatasetError(f"{meta_file}: field {at}.category must be text, got {category!r}")
            frames = described.get("frames")
            if frames is not None and (
                not isinstance(frames, list) or not frames or not all(isinstance(name, str) for name in frames)
            ):
                raise DatasetError(f"{meta_file}: field {at}.frames must be a non-empty list of frame names")
            parsed[object_id] = MetaObject(object_id, category, min(frames) if frames else None, at)
        meta[video] = dict(sorted(parsed.items()))
    return meta


def training_categories(train_meta: Path) -> frozenset[str]:
    """The categories of every object of a train split's ``meta.json``.

    Raises:
        DatasetError: naming the file and the object without a category.
    """
    categories = set()
    for objects in read_meta(train_meta).values():
        for described in objects.values():
            if described.category is None:
                raise DatasetError(f"{train_meta}: field {described.where} lacks 'category'")
            categories.add(described.category)
    return frozenset(categories)


def check_first_frames(
    objects: Mapping[int, MetaObject],
    frames: Mapping[str, Path],
    masks: Mapping[str, Path],
    kept: Sequence[str],
    meta_file: Path,
    frames_dir: Path,
    masks_dir: Path,
) -> None:
    """Before decoding: each object's listed first frame exists, and has a mask where it is read.

    Raises:
        DatasetError: naming ``meta.json``'s field, or the missing mask file.
    """
    read = set(kept)
    for described in objects.values():
        first = described.first_frame
        if first is None:
            continue
        if first not in frames:
            raise DatasetError(
                f"{meta_file}: field {described.where}.frames starts at frame {first}, which {frames_dir} lacks"
            )
        if first in read and first not in masks:
            raise DatasetError(
                f"{masks_dir / first}{MASK_SUFFIX}: mask of frame {frames[first]} does not exist; it is the first "
                f"frame of object {described.object_id} ({meta_file}, field {described.where}.frames)"
            )


def objects_from_meta(
    clip: DecodedClip, kept: Sequence[str], objects: Mapping[int, MetaObject], meta_file: Path, video: str
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The ids ``meta.json`` lists that the clip shows, and the frame each is first given in.

    Raises:
        DatasetError: naming the PNG that shows an object ``meta.json`` does not list, or
            whose listed first frame does not show it.
    """
    for object_id in clip.ids_shown():
        if object_id not in objects:
            position = clip.first_showing(object_id)
            assert position is not None  # it is shown
            raise DatasetError(
                f"{clip.mask_paths[position]}: mask shows object {object_id}, which {meta_file} does not list "
                f"under videos[{video!r}].objects (listed: {', '.join(map(str, objects)) or 'none'})"
            )
    ids, firsts = [], []
    for object_id, described in objects.items():
        if described.first_frame is not None and described.first_frame in kept:
            position = kept.index(described.first_frame)
            if not bool((clip.masks[position] == object_id).any()):
                raise DatasetError(
                    f"{clip.mask_paths[position]}: mask does not show object {object_id}, though {meta_file} "
                    f"field {described.where}.frames gives {described.first_frame} as its first frame"
                )
        else:
            found = clip.first_showing(object_id)
            if found is None:
                continue  # not on any frame read
            position = found
        ids.append(object_id)
        firsts.append(position)
    return tuple(ids), tuple(firsts)


class YouTubeVos(FrameFolderDataset):
    """YouTube-VOS videos of one split.

    Args:
        root: The folder holding ``<split>/`` (and ``<split>_all_frames/``).
        split: ``train``, ``valid`` or ``test``.
        all_frames: Read every frame from ``<split>_all_frames/JPEGImages`` (the masks stay
            those of ``<split>/Annotations``, every fifth frame).
        train_meta: The train split's ``meta.json``: its categories are the seen ones.
        seen_categories: The seen categories, given instead of ``train_meta``.
        videos: Read only these videos.
        stride: Read every ``stride``-th frame.
        max_frames: Read at most this many frames of each clip (after the stride).
        name: Name in reports; ``youtube-vos-<split>`` by default.

    Raises:
        DatasetError: naming the file and field: a missing folder or ``meta.json``, fields
            missing from it, a video it does not list, an object without the category that
            seen / unseen needs.
        ValueError: for both ``train_meta`` and ``seen_categories``, or a stride or frame count below 1.
        TypeError: for a string where a list of names belongs.
    """

    _kind = "youtube-vos"
    _clip_word = "video"

    def __init__(
        self,
        root: str | os.PathLike[str],
        split: str = "valid",
        *,
        all_frames: bool = False,
        train_meta: str | os.PathLike[str] | None = None,
        seen_categories: Sequence[str] | None = None,
        videos: Sequence[str] | None = None,
        stride: int = 1,
        max_frames: int | None = None,
        name: str | None = None,
    ) -> None:
        if train_meta is not None and seen_categories is not None:
            raise ValueError("give the seen categories either as train_meta or as seen_categories, not both")
        if isinstance(seen_categories, str) or isinstance(videos, str):
            raise TypeError("seen_categories and videos are lists of names, not a string")
        self.root = Path(root)
        self.split, self.all_frames = split, all_frames
        self.selection = FrameSelection(stride, max_frames)
        self.name = name if name is not None else f"youtube-vos-{split}"
        self.meta_file = self.root / split / "meta.json"
        self.frames_root = self.root / (f"{split}_all_frames" if all_frames else split) / "JPEGImages"
        self.masks_root = self.root / split / "Annotations"
        for folder, what in ((self.frames_root, "frames"), (self.masks_root, "annotations")):
            if not folder.is_dir():
                raise DatasetError(f"{folder}: YouTube-VOS {what} folder does not exist")
        self._meta = read_meta(self.meta_file)
        annotation_files = [self.meta_file]
        self.seen_categories: frozenset[str] | None = None
        if train_meta is not None:
            self.seen_categories = training_categories(Path(train_meta))
            annotation_files.append(Path(train_meta))
        elif seen_categories is not None:
            self.seen_categories = frozenset(seen_categories)
        chosen = sorted(self._meta)
        if videos is not None:
            unknown = [video for video in videos if video not in self._meta]
            if unknown:
                raise DatasetError(f"{self.meta_file}: videos {', '.join(unknown)} are not listed under 'videos'")
            wanted = set(videos)
            chosen = [video for video in chosen if video in wanted]
        for video in chosen:
            if not (self.frames_root / video).is_dir():
                raise DatasetError(
                    f"{self.frames_root / video}: frames folder of video {video} (listed in {self.meta_file}) does not exist"
                )
            if self.seen_categories is not None:
                for described in self._meta[video].values():
                    if described.category is None:
                        raise DatasetError(
                            f"{self.meta_file}: field {described.where} lacks 'category', which seen / unseen needs"
                        )
        self._sample_ids = chosen
        seen = "\x1e".join(sorted(self.seen_categories)) if self.seen_categories is not None else "-"
        self._options = f"{split}\x1fall_frames={all_frames}\x1f{seen}\x1f{self.selection.describe()}"
        self._annotation_files = tuple(annotation_files)

    def _read(self, index: int) -> Sample:
        video = self._sample_ids[index]
        frames, masks = self._files(video)
        kept = self.selection.apply(list(frames))
        described = self._meta[video]
        check_first_frames(
            described, frames, masks, kept, self.meta_file, self.frames_root / video, self.masks_root / video
        )
        clip = decode_named(frames, masks, kept)
        ids, firsts = objects_from_meta(clip, kept, described, self.meta_file, video)
        seen = self.seen_categories
        unseen = tuple(seen is not None and described[object_id].category not in seen for object_id in ids)
        objects = ClipObjects(clip.masks, clip.annotated, ids, firsts, unseen)
        return Sample.of(video, video=clip.video, objects=objects)


#: YouTube-VOS for a suite's ``dataset.factory``: the class under the name suites use.
youtube_vos = YouTubeVos
