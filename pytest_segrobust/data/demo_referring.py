"""Referring expressions for the embedded demo scenes: which object, in words.

Every scene of :mod:`pytest_segrobust.data.demo` is described object by object, with
expressions that name one object and no other in that scene: its texture ("the dotted
shape"), its colour ("the blue shape"), both, its place among objects of its texture ("the
leftmost striped shape"), its size among them ("the largest checkered shape"), or where it
lies relative to another object that its texture alone names ("the striped shape left of
the smooth shape"). Expressions are a pure function of the scene, so they are as
deterministic as its pixels.

What an expression may say is what the pixels show, measured on the object's visible part:

* Texture is the object's class (striped, checkered, dotted, smooth).
* Colour is the hue of the mean colour of the visible pixels, named from six hues (red,
  yellow, green, cyan, blue, purple). A colour is used only when the hue lies well inside
  its name's range; another object blocks it when its hue is anywhere near that range or
  its colour is too grey to name, so a name never hinges on a borderline hue.
* Places and sizes use the visible part's centroid and area, and only with a clear margin
  (:data:`POSITION_MARGIN` of the image side, :data:`SIZE_RATIO` in area) to every
  competitor, so the words hold for a person looking at the image.

Objects whose visible part is smaller than :data:`MIN_VISIBLE_FRACTION` of the image
(specks left by occlusion or tiny shapes) are neither described nor counted as competitors.
Shape words ("square", "circle") are not used: an occluded object's visible part often no
longer has its shape, and the scene records only what each pixel shows.

Each described object gets its first one to three unique expressions in the order of
:data:`TEMPLATE_ORDER`; an object with none is skipped. A sample is one expression, with id
``demo/<split>/<scene>/<object>/<k>`` (image ``demo/<split>/<scene>``, the scenes' ids in
:class:`~pytest_segrobust.data.demo.DemoScenes`; ref: the object's 1-based drawing-order
number; sentence ``k``), and its mask is the object's visible part.
"""

from __future__ import annotations

import colorsys
import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import torch

from pytest_segrobust.data.base import ReferringTarget, Sample, sample_position
from pytest_segrobust.data.demo import (
    CLASS_NAMES,
    GENERATOR_VERSION,
    DemoDataset,
    LastDrawn,
    Scene,
    generate_scene,
    split_size,
)
from pytest_segrobust.data.referring import REFERRING_CLASS_NAMES

# Bump whenever a change to this module changes any expression, id or mask; the scenes'
# own version (GENERATOR_VERSION) is in the fingerprint too.
EXPRESSION_VERSION = "1"

# Scenes per split: about 100 expressions in val (a few seconds per suite cell on a CPU).
DEFAULT_SCENES: dict[str, int] = {"train": 1500, "val": 10}
MAX_EXPRESSIONS_PER_OBJECT = 3
MIN_VISIBLE_FRACTION = 60 / (128 * 128)
POSITION_MARGIN = 0.08
SIZE_RATIO = 1.6
# A colour is named when the hue is within this distance of the name's centre...
COLOUR_CLEAR = 0.05
# ...and another object counts as that colour within this distance, or when it is greyer than MIN_SATURATION.
COLOUR_NEAR = 0.11
MIN_SATURATION = 0.25
COLOUR_NAMES: tuple[tuple[str, float], ...] = (
    ("red", 0.0),
    ("yellow", 1 / 6),
    ("green", 2 / 6),
    ("cyan", 3 / 6),
    ("blue", 4 / 6),
    ("purple", 5 / 6),
)
NOUN = "shape"


@dataclass(frozen=True)
class SceneObject:
    """What the expressions may say about one visible object.

    Attributes:
        number: 1-based drawing-order index (the value in :attr:`Scene.objects`).
        texture: Its class name (``"striped"``...).
        hue: Hue of the mean visible colour, a fraction of the colour wheel.
        saturation: Saturation of that mean colour.
        x: Centroid column of the visible part, as a fraction of the image side.
        y: Centroid row, likewise.
        area: Visible pixels.
    """

    number: int
    texture: str
    hue: float
    saturation: float
    x: float
    y: float
    area: int


def _hue_distance(hue: float, centre: float) -> float:
    distance = abs(hue - centre) % 1.0
    return min(distance, 1.0 - distance)


def colour_name(obj: SceneObject) -> str | None:
    """The object's colour name when its hue is clearly one; ``None`` otherwise."""
    if obj.saturation < MIN_SATURATION:
        return None
    for name, centre in COLOUR_NAMES:
        if _hue_distance(obj.hue, centre) < COLOUR_CLEAR:
            return name
    return None


