"""DAVIS 2017 (semi-supervised video object segmentation) in its published layout.

::

    DAVIS/
      JPEGImages/480p/<sequence>/00000.jpg ...
      Annotations/480p/<sequence>/00000.png ...   palette PNGs: index k is object k, 255 void
      ImageSets/2017/train.txt, val.txt           one sequence a line

One sample per sequence (its id is the sequence's name). As in DAVIS's semi-supervised
protocol every object is given in the first frame: the objects are the ids of frame 0's mask,
all with ``first_frames`` 0, none unseen. An object a later mask shows and frame 0's does not
is then neither given nor scored: reading its sequence warns
(:class:`~pytest_segrobust.core.errors.DatasetWarning`, naming the sequence, the object and the
mask that first shows it), and a sequence whose frame 0 shows no object is refused
(:class:`~pytest_segrobust.core.errors.DatasetError`). ``given_at="first_appearance"`` takes
YouTube-VOS's rule instead: every object an annotated frame shows, each given at the first
such frame (its ``first_frames`` entry); a sequence that shows none has no objects. Void (255)
is the ignore index. Every frame needs a mask (train and val annotate every frame);
``sparse=True`` reads sets that annotate the first frame only (test-dev), where frame 0 still
needs one and the others are annotated where a mask exists.

Suites name it as ``dataset: {factory: pytest_segrobust.data.davis:davis, kwargs: {root: ...}}``.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from pathlib import Path

from pytest_segrobust.core.errors import DatasetError, DatasetWarning
from pytest_segrobust.data.base import Sample
from pytest_segrobust.data.clip_folders import (
    MASK_SUFFIX,
    DecodedClip,
    FrameFolderDataset,
    FrameSelection,
    decode_named,
    ids_in,
    read_lines,
)
from pytest_segrobust.data.clips import ClipObjects

GIVEN_AT = ("first_frame", "first_appearance")
"""Where :class:`Davis2017` gives a sequence's objects: DAVIS's first frame, or each at its first appearance."""


class Davis2017(FrameFolderDataset):
    """DAVIS 2017 sequences of one split.

    Args:
        root: The ``DAVIS`` folder (holding ``JPEGImages``, ``Annotations``, ``ImageSets``).
        split: A split file ``ImageSets/2017/<split>.txt`` (``train``, ``val``, ``test-dev``).
        resolution: ``480p`` or ``Full-Resolution``.
        sequences: Read only these sequences of the split (in the split file's order).
        sparse: Frames other than the first may lack a mask (they are then not annotated).
        annotations: The masks folder: ``Annotations``, or ``Annotations_unsupervised`` (the
            unsupervised task's objects, which Ref-DAVIS17's expressions refer to).
        stride: Read every ``stride``-th frame.
        max_frames: Read at most this many frames of each clip (after the stride).
        given_at: ``first_frame`` (DAVIS's protocol: the objects of frame 0; a later one is
            left out with a warning) or ``first_appearance`` (YouTube-VOS's rule: every object
            shown, each given at the first annotated frame that shows it).
        name: Name in reports; ``davis2017-<split>`` by default.

    Raises:
        DatasetError: naming the folder or file: a missing folder or split file, a sequence
            not in the split, a split naming a sequence without frames or masks.
        ValueError: for a stride or frame count below 1, or another ``given_at``.
    """

    _kind = "davis2017"
    _clip_word = "sequence"

    def __init__(
        self,
        root: str | os.PathLike[str],
        split: str = "val",
        resolution: str = "480p",
        sequences: Sequence[str] | None = None,
        *,
        sparse: bool = False,
        annotations: str = "Annotations",
        stride: int = 1,
        max_frames: int | None = None,
        given_at: str = "first_frame",
        name: str | None = None,
    ) -> None:
        if given_at not in GIVEN_AT:
            raise ValueError(
                f"given_at must be 'first_frame' (DAVIS: the objects of frame 0) or 'first_appearance' "
                f"(YouTube-VOS: each object at the first frame that shows it), got {given_at!r}"
            )
        self.root = Path(root)
        self.split, self.resolution, self.sparse, self.given_at = split, resolution, sparse, given_at
        self.selection = FrameSelection(stride, max_frames)
        self.frames_root = self.root / "JPEGImages" / resolution
        self.masks_root = self.root / annotations / resolution
        self.split_file = self.root / "ImageSets" / "2017" / f"{split}.txt"
        self.name = name if name is not None else f"davis2017-{split}"
        for folder, what in ((self.frames_root, "frames"), (self.masks_root, "annotations")):
            if not folder.is_dir():
                raise DatasetError(f"{folder}: DAVIS {what} folder does not exist")
        listed = self._read_split()
        chosen = listed if sequences is None else self._chosen(listed, sequences)
        for sequence in chosen:
            for folder, what in ((self.frames_root, "frames"), (self.masks_root, "masks")):
                if not (folder / sequence).is_dir():
                    raise DatasetError(
                        f"{folder / sequence}: {what} folder of sequence {sequence} (listed in {self.split_file}) "
                        "does not exist"
                    )
        self._sample_ids = chosen
        self._options = f"{split}\x1f{resolution}\x1f{annotations}\x1fsparse={sparse}\x1f{self.selection.describe()}"
        if given_at != "first_frame":  # DAVIS's own rule keeps the fingerprints recorded before the option
            self._options += f"\x1fgiven_at={given_at}"
        self._annotation_files = (self.split_file,)

    def _read_split(self) -> list[str]:
        if not self.split_file.is_file():
            folder = self.split_file.parent
            known = sorted(path.stem for path in folder.glob("*.txt")) if folder.is_dir() else []
            raise DatasetError(
                f"{self.split_file}: split file of split {self.split!r} does not exist "
                f"(splits there: {', '.join(known) or 'none'})"
            )
        names = read_lines(self.split_file, "split file")
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise DatasetError(f"{self.split_file}: sequences {', '.join(repeated)} are listed more than once")
        return names

    def _chosen(self, listed: list[str], sequences: Sequence[str]) -> list[str]:
        if isinstance(sequences, str):
            raise TypeError(f"sequences must be a list of names, got the string {sequences!r}")
        unknown = [sequence for sequence in sequences if sequence not in listed]
        if unknown:
            raise DatasetError(f"{self.split_file}: sequences {', '.join(unknown)} are not in split {self.split!r}")
        wanted = set(sequences)
        return [sequence for sequence in listed if sequence in wanted]


    def read_sequence(self, sequence: str) -> DecodedClip:
        """Decode the selected frames of ``sequence`` and their masks.

        Raises:
            DatasetError: naming the file: a mask missing where one is required, a mask
                without a frame, a size that differs from the first frame's, a mask that is
                not a palette PNG.
        """
        frames, masks = self._files(sequence)
        kept = self.selection.apply(list(frames))
        for frame_name in kept[:1] if self.sparse else kept:
            if frame_name not in masks:
                raise DatasetError(
                    f"{self.masks_root / sequence / frame_name}{MASK_SUFFIX}: mask of frame {frames[frame_name]} "
                    f"does not exist (DAVIS annotates {'the first frame' if self.sparse else 'every frame'}"
                    f"{'' if self.sparse else '; sparse=True reads sets that annotate the first frame only'})"
                )
        return decode_named(frames, masks, kept)

    def _read(self, index: int) -> Sample:
        sequence = self._sample_ids[index]
        clip = self.read_sequence(sequence)
        object_ids, first_frames = self.objects_of(sequence, clip)
        objects = ClipObjects(clip.masks, clip.annotated, object_ids, first_frames, (False,) * len(object_ids))
        return Sample.of(sequence, video=clip.video, objects=objects)

    def objects_of(self, sequence: str, clip: DecodedClip) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """The objects of ``sequence`` and the frame each is given in, by :attr:`given_at`'s rule.

        Warns:
            DatasetWarning: under DAVIS's rule, naming each object a later mask shows and frame 0's does not.

        Raises:
            DatasetError: under DAVIS's rule, naming frame 0's mask when it shows no object.
        """
        shown: dict[int, int] = {}
        for object_id in clip.ids_shown():
            first = clip.first_showing(object_id)
            assert first is not None  # an id an annotated frame shows
            shown[object_id] = first
        if self.given_at == "first_appearance":
            return tuple(shown), tuple(shown.values())
        given = ids_in(clip.masks[0])
        fix = "given_at: first_appearance in the dataset's kwargs gives each object at the first frame that shows it"
        if not given:
            raise DatasetError(
                f"{clip.mask_paths[0]}: the first frame of sequence {sequence} shows no object, and DAVIS gives "
                f"every object in the first frame ({fix})"
            )
        for object_id, first in shown.items():
            if object_id in given:
                continue
            warnings.warn(
                DatasetWarning(
                    f"{clip.mask_paths[first]}: {self.name}: sequence {sequence}: object {object_id} first appears "
                    f"in frame {clip.video.names[first]}, not in the first frame, so it is neither given nor scored "
                    f"({fix})"
                ),
                stacklevel=2,
            )
        return tuple(given), (0,) * len(given)



#: DAVIS 2017 for a suite's ``dataset.factory``: the class under the name suites use.
davis = Davis2017
