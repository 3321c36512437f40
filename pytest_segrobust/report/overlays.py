"""The images that lost most under a corruption, with predictions and ground truth side by side.

The images come measured (:class:`~pytest_segrobust.pictures.values.WorstImages`, found by
:func:`pytest_segrobust.engine.worst_images.describe_worst`): each row shows one image, clean image, clean
prediction, corrupted image, corrupted prediction, ground truth (and, for a geometric
corruption, the ground truth moved with the image). The report draws them and never runs a
model or a corruption.

Predictions and targets are shown through their *class view* (a class id per pixel,
:mod:`pytest_segrobust.pictures.views`, where a new type registers its own), painted in PASCAL VOC's
colours. A view with panels (a promptable image's prediction per prompt kind) gets a prediction
column per panel, each with the prompts the model was given drawn on it (a click as a dot, green
on the instance and red off it, ringed in its instance's colour; a box as a rectangle in that
colour) and the outline of the true mask each instance is scored against.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from PIL import Image as PILImage
from PIL import ImageDraw

from pytest_segrobust.core.prompts import FOREGROUND
from pytest_segrobust.pictures.values import ImageLoss, PromptMarks, WorstImages

# The class views were defined here; they are :mod:`pytest_segrobust.pictures.views`' now.
from pytest_segrobust.pictures.views import NOTHING, NoClassView, class_map, class_maps
from pytest_segrobust.report.gallery import REPORT_TILE, report_font

__all__ = [
    "NOTHING",
    "ImageLoss",
    "NoClassView",
    "class_map",
    "class_maps",
    "overlay",
    "palette",
    "render_losses",
    "render_worst",
]

# How much of a pixel's colour is the class's in an overlay.
OPACITY = 0.7
# Small images are enlarged to tiles this wide (longest side), larger ones shown at their size up to
# the ``tile`` of :func:`render_losses`: enlarging further adds pixels to draw and store, not detail.
SMALLEST_TILE = 128
_BACKGROUND = (255, 255, 255)
_INK = (20, 20, 20)
# A click's fill by its label: on the instance (foreground) or off it (background), as SAM's demos draw them.
_CLICK = {True: (40, 220, 60), False: (230, 40, 40)}
_PROMPTS_KEY = "clicks: green on the instance, red off it; rectangle: box; outline: true mask"


def render_worst(worst: WorstImages, row: str) -> PILImage.Image | None:
    """The picture of one model's worst cell, titled with its report row; ``None`` without images."""
    if not worst.images:
        return None
    label = worst.metric_label
    title = f"{row}: {worst.corruption} at severity {worst.severity}, the images whose {label} fell most"
    return render_losses(worst.images, worst.class_names, metric=label, title=title)


# -- drawing -------------------------------------------------------------------------------


def palette(count: int) -> list[tuple[int, int, int]]:
    """PASCAL VOC's colour map: class ``k`` gets the bits of ``k`` spread over R, G and B."""
    colours = []
    for k in range(count):
        r = g = b = 0
        value = k
        for shift in range(7, -1, -1):
            r |= (value & 1) << shift
            g |= ((value >> 1) & 1) << shift
            b |= ((value >> 2) & 1) << shift
            value >>= 3
        colours.append((r, g, b))
    return colours


def overlay(image: torch.Tensor, classes: torch.Tensor, colours: Sequence[tuple[int, int, int]]) -> PILImage.Image:
    """The image with each pixel's class colour blended in (pixels of no class left as they are).

    Shape:
        image: ``(3, H, W)``, uint8; classes: ``(H, W)``, int64.
    """
    pixels = image.permute(1, 2, 0).float()
    table = torch.tensor(colours, dtype=torch.float32) if colours else torch.zeros(0, 3)
    shown = (classes >= 0) & (classes < len(colours))
    painted = table[classes.clamp(0, max(len(colours) - 1, 0))] if len(colours) else pixels
    blended = torch.where(shown[..., None], (1 - OPACITY) * pixels + OPACITY * painted, pixels)
    return PILImage.fromarray(blended.round().clamp(0, 255).to(torch.uint8).numpy())