def _may_be_colour(obj: SceneObject, name: str) -> bool:
    """Whether a person might call ``obj`` this colour: the conservative side of :func:`colour_name`."""
    centre = dict(COLOUR_NAMES)[name]
    return obj.saturation < MIN_SATURATION or _hue_distance(obj.hue, centre) < COLOUR_NEAR


def scene_objects(scene: Scene) -> list[SceneObject]:
    """The objects of ``scene`` that are visible enough to describe or to compete, in drawing order."""
    size = scene.objects.shape[0]
    min_area = max(1, round(MIN_VISIBLE_FRACTION * scene.objects.size))
    rows, columns = np.indices(scene.objects.shape)
    found: list[SceneObject] = []
    for number in range(1, len(scene.object_classes) + 1):
        visible = scene.objects == number
        area = int(visible.sum())
        if area < min_area:
            continue
        # Integer sums are exact on every machine; only the final divisions round.
        red, green, blue = (int(channel[visible].sum(dtype=np.int64)) / (255 * area) for channel in scene.pixels)
        hue, saturation, _ = colorsys.rgb_to_hsv(red, green, blue)
        found.append(
            SceneObject(
                number=number,
                texture=CLASS_NAMES[int(scene.object_classes[number - 1])],
                hue=hue,
                saturation=saturation,
                x=(int(columns[visible].sum()) / area + 0.5) / size,
                y=(int(rows[visible].sum()) / area + 0.5) / size,
                area=area,
            )
        )
    return found


def _clearly_first(target: SceneObject, others: list[SceneObject], key: Callable[[SceneObject], float]) -> bool:
    """``target`` has the smallest ``key`` by at least the margin; ``others`` excludes it."""
    return bool(others) and all(key(target) + POSITION_MARGIN <= key(other) for other in others)


# Superlatives of place: (word, key whose smallest value wins).
_PLACES: tuple[tuple[str, Callable[[SceneObject], float]], ...] = (
    ("leftmost", lambda o: o.x),
    ("rightmost", lambda o: -o.x),
    ("topmost", lambda o: o.y),
    ("bottommost", lambda o: -o.y),
)
# Relations to an anchor: (words, signed distance that is positive when the relation holds).
_RELATIONS: tuple[tuple[str, Callable[[SceneObject, SceneObject], float]], ...] = (
    ("left of", lambda o, a: a.x - o.x),
    ("right of", lambda o, a: o.x - a.x),
    ("above", lambda o, a: a.y - o.y),
    ("below", lambda o, a: o.y - a.y),
)


def _by_texture(target: SceneObject, objects: list[SceneObject]) -> Iterator[str]:
    if all(o.texture != target.texture for o in objects if o is not target):
        yield f"the {target.texture} {NOUN}"


def _by_colour(target: SceneObject, objects: list[SceneObject]) -> Iterator[str]:
    name = colour_name(target)
    if name is not None and not any(_may_be_colour(o, name) for o in objects if o is not target):
        yield f"the {name} {NOUN}"


def _by_colour_and_texture(target: SceneObject, objects: list[SceneObject]) -> Iterator[str]:
    name = colour_name(target)
    rivals = [o for o in objects if o is not target and o.texture == target.texture]
    if name is not None and not any(_may_be_colour(o, name) for o in rivals):
        yield f"the {name} {target.texture} {NOUN}"


def _by_place_among_texture(target: SceneObject, objects: list[SceneObject]) -> Iterator[str]:
    rivals = [o for o in objects if o is not target and o.texture == target.texture]
    for word, key in _PLACES:
        if _clearly_first(target, rivals, key):
            yield f"the {word} {target.texture} {NOUN}"


def _by_place(target: SceneObject, objects: list[SceneObject]) -> Iterator[str]:
    rivals = [o for o in objects if o is not target]
    for word, key in _PLACES:
        if _clearly_first(target, rivals, key):
            yield f"the {word} {NOUN}"


def _by_size_among_texture(target: SceneObject, objects: list[SceneObject]) -> Iterator[str]:
    rivals = [o for o in objects if o is not target and o.texture == target.texture]
    if rivals and all(target.area >= SIZE_RATIO * o.area for o in rivals):
        yield f"the largest {target.texture} {NOUN}"
    if rivals and all(o.area >= SIZE_RATIO * target.area for o in rivals):
        yield f"the smallest {target.texture} {NOUN}"


