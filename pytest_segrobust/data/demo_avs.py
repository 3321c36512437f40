"""An embedded audio-visual demo: procedural clips where each shape class has its own tone.

No files are read or written: every clip is drawn on the fly from generators of its own,
seeded by ``(split, clip index, part)`` through a stable hash, so the same index yields the
same frames, masks and waveform on every call, process and machine.

A clip is :data:`FRAMES` frames of :data:`IMAGE_SIZE` x :data:`IMAGE_SIZE` pixels, one per
second, with its sound: 16 kHz mono, one second per frame (AVSBench's S4 / MS3 layout). It
shows two or three shapes of different :data:`SOURCES` classes on a greyish, cloudy
background; each class has its own look (a shape and a colour) and its own tone (a two-note
chord: a fundamental and its fifth, an octave apart from class to class, 250 Hz to 4 kHz).
Shapes drift at a constant velocity and may overlap, later ones in front.

Some of the shapes sound and the rest are silent, so the frames alone do not say which shape
is the target: a model must listen.

* S4-like clips (two in three): one shape sounds, in every frame.
* MS3-like clips: two of three shapes sound, each in a drawn subset of the frames, at least
  one of them in every frame.

The mask of frame ``t`` marks the visible pixels of the shapes sounding during second ``t``
(``1``), everything else ``0``; every frame is annotated (unlike AVSBench's S4 train split,
which annotates the first frame only). A sounding shape's tone fades in and out over
:data:`FADE_SAMPLES` samples where it starts or stops, and a faint uniform hiss
(:data:`HISS`) lies under every clip, so "silent" is quiet but never digital zero.

Reproducibility across machines: as in :mod:`pytest_segrobust.data.demo`, arrays are computed
with ``+ - * /``, ``floor``, comparisons and table look-ups only; the one sine table is
built from scalar ``math.sin`` calls, and every tone has an integer frequency, so a sample of
it is an exact index into that table.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
import torch

from pytest_segrobust.data.base import Sample, sample_position
from pytest_segrobust.data.clips import ClipAudio, ClipFrames, ClipObjects
from pytest_segrobust.data.demo import (
    DemoDataset,
    _hsv,
    _value_noise,
    demo_seed,
    pixel_centres,
    quantise,
    split_size,
)

# Bump whenever a change to this module changes any generated pixel, mask or sample.
GENERATOR_VERSION = "1"

FRAMES = 5
IMAGE_SIZE = 64
SAMPLE_RATE = 16_000
FRAME_SAMPLES = SAMPLE_RATE  # one second of sound per frame
DEFAULT_CLIPS: dict[str, int] = {"train": 48, "val": 24}
CLASS_NAMES: tuple[str, ...] = ("background", "sounding")
MS3_SHARE = 1 / 3
FADE_SAMPLES = 160  # 10 ms, so a tone starting or stopping does not click
HISS = 0.002  # peak of the uniform noise floor under every clip
TONE_AMPLITUDE = (0.05, 0.15)  # of a tone's fundamental; its fifth is half as loud
MAX_SPEED = 3.0  # pixels per frame
# Centres stay this share of the two radii apart: shapes may touch and overlap a little, not hide.
MIN_SEPARATION = 0.8
PLACEMENT_ATTEMPTS = 50


@dataclass(frozen=True)
class SoundSource:
    """A shape class of the demo: how it looks and how it sounds.

    Attributes:
        name: What a person would call it (``"red disk"``).
        shape: ``disk``, ``square``, ``triangle``, ``diamond`` or ``bar``.
        hue: Centre hue, a fraction of the colour wheel.
        tone_hz: The chord's fundamental; its fifth is at ``1.5 * tone_hz``. Integers, so
            every sample is an exact index into the sine table.
    """

    name: str
    shape: str
    hue: float
    tone_hz: int

    @property
    def chord_hz(self) -> tuple[int, int]:
        return self.tone_hz, self.tone_hz * 3 // 2


SOURCES: tuple[SoundSource, ...] = (
    SoundSource("red disk", "disk", 0.0, 250),
    SoundSource("yellow square", "square", 1 / 6, 500),
    SoundSource("green triangle", "triangle", 2 / 6, 1000),
    SoundSource("cyan diamond", "diamond", 3 / 6, 2000),
    SoundSource("purple bar", "bar", 5 / 6, 4000),
)
"""The classes in tone order; a clip shows two or three different ones."""


@dataclass(frozen=True)
class ShownShape:
    """One shape of a clip: its class (an index of :data:`SOURCES`), path, size, colour and sound.

    Attributes:
        source: Index into :data:`SOURCES`.
        x, y: Centre at frame 0, in pixels.
        vx, vy: Velocity in pixels per frame.
        radius: Half its extent in pixels.
        rgb: Its colour, ``(3,)`` floats in ``[0, 1]``.
        sounding: Per frame, whether it sounds during that second.
        amplitude: Its tone's loudness (of the fundamental) when it sounds.
        phase: Start of its tone, in samples of the sine table.
    """

    source: int
    x: float
    y: float
    vx: float
    vy: float
    radius: float
    rgb: tuple[float, float, float]
    sounding: tuple[bool, ...]
    amplitude: float
    phase: int


@dataclass(frozen=True)
class ClipPlan:
    """Everything drawn about a clip before its pixels and samples: what a test or a trainer may ask.

    Attributes:
        shapes: In drawing order (later in front).
        multi_source: An MS3-like clip (two shapes sound) rather than S4-like (one).
    """

    shapes: tuple[ShownShape, ...]
    multi_source: bool

    def sounding_sources(self, frame: int) -> tuple[int, ...]:
        """The classes (indices of :data:`SOURCES`) heard during second ``frame``, in drawing order."""
        return tuple(shape.source for shape in self.shapes if shape.sounding[frame])


def _generator(split: str, index: int, part: str) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(demo_seed("demo-avs", split, index, part)))


@functools.cache
def _sine_table() -> np.ndarray:
    """``sin(2 pi k / SAMPLE_RATE)`` for ``k`` in ``0..SAMPLE_RATE-1``, each from a scalar ``math.sin``."""
    return np.asarray([math.sin(2.0 * math.pi * k / SAMPLE_RATE) for k in range(SAMPLE_RATE)], dtype=np.float32)


def _path(rng: np.random.Generator, image_size: int) -> tuple[float, float, float, float, float]:
    """A shape's radius, start and velocity, keeping its centre inside the frame over the clip."""
    radius = float(rng.uniform(0.12, 0.2)) * image_size
    low, high = radius, image_size - radius
    vx, vy = (float(rng.uniform(-MAX_SPEED, MAX_SPEED)) for _ in range(2))
    span = FRAMES - 1
    x = float(rng.uniform(max(low, low - vx * span), min(high, high - vx * span)))
    y = float(rng.uniform(max(low, low - vy * span), min(high, high - vy * span)))
    return radius, x, y, vx, vy