def render_losses(
    losses: Sequence[ImageLoss],
    class_names: Sequence[str],
    *,
    metric: str,
    title: str,
    tile: int = REPORT_TILE,
) -> PILImage.Image:
    """One row per image: clean image | clean prediction | corrupted image | corrupted prediction | ground truth.

    Rows whose corruption moved the ground truth get a last tile, the ground truth moved with
    the image (what the corrupted prediction is scored against). A view with panels gets a
    prediction column per panel, with its prompts and the true outlines drawn. Each tile is the
    image's own size, enlarged to :data:`SMALLEST_TILE` and shrunk to ``tile`` pixels on its
    longest side; a legend of the classes shown (and of the prompts' marks) closes the figure.
    """
    colours = palette(len(class_names))
    moved = any(loss.moved_truth is not None for loss in losses)
    panels = losses[0].panels
    prompted = any(loss.clean_prompts or loss.corrupted_prompts for loss in losses)
    titles = ["clean image", *_prediction_titles("clean", panels), "corrupted image", *_prediction_titles("corrupted", panels)]
    titles += ["ground truth"] + (["ground truth, moved"] if moved else [])
    full_h, full_w = losses[0].clean_image.shape[-2:]
    tile = min(tile, max(SMALLEST_TILE, int(full_h), int(full_w)))
    box_w, box_h = _fit(full_w, full_h, tile)
    font = report_font(max(11, min(box_h, box_w) // 14))
    pad, line = 4, int(font.size * 1.3)
    label_width = max(int(font.getlength(text)) for loss in losses for text in _row_labels(loss, metric)) + 3 * pad
    grid_width = label_width + len(titles) * (box_w + pad)
    present = sorted({k for loss in losses for k in _classes(loss) if k < len(class_names)})
    legend = _legend_layout(present, class_names, font, grid_width)
    key = [_PROMPTS_KEY] if prompted else []
    header = 2 * line + pad
    width = max(grid_width, int(font.getlength(title)) + 2 * pad, *(int(font.getlength(k)) + 2 * pad for k in key)) + pad
    height = header + len(losses) * (box_h + pad) + ((len(legend) + len(key)) * line + pad if legend or key else 0) + pad
    canvas = PILImage.new("RGB", (width, height), _BACKGROUND)
    draw = ImageDraw.Draw(canvas)
    draw.text((pad, 2), title, fill=_INK, font=font)
    for column, name in enumerate(titles):
        draw.text((label_width + column * (box_w + pad) + 2, line + 2), name, fill=_INK, font=font)
    for row, loss in enumerate(losses):
        top = header + row * (box_h + pad)
        for index, text in enumerate(_row_labels(loss, metric)):
            draw.text((pad, top + index * line + 2), text, fill=_INK, font=font)
        image_h, image_w = loss.clean_image.shape[-2:]
        size = _fit(image_w, image_h, tile)
        for column, (shown, marks, outline) in enumerate(_tiles(loss, colours, moved)):
            if shown.size != size:
                # Class boundaries stay sharp when enlarged; a shrunk photo stays smooth.
                enlarged = size[0] > shown.size[0]
                shown = shown.resize(size, PILImage.Resampling.NEAREST if enlarged else PILImage.Resampling.LANCZOS)
            if outline is not None:
                shown = _outlined(shown, outline, colours)
            if marks is not None:
                _draw_marks(shown, marks, colours, scale=size[0] / int(image_w))
            canvas.paste(shown, (label_width + column * (box_w + pad), top))
    top = header + len(losses) * (box_h + pad) + pad
    for entries in legend:
        x = pad
        for k in entries:
            draw.rectangle((x, top + 2, x + font.size, top + 2 + font.size), fill=colours[k], outline=_INK)
            draw.text((x + font.size + 4, top), class_names[k], fill=_INK, font=font)
            x += _legend_width(class_names[k], font)
        top += line
    for text in key:
        draw.text((pad, top), text, fill=_INK, font=font)
    return canvas


def _prediction_titles(state: str, panels: Sequence[str]) -> list[str]:
    return [f"{state}, {panel}" for panel in panels] if panels else [f"{state} prediction"]


_Tile = tuple[PILImage.Image, PromptMarks | None, torch.Tensor | None]


def _tiles(loss: ImageLoss, colours: Sequence[tuple[int, int, int]], moved: bool) -> list[_Tile]:
    """Each tile of a row, with the prompts and the true outline drawn on it (``None``: nothing)."""
    blank = torch.full(tuple(loss.clean_image.shape[-2:]), NOTHING, dtype=torch.int64)
    moved_truth = loss.truth if loss.moved_truth is None else loss.moved_truth

    def predictions(image: torch.Tensor, clean: bool) -> list[_Tile]:
        prompts = loss.clean_prompts if clean else loss.corrupted_prompts
        truth = loss.truth if clean else moved_truth
        return [
            (overlay(image, classes, colours), prompts[i] if prompts else None, truth if prompts else None)
            for i, classes in enumerate(loss.predictions(clean))
        ]

    tiles: list[_Tile] = [
        (overlay(loss.clean_image, blank, colours), None, None),
        *predictions(loss.clean_image, True),
        (overlay(loss.corrupted_image, blank, colours), None, None),
        *predictions(loss.corrupted_image, False),
        (overlay(loss.clean_image, blank if loss.truth is None else loss.truth, colours), None, None),
    ]
    if moved:
        tiles.append((overlay(loss.corrupted_image, blank if loss.moved_truth is None else loss.moved_truth, colours), None, None))
    return tiles


def _outlined(tile: PILImage.Image, classes: torch.Tensor, colours: Sequence[tuple[int, int, int]]) -> PILImage.Image:
    """The tile with the boundary pixels of each class region in its colour, at the tile's size (nearest-neighbour)."""
    if tuple(classes.shape) != (tile.size[1], tile.size[0]):
        ys = (torch.arange(tile.size[1]) * classes.shape[0] // tile.size[1]).clamp(max=classes.shape[0] - 1)
        xs = (torch.arange(tile.size[0]) * classes.shape[1] // tile.size[0]).clamp(max=classes.shape[1] - 1)
        classes = classes[ys][:, xs]
    padded = torch.nn.functional.pad(classes[None, None].float(), (1, 1, 1, 1), mode="replicate")[0, 0]
    edge = torch.zeros(classes.shape, dtype=torch.bool)
    for dy, dx in ((0, 1), (2, 1), (1, 0), (1, 2)):
        edge |= padded[dy : dy + classes.shape[0], dx : dx + classes.shape[1]] != classes.float()
    edge &= (classes >= 0) & (classes < len(colours))
    if not colours or not bool(edge.any()):
        return tile
    table = torch.tensor(colours, dtype=torch.uint8)
    pixels = torch.from_numpy(np.array(tile.convert("RGB")))
    pixels[edge] = table[classes[edge]]
    return PILImage.fromarray(pixels.numpy())


def _draw_marks(tile: PILImage.Image, marks: PromptMarks, colours: Sequence[tuple[int, int, int]], *, scale: float) -> None:
    """The prompts on a tile ``scale`` times the image's size: boxes, then clicks on top."""
    draw = ImageDraw.Draw(tile)

    def colour(owner: int) -> tuple[int, int, int]:
        return colours[owner] if 0 <= owner < len(colours) else _INK

    for box, owner in zip(marks.boxes.tolist(), marks.box_owners.tolist()):
        x0, y0, x1, y1 = (value * scale for value in box)  # exclusive ends: the last pixel is x1 - 1
        draw.rectangle((x0, y0, max(x0, x1 - 1), max(y0, y1 - 1)), outline=colour(int(owner)), width=2)
    radius = max(2.0, tile.size[0] / 40)
    for (x, y), label, owner in zip(marks.points.tolist(), marks.labels.tolist(), marks.point_owners.tolist()):
        # A pixel's centre is at its integer coordinate: at (x + 0.5) * scale on the tile.
        cx, cy = (x + 0.5) * scale, (y + 0.5) * scale
        draw.ellipse(
            (cx - radius, cy - radius, cx + radius, cy + radius),
            fill=_CLICK[int(label) == FOREGROUND],
            outline=colour(int(owner)),
            width=max(1, round(radius / 2)),
        )


def _fit(width: int, height: int, tile: int) -> tuple[int, int]:
    """``(width, height)`` scaled so that the longest side is ``tile``."""
    scale = tile / max(width, height)
    return max(1, round(width * scale)), max(1, round(height * scale))


def _classes(loss: ImageLoss) -> set[int]:
    maps = [*loss.predictions(True), *loss.predictions(False), *(m for m in (loss.truth, loss.moved_truth) if m is not None)]
    return {int(k) for m in maps for k in m.unique().tolist() if k >= 0}


def _row_labels(loss: ImageLoss, metric: str) -> list[str]:
    return [loss.sample_id, f"{metric} {loss.clean_score:.1f} -> {loss.corrupted_score:.1f}"]


def _legend_width(name: str, font: Any) -> int:
    return int(font.size) + 4 + int(font.getlength(name)) + 16


def _legend_layout(present: Sequence[int], class_names: Sequence[str], font: Any, width: int) -> list[list[int]]:
    """The legend's entries, wrapped into rows no wider than ``width``."""
    rows: list[list[int]] = []
    used = width
    for k in present:
        needed = _legend_width(class_names[k], font)
        if not rows or used + needed > width:
            rows.append([])
            used = 4
        rows[-1].append(k)
        used += needed
    return rows
