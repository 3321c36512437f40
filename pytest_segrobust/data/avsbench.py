"""AVSBench (audio-visual segmentation, Zhou et al. 2022): the single-source S4 and multi-source MS3 sets as published.

::

    Single-source/                                 (subset s4)
      s4_meta_data.csv                             a row per clip: its name first, then columns
                                                   category and split (train, val, test)
      s4_data/visual_frames/<split>/<category>/<clip>/<clip>_1.png .. <clip>_5.png
      s4_data/gt_masks/<split>/<category>/<clip>/<clip>_1.png ..   (train: the first frame only)
      s4_data/audio_wav/<split>/<category>/<clip>.wav
    Multi-sources/                                 (subset ms3)
      ms3_meta_data.csv                            a row per clip: its name first, then a split column
      ms3_data/visual_frames/<clip>/<clip>.mp4_1.png .. <clip>.mp4_5.png
      ms3_data/gt_masks/<split>/<clip>/<clip>_1.png .. <clip>_5.png
      ms3_data/audio_wav/<split>/<clip>.wav

A clip is five frames, one per second, and its 5-s sound (16 kHz PCM WAV). A sound at another
rate is refused (option ``sample_rate`` names the rate of a resampled copy); a sound shorter than
its five seconds (by a sample or more) is refused too, unless option ``audio_pad`` says how to pad
it (``zeros`` or ``repeat``; :mod:`pytest_segrobust.data.audio_length`). One sample per
clip (its id is the clip's name): ``video`` (:class:`~pytest_segrobust.data.clips.ClipFrames`),
``objects`` (:class:`~pytest_segrobust.data.clips.ClipObjects`: 1 where a pixel sounds, object
id 1; a frame without a mask file is not annotated and all ``ignore_index``) and ``audio``
(:class:`~pytest_segrobust.data.clips.ClipAudio`). A mask pixel sounds where its palette
index is not 0 (a palette PNG) or its grey level is at least 128 (a grey or binary PNG).
:meth:`AVSBench.read_audio` reads a clip's sound alone (the task's competing source).

Suites name it as ``dataset: {factory: pytest_segrobust.data.avsbench:avsbench, kwargs: {root: ..., subset: s4}}``
(``audio_pad: zeros`` among the kwargs to pad short sounds with silence).
"""

from __future__ import annotations

import csv
import wave
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from pytest_segrobust.core.errors import DatasetError
from pytest_segrobust.data.audio_length import AudioPad, fit_to_frames
from pytest_segrobust.data.base import Sample
from pytest_segrobust.data.clip_folders import ClipFolderDataset
from pytest_segrobust.data.clips import ClipAudio, ClipFrames, ClipObjects
from pytest_segrobust.data.io import read_rgb

FRAMES = 5
FRAME_SECONDS = 1.0  # a frame a second: frame t is heard during second t
SAMPLE_RATE = 16_000
SUBSETS = ("s4", "ms3")
AVS_CLASS_NAMES: tuple[str, ...] = ("background", "sounding")


@dataclass(frozen=True)
class ClipFiles:
    """Where one clip's frames, masks (``None`` where a frame has none) and sound are."""

    frames: tuple[Path, ...]
    masks: tuple[Path | None, ...]
    audio: Path


