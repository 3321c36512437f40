"""Video object segmentation: region similarity J, boundary accuracy F and J&F (DAVIS 2017).

Definitions, as in the DAVIS 2017 evaluation (github.com/davisvideochallenge/davis2017-evaluation,
``davis2017/metrics.py``, ``utils.py``, ``evaluation.py``):

* Each object of a clip (``VideoMasks.object_ids``) is scored on its own, frame by frame, with
  the binary masks ``truth == id`` and ``prediction == id``.
* **J** is the IoU of the two masks; 1 when both are empty (an object that left the frame and
  was not predicted scores 1).
* **F** compares 1-pixel boundary maps: a pixel is boundary where it differs from its east,
  south or south-east neighbour inside the frame (:func:`boundary_maps`; no thinning). A
  boundary pixel of one map is matched when the other map has a boundary pixel within a disk
  of radius ``ceil(0.008 * sqrt(H**2 + W**2))`` (:func:`boundary_radius`, by dilation).
  Precision is the matched share of the predicted boundary, recall that of the true
  boundary, F their harmonic mean (0 when both are 0). Empty boundaries: none predicted and
  some true gives precision 1, recall 0; some predicted and none true gives precision 0,
  recall 1; none of either gives 1 and 1 (so F is 1).
* Pixels marked ``ignore_index`` are not scored: they count in neither intersection nor union
  of J, and both masks are cleared there before their boundaries are drawn (the reference's
  ``void_pixels``; its semi-supervised script passes none, and DAVIS masks have none).
* Frames: only frames that are ``annotated`` are scored, in the order of the clip's
  positions. Under the semi-supervised protocol (:attr:`VideoObjectMetric.drops_ends`, the
  registered ``vos_j``, ``vos_f`` and ``vos_jf``) the first and the last annotated frame of each clip are
  not scored either: the first is the mask the model was given, and the reference drops the
  last too. ``vos_jf_all`` scores every annotated frame.
* Per object, over its scored frames: the **Mean**, the **Recall** (share of frames scoring
  above 0.5) and the **Decay**: the frames are cut into 4 bins at indices
  ``round(linspace(0, n - 1, 5))`` (halves up), bin ``i`` running from edge ``i`` to edge
  ``i + 1`` inclusive, and the Decay is the mean of the first bin minus that of the last.
  The reference casts the edges to uint8, which wraps past 256 frames; here they are plain
  integers (:func:`decay_edges`).
* Over a dataset every number is the mean over objects (each clip's objects count once; an
  object with no scored frame is left out), in percent; J&F is the mean of J-Mean and F-Mean.

Statistics: a clip's row (:meth:`VideoObjectMetric.image_statistics`) holds, for each measure,
the sums over its objects of their Mean, Recall and Decay, and the number of its objects. Rows
add up: summed over any multiset of clips (a bootstrap resample) they give that multiset's
numbers (:meth:`VideoObjectMetric.score_of`), so the statistical gate resamples clips.

Scale: percent (0..100), as every other metric of the gate; the Decay may be negative.

Seen and unseen categories (YouTube-VOS's J and F of seen and unseen objects, and G their
mean) need a per-object flag that :class:`~pytest_segrobust.core.types.VideoMasks` does not carry
yet; a later step can add two groups of columns to the rows.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np
import torch

from pytest_segrobust.core.errors import ModelOutputError
from pytest_segrobust.core.types import Batch, VideoMasks, field_of
from pytest_segrobust.metrics.base import Metric, MetricContext, MetricResult, Reduction
from pytest_segrobust.metrics.registry import register_metric

BOUNDARY_RATIO = 0.008
RECALL_THRESHOLD = 0.5
DECAY_BINS = 4
# What one object's scored frames give, per measure: summed over a clip's objects in its row.
STATISTICS: tuple[str, ...] = ("mean", "recall", "decay")
# Object-mask pixels handled at once (bounds the memory of a long clip with many objects).
_PIXELS_AT_ONCE = 1 << 26
# Pixel looks of one step of :func:`_count_near_marked` (bounds its index memory).
_LOOKS_AT_ONCE = 1 << 22


def boundary_radius(height: int, width: int, ratio: float = BOUNDARY_RATIO) -> int:
    """Radius in pixels of the disk within which boundary pixels match: ``ceil(ratio * diagonal)``."""
    # The reference's np.ceil(ratio * np.linalg.norm(shape)): the norm is sqrt(h*h + w*w).
    return math.ceil(ratio * math.sqrt(height * height + width * width))


def boundary_maps(masks: torch.Tensor) -> torch.Tensor:
    """1-pixel boundaries of binary masks: where a pixel differs from its east, south or
    south-east neighbour (neighbours outside the frame do not count).

    Shape:
        masks: ``(N, H, W)``, bool; return: ``(N, H, W)``, bool.
    """
    bounds = torch.zeros_like(masks)
    bounds[:, :, :-1] |= masks[:, :, :-1] ^ masks[:, :, 1:]
    bounds[:, :-1, :] |= masks[:, :-1, :] ^ masks[:, 1:, :]
    bounds[:, :-1, :-1] |= masks[:, :-1, :-1] ^ masks[:, 1:, 1:]
    return bounds


def dilate_by_disk(maps: torch.Tensor, radius: int) -> torch.Tensor:
    """Where a set pixel lies within Euclidean distance ``radius`` (``dx**2 + dy**2 <= radius**2``).

    The disk is cut into rows: row ``dy`` is a run of half-width ``isqrt(radius**2 - dy**2)``,
    found for every pixel at once from prefix sums along the row (one per half-width: rows
    ``dy`` and ``-dy`` share theirs), then moved ``dy`` rows. The work is about
    ``3 * radius`` passes over the maps, not one per pixel of the disk.

    Shape:
        maps: ``(N, H, W)``, bool; return: ``(N, H, W)``, bool.
    """
    _, height, width = maps.shape
    # prefix[..., x] counts the set pixels left of column x: (N, H, W + 1).
    prefix = torch.nn.functional.pad(torch.cumsum(maps, dim=-1, dtype=torch.int32), (1, 0))
    dilated = torch.zeros_like(maps)
    reach = min(radius, height - 1)  # rows further away are outside the frame
    for distance in range(reach + 1):
        half = math.isqrt(radius * radius - distance * distance)
        # Padded so that padded[..., j] = prefix[..., clamp(j - half, 0, W)]: the run of pixel x,
        # columns x - half .. x + half, holds padded[x + 2 half + 1] - padded[x] set pixels.
        padded = torch.cat(
            [prefix[..., :1].expand(-1, -1, half), prefix, prefix[..., -1:].expand(-1, -1, half)], dim=-1
        )
        runs = (padded[..., 2 * half + 1 : 2 * half + 1 + width] - padded[..., :width]) > 0
        # Pixel (y, x) sees rows y + distance and y - distance.
        dilated[:, : height - distance] |= runs[:, distance:]
        if distance:
            dilated[:, distance:] |= runs[:, : height - distance]
    return dilated


def disk_offsets(radius: int) -> list[tuple[int, int]]:
    """The ``(dy, dx)`` with ``dx**2 + dy**2 <= radius**2``: skimage's ``disk(radius)``, as the reference dilates with."""
    return [
        (dy, dx)
        for dy in range(-radius, radius + 1)
        for dx in range(-radius, radius + 1)
        if dy * dy + dx * dx <= radius * radius
    ]


