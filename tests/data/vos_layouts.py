"""Small generated copies of the DAVIS 2017 and YouTube-VOS layouts (24x32 JPEG frames, palette PNG masks).

Every frame ``t`` of a clip is one flat grey whose level (:func:`frame_level`) tells which
frame a reader returned where, JPEG or not; a mask is a palette PNG whose indices are object
ids, so a reader's masks can be compared with the arrays written here exactly.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

HEIGHT, WIDTH = 24, 32
VOID = 255
# DAVIS's palette starts black, dark red, dark green, ...; any palette will do, indices are what count.
PALETTE = [value for index in range(256) for value in ((index * 37) % 256, (index * 91) % 256, (index * 53) % 256)]


def frame_level(clip_number: int, position: int) -> int:
    """The grey level of frame ``position`` of clip ``clip_number``: distinct, and far apart for JPEG."""
    return 20 + 12 * position + 3 * clip_number


def write_frame(path: Path, level: int, height: int = HEIGHT, width: int = WIDTH) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.full((height, width, 3), level, dtype=np.uint8)).save(path, quality=95)


def write_mask(path: Path, ids: np.ndarray) -> None:
    """``ids`` ``(H, W)`` as a palette PNG whose indices are the ids."""
    path.parent.mkdir(parents=True, exist_ok=True)
    image = Image.fromarray(ids.astype(np.uint8))
    image.putpalette(PALETTE)  # an L image with a palette becomes mode P, indices kept
    assert image.mode == "P"
    image.save(path)


def box(ids: np.ndarray, object_id: int, top: int, left: int, size: int = 6) -> np.ndarray:
    ids[top : top + size, left : left + size] = object_id
    return ids


def blank() -> np.ndarray:
    return np.zeros((HEIGHT, WIDTH), dtype=np.uint8)


def moving_objects(frames: int, appear: Mapping[int, int]) -> list[np.ndarray]:
    """Masks of ``frames`` frames where object ``k`` appears at frame ``appear[k]`` and moves right.

    Frame 1 has a void band (255) along its top row, as DAVIS marks uncertain pixels.
    """
    masks = []
    for position in range(frames):
        ids = blank()
        for object_id, first in appear.items():
            if position >= first:
                box(ids, object_id, top=2 + 7 * ((object_id - 1) % 3), left=(2 * position + 5 * object_id) % 24)
        if position == 1:
            ids[0, :] = VOID
        masks.append(ids)
    return masks


def frame_name(position: int, step: int = 1) -> str:
    return f"{position * step:05d}"


def write_davis(
    root: Path,
    clips: Mapping[str, Sequence[np.ndarray | None]],
    splits: Mapping[str, Sequence[str]],
    annotations: str = "Annotations",
) -> Path:
    """A DAVIS folder: frames of every clip (frames written last to first), masks where given, split files."""
    for clip_number, (sequence, masks) in enumerate(clips.items()):
        for position in reversed(range(len(masks))):
            name = frame_name(position)
            write_frame(root / "JPEGImages" / "480p" / sequence / f"{name}.jpg", frame_level(clip_number, position))
            mask = masks[position]
            if mask is not None:
                write_mask(root / annotations / "480p" / sequence / f"{name}.png", mask)
        (root / annotations / "480p" / sequence).mkdir(parents=True, exist_ok=True)
    for split, sequences in splits.items():
        split_file = root / "ImageSets" / "2017" / f"{split}.txt"
        split_file.parent.mkdir(parents=True, exist_ok=True)
        split_file.write_text("".join(f"{sequence}\n" for sequence in sequences))
    return root


def write_youtube_clip(
    split_dir: Path, video: str, clip_number: int, masks: Sequence[np.ndarray | None], step: int = 5
) -> list[str]:
    """Frames ``00000, 0000<step>, ...`` of one video and the masks given; the frame names."""
    names = [frame_name(position, step) for position in range(len(masks))]
    for position, (name, mask) in enumerate(zip(names, masks, strict=True)):
        write_frame(split_dir / "JPEGImages" / video / f"{name}.jpg", frame_level(clip_number, position))
        if mask is not None:
            write_mask(split_dir / "Annotations" / video / f"{name}.png", mask)
    (split_dir / "Annotations" / video).mkdir(parents=True, exist_ok=True)
    return names


def write_json(path: Path, document: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document))
    return path


def meta_object(category: str, frames: Sequence[str]) -> dict[str, Any]:
    return {"category": category, "frames": list(frames)}
