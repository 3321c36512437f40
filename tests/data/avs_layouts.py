"""Small generated copies of the AVSBench layouts: S4 (``Single-source``) and MS3 (``Multi-sources``).

The writers put one clip's five frames, masks (``None``: no mask file for that frame) and
sound where :mod:`pytest_segrobust.data.avsbench` reads them; :func:`tone_clip` makes a clip
that :func:`tests.av_fakes.tone_reader` can hear: a red and a green square, the red one
sounding (a 500 Hz tone) in even clips and the green one (1500 Hz) in odd ones, and in every
fourth clip a silent second frame whose mask is empty. S4 masks are written as grey PNGs
(255 sounds), MS3 masks as palette PNGs (index 1 sounds), the two forms the reader takes.
"""

from __future__ import annotations

import math
import wave
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
from PIL import Image

FRAMES = 5
RATE = 16000
TONES = {1: 500.0, 2: 1500.0}  # tests.av_fakes.TONES: 1 the red square sounds, 2 the green one
COLOURS = {1: (255, 0, 0), 2: (0, 255, 0)}
S4_HEADER = ("name", "start", "category", "split")


def write_wav(path: Path, samples: np.ndarray, rate: int = RATE) -> None:
    """Mono 16-bit PCM of ``samples`` in ``[-1, 1]``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes((samples * 32767).astype("<i2").tobytes())


def _save(path: Path, image: Image.Image) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    image.save(path)


def write_meta(root: Path, subset: str, rows: Sequence[Sequence[str]], header: Sequence[str]) -> None:
    """``<subset>_meta_data.csv`` with ``header`` and one line per row."""
    root.mkdir(parents=True, exist_ok=True)
    lines = [",".join(header), *(",".join(row) for row in rows)]
    (root / f"{subset}_meta_data.csv").write_text("\n".join(lines) + "\n")


def write_s4_clip(
    root: Path,
    split: str,
    category: str,
    clip: str,
    frames: np.ndarray,
    masks: Sequence[np.ndarray | None],
    sound: np.ndarray,
    rate: int = RATE,
) -> None:
    """One S4 clip: frames ``(5, H, W, 3)`` uint8, masks ``(H, W)`` bool (grey PNG, 255 sounds), its wav."""
    data = root / "s4_data"
    for k in range(1, FRAMES + 1):
        _save(data / "visual_frames" / split / category / clip / f"{clip}_{k}.png", Image.fromarray(frames[k - 1]))
        mask = masks[k - 1]
        if mask is not None:
            grey = Image.fromarray(np.where(mask, 255, 0).astype(np.uint8))
            _save(data / "gt_masks" / split / category / clip / f"{clip}_{k}.png", grey)
    write_wav(data / "audio_wav" / split / category / f"{clip}.wav", sound, rate)


def write_ms3_clip(
    root: Path,
    split: str,
    clip: str,
    frames: np.ndarray,
    masks: Sequence[np.ndarray | None],
    sound: np.ndarray,
    rate: int = RATE,
) -> None:
    """One MS3 clip: frames ``(5, H, W, 3)`` uint8 (``<clip>.mp4_k.png``), masks as palette PNGs, its wav."""
    data = root / "ms3_data"
    for k in range(1, FRAMES + 1):
        _save(data / "visual_frames" / clip / f"{clip}.mp4_{k}.png", Image.fromarray(frames[k - 1]))
        mask = masks[k - 1]
        if mask is not None:
            _save(
                data / "gt_masks" / split / clip / f"{clip}_{k}.png",
                Image.fromarray(mask.astype(np.uint8)).convert("P"),
            )
    write_wav(data / "audio_wav" / split / f"{clip}.wav", sound, rate)


def tone_clip(index: int, size: int = 16, seconds: float = FRAMES) -> tuple[np.ndarray, list[np.ndarray], np.ndarray]:
    """Frames ``(5, size, size, 3)``, masks of the sounding square, and the clip's sound (``RATE`` Hz; a second
    a frame, as AVSBench's)."""
    labels = np.zeros((FRAMES, size, size), np.int64)
    for t in range(FRAMES):
        labels[t, 1 + t % 3 : 6 + t % 3, 1 + index % 3 : 6 + index % 3] = 1
        labels[t, 9:14, 8 + t % 2 : 13 + t % 2] = 2
    frames = np.zeros((FRAMES, size, size, 3), np.uint8)
    for colour_id, colour in COLOURS.items():
        frames[labels == colour_id] = colour
    sounding = 1 if index % 2 == 0 else 2
    times = np.arange(int(RATE * seconds)) / RATE
    sound = 0.5 * np.sin(2 * math.pi * TONES[sounding] * times + index)
    masks = [labels[t] == sounding for t in range(FRAMES)]
    if index % 4 == 3:  # a silent second frame: its truth is empty
        span = sound.shape[-1] // FRAMES
        sound[span : 2 * span] = 0.0
        masks[1] = np.zeros_like(masks[1])
    return frames, masks, sound


def write_s4_meta(root: Path, clips: Mapping[str, str], split: str) -> None:
    """``s4_meta_data.csv`` listing ``clips`` (clip name -> category) in ``split``."""
    write_meta(root, "s4", [(clip, "0", category, split) for clip, category in clips.items()], S4_HEADER)


def write_s4(root: Path, clips: Mapping[str, str], split: str = "test") -> None:
    """An S4 copy of :func:`tone_clip` clips (clip name -> category), every frame annotated."""
    write_s4_meta(root, clips, split)
    for index, (clip, category) in enumerate(clips.items()):
        frames, masks, sound = tone_clip(index)
        write_s4_clip(root, split, category, clip, frames, masks, sound)


def write_ms3(root: Path, clips: Sequence[str], split: str = "test") -> None:
    """An MS3 copy of :func:`tone_clip` clips, every frame annotated, and a train clip that is not read."""
    write_meta(root, "ms3", [*((clip, split) for clip in clips), ("unused", "train")], ("video_id", "split"))
    for index, clip in enumerate(clips):
        frames, masks, sound = tone_clip(index + 1)  # other clips than the S4 copy's
        write_ms3_clip(root, split, clip, frames, masks, sound)
