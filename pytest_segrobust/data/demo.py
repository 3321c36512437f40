"""An embedded demo dataset: procedurally generated scenes of textured shapes.

No files are read or written: every image is drawn on the fly from a random generator
seeded by ``(split, index)`` through a stable hash, so the same index yields the same
pixels on every call, process and machine.

Each scene is a textured background with several overlapping shapes (disks, ellipses,
rectangles, triangles) of four object classes; the visible part of every shape is also an
instance and a thing segment, and the background one stuff segment, so the same scenes serve
semantic, instance and panoptic segmentation. An object's class
shows only in its local appearance: a texture family with fine, few-pixel structure plus a
loosely class-related colour range (neighbouring classes share hues). Shape and size carry
no class information. A small CNN learns the classes from clean images, while Gaussian noise
and blur wash out exactly the fine structure it relies on, which is what a robustness demo
needs.

Besides ``train`` and ``val``, two splits model a natural distribution shift in the manner
of SOOD-ImageNet (train on one distribution, test on an "easy" and a "hard" shift away from
it), not a synthetic corruption of ``val`` images: the scenes themselves are drawn from
another distribution, described by a :class:`SceneStyle` per split.

* ``ood-easy``: the training texture families and backgrounds under other conditions: more
  and mostly smaller objects, slightly coarser textures, hues a little outside the training
  spread, and uneven scene lighting, dimmer or brighter than in training.
* ``ood-hard``: texture geometries the model never saw (zigzag stripes, diagonal checks of
  oblong cells, rings on a staggered lattice for dots, radial shading for smooth), at coarser
  scales, on more saturated and cloudier backgrounds, with every class's hue moved half way
  towards its neighbour's. The class is still defined by the same texture family, so a
  person labels it the same way.

Reproducibility across machines: pixel arrays are computed with ``+ - * /``, ``floor``
and comparisons only (all exactly rounded under IEEE 754). Transcendental functions,
whose vectorised implementations differ between CPUs, are applied only to scalars.
"""

from __future__ import annotations

import colorsys
import hashlib
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

import numpy as np
import torch

from pytest_segrobust.data.base import (
    DEFAULT_IGNORE_INDEX,
    InstanceTarget,
    PanopticTarget,
    Sample,
    SemanticTarget,
    sample_position,
)

# Bump whenever a change to this module changes any generated pixel or label of the
# in-distribution splits (train, val and any split name not in SHIFTED_STYLES).
GENERATOR_VERSION = "1"
# Bump whenever a change changes a pixel or label of the natural-shift splits only; it is
# in their fingerprints, so their baselines go stale without touching those of val.
SHIFT_VERSION = "1"

CLASS_NAMES: tuple[str, ...] = ("background", "striped", "checkered", "dotted", "smooth")
DEFAULT_SIZES: dict[str, int] = {"train": 512, "val": 64, "ood-easy": 64, "ood-hard": 64}

BACKGROUND = 0
_STRIPED, _CHECKERED, _DOTTED, _SMOOTH = 1, 2, 3, 4
# The panoptic stuff classes; every object class is a thing.
STUFF_CLASSES: tuple[int, ...] = (BACKGROUND,)
# COCO categories of the object classes: id k is class k, so labels need no translation.
# The background has none (instance labels start at 1), so panoptic quality, which counts a
# class without a category as stuff, sees the same split as STUFF_CLASSES.
CATEGORIES: tuple[dict[str, Any], ...] = tuple(
    {
        "id": class_id,
        "name": CLASS_NAMES[class_id],
        "supercategory": "plain" if class_id == _SMOOTH else "pattern",
        "isthing": 1,
    }
    for class_id in (_STRIPED, _CHECKERED, _DOTTED, _SMOOTH)
)
# Centre hue (fraction of the colour wheel) of each object class. Hues are drawn within
# +-SceneStyle.hue_spread of the centre, wide enough that neighbouring classes overlap:
# colour narrows the class down but only the texture settles it.
_CLASS_HUE: dict[int, float] = {_STRIPED: 0.0, _CHECKERED: 0.25, _DOTTED: 0.5, _SMOOTH: 0.75}
_MIN_IMAGE_SIZE = 16

Range = tuple[float, float]