class AVSBench(ClipFolderDataset):
    """The clips of one split of AVSBench's S4 or MS3 set.

    Args:
        root: The ``Single-source`` (S4) or ``Multi-sources`` (MS3) folder.
        subset: ``s4`` or ``ms3``.
        split: ``train``, ``val`` or ``test`` (the csv's split column).
        clips: Read only these clips of the split (in the csv's order).
        name: Name in reports; ``avsbench-<subset>-<split>`` by default.
        sample_rate: The rate every sound file must have (the published set's 16 kHz by default).
        audio_pad: How to pad a sound shorter than its frames' five seconds: ``none`` (refuse
            it, the default), ``zeros`` or ``repeat`` (:class:`~pytest_segrobust.data.audio_length.AudioPad`).

    Raises:
        DatasetError: naming the file and field: a missing csv or column, a clip not in the
            split, a missing frame or sound file, an unknown ``audio_pad``; when a clip is read,
            a sound at another rate, or shorter than its frames need where ``audio_pad`` is ``none``.
    """

    class_names = AVS_CLASS_NAMES

    def __init__(
        self,
        root: str | Path,
        subset: str = "s4",
        split: str = "test",
        clips: Sequence[str] | None = None,
        name: str | None = None,
        sample_rate: int = SAMPLE_RATE,
        audio_pad: str = AudioPad.NONE.value,
    ) -> None:
        if subset not in SUBSETS:
            raise DatasetError(f"{root}: unknown AVSBench subset {subset!r}; expected s4 or ms3")
        self.audio_pad = AudioPad.parse(audio_pad, f"{root}: AVSBench")
        if isinstance(sample_rate, bool) or not isinstance(sample_rate, int) or sample_rate <= 0:
            raise DatasetError(
                f"{root}: AVSBench: option sample_rate is {sample_rate!r}; expected a positive integer (Hz)"
            )
        self.sample_rate = sample_rate
        self.root = Path(root)
        self.subset, self.split = subset, split
        self.name = name or f"avsbench-{subset}-{split}"
        self._meta = self.root / f"{subset}_meta_data.csv"
        rows = _split_rows(self._meta, split, needs_category=subset == "s4")
        if clips is not None:
            missing = [clip for clip in clips if clip not in rows]
            if missing:
                raise DatasetError(f"{self._meta}: clip {missing[0]!r} is not in split {split!r}")
            rows = {clip: rows[clip] for clip in clips}
        self._files = {clip: self._clip_files(clip, category) for clip, category in rows.items()}
        self._sample_ids = list(rows)
        self._kind = f"avsbench-{subset}"
        # Padding changes what is read; refusing (the default) leaves the digest as it was.
        pad = "" if self.audio_pad is AudioPad.NONE else f",audio_pad={self.audio_pad.value}"
        self._options = f"split={split}{pad}"
        self._annotation_files = (self._meta,)

    def _clip_files(self, clip: str, category: str | None) -> ClipFiles:
        data = self.root / f"{self.subset}_data"
        if self.subset == "s4":
            frames_dir = data / "visual_frames" / self.split / str(category) / clip
            masks_dir = data / "gt_masks" / self.split / str(category) / clip
            audio = data / "audio_wav" / self.split / str(category) / f"{clip}.wav"
            frame_name = f"{clip}_{{}}.png"
        else:
            frames_dir = data / "visual_frames" / clip
            masks_dir = data / "gt_masks" / self.split / clip
            audio = data / "audio_wav" / self.split / f"{clip}.wav"
            frame_name = f"{clip}.mp4_{{}}.png"
        frames = tuple(frames_dir / frame_name.format(k) for k in range(1, FRAMES + 1))
        for path in frames:
            if not path.is_file():
                raise DatasetError(f"{path}: frame of clip {clip} is missing ({self._meta} lists the clip)")
        masks = tuple(
            path if path.is_file() else None for path in (masks_dir / f"{clip}_{k}.png" for k in range(1, FRAMES + 1))
        )
        if masks[0] is None:
            raise DatasetError(f"{masks_dir / f'{clip}_1.png'}: the first frame's mask of clip {clip} is missing")
        if not audio.is_file():
            raise DatasetError(f"{audio}: sound of clip {clip} is missing ({self._meta} lists the clip)")
        return ClipFiles(frames, masks, audio)

    def read_audio(self, sample_id: str) -> ClipAudio:
        """The sound of clip ``sample_id`` alone (no frame decoded).

        Raises:
            DatasetError: for an unknown clip or an unreadable file.
        """
        if sample_id not in self._files:
            raise DatasetError(f"{self._meta}: no clip {sample_id!r} in split {self.split!r}")
        return self._sound(self._files[sample_id].audio)

    def _sound(self, path: Path) -> ClipAudio:
        """A clip's sound file, at the set's rate and as long as its frames need (padded by ``audio_pad``).

        Raises:
            DatasetError: naming the file, for another rate (found and expected) or too short a sound.
        """
        audio = read_wav(path)
        if audio.sample_rate != self.sample_rate:
            raise DatasetError(
                f"{path}: sound at {audio.sample_rate} Hz, expected {self.sample_rate} Hz (option sample_rate names "
                "the rate of a resampled copy of the set)"
            )
        return fit_to_frames(audio, path, FRAMES, FRAME_SECONDS, self.audio_pad)

    def _read(self, index: int) -> Sample:
        clip = self._sample_ids[index]
        files = self._files[clip]
        frames = torch.stack([torch.from_numpy(read_rgb(p).copy()).permute(2, 0, 1) for p in files.frames])
        height, width = int(frames.shape[2]), int(frames.shape[3])
        masks = torch.full((FRAMES, height, width), self.ignore_index, dtype=torch.int64)
        for frame, path in enumerate(files.masks):
            if path is not None:
                masks[frame] = torch.from_numpy(read_sounding_mask(path, (height, width)))
        annotated = torch.tensor([path is not None for path in files.masks])
        return Sample.of(
            clip,
            video=ClipFrames(frames.contiguous(), tuple(p.stem for p in files.frames)),
            objects=ClipObjects(masks, annotated, (1,), (0,), (False,), self.ignore_index),
            audio=self._sound(files.audio),
        )

    def _used_files(self) -> Iterable[Path]:
        for files in self._files.values():
            yield from files.frames
            yield from (p for p in files.masks if p is not None)
            yield files.audio


