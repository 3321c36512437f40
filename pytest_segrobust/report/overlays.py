"""The images that lost most under a corruption, with predictions and ground truth side by side.

For one cell (a model, a corruption, a severity) the first images of the dataset are run
clean and corrupted, one at a time, exactly as the suite runs them (same collation, same
per-image seed, same output checks), and each is scored with the suite's headline metric on
its own. The images whose score fell most are drawn as a row each: clean image, clean
prediction, corrupted image, corrupted prediction, ground truth (and, for a geometric
corruption, the ground truth moved with the image).

Predictions and targets are shown through a *class view*: a class id per pixel. It is
registered per type, as the corruption kernels are (``@class_maps.register`` for a batch-level
value, ``@class_map.register`` for one image's prediction): semantic masks as they are,
instances painted by class (highest score on top), panoptic segments by their class. A type
without a view leaves its suite without pictures, and the report says why.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import singledispatch
from typing import Any

import torch
from PIL import Image as PILImage
from PIL import ImageDraw

from pytest_segrobust.corruptions import Corruption
from pytest_segrobust.corruptions.functional import to_uint8
from pytest_segrobust.data.base import SegmentationDataset
from pytest_segrobust.metrics import METRICS, MetricContext
from pytest_segrobust.models.base import InstancePredictions, PanopticPredictions, model_device
from pytest_segrobust.report.gallery import REPORT_TILE, report_font
from pytest_segrobust.seeding import sample_seed
from pytest_segrobust.tasks import get_task
from pytest_segrobust.types import (
    Batch,
    Expressions,
    Image,
    InstanceMasks,
    PanopticMap,
    ReferringMask,
    SampleIndex,
    SemanticMask,
    field_of,
)

# A pixel without a class in a view: ignored, void, or covered by no shown instance.
NOTHING = -1
# Instances at least this confident are painted; weaker ones would bury the picture.
SHOWN_SCORE = 0.5
# Images looked at per cell, and rows drawn: enough to find a telling one, cheap to run.
CONSIDERED = 16
SHOWN = 3
# How much of a pixel's colour is the class's in an overlay.
OPACITY = 0.7
# Small images are enlarged to tiles this wide (longest side), larger ones shown at their size up to
# the ``tile`` of :func:`render_losses`: enlarging further adds pixels to draw and store, not detail.
SMALLEST_TILE = 128
_BACKGROUND = (255, 255, 255)
_INK = (20, 20, 20)


# -- class views ---------------------------------------------------------------------------


class NoClassView(TypeError):
    """A task's predictions or targets have no class view, so its images cannot be drawn."""


@singledispatch
def class_maps(value: Any) -> list[torch.Tensor]:
    """A class id per pixel for each image of a batch-level value (predictions or a target field).

    Shape:
        return: ``B`` tensors of ``(H, W)``, int64, on the CPU; :data:`NOTHING` where no class is shown.

    Raises:
        NoClassView: for a type without a registered view.
    """
    raise NoClassView(
        f"{type(value).__name__} has no class view to draw; register one with "
        "@pytest_segrobust.report.overlays.class_maps.register"
    )


@singledispatch
def class_map(value: Any) -> torch.Tensor:
    """A class id per pixel for one image's prediction (an element of a list of predictions).

    Raises:
        NoClassView: for a type without a registered view.
    """
    raise NoClassView(
        f"{type(value).__name__} has no class view to draw; register one with "
        "@pytest_segrobust.report.overlays.class_map.register"
    )


@class_maps.register
def _(value: torch.Tensor) -> list[torch.Tensor]:
    return [row.detach().to("cpu", torch.int64) for row in value]


@class_maps.register(list)
@class_maps.register(tuple)
def _(value: Sequence[Any]) -> list[torch.Tensor]:
    return [class_map(item) for item in value]


@class_maps.register
def _(value: SemanticMask) -> list[torch.Tensor]:
    data = value.data.detach().to("cpu", torch.int64)
    return list(torch.where(data == value.ignore_index, NOTHING, data))