@dataclass(frozen=True)
class SceneStyle:
    """The distribution one split's scenes are drawn from; the defaults are the training one.

    Ranges are ``(low, high)`` and drawn uniformly unless said otherwise.

    Attributes:
        object_count: Objects per scene, both ends included.
        radius: Object radius as a fraction of the image side, drawn log-uniformly so that
            small objects (4 px at 128 px) are as common as large ones.
        hue_spread: Object hues lie within this distance of their class's centre hue.
        hue_shift: Added to every class's centre hue (fraction of the colour wheel).
        object_value: Brightness of an object's primary colour.
        period: Texture period in pixels, not relative to the image: corruptions act in
            pixels too.
        novel_textures: Draw each class's texture family with geometry unseen in training.
        background_saturation: Saturation of the background's base colour.
        background_value: Brightness of the background's base colour.
        background_cells: Cells across the broad background variation, both ends included.
        background_contrast: Amplitude of the broad background variation.
        lighting: Mean illumination level of the scene, which also falls off linearly
            across it; ``None`` for the even lighting of training, which draws nothing.
    """

    object_count: tuple[int, int] = (4, 9)
    radius: Range = (0.03, 0.3)
    hue_spread: float = 0.2
    hue_shift: float = 0.0
    object_value: Range = (0.55, 0.95)
    period: Range = (4.0, 8.0)
    novel_textures: bool = False
    background_saturation: Range = (0.0, 0.3)
    background_value: Range = (0.3, 0.8)
    background_cells: tuple[int, int] = (2, 4)
    background_contrast: Range = (0.15, 0.35)
    lighting: Range | None = None


IN_DISTRIBUTION = SceneStyle()
# The natural-shift splits; every other split name draws from IN_DISTRIBUTION.
SHIFTED_STYLES: dict[str, SceneStyle] = {
    # Clean mIoU of the shipped demo model (benchmarks/natural_shift.py): val 92.5,
    # ood-easy 82.2, ood-hard 51.6.
    "ood-easy": SceneStyle(
        object_count=(7, 13), radius=(0.025, 0.2), hue_spread=0.26, period=(4.0, 9.0), lighting=(0.65, 1.3)
    ),
    "ood-hard": SceneStyle(
        # Half way to the neighbouring class's hue: colour now points the wrong way as often as not.
        hue_shift=0.125,
        period=(8.0, 13.0),
        novel_textures=True,
        background_saturation=(0.3, 0.6),
        background_cells=(3, 7),
        background_contrast=(0.3, 0.5),
    ),
}


def demo_seed(*parts: object) -> int:
    """A 64-bit seed for the demo generators, the same on every call, process and machine.

    ``parts`` (``"demo", split, index``) join as text, so an index given as a numpy integer
    seeds as the same Python integer does.
    """
    # Python's hash() is salted per process; blake2b is stable everywhere.
    key = "\x1f".join(str(part) for part in parts).encode()
    return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "little")


def _hsv(hue: float, saturation: float, value: float) -> np.ndarray:
    """One RGB colour as a ``(3, 1, 1)`` float32 array, ready to broadcast over pixels."""
    return np.asarray(colorsys.hsv_to_rgb(hue % 1.0, saturation, value), dtype=np.float32).reshape(3, 1, 1)


def pixel_centres(size: int) -> tuple[np.ndarray, np.ndarray]:
    """Coordinates of the pixel centres of a square picture, ready to broadcast.

    Shape:
        return: ys ``(S, 1)``, xs ``(1, S)``, float32.
    """
    coordinates = np.arange(size, dtype=np.float32) + np.float32(0.5)
    return coordinates[:, None], coordinates[None, :]


def rotate_offsets(dx: np.ndarray, dy: np.ndarray, angle: float) -> tuple[np.ndarray, np.ndarray]:
    """Offsets from a shape's centre in the shape's own frame, turned by ``angle`` radians.

    Shape:
        dx: ``(1, S)``; dy: ``(S, 1)``; return: u, v ``(S, S)``, float32.
    """
    cos_a, sin_a = np.float32(math.cos(angle)), np.float32(math.sin(angle))
    return dx * cos_a + dy * sin_a, dy * cos_a - dx * sin_a