def count_near(
    marked: torch.Tensor, targets: torch.Tensor, radius: int, points: torch.Tensor | None = None
) -> torch.Tensor:
    """How many set pixels of each ``marked`` map lie within ``radius`` of a set pixel of its ``targets`` map.

    Two exact ways, whichever costs less: the targets dilated by the disk over the whole frame
    (:func:`dilate_by_disk`, about ``3 * radius`` passes over every pixel), or only the marked
    pixels looking at each offset of the disk (:func:`_count_near_marked`, one look per marked
    pixel and offset). Boundary maps are sparse, so the second usually wins; a ragged mask
    with boundary pixels everywhere takes the first.

    Args:
        points: ``marked.nonzero()``, where the caller has it already.

    Shape:
        marked, targets: ``(N, H, W)``, bool; return: ``(N,)``, int64.
    """
    points = marked.nonzero() if points is None else points
    looks = len(points) * len(disk_offsets(radius))
    if looks <= marked.numel() * 3 * radius:
        return _count_near_marked(points, targets, radius)
    return _count(marked & dilate_by_disk(targets, radius))


def _count(maps: torch.Tensor) -> torch.Tensor:
    """Set pixels of each map, ``(N, H, W)`` -> ``(N,)`` int64 (summed in int32: twice as fast on CPU)."""
    return maps.flatten(1).sum(dim=1, dtype=torch.int32).long()