def _apart(path: tuple[float, float, float, float, float], other: ShownShape) -> bool:
    """Whether a shape on ``path`` keeps clear enough of ``other`` in every frame that neither hides much of the other."""
    radius, x, y, vx, vy = path
    reach = MIN_SEPARATION * (radius + other.radius)
    return all(
        (x + vx * t - other.x - other.vx * t) ** 2 + (y + vy * t - other.y - other.vy * t) ** 2 >= reach * reach
        for t in range(FRAMES)
    )


def plan_clip(split: str, index: int, image_size: int = IMAGE_SIZE) -> ClipPlan:
    """Draw which shapes a clip shows, where they go and which of them sound; a pure function of its arguments."""
    rng = _generator(split, index, "plan")
    multi_source = bool(rng.random() < MS3_SHARE)
    count = 3 if multi_source else int(rng.integers(2, 4))
    sources = rng.permutation(len(SOURCES))[:count]
    if multi_source:
        # Two shapes sound, each in a drawn subset of the frames; in every frame at least one does.
        first = rng.random(FRAMES) < 0.7
        second = (rng.random(FRAMES) < 0.7) | ~first
        voices = [tuple(bool(v) for v in first), tuple(bool(v) for v in second)]
    else:
        voices = [(True,) * FRAMES]
    # Which shapes sound: the first of a random order of the shown ones, one per voice.
    sounders = rng.permutation(count)[: len(voices)].tolist()
    shapes: list[ShownShape] = []
    for number, source in enumerate(sources.tolist()):
        for _ in range(PLACEMENT_ATTEMPTS):
            radius, x, y, vx, vy = _path(rng, image_size)
            if all(_apart((radius, x, y, vx, vy), other) for other in shapes):
                break  # else the last attempt stays: a rare clip with a hidden shape is still a clip
        hue = SOURCES[source].hue + float(rng.uniform(-0.03, 0.03))
        rgb = tuple(float(c) for c in _hsv(hue, float(rng.uniform(0.55, 0.9)), float(rng.uniform(0.6, 0.95))).ravel())
        sounding = voices[sounders.index(number)] if number in sounders else (False,) * FRAMES
        amplitude = float(rng.uniform(*TONE_AMPLITUDE))
        phase = int(rng.integers(SAMPLE_RATE))
        shapes.append(ShownShape(source, x, y, vx, vy, radius, rgb, sounding, amplitude, phase))  # type: ignore[arg-type]
    return ClipPlan(tuple(shapes), multi_source)


