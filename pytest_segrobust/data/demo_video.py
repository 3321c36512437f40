"""An embedded video demo: procedural clips of the demo's textured shapes, moving.

No files are read or written: every clip is drawn on the fly from a generator of its own,
seeded by ``(split, clip index)`` through a stable hash, so the same index yields the same
frames and masks on every call, process and machine.

A clip is :data:`FRAMES` frames of :data:`IMAGE_SIZE` x :data:`IMAGE_SIZE` pixels: a still,
greyish background of the demo's kind (broad light variation and grain) and two to four
objects, each a shape (disk, ellipse, rectangle or triangle) painted in one of the demo's
texture families (striped, checkered, dotted, smooth; :func:`pytest_segrobust.data.demo._texture`)
and one of six named colours. No two objects of a clip share both texture and colour. Objects
move, the texture with them:

* at a constant velocity, or with a constant acceleration (changing speed and direction);
* some start inside the frame, some enter it across an edge (partly visible at frame 0),
  some leave it before the clip ends;
* in some clips an object appears after frame 0 (dropped into the scene at a later frame),
  so its ``first_frames`` entry is not 0;
* objects are drawn in a fixed order, later ones in front: crossing paths occlude.

Every frame is annotated; the masks give each pixel the number (1-based drawing order) of the
object it shows, 0 for background. An object's first frame is the first where it covers at
least :data:`MIN_FIRST_AREA` pixels and it covers none before; a draw that breaks this for some
object is redrawn (the attempt number is part of the seed), so the reference mask a model is
given is never a sliver.

:class:`DemoClips` is the VOS dataset (one sample per clip), :class:`DemoReferringClips` the
R-VOS one (one sample per clip and expression). Expressions use only words that hold for the
whole clip: texture, colour and shape ("the dotted shape", "the blue shape", "the red
striped shape", "the green disk"), never places or sizes, which change as objects move and
leave. Each names one object and no other of its clip.

Reproducibility across machines: as in :mod:`pytest_segrobust.data.demo`, pixel arrays are
computed with ``+ - * /``, ``floor`` and comparisons only; transcendental functions are
applied to scalars.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch

from pytest_segrobust.core.types import Video, VideoMasks
from pytest_segrobust.data.base import Sample, sample_position
from pytest_segrobust.data.clips import ClipExpression, ClipFrames, ClipObjects
from pytest_segrobust.data.demo import (
    CLASS_NAMES,
    IN_DISTRIBUTION,
    DemoDataset,
    LastDrawn,
    _hsv,
    _texture,
    _value_noise,
    demo_seed,
    pixel_centres,
    quantise,
    rotate_offsets,
    split_size,
)
from pytest_segrobust.data.demo_referring import COLOUR_NAMES

# Bump whenever a change to this module changes any generated pixel, mask or expression.
GENERATOR_VERSION = "1"

FRAMES = 12
IMAGE_SIZE = 64
DEFAULT_CLIPS: dict[str, int] = {"train": 400, "val": 12}
OBJECT_COUNT = (2, 4)
# Object radius as a fraction of the image side.
RADIUS = (0.1, 0.2)
# Pixels an object covers at least in its first frame (the mask a model is given there).
MIN_FIRST_AREA = 24
# Share of clips with an object that appears after frame 0.
LATE_SHARE = 0.4
# Share of objects that move with a constant acceleration rather than a constant velocity.
ACCELERATING_SHARE = 0.5
MAX_ATTEMPTS = 64

# Hues are drawn this close to their name's centre: far from any neighbour's.
HUE_JITTER = 0.03
SHAPE_NAMES: tuple[str, ...] = ("disk", "ellipse", "rectangle", "triangle")
NOUN = "shape"
MAX_EXPRESSIONS_PER_OBJECT = 2

# How an object enters the clip.
_INSIDE, _ENTERING, _LEAVING, _LATE = "inside", "entering", "leaving", "late"


@dataclass(frozen=True)
class ClipObject:
    """One moving object of a clip, everything needed to draw it in any frame.

    Attributes:
        number: 1-based drawing order; its id in the masks. Later objects are in front.
        class_id: Texture family, an index into :data:`~pytest_segrobust.data.demo.CLASS_NAMES`.
        colour: Index into :data:`COLOUR_NAMES`.
        shape: Index into :data:`SHAPE_NAMES`.
        radius: Size in pixels.
        aspect: Minor over major axis (ellipse, rectangle).
        corners: The triangle's three vertex angles (radians); unused for other shapes.
        angle: Orientation (radians), fixed for the clip.
        position: Centre ``(x, y)`` at frame 0, in pixels (may lie outside the frame).
        velocity: Pixels per frame at frame 0.
        acceleration: Pixels per frame squared.
        appears: The frame it is dropped in at (0 for most).
        texture_seed: Seeds the texture's period and phase, drawn anew, alike, in every frame.
        hsv: Its primary colour; the secondary is the same hue, darker.
        darker: Value of the secondary colour as a fraction of the primary's.
    """

    number: int
    class_id: int
    colour: int
    shape: int
    radius: float
    aspect: float
    corners: tuple[float, float, float]
    angle: float
    position: tuple[float, float]
    velocity: tuple[float, float]
    acceleration: tuple[float, float]
    appears: int
    texture_seed: int
    hsv: tuple[float, float, float]
    darker: float

    @property
    def texture(self) -> str:
        return CLASS_NAMES[self.class_id]

    @property
    def colour_name(self) -> str:
        return COLOUR_NAMES[self.colour][0]

    @property
    def shape_name(self) -> str:
        return SHAPE_NAMES[self.shape]

    def centre(self, frame: int) -> tuple[float, float]:
        """Where its centre is at ``frame``, in pixels."""
        t = float(frame)
        return (
            self.position[0] + self.velocity[0] * t + 0.5 * self.acceleration[0] * t * t,
            self.position[1] + self.velocity[1] * t + 0.5 * self.acceleration[1] * t * t,
        )


@dataclass(frozen=True)
class Clip:
    """One generated clip.

    Attributes:
        frames: RGB frames.
        masks: Object number per pixel and frame, 0 for background.
        objects: The objects, in drawing order.
        first_frames: Each object's first frame (see the module docstring).

    Shape:
        frames: ``(T, 3, S, S)`` uint8; masks: ``(T, S, S)`` int64.
    """

    frames: np.ndarray
    masks: np.ndarray
    objects: tuple[ClipObject, ...]
    first_frames: tuple[int, ...]


def _draw_object(rng: np.random.Generator, number: int, look: tuple[int, int], kind: str, size: int) -> ClipObject:
    """One object's appearance and motion; ``look`` is its (class id, colour index)."""
    class_id, colour = look
    radius = size * float(rng.uniform(*RADIUS))
    shape = int(rng.integers(len(SHAPE_NAMES)))
    aspect = float(rng.uniform(0.5, 0.85))
    base = float(rng.uniform(0.0, 2.0 * math.pi))
    corners = tuple(base + k * (2.0 * math.pi / 3) + float(rng.uniform(-0.35, 0.35)) for k in range(3))
    angle = float(rng.uniform(0.0, math.pi))
    speed = float(rng.uniform(0.6, 2.4))
    heading = float(rng.uniform(0.0, 2.0 * math.pi))
    velocity = (speed * math.cos(heading), speed * math.sin(heading))
    acceleration = (0.0, 0.0)
    if rng.random() < ACCELERATING_SHARE:
        acceleration = (float(rng.uniform(-0.3, 0.3)), float(rng.uniform(-0.3, 0.3)))
    margin = radius
    position = (float(rng.uniform(margin, size - margin)), float(rng.uniform(margin, size - margin)))
    appears = 0
    if kind == _ENTERING:
        # Centre just outside one edge, heading in: partly visible at frame 0.
        edge = int(rng.integers(4))
        offset = float(rng.uniform(0.0, 0.4)) * radius
        along = float(rng.uniform(0.25, 0.75)) * size
        inward = float(rng.uniform(1.2, 2.4))
        sideways = float(rng.uniform(-0.8, 0.8))
        position, velocity = (
            ((-offset, along), (inward, sideways)),
            ((size + offset, along), (-inward, sideways)),
            ((along, -offset), (sideways, inward)),
            ((along, size + offset), (sideways, -inward)),
        )[edge]
        acceleration = (0.0, 0.0)
    elif kind == _LEAVING:
        # Heading out of the frame fast enough to be gone before the end.
        edge = int(rng.integers(4))
        outward = (size / 2 + 2 * radius) / (FRAMES - 2) + float(rng.uniform(0.5, 1.5))
        along = float(rng.uniform(0.3, 0.7)) * size
        sideways = float(rng.uniform(-0.6, 0.6))
        start = float(rng.uniform(0.35, 0.6)) * size
        position, velocity = (
            ((size - start, along), (-outward, sideways)),
            ((start, along), (outward, sideways)),
            ((along, size - start), (sideways, -outward)),
            ((along, start), (sideways, outward)),
        )[edge]
        acceleration = (0.0, 0.0)
    elif kind == _LATE:
        appears = int(rng.integers(2, FRAMES // 2 + 1))
    hue = COLOUR_NAMES[colour][1] + float(rng.uniform(-HUE_JITTER, HUE_JITTER))
    value = float(rng.uniform(0.65, 0.95))
    return ClipObject(
        number=number,
        class_id=class_id,
        colour=colour,
        shape=shape,
        radius=radius,
        aspect=aspect,
        corners=corners,  # type: ignore[arg-type]
        angle=angle,
        position=position,
        velocity=velocity,
        acceleration=acceleration,
        appears=appears,
        texture_seed=int(rng.integers(1 << 62)),
        hsv=(hue, float(rng.uniform(0.6, 1.0)), value),
        darker=float(rng.uniform(0.35, 0.6)),
    )


def _covered(obj: ClipObject, u: np.ndarray, v: np.ndarray, dx: np.ndarray, dy: np.ndarray) -> np.ndarray:
    """Pixels the object covers, from offsets to its centre (rotated ``u, v``; plain ``dx, dy``).

    Shape:
        u, v: ``(S, S)``; dx: ``(1, S)``; dy: ``(S, 1)``; return: ``(S, S)``, bool.
    """
    r = np.float32(obj.radius)
    if obj.shape == 0:  # disk
        return np.broadcast_to(dx * dx + dy * dy <= r * r, u.shape)
    if obj.shape == 1:  # ellipse
        b = r * np.float32(obj.aspect)
        return (u * u) / (r * r) + (v * v) / (b * b) <= 1.0
    if obj.shape == 2:  # rectangle
        a, b = r * np.float32(0.85), r * np.float32(0.85 * obj.aspect + 0.15)
        return (np.abs(u) <= a) & (np.abs(v) <= b)
    vertices = [(obj.radius * math.cos(a), obj.radius * math.sin(a)) for a in obj.corners]
    inside = np.ones(u.shape, dtype=bool)
    for (x1, y1), (x2, y2) in zip(vertices, vertices[1:] + vertices[:1], strict=True):
        inside &= np.float32(x2 - x1) * (dy - np.float32(y1)) - np.float32(y2 - y1) * (dx - np.float32(x1)) >= 0
    return inside


def _background(rng: np.random.Generator, size: int) -> np.ndarray:
    """A still, greyish background: base colour, broad light variation, detail and grain.

    Shape:
        return: ``(3, S, S)`` float32.
    """
    base = _hsv(float(rng.random()), float(rng.uniform(0.0, 0.2)), float(rng.uniform(0.3, 0.7)))
    broad = _value_noise(rng, int(rng.integers(2, 4)), size, size)
    detail = _value_noise(rng, max(2, size // 12), size, size)
    grain = rng.random((1, size, size), dtype=np.float32)
    return (
        base
        + np.float32(rng.uniform(0.15, 0.3)) * (broad - 0.5)
        + np.float32(rng.uniform(0.03, 0.1)) * (detail - 0.5)
        + np.float32(0.04) * (grain - 0.5)
    )


def _render(background: np.ndarray, objects: tuple[ClipObject, ...], frames: int) -> tuple[np.ndarray, np.ndarray]:
    """Every frame and its object map.

    Shape:
        return: frames ``(T, 3, S, S)`` uint8, masks ``(T, S, S)`` int64.
    """
    size = background.shape[-1]
    ys, xs = pixel_centres(size)
    pixels = np.empty((frames, 3, size, size), dtype=np.uint8)
    masks = np.zeros((frames, size, size), dtype=np.int64)
    for t in range(frames):
        image = background.copy()
        for obj in objects:
            if t < obj.appears:
                continue
            cx, cy = obj.centre(t)
            dx, dy = xs - np.float32(cx), ys - np.float32(cy)
            u, v = rotate_offsets(dx, dy, obj.angle)
            covered = _covered(obj, u, v, dx, dy)
            if not covered.any():
                continue
            # The same texture draws in every frame: the pattern moves with the object.
            texture_rng = np.random.Generator(np.random.PCG64(obj.texture_seed))
            weight = _texture(texture_rng, obj.class_id, u, v, obj.radius, IN_DISTRIBUTION)
            hue, saturation, value = obj.hsv
            primary = _hsv(hue, saturation, value)
            secondary = _hsv(hue, saturation, value * obj.darker)
            image = np.where(covered, primary + (secondary - primary) * weight, image)
            masks[t][covered] = obj.number
        pixels[t] = quantise(image)
    return pixels, masks


def _first_frames(masks: np.ndarray, count: int) -> tuple[int, ...] | None:
    """Each object's first visible frame, or ``None`` when one is never visible or first shows
    as fewer than :data:`MIN_FIRST_AREA` pixels."""
    areas = np.stack([(masks == number).sum(axis=(1, 2)) for number in range(1, count + 1)])  # (O, T)
    firsts = []
    for area in areas:
        shown = np.flatnonzero(area)
        if len(shown) == 0 or area[shown[0]] < MIN_FIRST_AREA:
            return None
        firsts.append(int(shown[0]))
    return tuple(firsts)


def generate_clip(split: str, index: int, frames: int = FRAMES, image_size: int = IMAGE_SIZE) -> Clip:
    """Draw one demo clip, a pure function of its arguments.

    Raises:
        RuntimeError: When no draw of :data:`MAX_ATTEMPTS` shows every object well (not seen
            at the default sizes).
    """
    for attempt in range(MAX_ATTEMPTS):
        rng = np.random.Generator(np.random.PCG64(demo_seed("demo-video", split, index, attempt)))
        background = _background(rng, image_size)
        count = int(rng.integers(OBJECT_COUNT[0], OBJECT_COUNT[1] + 1))
        # Distinct (texture, colour) pairs, so colour and texture together always name one object.
        looks = [(class_id, colour) for class_id in range(1, len(CLASS_NAMES)) for colour in range(len(COLOUR_NAMES))]
        chosen = rng.choice(len(looks), size=count, replace=False)
        kinds = [str(k) for k in rng.choice([_INSIDE, _INSIDE, _ENTERING, _LEAVING], size=count)]
        if rng.random() < LATE_SHARE:
            kinds[int(rng.integers(count))] = _LATE
        objects = tuple(
            _draw_object(rng, number, looks[int(choice)], kind, image_size)
            for number, (choice, kind) in enumerate(zip(chosen, kinds, strict=True), start=1)
        )
        pixels, masks = _render(background, objects, frames)
        firsts = _first_frames(masks, count)
        if firsts is not None:
            return Clip(pixels, masks, objects, firsts)
    raise RuntimeError(f"no clip of {split}/{index} shows every object well in {MAX_ATTEMPTS} draws")


def describe_objects(objects: tuple[ClipObject, ...]) -> list[list[str]]:
    """Up to :data:`MAX_EXPRESSIONS_PER_OBJECT` expressions per object, each naming it alone.

    Words come from what holds for the whole clip (texture, colour, shape), tried from the
    fewest: texture, colour, colour and texture, texture and shape, colour and shape, all three.
    """

    def unique(target: ClipObject, **words: int) -> bool:
        return not any(
            all(getattr(other, attribute) == value for attribute, value in words.items())
            for other in objects
            if other is not target
        )

    described = []
    for obj in objects:
        candidates = (
            ({"class_id": obj.class_id}, f"the {obj.texture} {NOUN}"),
            ({"colour": obj.colour}, f"the {obj.colour_name} {NOUN}"),
            ({"colour": obj.colour, "class_id": obj.class_id}, f"the {obj.colour_name} {obj.texture} {NOUN}"),
            ({"class_id": obj.class_id, "shape": obj.shape}, f"the {obj.texture} {obj.shape_name}"),
            ({"colour": obj.colour, "shape": obj.shape}, f"the {obj.colour_name} {obj.shape_name}"),
        )
        chosen = [text for words, text in candidates if unique(obj, **words)]
        described.append(chosen[:MAX_EXPRESSIONS_PER_OBJECT])
    return described


class DemoClips(DemoDataset):
    """Procedural clips of moving textured shapes, for semi-supervised VOS: one sample per clip.

    A sample holds ``video`` (:class:`~pytest_segrobust.data.clips.ClipFrames`) and ``objects``
    (:class:`~pytest_segrobust.data.clips.ClipObjects`: every frame annotated, every object's
    ``first_frames`` entry where it first shows, no unseen categories). Its id is
    ``demo-video/<split>/<clip>``.

    Args:
        split: ``"train"`` (400 clips by default) or ``"val"`` (12).
        clips: Number of clips; defaults per split as above.

    Raises:
        ValueError: On an unknown split or a negative number of clips.
    """

    class_names: tuple[str, ...] = ("background", "object")
    _generator = f"demo-video:v{GENERATOR_VERSION}"
    _settings = ("split", "clips")
    _fixed_sizes: ClassVar[dict[str, int]] = {"frames": FRAMES, "image_size": IMAGE_SIZE}

    def __init__(self, split: str = "val", clips: int | None = None) -> None:
        self.clips = split_size(split, clips, DEFAULT_CLIPS, "demo video", "clips")
        super().__init__(split, IMAGE_SIZE, "demo-vos")

    def __len__(self) -> int:
        return self.clips

    def clip(self, index: int) -> Clip:
        """Clip ``index`` of the split."""
        return generate_clip(self.split, index)

    def clip_id(self, index: int) -> str:
        return f"demo-video/{self.split}/{index:04d}"

    def __getitem__(self, index: int) -> Sample:
        """Clip ``index``; negative indices count from the end.

        Raises:
            IndexError: When ``index`` is out of range, which also ends plain iteration.
        """
        index = sample_position(index, len(self), self.name)
        clip = self.clip(index)
        return Sample.of(self.clip_id(index), **clip_fields(clip))


def clip_fields(clip: Clip) -> dict[str, ClipFrames | ClipObjects]:
    """A clip's ``video`` and ``objects`` fields."""
    frames = clip.frames.shape[0]
    return {
        "video": ClipFrames(torch.from_numpy(clip.frames.copy()), tuple(f"{t:05d}" for t in range(frames))),
        "objects": ClipObjects(
            masks=torch.from_numpy(clip.masks.copy()),
            annotated=torch.ones(frames, dtype=torch.bool),
            object_ids=tuple(obj.number for obj in clip.objects),
            first_frames=clip.first_frames,
            unseen=(False,) * len(clip.objects),
        ),
    }


@dataclass(frozen=True)
class _Entry:
    clip: int
    number: int
    sentence: int
    expression: str


class DemoReferringClips(DemoDataset):
    """The demo clips with referring expressions (R-VOS): one sample per clip and expression.

    A sample holds the clip's ``video`` and ``objects`` and an ``expression``
    (:class:`~pytest_segrobust.data.clips.ClipExpression`) naming one of them; its id is
    ``<clip id>/<object number>-<k>`` (sentence ``k`` of that object).

    Args:
        split: ``"train"`` (400 clips by default) or ``"val"`` (6, 38 expressions).
        clips: Number of clips; defaults per split as above.

    Raises:
        ValueError: On an unknown split or a negative number of clips.
    """

    class_names: tuple[str, ...] = ("background", "object")
    default_clips: ClassVar[dict[str, int]] = {"train": 400, "val": 6}
    _generator = f"demo-rvos:v{GENERATOR_VERSION}"
    _settings = ("split", "clips")
    _fixed_sizes: ClassVar[dict[str, int]] = {"frames": FRAMES, "image_size": IMAGE_SIZE}

    def __init__(self, split: str = "val", clips: int | None = None) -> None:
        self.clips = split_size(split, clips, self.default_clips, "demo referring video", "clips")
        super().__init__(split, IMAGE_SIZE, "demo-rvos")
        self._videos = DemoClips(split, self.clips)
        self._entries: list[_Entry] = []
        for index in range(self.clips):
            objects = self._videos.clip(index).objects
            for obj, texts in zip(objects, describe_objects(objects), strict=True):
                self._entries.extend(_Entry(index, obj.number, k, text) for k, text in enumerate(texts))
        self._clips = LastDrawn(self._videos.clip)

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def expressions(self) -> tuple[str, ...]:
        return tuple(entry.expression for entry in self._entries)

    @property
    def clip_indices(self) -> tuple[int, ...]:
        """The clip of each sample, by index (samples of one clip are consecutive)."""
        return tuple(entry.clip for entry in self._entries)

    def clip(self, index: int) -> Clip:
        return self._clips(index)

    def __getitem__(self, index: int) -> Sample:
        """Expression ``index`` with its clip; negative indices count from the end.

        Raises:
            IndexError: When ``index`` is out of range, which also ends plain iteration.
        """
        entry = self._entries[sample_position(index, len(self), self.name)]
        clip = self.clip(entry.clip)
        clip_id = self._videos.clip_id(entry.clip)
        sample_id = f"{clip_id}/{entry.number}-{entry.sentence}"
        expression = ClipExpression(entry.expression, entry.number)
        return Sample.of(sample_id, unit=clip_id, **clip_fields(clip), expression=expression)


def demo_vos_dataset(split: str = "val", clips: int | None = None) -> DemoClips:
    """The demo VOS clips; the entry point suites name as ``...data.demo_video:demo_vos_dataset``."""
    return DemoClips(split=split, clips=clips)


def demo_rvos_dataset(split: str = "val", clips: int | None = None) -> DemoReferringClips:
    """The demo R-VOS clips and expressions; suites name ``...data.demo_video:demo_rvos_dataset``."""
    return DemoReferringClips(split=split, clips=clips)


def given_masks(masks: torch.Tensor, object_ids: Sequence[int], first_frames: Sequence[int]) -> torch.Tensor:
    """What a semi-supervised model is given: each object's mask in its first frame, 0 elsewhere.

    Shape:
        masks: ``(T, H, W)`` int64; return: the same.
    """
    reference = torch.zeros_like(masks)
    for object_id, first in zip(object_ids, first_frames, strict=True):
        reference[first][masks[first] == object_id] = object_id
    return reference


def stack_clips(samples: Sequence[Sample], named_only: bool = False) -> tuple[Video, VideoMasks, torch.Tensor]:
    """A batch of demo clips as the video tasks see it, with the reference a VOS model is given.

    For the training scripts and the tests; the ``vos`` and ``rvos`` tasks collate on their own.
    With ``named_only`` (R-VOS), the masks are the named object's, as object 1.

    Shape:
        return: ``Video`` ``(B, T, 3, H, W)``; ``VideoMasks`` ``(B, T, H, W)``; reference ``(B, T, H, W)``.
    """
    frames = torch.stack([sample.field("video").frames for sample in samples]).float() / 255.0
    objects = [sample.field("objects") for sample in samples]
    masks = torch.stack([o.masks for o in objects])
    reference = torch.stack([given_masks(o.masks, o.object_ids, o.first_frames) for o in objects])
    object_ids = tuple(o.object_ids for o in objects)
    if named_only:
        named = torch.tensor([sample.field("expression").object_id for sample in samples]).view(-1, 1, 1, 1)
        masks = (masks == named).long()
        object_ids = ((1,),) * len(samples)
    annotated = torch.stack([o.annotated for o in objects])
    video = Video.of(frames)
    return video, VideoMasks(masks, object_ids, annotated, video.frame_ids.clone()), reference
