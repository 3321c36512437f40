"""Small generated clips and video models for the VOS and R-VOS tests (also copied into pytester projects).

Clips are 32x32, a few frames: a red square (object 1) moving right, a green one (object 2)
moving down, and in odd clips a blue one (object 3, an unseen category) that appears at frame
3. Models segment by colour, so a clean clip is segmented exactly.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from pytest_segrobust.data.base import Sample
from pytest_segrobust.data.clips import ClipExpression, ClipFrames, ClipObjects

SIZE = 32
PALETTE = {1: (255, 0, 0), 2: (0, 255, 0), 3: (0, 0, 255)}
COLOURS = {1: "red", 2: "green", 3: "blue"}
LATE = 3  # the frame object 3 appears in


def clip(index: int, frames: int) -> tuple[torch.Tensor, ClipObjects]:
    """Frames ``(T, 3, H, W)`` uint8 and the objects of clip ``index``."""
    pixels = torch.zeros(frames, 3, SIZE, SIZE, dtype=torch.uint8)
    masks = torch.zeros(frames, SIZE, SIZE, dtype=torch.int64)
    late = index % 2 == 1
    for t in range(frames):
        boxes = {1: (4 + index, 2 + 2 * t, 8), 2: (2 + 2 * t, 18 - index, 7)}
        if late and t >= LATE:
            boxes[3] = (20, 20 - t, 6)
        for object_id, (top, left, side) in boxes.items():
            masks[t, top : top + side, left : left + side] = object_id
    for object_id, colour in PALETTE.items():
        pixels.permute(0, 2, 3, 1)[masks == object_id] = torch.tensor(colour, dtype=torch.uint8)
    ids = (1, 2, 3) if late else (1, 2)
    first = (0, 0, LATE) if late else (0, 0)
    unseen = (False, False, True) if late else (False, False)
    return pixels, ClipObjects(masks, torch.ones(frames, dtype=torch.bool), ids, first, unseen)


class ClipScenes:
    """``count`` clips of ``frames`` frames; ``referring=True`` gives one sample per (clip, object named)."""

    class_names = ("background", "object")
    ignore_index = 255

    def __init__(self, count: int = 4, frames: int = 8, referring: bool = False) -> None:
        self.count, self.frames, self.referring = count, frames, referring
        self.name = "rvos-clips" if referring else "vos-clips"
        self.index = [(c, o) for c in range(count) for o in ((1, 2) if referring else (0,))]

    def __len__(self) -> int:
        return len(self.index)

    def __getitem__(self, position: int) -> Sample:
        number, named = self.index[position]
        pixels, objects = clip(number, self.frames)
        video = ClipFrames(pixels, tuple(f"{t:05d}" for t in range(self.frames)))
        if not self.referring:
            return Sample.of(f"clip{number}", video=video, objects=objects)
        expression = ClipExpression(f"the {COLOURS[named]} square", named)
        return Sample.of(f"clip{number}/{named}", unit=f"clip{number}", video=video, objects=objects, expression=expression)

    def fingerprint(self) -> str:
        return f"{self.name}-{self.count}-{self.frames}-v1"


def clip_scenes(count: int = 4, frames: int = 8) -> ClipScenes:
    return ClipScenes(count, frames)


def referring_clip_scenes(count: int = 3, frames: int = 6) -> ClipScenes:
    return ClipScenes(count, frames, referring=True)


def by_colour(frame: np.ndarray, ids: list[int], erode: int = 0) -> np.ndarray:
    """Ids ``(H, W)`` of a ``(3, H, W)`` frame in [0, 1]: the nearest palette colour among ``ids``,
    within 0.5; ``erode`` drops that many pixel rows off each object's top (a worse model)."""
    out = np.zeros(frame.shape[1:], dtype=np.int64)
    best = np.full(frame.shape[1:], 0.5)
    for object_id in ids:
        colour = np.array(PALETTE[object_id], dtype=np.float32).reshape(3, 1, 1) / 255.0
        distance = np.sqrt(((frame - colour) ** 2).mean(axis=0))
        closer = distance < best
        out[closer], best[closer] = object_id, distance[closer]
    for _ in range(erode):
        top = (out != 0) & (np.roll(out, 1, axis=0) != out)
        out[top] = 0
    return out


def colour_segmenter(erode: int = 0) -> Any:
    """An offline numpy model: frame 0 as given, every later frame by colour among the objects given so far."""

    def segment(clips: np.ndarray, reference: np.ndarray) -> np.ndarray:
        out = np.zeros(reference.shape, dtype=np.int64)
        for b in range(clips.shape[0]):
            known: list[int] = []
            for t in range(clips.shape[1]):
                known += [int(i) for i in np.unique(reference[b, t]) if i and int(i) not in known]
                out[b, t] = reference[b, t] if t == 0 else by_colour(clips[b, t], known, erode)
        return out

    segment.__qualname__ = f"colour_segmenter.erode{erode}"
    return segment


def prompted_colour_segmenter(erode: int = 0) -> Any:
    """A promptable numpy model (a VOS suite's prompt reference), called per clip: each object given is
    segmented by colour from the frame its prompts come in, nothing before it."""

    def segment(frames: np.ndarray, prompts: list[dict[str, Any]]) -> np.ndarray:
        out = np.zeros(frames.shape[:3], dtype=np.int64)
        for t in range(frames.shape[0]):
            known = [int(p["object_id"]) for p in prompts if p["frame"] <= t]
            out[t] = by_colour(frames[t].transpose(2, 0, 1).astype(np.float32) / 255.0, known, erode)
        return out

    segment.__qualname__ = f"prompted_colour_segmenter.erode{erode}"
    return segment


class ColourTracker(torch.nn.Module):
    """An online torch tracker computing what :func:`colour_segmenter` computes, frame by frame."""

    def __init__(self, erode: int = 0) -> None:
        super().__init__()
        self.erode = erode
        self.register_buffer("version", torch.tensor(1))
        self.known: list[int] = []

    def start(self, frame: torch.Tensor, reference: torch.Tensor) -> None:
        self.known = [int(i) for i in reference.unique().tolist() if i]

    def step(self, frame: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
        self.known += [int(i) for i in reference.unique().tolist() if i and int(i) not in self.known]
        ids = by_colour(frame.float().cpu().numpy(), self.known, self.erode)
        return torch.from_numpy(ids).to(frame.device)


def colour_tracker(erode: int = 0) -> ColourTracker:
    return ColourTracker(erode)


class ColourReader(torch.nn.Module):
    """R-VOS: logits of the named colour (0.5 minus the distance to it), for every frame; nothing where no colour is named."""

    def __init__(self) -> None:
        super().__init__()
        self.margin = torch.nn.Parameter(torch.tensor(0.5))

    def forward(self, clips: torch.Tensor, texts: list[str]) -> torch.Tensor:
        named = [next((i for i, name in COLOURS.items() if name in text), None) for text in texts]
        # an expression without a colour word (a misspelt one) names no colour: a grey nothing matches
        rgb = [PALETTE[i] if i is not None else (128, 128, 128) for i in named]
        colours = torch.tensor(rgb, dtype=torch.float32, device=clips.device) / 255.0
        distance = ((clips - colours.view(-1, 1, 3, 1, 1)) ** 2).mean(dim=2).sqrt()
        return (
            self.margin
            - distance
            - torch.tensor([float(i is None) for i in named], device=clips.device).view(-1, 1, 1, 1)
        )


def colour_reader() -> ColourReader:
    return ColourReader()


SOURCE = Path(__file__).read_text(encoding="utf-8")