def _by_relation(target: SceneObject, objects: list[SceneObject]) -> Iterator[str]:
    rivals = [o for o in objects if o is not target and o.texture == target.texture]
    if not rivals:  # its texture names it already; a relation would only add words
        return
    # Anchors: objects of another texture that their texture alone names.
    anchors = [
        o for o in objects if o.texture != target.texture and sum(other.texture == o.texture for other in objects) == 1
    ]
    for anchor in anchors:
        for words, signed in _RELATIONS:
            if signed(target, anchor) >= POSITION_MARGIN and all(signed(o, anchor) <= -POSITION_MARGIN for o in rivals):
                yield f"the {target.texture} {NOUN} {words} the {anchor.texture} {NOUN}"


# The order in which an object's expressions are tried; the first unique ones are kept.
TEMPLATE_ORDER: tuple[Callable[[SceneObject, list[SceneObject]], Iterator[str]], ...] = (
    _by_texture,
    _by_colour,
    _by_place_among_texture,
    _by_colour_and_texture,
    _by_relation,
    _by_size_among_texture,
    _by_place,
)


def describe(target: SceneObject, objects: list[SceneObject]) -> list[str]:
    """Up to :data:`MAX_EXPRESSIONS_PER_OBJECT` distinct expressions that name ``target`` alone among ``objects``."""
    chosen: list[str] = []
    for template in TEMPLATE_ORDER:
        for expression in template(target, objects):
            if expression not in chosen:
                chosen.append(expression)
            if len(chosen) == MAX_EXPRESSIONS_PER_OBJECT:
                return chosen
    return chosen


@dataclass(frozen=True)
class _Entry:
    scene: int
    number: int
    sentence: int
    expression: str


class DemoReferring(DemoDataset):
    """The demo scenes as a referring segmentation dataset; implements ``SegmentationDataset``.

    Args:
        split: ``"train"`` (1500 scenes by default) or ``"val"`` (10 scenes, about 100
            expressions), the scenes of :class:`~pytest_segrobust.data.demo.DemoScenes`.
        scenes: Number of scenes to describe; defaults per split as above.
        image_size: Side of the square images in pixels, at least 16.

    Raises:
        ValueError: On an unknown split, a negative number of scenes or too small an image size.
    """

    class_names: tuple[str, ...] = REFERRING_CLASS_NAMES
    # The scenes' version, then the expressions'.
    _generator = f"demo-referring:v{GENERATOR_VERSION}.{EXPRESSION_VERSION}"
    _settings = ("split", "scenes", "image_size")

    def __init__(self, split: str = "val", scenes: int | None = None, image_size: int = 128) -> None:
        self.scenes = split_size(split, scenes, DEFAULT_SCENES, "demo referring", "scenes")
        super().__init__(split, image_size, "demo-referring")
        self._entries: list[_Entry] = []
        for index in range(self.scenes):
            objects = scene_objects(generate_scene(split, index, image_size))
            for target in objects:
                for sentence, expression in enumerate(describe(target, objects)):
                    self._entries.append(_Entry(index, target.number, sentence, expression))
        self._scenes = LastDrawn(functools.partial(generate_scene, split, image_size=image_size))

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def sample_ids(self) -> tuple[str, ...]:
        return tuple(self._sample_id(entry) for entry in self._entries)

    @property
    def expressions(self) -> tuple[str, ...]:
        return tuple(entry.expression for entry in self._entries)

    def _sample_id(self, entry: _Entry) -> str:
        return f"demo/{self.split}/{entry.scene:05d}/{entry.number}/{entry.sentence}"

    def scene(self, index: int) -> Scene:
        """Scene ``index`` of the split (the image that expressions of that scene refer to)."""
        return self._scenes(index)

    def __getitem__(self, index: int) -> Sample:
        """Expression ``index`` with its scene and its object's visible mask; negative indices count from the end.

        Raises:
            IndexError: When ``index`` is out of range, which also ends plain iteration.
        """
        entry = self._entries[sample_position(index, len(self), self.name)]
        scene = self.scene(entry.scene)
        return Sample(
            sample_id=self._sample_id(entry),
            image=torch.from_numpy(scene.pixels.copy()),
            referring=ReferringTarget(entry.expression, torch.from_numpy(scene.objects == entry.number)),
            unit=f"demo/{self.split}/{entry.scene:05d}",
        )


def demo_referring_dataset(split: str = "val", scenes: int | None = None) -> DemoReferring:
    """Build the demo referring dataset (:class:`DemoReferring`); suites name ``...data.demo_referring:demo_referring_dataset``."""
    return DemoReferring(split=split, scenes=scenes)