#: An AVSBench split for a suite's ``dataset.factory``: the class under the name suites use.
avsbench = AVSBench


def _split_rows(path: Path, split: str, *, needs_category: bool) -> dict[str, str | None]:
    """The clips of ``split`` in the csv's order, with their category (``None`` without that column)."""
    if not path.is_file():
        raise DatasetError(f"{path}: AVSBench metadata csv does not exist")
    try:
        with path.open(newline="", encoding="utf-8") as handle:
            reader = csv.reader(handle)
            header = next(reader, None)
            body = list(reader)
    except (OSError, UnicodeDecodeError, csv.Error) as error:
        raise DatasetError(f"{path}: cannot read csv ({error})") from error
    if not header:
        raise DatasetError(f"{path}: empty csv; expected a header with a split column")
    columns = [name.strip() for name in header]
    for needed in ("split", *(("category",) if needs_category else ())):
        if needed not in columns:
            raise DatasetError(f"{path}: no column {needed!r} (columns: {', '.join(columns)})")
    split_at = columns.index("split")
    category_at = columns.index("category") if "category" in columns else None
    rows: dict[str, str | None] = {}
    for number, row in enumerate(body, start=2):
        if not row:
            continue
        if len(row) != len(columns):
            raise DatasetError(f"{path}: line {number} has {len(row)} fields, the header {len(columns)}")
        if row[split_at].strip() != split:
            continue
        clip = row[0].strip()
        if not clip:
            raise DatasetError(f"{path}: line {number}: field {columns[0]!r} (the clip's name) is empty")
        if clip in rows:
            raise DatasetError(f"{path}: line {number}: clip {clip!r} is listed twice in split {split!r}")
        rows[clip] = None if category_at is None else row[category_at].strip()
    if not rows:
        raise DatasetError(f"{path}: no clip of split {split!r} (field 'split')")
    return rows


def read_sounding_mask(path: Path, size: tuple[int, int]) -> np.ndarray:
    """1 where a mask sounds (palette index not 0, or grey level >= 128), 0 elsewhere.

    Shape:
        return: ``(H, W)``, int64.

    Raises:
        DatasetError: naming the file when it cannot be read or its size is not the frame's.
    """
    try:
        with Image.open(path) as opened:
            if opened.mode == "P":
                sounding = np.asarray(opened) != 0
            else:
                sounding = np.asarray(opened.convert("L")) >= 128
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as error:
        raise DatasetError(f"{path}: cannot read mask ({error})") from error
    if sounding.shape != size:
        raise DatasetError(f"{path}: mask is {sounding.shape[1]}x{sounding.shape[0]}, its frame {size[1]}x{size[0]}")
    return sounding.astype(np.int64)


def read_wav(path: Path) -> ClipAudio:
    """A PCM WAV file (8, 16 or 32 bits) as float32 ``(C, S)`` in ``[-1, 1]``.

    Raises:
        DatasetError: naming the file when it cannot be read or is not integer PCM.
    """
    try:
        with wave.open(str(path), "rb") as opened:
            channels, width, rate = opened.getnchannels(), opened.getsampwidth(), opened.getframerate()
            raw = opened.readframes(opened.getnframes())
    except (OSError, EOFError, wave.Error) as error:
        raise DatasetError(f"{path}: cannot read sound ({error})") from error
    if width == 1:
        samples = (np.frombuffer(raw, np.uint8).astype(np.float32) - 128.0) / 128.0
    elif width in (2, 4):
        dtype = np.int16 if width == 2 else np.int32
        samples = np.frombuffer(raw, dtype).astype(np.float32) / float(2 ** (8 * width - 1))
    else:
        raise DatasetError(f"{path}: {8 * width}-bit samples; expected 8-, 16- or 32-bit PCM")
    waveform = torch.from_numpy(samples.reshape(-1, channels).T.copy())
    layout = "mono" if channels == 1 else "left,right" if channels == 2 else ",".join(f"ch{i}" for i in range(channels))
    return ClipAudio(waveform, rate, layout)