def _count_near_marked(points: torch.Tensor, targets: torch.Tensor, radius: int) -> torch.Tensor:
    """:func:`count_near` from the marked pixels ``points`` (``(K, 3)``: map, row, column) and the disk's offsets.

    Shape:
        points: ``(K, 3)``, int64; targets: ``(N, H, W)``, bool; return: ``(N,)``, int64.
    """
    count, height, width = targets.shape
    wide = width + 2 * radius
    # Targets framed by ``radius`` empty pixels: every look at an offset stays inside, and outside is empty.
    framed = torch.nn.functional.pad(targets, (radius, radius, radius, radius)).flatten()
    offsets = torch.tensor(
        [dy * wide + dx for dy, dx in disk_offsets(radius)], dtype=torch.int64, device=targets.device
    )
    image, row, column = points.unbind(dim=1)
    starts = image * ((height + 2 * radius) * wide) + (row + radius) * wide + (column + radius)
    near = torch.zeros(len(starts), dtype=torch.bool, device=targets.device)
    step = max(1, _LOOKS_AT_ONCE // len(offsets))
    for start in range(0, len(starts), step):
        near[start : start + step] = framed[starts[start : start + step, None] + offsets].any(dim=1)
    return torch.bincount(image[near], minlength=count)


def object_indices(labels: torch.Tensor, objects: tuple[int, ...]) -> torch.Tensor:
    """``k + 1`` where a pixel holds ``objects[k]``, 0 where it holds none of them.

    Shape:
        labels: ``(n, H, W)``, integer; return: ``(n, H, W)``, int64.
    """
    labels = labels.long()  # a narrower type would wrap the ids: 300 == 44 in uint8
    indices = torch.zeros(labels.shape, dtype=torch.int64, device=labels.device)
    for index, object_id in enumerate(objects, start=1):
        indices.masked_fill_(labels == object_id, index)
    return indices


def object_region_counts(
    predicted: torch.Tensor, truth: torch.Tensor, scored: torch.Tensor, objects: int
) -> torch.Tensor:
    """Intersection and union of every object's masks in every frame, from one count of
    (frame, true index, predicted index) over the scored pixels (:func:`object_indices`).

    Shape:
        predicted, truth: ``(n, H, W)``, int64 indices ``0 .. objects``; scored: ``(n, H, W)``, bool;
        return: ``(objects, n, 2)``, int64.
    """
    frames, size = truth.shape[0], objects + 1
    frame = torch.arange(frames, device=truth.device).view(-1, 1, 1)
    # Unscored pixels go to one extra bin that is dropped.
    code = torch.where(scored, (frame * size + truth) * size + predicted, frames * size * size)
    counts = torch.bincount(code.flatten(), minlength=frames * size * size + 1)[:-1].view(frames, size, size)
    both = counts.diagonal(dim1=1, dim2=2)[:, 1:]  # (n, objects)
    true, predicted_sums = counts.sum(dim=2)[:, 1:], counts.sum(dim=1)[:, 1:]
    return torch.stack([both, true + predicted_sums - both], dim=-1).transpose(0, 1)


def boundary_counts(
    predicted: torch.Tensor, truth: torch.Tensor, scored: torch.Tensor | None, radius: int
) -> torch.Tensor:
    """Matched and total boundary pixels of each pair of masks (cleared where not scored; ``None``: all are).

    Columns: predicted boundary pixels near a true one, predicted boundary pixels, true
    boundary pixels near a predicted one, true boundary pixels.

    Shape:
        predicted, truth, scored: ``(N, H, W)``, bool; return: ``(N, 4)``, int64.
    """
    masks = torch.cat([predicted, truth]) if scored is None else torch.cat([predicted & scored, truth & scored])
    bounds = boundary_maps(masks)
    points = bounds.nonzero()
    totals = torch.bincount(points[:, 0], minlength=len(bounds))
    partners = torch.cat([bounds[len(truth) :], bounds[: len(truth)]])  # the truth's for a prediction, and back
    matched = count_near(bounds, partners, radius, points)
    return torch.stack(
        [matched[: len(truth)], totals[: len(truth)], matched[len(truth) :], totals[len(truth) :]], dim=1
    )


def region_similarity(counts: np.ndarray) -> np.ndarray:
    """J of intersection and union counts ``(..., 2)``: their ratio, 1 where the union is empty."""
    intersection, union = counts[..., 0].astype(np.float64), counts[..., 1].astype(np.float64)
    return np.where(union > 0, intersection / np.where(union > 0, union, 1.0), 1.0)


def boundary_accuracy(counts: np.ndarray) -> np.ndarray:
    """F of boundary counts ``(..., 4)`` (:func:`boundary_counts`), with the reference's empty cases.

    An empty boundary has precision (or recall) 1. The reference's one-sided cases follow:
    where only one map has boundary pixels, none of them can be matched, so its share is 0
    (none predicted, some true: precision 1, recall 0, and the other way round).
    """
    counts = counts.astype(np.float64)
    matched_predicted, predicted, matched_true, true = (counts[..., i] for i in range(4))
    with np.errstate(invalid="ignore", divide="ignore"):
        precision = np.where(predicted > 0, matched_predicted / np.where(predicted > 0, predicted, 1.0), 1.0)
        recall = np.where(true > 0, matched_true / np.where(true > 0, true, 1.0), 1.0)
        total = precision + recall
        return np.where(total > 0, 2 * precision * recall / np.where(total > 0, total, 1.0), 0.0)


def scored_frames(annotated: torch.Tensor, drops_ends: bool) -> torch.Tensor:
    """The frames of each clip that are scored: the annotated ones, less the first and the last
    of them where ``drops_ends`` (the semi-supervised protocol).

    Shape:
        annotated: ``(B, T)``, bool; return: ``(B, T)``, bool.
    """
    scored = annotated.clone()
    if drops_ends:
        rank = torch.cumsum(annotated.long(), dim=1)  # 1 at the first annotated frame
        scored &= (rank > 1) & (rank < rank[:, -1:])
    return scored


def decay_edges(frames: int) -> tuple[int, ...]:
    """The ``DECAY_BINS + 1`` bin edges over ``frames`` scored frames: ``round(i * (n - 1) / 4)``
    with halves up, the reference's ``round(linspace(1, n, 5) + 1e-10) - 1`` without its uint8 cast."""
    return tuple((i * (frames - 1) + DECAY_BINS // 2) // DECAY_BINS for i in range(DECAY_BINS + 1))


def object_statistics(values: np.ndarray) -> np.ndarray:
    """Mean, Recall and Decay of each object's per-frame values (fractions, not percent).

    Shape:
        values: ``(O, n)`` with ``n >= 1``; return: ``(O, len(STATISTICS))``, float64.
    """
    edges = decay_edges(values.shape[1])
    first, last = values[:, : edges[1] + 1], values[:, edges[DECAY_BINS - 1] :]
    mean = values.mean(axis=1)
    recall = (values > RECALL_THRESHOLD).mean(axis=1)
    return np.stack([mean, recall, first.mean(axis=1) - last.mean(axis=1)], axis=1)


def predicted_object_ids(predictions: Any, target: VideoMasks, name: str) -> torch.Tensor:
    """The predicted object ids of a batch of clips, checked, on the targets' device.

    Args:
        predictions: A tensor of ids, or :class:`~pytest_segrobust.core.types.VideoMasks` whose ``data`` is read.
        target: The batch's true masks.
        name: The metric's name, for messages.

    Shape:
        return: ``(B, T, H, W)``, those of ``target.data``.

    Raises:
        ModelOutputError: when the predictions are not integer ids of the targets' shape.
    """
    predicted = predictions.data if isinstance(predictions, VideoMasks) else predictions
    if (
        not isinstance(predicted, torch.Tensor)
        or predicted.is_floating_point()
        or predicted.is_complex()
        or predicted.shape != target.data.shape
    ):
        got = (
            f"{predicted.dtype} {tuple(predicted.shape)}"
            if isinstance(predicted, torch.Tensor)
            else type(predicted).__name__
        )
        raise ModelOutputError(f"{name}: expected integer object ids of shape {tuple(target.data.shape)}, got {got}")
    return predicted.to(target.data.device)


class ClipRowsMetric(Metric):
    """A metric whose state is a row of summed statistics per clip (``clips``), each row named by
    its clip, so that the gate resamples clips (an R-VOS clip's expressions are drawn together)."""

    chance_by_classes = False  # objects are scored against their own masks: all background scores 0
    clips: list[torch.Tensor]

    def __init__(self, context: MetricContext) -> None:
        super().__init__(context)
        self.add_state("clips", [], Reduction.CONCAT)
        self.keep_row_units()


class VideoObjectMetric(ClipRowsMetric):
    """What J, F and J&F share: a row of summed per-object statistics per clip.

    Subclasses set :attr:`measures`; the score is the mean of their Means.

    Attributes:
        measures: ``"J"``, ``"F"`` or both, in that order.
        drops_ends: Whether the first and last annotated frame of a clip go unscored (the
            semi-supervised protocol).
        boundary_ratio: The matching radius of F as a fraction of the frame's diagonal.
    """

    measures: ClassVar[tuple[str, ...]]
    drops_ends: ClassVar[bool] = True
    boundary_ratio: ClassVar[float] = BOUNDARY_RATIO
    accepts = (VideoMasks,)

    @classmethod
    def columns(cls) -> tuple[str, ...]:
        """The columns of a clip's row: each measure's summed statistics, then the object count."""
        return (*(f"{measure.lower()}_{statistic}" for measure in cls.measures for statistic in STATISTICS), "objects")

    @classmethod
    def details_of(cls, summed: np.ndarray) -> dict[str, np.ndarray]:
        """Every number in percent, by column name, from summed rows ``(..., len(columns))``;
        NaN where no object was scored."""
        objects = summed[..., -1]
        with np.errstate(invalid="ignore", divide="ignore"):
            return {name: 100.0 * summed[..., i] / objects for i, name in enumerate(cls.columns()[:-1])}

    @classmethod
    def score_of(cls, summed: np.ndarray) -> np.ndarray:
        """The mean of the measures' Means in percent, from summed rows ``(..., len(columns))``."""
        details = cls.details_of(summed)
        return sum(details[f"{measure.lower()}_mean"] for measure in cls.measures) / len(cls.measures)

    def update(self, predictions: Any, batch: Batch) -> None:
        """Add a batch of clips: a predicted object id per pixel and frame, ``(B, T, H, W)``
        (a tensor, or :class:`~pytest_segrobust.core.types.VideoMasks` whose ``data`` is read).

        Raises:
            ModelOutputError: when the predictions are not integer ids of the targets' shape.
        """
        target = field_of(batch, VideoMasks)
        predicted = predicted_object_ids(predictions, target, self.name)
        radius = boundary_radius(*target.size(), self.boundary_ratio)
        scored = scored_frames(target.annotated.to(torch.bool), self.drops_ends).cpu()
        rows = np.zeros((target.batch_size(), len(self.columns())), dtype=np.float64)
        for clip, objects in enumerate(target.object_ids):
            frames = scored[clip].nonzero().flatten().to(target.data.device)
            if not objects or len(frames) == 0:
                continue  # nothing of the clip is scored
            values = self._object_frame_values(
                predicted[clip, frames], target.data[clip, frames], objects, target.ignore_index, radius
            )
            statistics = [object_statistics(values[measure]) for measure in self.measures]
            rows[clip] = [*np.concatenate(statistics, axis=1).sum(axis=0), len(objects)]
        self.clips.append(torch.from_numpy(rows))
        self.add_row_units(batch)

    def _object_frame_values(
        self, predicted: torch.Tensor, truth: torch.Tensor, objects: tuple[int, ...], ignore_index: int, radius: int
    ) -> dict[str, np.ndarray]:
        """Each measure's value per object and scored frame, ``(O, n)``, of one clip's ``(n, H, W)`` maps."""
        counts: dict[str, list[torch.Tensor]] = {measure: [] for measure in self.measures}
        indices = torch.arange(1, len(objects) + 1, device=truth.device).view(-1, 1, 1, 1)
        step = max(1, _PIXELS_AT_ONCE // (len(objects) * truth[0].numel()))
        for start in range(0, truth.shape[0], step):
            part = slice(start, start + step)
            scored = truth[part] != ignore_index
            true_indices = object_indices(truth[part], objects)
            predicted_indices = object_indices(predicted[part], objects)
            if "J" in counts:
                counts["J"].append(object_region_counts(predicted_indices, true_indices, scored, len(objects)))
            if "F" in counts:
                # Unscored pixels belong to no object: both masks are cleared there.
                true_masks = (torch.where(scored, true_indices, 0).unsqueeze(0) == indices).flatten(0, 1)
                predicted_masks = (torch.where(scored, predicted_indices, 0).unsqueeze(0) == indices).flatten(0, 1)
                counts["F"].append(boundary_counts(predicted_masks, true_masks, None, radius).view(len(objects), -1, 4))
        values = {}
        for measure, parts in counts.items():
            joined = torch.cat(parts, dim=1).cpu().numpy()
            values[measure] = region_similarity(joined) if measure == "J" else boundary_accuracy(joined)
        return values

    def image_statistics(self) -> np.ndarray:
        """``(N, len(columns))``: per clip, the sums over its objects of each measure's Mean,
        Recall and Decay (fractions), and the number of its scored objects."""
        parts = [
            torch.as_tensor(part, dtype=torch.float64).reshape(-1, len(self.columns())).cpu() for part in self.clips
        ]
        return torch.cat(parts).numpy() if parts else np.zeros((0, len(self.columns())), dtype=np.float64)

    def compute(self) -> MetricResult:
        summed = self.image_statistics().sum(axis=0)
        details = {name: float(value) for name, value in self.details_of(summed).items()}
        score = float(self.score_of(summed))
        if len(self.measures) == 1:
            details.pop(f"{self.measures[0].lower()}_mean")  # it is the score
        return MetricResult(score, tuple(None for _ in self.context.class_names), details)


DETAIL_LABELS: dict[str, str] = {
    f"{measure.lower()}_{statistic}": f"{measure}-{statistic.capitalize()}"
    for measure in ("J", "F")
    for statistic in STATISTICS
}


@register_metric
class RegionSimilarity(VideoObjectMetric):
    """J-Mean: the IoU of each object's masks, averaged over its scored frames, then over objects (percent)."""

    name, label, measures = "vos_j", "J", ("J",)
    detail_labels = DETAIL_LABELS


@register_metric
class BoundaryAccuracy(VideoObjectMetric):
    """F-Mean: the boundary F-measure of each object, averaged over its scored frames, then over objects (percent)."""

    name, label, measures = "vos_f", "F", ("F",)
    detail_labels = DETAIL_LABELS


@register_metric
class RegionAndBoundary(VideoObjectMetric):
    """J&F-Mean: the mean of J-Mean and F-Mean (percent), the DAVIS 2017 semi-supervised headline."""

    name, label, measures = "vos_jf", "J&F", ("J", "F")
    detail_labels = DETAIL_LABELS


@register_metric
class RegionAndBoundaryAllFrames(RegionAndBoundary):
    """J&F over every annotated frame, the first and last included (no semi-supervised drop)."""

    name, label, drops_ends = "vos_jf_all", "J&F (all frames)", False