def quantise(image: np.ndarray) -> np.ndarray:
    """Float colours, clipped to ``[0, 1]``, rounded half up to ``uint8`` levels.

    Shape:
        image: any; return: same, uint8.
    """
    return np.floor(np.clip(image, 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8)


def _value_noise(rng: np.random.Generator, cells: int, height: int, width: int) -> np.ndarray:
    """Smooth random field: a coarse random grid, interpolated with smoothstep weights.

    Shape:
        return: ``(3, height, width)``, float32 in ``[0, 1)``.
    """
    grid = rng.random((3, cells + 1, cells + 1), dtype=np.float32)

    def axis(n: int) -> tuple[np.ndarray, np.ndarray]:
        position = (np.arange(n, dtype=np.float32) + 0.5) * np.float32(cells / n)
        lower = np.minimum(np.floor(position).astype(np.int64), cells - 1)
        frac = position - lower.astype(np.float32)
        # Smoothstep hides the grid lines that plain bilinear weights would show.
        return lower, frac * frac * (3.0 - 2.0 * frac)

    y0, wy = axis(height)
    x0, wx = axis(width)
    wy, wx = wy[None, :, None], wx[None, None, :]
    top = grid[:, y0][:, :, x0] * (1 - wx) + grid[:, y0][:, :, x0 + 1] * wx
    bottom = grid[:, y0 + 1][:, :, x0] * (1 - wx) + grid[:, y0 + 1][:, :, x0 + 1] * wx
    return top * (1 - wy) + bottom * wy


def _shape_mask(
    rng: np.random.Generator, u: np.ndarray, v: np.ndarray, dx: np.ndarray, dy: np.ndarray, radius: float
) -> np.ndarray:
    """Pixels covered by a random shape centred at the origin of the local frame.

    Args:
        rng: The scene's generator.
        u: Rotated x offsets from the centre.
        v: Rotated y offsets from the centre.
        dx: Unrotated x offsets from the centre.
        dy: Unrotated y offsets from the centre.
        radius: Overall size of the shape in pixels.

    Shape:
        u, v: ``(H, W)``; dx: ``(1, W)``; dy: ``(H, 1)``; return: ``(H, W)``, bool.
    """
    kind = int(rng.integers(4))
    if kind == 0:  # disk
        return dx * dx + dy * dy <= radius * radius
    if kind == 1:  # ellipse
        a, b = radius, radius * float(rng.uniform(0.4, 0.9))
        return (u * u) / (a * a) + (v * v) / (b * b) <= 1.0
    if kind == 2:  # rectangle
        a, b = radius * float(rng.uniform(0.6, 1.0)), radius * float(rng.uniform(0.4, 1.0))
        return (np.abs(u) <= a) & (np.abs(v) <= b)
    # Triangle: vertices near three evenly spaced directions, jittered so shapes vary.
    angles = rng.uniform(0.0, 2.0 * math.pi) + np.arange(3) * (2.0 * math.pi / 3) + rng.uniform(-0.4, 0.4, 3)
    vertices = [(radius * math.cos(float(a)), radius * math.sin(float(a))) for a in angles]
    inside = np.ones(np.broadcast_shapes(dx.shape, dy.shape), dtype=bool)
    for (x1, y1), (x2, y2) in zip(vertices, vertices[1:] + vertices[:1], strict=True):
        # Vertices go counter-clockwise in (x, y), so the interior is left of each edge.
        inside &= (x2 - x1) * (dy - y1) - (y2 - y1) * (dx - x1) >= 0
    return inside


def _triangle_wave(x: np.ndarray) -> np.ndarray:
    """Triangle wave of period 1, from -1 at integers to 1 half way between them.

    Shape:
        x: any; return: same.
    """
    return np.abs(x - np.floor(x) - 0.5) * 4.0 - 1.0


def _texture(
    rng: np.random.Generator, class_id: int, u: np.ndarray, v: np.ndarray, radius: float, style: SceneStyle
) -> np.ndarray:
    """Mixing weight between an object's two colours: its class's texture family.

    Args:
        rng: The scene's generator.
        class_id: Object class, one of the non-background classes.
        u: Rotated x offsets from the object centre.
        v: Rotated y offsets from the object centre.
        radius: Object size in pixels, the length scale of the smooth gradient.
        style: The split's distribution, which sets the period and the geometry.

    Shape:
        u, v: ``(H, W)``; return: ``(H, W)``, float32 in ``[0, 1]``.
    """
    period = np.float32(rng.uniform(*style.period))
    phase = np.float32(rng.random())
    if style.novel_textures:
        return _novel_texture(rng, class_id, u, v, radius, period, phase)
    if class_id == _STRIPED:
        # Triangle wave sharpened into near-square stripes with soft edges.
        return np.clip(0.5 + 1.5 * _triangle_wave(u / period + phase), 0.0, 1.0)
    if class_id == _CHECKERED:
        cell = period / 2
        parity = np.floor(u / cell + phase) + np.floor(v / cell + phase)
        return (parity - 2.0 * np.floor(parity / 2.0)).astype(np.float32)
    if class_id == _DOTTED:
        spacing = period * np.float32(1.1)
        dot_radius = np.float32(rng.uniform(0.18, 0.28)) * spacing
        cu = u / spacing + phase
        cv = v / spacing + phase
        du = (cu - np.floor(cu) - 0.5) * spacing
        dv = (cv - np.floor(cv) - 0.5) * spacing
        return (du * du + dv * dv <= dot_radius * dot_radius).astype(np.float32)
    # Smooth: one linear ramp across the whole object, no fine structure at all.
    return np.clip(0.5 + u / np.float32(2.0 * radius), 0.0, 1.0)


def _novel_texture(
    rng: np.random.Generator,
    class_id: int,
    u: np.ndarray,
    v: np.ndarray,
    radius: float,
    period: np.float32,
    phase: np.float32,
) -> np.ndarray:
    """The same texture families as :func:`_texture`, in geometries training never shows.

    Stripes bend into zigzags, checks turn diagonal with oblong cells, dots become rings on
    a staggered lattice and smooth shading turns radial. Each is still unmistakably its
    family to a person, which keeps the shifted task well posed.

    Args:
        rng, class_id, u, v, radius: As for :func:`_texture`.
        period: Texture period in pixels.
        phase: Offset of the pattern, in periods.

    Shape:
        u, v: ``(H, W)``; return: ``(H, W)``, float32 in ``[0, 1]``.
    """
    if class_id == _STRIPED:
        wavelength = period * np.float32(rng.uniform(2.0, 4.0))
        amplitude = period * np.float32(rng.uniform(0.4, 0.8))
        cycle = (u + amplitude * _triangle_wave(v / wavelength)) / period + phase
        return np.clip(0.5 + 1.5 * _triangle_wave(cycle), 0.0, 1.0)
    if class_id == _CHECKERED:
        cell = period / 2
        long_cell = cell * np.float32(rng.uniform(1.5, 2.5))
        parity = np.floor((u + v) / cell + phase) + np.floor((u - v) / long_cell + phase)
        return (parity - 2.0 * np.floor(parity / 2.0)).astype(np.float32)
    if class_id == _DOTTED:
        spacing = period * np.float32(1.1)
        outer = np.float32(rng.uniform(0.3, 0.4)) * spacing
        inner = outer * np.float32(0.55)
        cv = v / spacing + phase
        row = np.floor(cv)
        # Every other row shifts by half a spacing: a staggered, near-hexagonal lattice.
        cu = u / spacing + phase + 0.5 * (row - 2.0 * np.floor(row / 2.0))
        du = (cu - np.floor(cu) - 0.5) * spacing
        dv = (cv - row - 0.5) * spacing
        distance2 = du * du + dv * dv
        return ((distance2 <= outer * outer) & (distance2 >= inner * inner)).astype(np.float32)
    # Smooth: shading from the centre outwards, still without fine structure.
    return np.clip((u * u + v * v) / np.float32(radius * radius), 0.0, 1.0)


def _lighting(rng: np.random.Generator, level: Range, ys: np.ndarray, xs: np.ndarray, size: int) -> np.ndarray:
    """Illumination of the scene: a mean level that falls off linearly towards one side.

    Shape:
        ys: ``(S, 1)``; xs: ``(1, S)``; return: ``(S, S)``, float32.
    """
    mean = np.float32(rng.uniform(*level))
    direction = rng.uniform(0.0, 2.0 * math.pi)
    falloff = rng.uniform(0.2, 0.6)
    slope_x, slope_y = np.float32(falloff * math.cos(direction)), np.float32(falloff * math.sin(direction))
    return mean * (1.0 + slope_x * (xs / np.float32(size) - 0.5) + slope_y * (ys / np.float32(size) - 0.5))


@dataclass(frozen=True)
class Scene:
    """One generated scene: its pixels and which object each pixel shows.

    Attributes:
        pixels: The RGB image.
        labels: Class id per pixel, 0 for background.
        objects: Per pixel, the 1-based drawing-order index of the object it shows; 0 for
            background. Later objects occlude earlier ones.
        object_classes: Class id of every drawn object, in drawing order (hidden ones too).

    Shape:
        pixels: ``(3, S, S)`` uint8; labels, objects: ``(S, S)`` uint8;
        object_classes: ``(N,)`` uint8.
    """

    pixels: np.ndarray
    labels: np.ndarray
    objects: np.ndarray
    object_classes: np.ndarray

    def instances(self) -> InstanceTarget:
        """The visible part of every object that shows at all, in drawing order; none is crowd.

        Painting the masks in order over a background of zeros gives ``labels`` back.
        """
        shown = self._shown_objects()
        masks = self.objects[None] == (shown + 1).astype(self.objects.dtype)[:, None, None]
        return InstanceTarget.from_masks(torch.from_numpy(masks), torch.from_numpy(self.object_classes[shown]))

    def panoptic(self) -> PanopticTarget:
        """Every visible object as a thing segment, the visible background as one stuff segment.

        A thing's segment id is its 1-based drawing-order index (as in ``objects``), so its
        pixels are exactly its instance mask; the background's id is one past the last
        object's. Segments are listed things first, in drawing order. No pixel is void and no
        segment is crowd; each pixel's segment has the pixel's class in ``labels``.

        Shape:
            segments: ``(S, S)``, int64; ids, labels, iscrowd: ``(number of segments,)``.
        """
        shown = self._shown_objects()
        ids, labels = (shown + 1).astype(np.int64), self.object_classes[shown].astype(np.int64)
        background = self.objects == 0
        segments = self.objects.astype(np.int64)
        if background.any():
            background_id = len(self.object_classes) + 1
            segments[background] = background_id
            ids, labels = np.append(ids, background_id), np.append(labels, BACKGROUND)
        return PanopticTarget(
            segments=torch.from_numpy(segments),
            ids=torch.from_numpy(ids),
            labels=torch.from_numpy(labels),
            iscrowd=torch.zeros(len(ids), dtype=torch.bool),
        )

    def _shown_objects(self) -> np.ndarray:
        """0-based drawing-order indices of the objects that cover at least one pixel, ascending."""
        pixel_counts = np.bincount(self.objects.ravel(), minlength=len(self.object_classes) + 1)
        return np.flatnonzero(pixel_counts[1:])


def generate_scene(split: str, index: int, image_size: int = 128) -> Scene:
    """Draw one demo scene, a pure function of its arguments.

    Args:
        split: Dataset split; different splits draw different scenes.
        index: Scene index within the split.
        image_size: Side of the square image in pixels.

    Returns:
        The RGB image, its per-pixel class ids and the object shown at each pixel.

    Shape:
        return: image ``(3, image_size, image_size)``; label and object maps
        ``(image_size, image_size)``.
    """
    rng = np.random.Generator(np.random.PCG64(demo_seed("demo", split, index)))
    style = SHIFTED_STYLES.get(split, IN_DISTRIBUTION)
    size = image_size

    # Background: a base colour (desaturated in training), broad light/colour variation
    # and a little grain, so that "no object" is not the same as "flat".
    base = _hsv(
        float(rng.random()),
        float(rng.uniform(*style.background_saturation)),
        float(rng.uniform(*style.background_value)),
    )
    broad_cells = int(rng.integers(style.background_cells[0], style.background_cells[1] + 1))
    broad = _value_noise(rng, broad_cells, size, size)
    detail = _value_noise(rng, max(2, size // 12), size, size)
    grain = rng.random((1, size, size), dtype=np.float32)
    image = (
        base
        + np.float32(rng.uniform(*style.background_contrast)) * (broad - 0.5)
        + np.float32(rng.uniform(0.03, 0.1)) * (detail - 0.5)
        + np.float32(0.04) * (grain - 0.5)
    )
    objects = np.zeros((size, size), dtype=np.uint8)
    object_classes: list[int] = []

    ys, xs = pixel_centres(size)
    min_objects, max_objects = style.object_count
    min_radius, max_radius = style.radius
    for number in range(1, int(rng.integers(min_objects, max_objects + 1)) + 1):
        class_id = int(rng.integers(1, len(CLASS_NAMES)))
        radius = size * math.exp(rng.uniform(math.log(min_radius), math.log(max_radius)))
        dx = xs - np.float32(rng.uniform(0.0, size))
        dy = ys - np.float32(rng.uniform(0.0, size))
        angle = rng.uniform(0.0, math.pi)
        u, v = rotate_offsets(dx, dy, angle)
        covered = _shape_mask(rng, u, v, dx, dy, radius)

        hue = _CLASS_HUE[class_id] + style.hue_shift + float(rng.uniform(-style.hue_spread, style.hue_spread))
        value = float(rng.uniform(*style.object_value))
        primary = _hsv(hue, float(rng.uniform(0.5, 1.0)), value)
        # Secondary colour: same hue, clearly darker, so the texture is a luminance
        # pattern of fixed-ish contrast that strong noise can bury.
        secondary = _hsv(hue, float(rng.uniform(0.4, 1.0)), value * float(rng.uniform(0.35, 0.6)))
        weight = _texture(rng, class_id, u, v, radius, style)
        painted = primary + (secondary - primary) * weight
        # Later objects occlude earlier ones, in pixels and in labels alike.
        image = np.where(covered, painted, image)
        objects[covered] = number
        object_classes.append(class_id)

    if style.lighting is not None:
        image = image * _lighting(rng, style.lighting, ys, xs, size)
    pixels = quantise(image)
    # Class of each object index; index 0, background, is class 0.
    class_of_object = np.asarray([0, *object_classes], dtype=np.uint8)
    return Scene(pixels, class_of_object[objects], objects, class_of_object[1:])


def split_size(split: str, size: int | None, defaults: Mapping[str, int], what: str, parameter: str) -> int:
    """How many samples a demo dataset of ``split`` holds: ``size``, or the split's default.

    Args:
        split: The split asked for.
        size: The number asked for, ``None`` for the default.
        defaults: Each split's default number; its keys are the splits there are.
        what: The dataset in words, for messages (``"demo video"``).
        parameter: The name of the dataset's argument that ``size`` is, for messages.

    Raises:
        ValueError: On an unknown split or a negative size.
    """
    if split not in defaults:
        raise ValueError(f"unknown {what} split {split!r}; expected one of {sorted(defaults)}")
    if size is not None and size < 0:
        raise ValueError(f"{parameter} must be non-negative, got {size}")
    return defaults[split] if size is None else size


def check_image_size(image_size: int) -> None:
    """Refuse an image too small for the demo's shapes and textures.

    Raises:
        ValueError: When ``image_size`` is below 16 pixels.
    """
    if image_size < _MIN_IMAGE_SIZE:
        raise ValueError(f"image_size must be at least {_MIN_IMAGE_SIZE}, got {image_size}")


class DemoDataset:
    """What the demo datasets share: a split, square images of one side, a name, and an identity.

    The identity is made of what decides the content, which a subclass declares: the
    generator and its version (:attr:`_generator`), the settings (:attr:`_settings`, its
    constructor's arguments, as its ``repr`` shows them) and any fixed size they do not say
    (:attr:`_fixed_sizes`); :meth:`fingerprint` joins the three.

    Args:
        split: The split, already checked by the subclass (:func:`split_size`).
        image_size: Side of the square images in pixels, at least 16.
        prefix: The dataset's name is ``<prefix>-<split>``.

    Raises:
        ValueError: When ``image_size`` is below 16 pixels.
    """

    ignore_index: int = DEFAULT_IGNORE_INDEX
    #: The fingerprint's first part: which generator, which version (``demo-avs:v1``).
    _generator: ClassVar[str]
    #: The constructor's arguments that decide the content, in its order; attributes of the same names.
    _settings: ClassVar[tuple[str, ...]]
    #: Sizes that decide the content without being arguments.
    _fixed_sizes: ClassVar[Mapping[str, int]] = {}

    def __init__(self, split: str, image_size: int, prefix: str) -> None:
        check_image_size(image_size)
        self.split = split
        self.image_size = image_size
        self.name = f"{prefix}-{split}"

    def _generator_version(self) -> str:
        """:attr:`_generator`, unless what generates the content depends on the settings."""
        return self._generator

    def fingerprint(self) -> str:
        """Identify the content: generator and version, settings, fixed sizes (``key=value``, ``:``-joined)."""
        fields = {**{key: getattr(self, key) for key in self._settings}, **self._fixed_sizes}
        return ":".join([self._generator_version(), *(f"{key}={value}" for key, value in fields.items())])

    def __repr__(self) -> str:
        settings = ", ".join(f"{key}={getattr(self, key)!r}" for key in self._settings)
        return f"{type(self).__name__}({settings})"


_Drawn = TypeVar("_Drawn")


class LastDrawn(Generic[_Drawn]):
    """What ``draw`` gives for an index (a scene, a clip), the last one kept until another index
    is asked for: the samples of one scene or clip (its expressions) come one after another.

    Args:
        draw: Draws the item of an index; a pure function of it (module-level or a bound
            method, so that a dataset holding it still pickles for loader processes).
    """

    def __init__(self, draw: Callable[[int], _Drawn]) -> None:
        self._draw = draw
        self._last: tuple[int, _Drawn] | None = None

    def __call__(self, index: int) -> _Drawn:
        if self._last is None or self._last[0] != index:
            self._last = (index, self._draw(index))
        return self._last[1]


class DemoScenes(DemoDataset):
    """Procedurally generated textured-shape scenes; implements ``SegmentationDataset``.

    Every sample carries three targets: class ids per pixel, the visible part of each object
    as an instance, labelled with its class id (so label ``k`` is ``class_names[k]`` and the
    ``k``-th of :attr:`categories`), and the panoptic segmentation of :meth:`Scene.panoptic`:
    each object a thing segment, the background (class 0, which has no category and is the
    only class of :data:`STUFF_CLASSES`) one stuff segment.

    Args:
        split: ``"train"`` (512 scenes by default), ``"val"``, or one of the natural-shift
            splits ``"ood-easy"`` and ``"ood-hard"`` (64 scenes each by default).
        size: Number of scenes; defaults per split as above.
        image_size: Side of the square images in pixels, at least 16.

    Raises:
        ValueError: On an unknown split, a negative size or too small an image size.
    """

    class_names: tuple[str, ...] = CLASS_NAMES
    #: COCO category dicts of the object classes in id order (``isthing`` 1), e.g. for ``CocoMAP``.
    categories: tuple[dict[str, Any], ...] = CATEGORIES
    _generator = f"demo-scenes:v{GENERATOR_VERSION}"
    _settings = ("split", "size", "image_size")

    def __init__(self, split: str = "val", size: int | None = None, image_size: int = 128) -> None:
        self.size = split_size(split, size, DEFAULT_SIZES, "demo", "size")
        super().__init__(split, image_size, "demo")

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> Sample:
        """Generate scene ``index``; negative indices count from the end.

        Raises:
            IndexError: When ``index`` is out of range, which also ends plain iteration.
        """
        index = sample_position(index, self.size, self.name)
        scene = generate_scene(self.split, index, self.image_size)
        return Sample(
            sample_id=f"demo/{self.split}/{index:05d}",
            image=torch.from_numpy(scene.pixels),
            target=SemanticTarget(mask=torch.from_numpy(scene.labels.astype(np.int64))),
            instances=scene.instances(),
            panoptic=scene.panoptic(),
        )

    def _generator_version(self) -> str:
        # Only the shifted splits name SHIFT_VERSION: committed baselines store the others' form.
        return f"{self._generator}.{SHIFT_VERSION}" if self.split in SHIFTED_STYLES else self._generator


def demo_dataset(split: str = "val", size: int | None = None) -> DemoScenes:
    """Build the demo dataset (:class:`DemoScenes`); the entry point suites name as ``...data.demo:demo_dataset``."""
    return DemoScenes(split=split, size=size)