def _covers(shape: str, dx: np.ndarray, dy: np.ndarray, radius: float) -> np.ndarray:
    """Pixels a shape covers, by offsets from its centre (only ``+ - * /`` and comparisons).

    Shape:
        dx: ``(1, W)``; dy: ``(H, 1)``; return: ``(H, W)``, bool.
    """
    r = np.float32(radius)
    if shape == "disk":
        return dx * dx + dy * dy <= r * r
    if shape == "square":
        half = r * np.float32(0.85)
        return (np.abs(dx) <= half) & (np.abs(dy) <= half)
    if shape == "triangle":  # apex up
        top, bottom = -r, r * np.float32(0.8)
        return (dy >= top) & (dy <= bottom) & (np.abs(dx) <= (dy - top) * np.float32(0.6))
    if shape == "diamond":
        return np.abs(dx) + np.abs(dy) <= r
    if shape == "bar":
        return (np.abs(dx) <= r * np.float32(1.2)) & (np.abs(dy) <= r * np.float32(0.45))
    raise ValueError(f"unknown shape {shape!r}")


def draw_frames(split: str, index: int, plan: ClipPlan, image_size: int = IMAGE_SIZE) -> tuple[np.ndarray, np.ndarray]:
    """The clip's frames and, per frame, the shape shown at each pixel.

    Returns:
        ``(frames, shown)``: frames ``uint8`` RGB, ``shown`` the 1-based drawing-order number
        of the shape at each pixel (0: background).

    Shape:
        frames: ``(T, 3, H, W)``; shown: ``(T, H, W)``, ``uint8``.
    """
    rng = _generator(split, index, "pixels")
    size = image_size
    base = _hsv(float(rng.random()), float(rng.uniform(0.0, 0.15)), float(rng.uniform(0.35, 0.6)))
    broad = _value_noise(rng, int(rng.integers(2, 5)), size, size)
    background = base + np.float32(rng.uniform(0.1, 0.25)) * (broad - 0.5)
    ys, xs = pixel_centres(size)
    frames = np.empty((FRAMES, 3, size, size), dtype=np.uint8)
    shown = np.zeros((FRAMES, size, size), dtype=np.uint8)
    for t in range(FRAMES):
        # Fresh grain per frame: a still background that is not a still picture.
        grain = rng.random((1, size, size), dtype=np.float32)
        image = background + np.float32(0.04) * (grain - 0.5)
        for number, shape in enumerate(plan.shapes, start=1):
            dx = xs - np.float32(shape.x + shape.vx * t)
            dy = ys - np.float32(shape.y + shape.vy * t)
            covered = _covers(SOURCES[shape.source].shape, dx, dy, shape.radius)
            image = np.where(covered, np.asarray(shape.rgb, dtype=np.float32).reshape(3, 1, 1), image)
            shown[t][covered] = number
        frames[t] = quantise(image)
    return frames, shown


def _envelope(sounding: tuple[bool, ...]) -> np.ndarray:
    """Per sample, how loud a source is (0 or 1), ramped linearly over :data:`FADE_SAMPLES` where it turns on or off."""
    on = np.repeat(np.asarray(sounding, dtype=np.float32), FRAME_SAMPLES)
    half = FADE_SAMPLES // 2
    ramp = (np.arange(FADE_SAMPLES, dtype=np.float32) + np.float32(0.5)) / np.float32(FADE_SAMPLES)
    for t in range(1, FRAMES):
        if sounding[t] != sounding[t - 1]:
            edge = t * FRAME_SAMPLES
            on[edge - half : edge + half] = ramp if sounding[t] else 1.0 - ramp
    return on


def render_audio(split: str, index: int, plan: ClipPlan) -> np.ndarray:
    """The clip's sound: each sounding shape's chord while it sounds, over a faint hiss.

    Shape:
        return: ``(FRAMES * FRAME_SAMPLES,)``, float32 in ``[-1, 1]``.
    """
    rng = _generator(split, index, "audio")
    length = FRAMES * FRAME_SAMPLES
    table = _sine_table()
    samples = np.arange(length, dtype=np.int64)
    wave = np.float32(HISS) * (rng.random(length, dtype=np.float32) * np.float32(2.0) - np.float32(1.0))
    for shape in plan.shapes:
        if not any(shape.sounding):
            continue
        fundamental, fifth = SOURCES[shape.source].chord_hz
        chord = (
            table[(samples * fundamental + shape.phase) % SAMPLE_RATE]
            + np.float32(0.5) * table[(samples * fifth + 2 * shape.phase) % SAMPLE_RATE]
        )
        wave = wave + np.float32(shape.amplitude) * _envelope(shape.sounding) * chord
    return np.clip(wave, -1.0, 1.0).astype(np.float32)