@class_maps.register
def _(value: InstanceMasks) -> list[torch.Tensor]:
    return [_paint(t.masks, t.labels, torch.zeros(len(t))) for t in value.targets]


@class_maps.register
def _(value: ReferringMask) -> list[torch.Tensor]:
    return list(value.data.detach().to("cpu", torch.int64))  # 1: the referred region (class "referent")


@class_maps.register
def _(value: PanopticMap) -> list[torch.Tensor]:
    return [_segment_classes(t.segments, t.ids, t.labels) for t in value.targets]


@class_map.register
def _(value: InstancePredictions) -> torch.Tensor:
    confident = value.scores >= SHOWN_SCORE
    return _paint(value.masks[confident], value.labels[confident], value.scores[confident])


@class_map.register
def _(value: PanopticPredictions) -> torch.Tensor:
    return _segment_classes(value.segments, value.ids, value.labels)


def _paint(masks: torch.Tensor, labels: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
    """Instances painted by class, the most confident last (on top)."""
    height, width = masks.shape[-2:]
    out = torch.full((height, width), NOTHING, dtype=torch.int64)
    for index in torch.argsort(scores.detach().cpu().float(), stable=True).tolist():
        out[masks[index].detach().cpu().bool()] = int(labels[index])
    return out


def _segment_classes(segments: torch.Tensor, ids: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    segments = segments.detach().cpu()
    out = torch.full(segments.shape, NOTHING, dtype=torch.int64)
    for segment, label in zip(ids.tolist(), labels.tolist()):
        out[segments == segment] = int(label)
    return out


def truth_maps(batch: Batch) -> list[torch.Tensor] | None:
    """The class view of the batch's ground truth: its first target field that has one."""
    for value in batch.values():
        if isinstance(value, (Image, SampleIndex)):
            continue
        try:
            return class_maps(value)
        except NoClassView:
            continue
    return None


# -- finding the images --------------------------------------------------------------------


@dataclass(frozen=True)
class ImageLoss:
    """One image clean and corrupted: its own scores, pictures and class views.

    Attributes:
        drop: How much worse the corrupted score is, in the metric's direction (positive: worse).

    Shape:
        clean_image, corrupted_image: ``(3, H, W)``, uint8; the maps: ``(H, W)``, int64.
    """

    sample_id: str
    clean_score: float
    corrupted_score: float
    drop: float
    clean_image: torch.Tensor
    corrupted_image: torch.Tensor
    clean_prediction: torch.Tensor
    corrupted_prediction: torch.Tensor
    truth: torch.Tensor | None
    moved_truth: torch.Tensor | None
    clean_text: str | None = None
    corrupted_text: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The numbers, without the pictures (and a referring sample's clean and perturbed expression)."""
        out: dict[str, Any] = {
            "sample_id": self.sample_id, "clean": self.clean_score, "corrupted": self.corrupted_score, "drop": self.drop
        }
        if self.clean_text is not None:
            out |= {"clean_text": self.clean_text, "corrupted_text": self.corrupted_text}
        return out


def worst_images(
    model: Any,
    dataset: SegmentationDataset,
    corruption: Corruption[Any],
    severity: int,
    *,
    task: str,
    metric: str,
    seed: int,
    considered: int = CONSIDERED,
    shown: int = SHOWN,
    limit: int | None = None,
) -> list[ImageLoss]:
    """Among the first ``considered`` images, the ``shown`` whose ``metric`` fell most, worst first.

    Each image is collated, corrupted (with the seed it gets in the suite) and predicted on
    its own, so the pictures are the ones the cell scored. Images whose score is undefined
    clean or corrupted (no object of a class to find) are passed over.

    Args:
        model: The suite's (adapted) model.
        dataset: The cell's dataset.
        corruption: The cell's corruption.
        severity: The cell's severity, 1..5.
        task: The suite's task.
        metric: The suite's headline metric, scored per image.
        seed: The suite's global seed.
        considered: How many of the first images to look at.
        shown: How many to return.
        limit: The suite's ``limit``: images beyond it were never evaluated.

    Raises:
        NoClassView: when the task's predictions have no class view.
    """
    chosen_task = get_task(task)
    kind = METRICS.get(metric)
    device = model_device(model)
    context = MetricContext.of(dataset, device)
    total = considered_count(dataset, limit, considered)
    found: list[ImageLoss] = []
    for position in range(total):
        sample = dataset[position]
        clean = chosen_task.collate([sample], [position], dataset, device)
        corrupted = corruption(clean, severity, [sample_seed(seed, sample.sample_id, corruption.name, severity)])
        scored = []
        for batch in (clean, corrupted):
            predictions = chosen_task.check_predictions(chosen_task.predict(model, batch), batch)
            scorer = kind(context)
            scorer.update(predictions, batch)
            scored.append((float(scorer.compute().score), predictions))
        (clean_score, clean_predictions), (corrupted_score, corrupted_predictions) = scored
        drop = clean_score - corrupted_score if kind.higher_is_better else corrupted_score - clean_score
        if not math.isfinite(drop):
            continue
        if len(found) == shown and drop <= found[-1].drop:
            continue
        truth, moved = truth_maps(clean), truth_maps(corrupted)
        found.append(
            ImageLoss(
                sample_id=sample.sample_id,
                clean_score=clean_score,
                corrupted_score=corrupted_score,
                drop=drop,
                clean_image=to_uint8(field_of(clean, Image).data[0]).cpu(),
                corrupted_image=to_uint8(field_of(corrupted, Image).data[0]).cpu(),
                clean_prediction=class_maps(clean_predictions)[0],
                corrupted_prediction=class_maps(corrupted_predictions)[0],
                truth=None if truth is None else truth[0],
                moved_truth=None if moved is None or not corruption.geometric else moved[0],
                clean_text=_text(clean),
                corrupted_text=_text(corrupted),
            )
        )
        found.sort(key=lambda loss: -loss.drop)  # stable: among equal drops, the earlier image first
        del found[shown:]
    return found


def _text(batch: Batch) -> str | None:
    """The first sample's referring expression, if the batch has expressions."""
    found = [f for f in batch.values() if isinstance(f, Expressions)]
    return found[0].texts[0] if found else None


def considered_count(dataset: SegmentationDataset, limit: int | None, considered: int = CONSIDERED) -> int:
    """How many images :func:`worst_images` looks at: the first ``considered`` the suite evaluated."""
    return min(considered, len(dataset), considered if limit is None else limit)


def describe_worst(
    model: Any,
    dataset: SegmentationDataset,
    corruption: Corruption[Any],
    severity: int,
    *,
    task: str,
    metric: str,
    label: str,
    seed: int,
    limit: int | None,
    row: str,
    gamma_r: float | None,
) -> tuple[dict[str, Any], PILImage.Image | None]:
    """One model's worst cell for the report: its images that lost most (JSON-safe) and their picture.

    A task whose predictions have no class view gets the numbers of no image and a note
    saying why, not an error.
    """
    info: dict[str, Any] = {
        "corruption": corruption.name,
        "severity": severity,
        "gamma_r": gamma_r,
        "considered": considered_count(dataset, limit),
        "images": [],
    }
    try:
        losses = worst_images(model, dataset, corruption, severity, task=task, metric=metric, seed=seed, limit=limit)
    except NoClassView as exc:
        info["note"] = f"no pictures: {exc}"
        return info, None
    info["images"] = [loss.to_json() for loss in losses]
    if not losses:
        info["note"] = f"no pictures: no image among the first {info['considered']} has a defined {label} clean and corrupted"
        return info, None
    title = f"{row}: {corruption.name} at severity {severity}, the images whose {label} fell most"
    return info, render_losses(losses, dataset.class_names, metric=label, title=title)


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
    the image (what the corrupted prediction is scored against). Each tile is the image's own
    size, enlarged to :data:`SMALLEST_TILE` and shrunk to ``tile`` pixels on its longest side; a
    legend of the classes shown closes the figure.
    """
    colours = palette(len(class_names))
    moved = any(loss.moved_truth is not None for loss in losses)
    titles = ["clean image", "clean prediction", "corrupted image", "corrupted prediction", "ground truth"]
    titles += ["ground truth, moved"] if moved else []
    full_h, full_w = losses[0].clean_image.shape[-2:]
    tile = min(tile, max(SMALLEST_TILE, int(full_h), int(full_w)))
    box_w, box_h = _fit(full_w, full_h, tile)
    font = report_font(max(11, min(box_h, box_w) // 14))
    pad, line = 4, int(font.size * 1.3)
    label_width = max(int(font.getlength(text)) for loss in losses for text in _row_labels(loss, metric)) + 3 * pad
    grid_width = label_width + len(titles) * (box_w + pad)
    present = sorted({k for loss in losses for k in _classes(loss) if k < len(class_names)})
    legend = _legend_layout(present, class_names, font, grid_width)
    header = 2 * line + pad
    width = max(grid_width, int(font.getlength(title)) + 2 * pad) + pad
    height = header + len(losses) * (box_h + pad) + (len(legend) * line + pad if legend else 0) + pad
    canvas = PILImage.new("RGB", (width, height), _BACKGROUND)
    draw = ImageDraw.Draw(canvas)
    draw.text((pad, 2), title, fill=_INK, font=font)
    for column, name in enumerate(titles):
        draw.text((label_width + column * (box_w + pad) + 2, line + 2), name, fill=_INK, font=font)
    for row, loss in enumerate(losses):
        top = header + row * (box_h + pad)
        for index, text in enumerate(_row_labels(loss, metric)):
            draw.text((pad, top + index * line + 2), text, fill=_INK, font=font)
        for column, shown in enumerate(_tiles(loss, colours, moved)):
            image_h, image_w = loss.clean_image.shape[-2:]
            size = _fit(image_w, image_h, tile)
            if shown.size != size:
                # Class boundaries stay sharp when enlarged; a shrunk photo stays smooth.
                enlarged = size[0] > shown.size[0]
                shown = shown.resize(size, PILImage.Resampling.NEAREST if enlarged else PILImage.Resampling.LANCZOS)
            canvas.paste(shown, (label_width + column * (box_w + pad), top))
    top = header + len(losses) * (box_h + pad) + pad
    for entries in legend:
        x = pad
        for k in entries:
            draw.rectangle((x, top + 2, x + font.size, top + 2 + font.size), fill=colours[k], outline=_INK)
            draw.text((x + font.size + 4, top), class_names[k], fill=_INK, font=font)
            x += _legend_width(class_names[k], font)
        top += line
    return canvas


def _tiles(loss: ImageLoss, colours: Sequence[tuple[int, int, int]], moved: bool) -> list[PILImage.Image]:
    blank = torch.full(loss.clean_prediction.shape, NOTHING, dtype=torch.int64)
    tiles = [
        overlay(loss.clean_image, blank, colours),
        overlay(loss.clean_image, loss.clean_prediction, colours),
        overlay(loss.corrupted_image, blank, colours),
        overlay(loss.corrupted_image, loss.corrupted_prediction, colours),
        overlay(loss.clean_image, blank if loss.truth is None else loss.truth, colours),
    ]
    if moved:
        tiles.append(overlay(loss.corrupted_image, blank if loss.moved_truth is None else loss.moved_truth, colours))
    return tiles


def _fit(width: int, height: int, tile: int) -> tuple[int, int]:
    """``(width, height)`` scaled so that the longest side is ``tile``."""
    scale = tile / max(width, height)
    return max(1, round(width * scale)), max(1, round(height * scale))


def _classes(loss: ImageLoss) -> set[int]:
    maps = [loss.clean_prediction, loss.corrupted_prediction, *(m for m in (loss.truth, loss.moved_truth) if m is not None)]
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