@dataclass(frozen=True)
class DemoAVSClip:
    """One generated clip, as arrays: its plan, frames, shapes shown, sounding mask and waveform.

    Shape:
        frames: ``(T, 3, H, W)`` uint8; shown: ``(T, H, W)`` uint8; masks: ``(T, H, W)`` bool;
        waveform: ``(T * 16000,)`` float32.
    """

    plan: ClipPlan
    frames: np.ndarray
    shown: np.ndarray
    masks: np.ndarray
    waveform: np.ndarray


def generate_clip(split: str, index: int, image_size: int = IMAGE_SIZE) -> DemoAVSClip:
    """Draw one demo clip, a pure function of its arguments."""
    plan = plan_clip(split, index, image_size)
    frames, shown = draw_frames(split, index, plan, image_size)
    masks = np.zeros(shown.shape, dtype=bool)
    for t in range(FRAMES):
        for number, shape in enumerate(plan.shapes, start=1):
            if shape.sounding[t]:
                masks[t] |= shown[t] == number
    return DemoAVSClip(plan, frames, shown, masks, render_audio(split, index, plan))


class DemoAVSClips(DemoDataset):
    """The demo's audio-visual clips: one sample per clip, in the audio-visual contract's fields.

    Each sample has ``video`` (:class:`ClipFrames`), ``objects`` (:class:`ClipObjects`: the
    sounding mask as object 1, every frame annotated) and ``audio`` (:class:`ClipAudio`,
    16 kHz mono).

    Args:
        split: ``"train"`` (48 clips by default; training scripts ask for more) or ``"val"`` (24).
        clips: Number of clips; defaults per split as above.
        image_size: Side of the square frames in pixels, at least 16.

    Raises:
        ValueError: On an unknown split, a negative number of clips or too small an image size.
    """

    class_names: tuple[str, ...] = CLASS_NAMES
    _generator = f"demo-avs:v{GENERATOR_VERSION}"
    _settings = ("split", "clips", "image_size")

    def __init__(self, split: str = "val", clips: int | None = None, image_size: int = IMAGE_SIZE) -> None:
        self.clips = split_size(split, clips, DEFAULT_CLIPS, "demo AVS", "clips")
        super().__init__(split, image_size, "demo-avs")

    def __len__(self) -> int:
        return self.clips

    @property
    def sample_ids(self) -> tuple[str, ...]:
        return tuple(self._sample_id(i) for i in range(self.clips))

    def _sample_id(self, index: int) -> str:
        return f"demo-avs/{self.split}/{index:04d}"

    def _index(self, index: int) -> int:
        return sample_position(index, self.clips, self.name)

    def clip(self, index: int) -> DemoAVSClip:
        """Clip ``index`` as arrays, with what was drawn about it (:class:`DemoAVSClip`)."""
        return generate_clip(self.split, self._index(index), self.image_size)

    def plan(self, index: int) -> ClipPlan:
        """What clip ``index`` shows and which shapes sound, without drawing its pixels or samples."""
        return plan_clip(self.split, self._index(index), self.image_size)

    def read_audio(self, sample_id: str) -> ClipAudio:
        """Only the sound of clip ``sample_id`` (no pixels drawn): what a competing source needs.

        Raises:
            KeyError: naming the id when it is not a clip of this dataset.
        """
        index = self._ids().get(sample_id)
        if index is None:
            raise KeyError(f"{sample_id!r} is not a clip of {self.name} ({self.clips} clips)")
        wave = render_audio(self.split, index, plan_clip(self.split, index, self.image_size))
        return ClipAudio(torch.from_numpy(wave)[None], SAMPLE_RATE, "mono")

    def _ids(self) -> dict[str, int]:
        return {self._sample_id(i): i for i in range(self.clips)}

    def __getitem__(self, index: int) -> Sample:
        """Generate clip ``index``; negative indices count from the end.

        Raises:
            IndexError: When ``index`` is out of range, which also ends plain iteration.
        """
        index = self._index(index)
        clip = generate_clip(self.split, index, self.image_size)
        names = tuple(f"{t:05d}" for t in range(FRAMES))
        return Sample.of(
            self._sample_id(index),
            video=ClipFrames(torch.from_numpy(clip.frames), names),
            objects=ClipObjects(
                masks=torch.from_numpy(clip.masks.astype(np.int64)),
                annotated=torch.ones(FRAMES, dtype=torch.bool),
                object_ids=(1,),
                first_frames=(0,),
                unseen=(False,),
            ),
            audio=ClipAudio(torch.from_numpy(clip.waveform)[None], SAMPLE_RATE, "mono"),
        )


def demo_avs_dataset(split: str = "val", clips: int | None = None) -> DemoAVSClips:
    """Build the demo AVS dataset (:class:`DemoAVSClips`); suites name ``...data.demo_avs:demo_avs_dataset``."""
    return DemoAVSClips(split=split, clips=clips)
