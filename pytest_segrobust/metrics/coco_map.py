"""COCO instance-segmentation mAP, with the numbers of pycocotools' ``COCOeval``.

The state is what COCO evaluation needs and nothing more (sufficient statistics): one
record per image, and every ground-truth instance and detection as a COCO annotation dict
whose mask is a compressed RLE with its counts as ``str``. That keeps the state JSON-safe
(xdist workers ship it to the controller as is), small (an RLE costs bytes per object, not
per pixel) and mergeable by concatenation. ``compute`` hands the records to
faster-coco-eval, a C++ re-implementation of ``COCOeval`` that gives the same numbers.

Masks become RLEs in :mod:`pytest_segrobust.metrics.coco_masks`, with the areas and boxes
read off the RLEs; the ground truth's encodings are kept by content across the process's
evaluations, so the cells of a model that leave the ground truth in place encode it once.

Labels are contiguous: label ``k`` (1-based) is the ``k``-th category in id order, which is
how :class:`pytest_segrobust.data.coco.CocoInstances` numbers its classes, so a model's
labels and the dataset's targets go through the same table.

The engines are optional dependencies (``pip install pytest-segrobust[coco]``); this module
imports without them and asks for them only when an instance is created.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any, ClassVar

import numpy as np
import torch

from pytest_segrobust.core.errors import DatasetError, ModelOutputError
from pytest_segrobust.core.extras import COCO
from pytest_segrobust.core.types import (
    Batch,
    InstanceMasks,
    InstancePredictions,
    InstanceTarget,
    SampleIndex,
    field_of,
    instance_categories,
)
from pytest_segrobust.metrics import coco_masks
from pytest_segrobust.metrics.base import Metric, MetricContext, MetricResult, Reduction
from pytest_segrobust.metrics.coco_masks import EncodingCache, encode_masks
from pytest_segrobust.metrics.coco_matches import match_rows, resampled_map
from pytest_segrobust.metrics.registry import register_metric

_LOG = logging.getLogger(__name__)

IOU_TYPES = ("segm", "bbox")
# COCO's headline numbers are read at area range "all" and at most 100 detections per image.
_AREA_RANGE = "all"
_MAX_DETECTIONS = 100
_INSTALL_HINT = "COCO mAP needs faster-coco-eval and pycocotools: install pytest-segrobust[coco]"


def _coco_libraries() -> tuple[ModuleType, ModuleType]:
    """The faster-coco-eval package and ``pycocotools.mask``, or an error saying how to get them."""
    try:
        import faster_coco_eval
        from pycocotools import mask as mask_utils
    except ImportError as error:
        raise ImportError(f"{_INSTALL_HINT} ({error})") from error
    return faster_coco_eval, mask_utils


@dataclass(frozen=True)
class MAPResult:
    """COCO average precision in percent (0..100).

    Attributes:
        ap: AP averaged over IoU thresholds 0.50:0.05:0.95 (NaN when no category has ground truth).
        ap50: AP at IoU 0.50.
        ap75: AP at IoU 0.75.
        per_class: AP per category name, ``None`` for categories without ground truth.
        bbox: The same numbers for boxes, when box AP was requested.
    """

    ap: float
    ap50: float
    ap75: float
    per_class: dict[str, float | None]
    bbox: MAPResult | None = None


class CocoMAP:
    """Accumulates instances and detections of a dataset; ``compute`` gives COCO mAP.

    Args:
        categories: COCO category dicts (``id``, ``name``, ``supercategory``). Label ``k``
            is the ``k``-th category in id order.
        iou_types: ``("segm",)`` or ``("segm", "bbox")``; the first entry is reported at the top
            level of :class:`MAPResult`, box AP under ``bbox``.
        encodings: Where ground-truth encodings are kept across instances (default: the
            process's, :data:`~pytest_segrobust.metrics.coco_masks.GROUND_TRUTH`).

    Raises:
        ImportError: when faster-coco-eval or pycocotools is missing.
    """

    def __init__(
        self,
        categories: Sequence[dict[str, Any]],
        iou_types: Sequence[str] = ("segm",),
        encodings: EncodingCache | None = None,
    ) -> None:
        _coco_libraries()
        if not categories:
            raise ValueError("CocoMAP needs at least one category")
        if tuple(iou_types) not in (("segm",), ("segm", "bbox")):
            raise ValueError(f"iou_types must be ('segm',) or ('segm', 'bbox'), got {tuple(iou_types)}")
        self.categories = sorted((dict(category) for category in categories), key=lambda category: category["id"])
        ids = [category["id"] for category in self.categories]
        if len(set(ids)) != len(ids):
            raise ValueError(f"category ids are not unique: {ids}")
        self.iou_types = tuple(iou_types)
        self._category_id_of_label = [0, *ids]  # index 0 is background, never a COCO category
        self.images: list[dict[str, int]] = []
        self.ground_truths: list[dict[str, Any]] = []
        self.detections: list[dict[str, Any]] = []
        self._image_ids: set[int] = set()
        self.encodings = coco_masks.GROUND_TRUTH if encodings is None else encodings

    def reset(self) -> None:
        """Forget every image added.

        Not a :class:`~pytest_segrobust.metrics.base.Metric` (:class:`MaskAP` declares these
        records as its states and resets them through its properties): the image ids kept to
        refuse an image added twice go with the records.
        """
        self.images, self.ground_truths, self.detections = [], [], []
        self._image_ids = set()

    def update(
        self,
        image_id: int,
        height: int,
        width: int,
        targets: InstanceTarget,
        predictions: InstancePredictions,
    ) -> None:
        """Add one image: its ground-truth instances and the model's detections.

        Args:
            image_id: Identifier of the image, unique within the dataset.
            height: Image height in pixels.
            width: Image width in pixels.
            targets: Ground truth; crowd instances are regions that neither count as misses nor
                make matched detections false positives.
            predictions: Detections of the model.

        Shape:
            targets.masks, predictions.masks: ``(N, height, width)``.

        Raises:
            ValueError: when ``image_id`` was added before.
            DatasetError: when the targets do not fit the image or name an unknown label.
            ModelOutputError: when the predictions do not fit the image, name an unknown label
                or hold non-finite scores.
        """
        image_id = int(image_id)
        if image_id in self._image_ids:
            raise ValueError(f"image {image_id} was added to CocoMAP twice")
        size = (int(height), int(width))
        where = f"image {image_id}"
        if tuple(targets.masks.shape[1:]) != size or targets.masks.dim() != 3:
            raise DatasetError(
                f"{where}: instance masks of shape {tuple(targets.masks.shape)}, expected (N, {size[0]}, {size[1]})"
            )
        if tuple(predictions.masks.shape[1:]) != size:
            raise ModelOutputError(
                f"{where}: predicted masks of shape {tuple(predictions.masks.shape)}, expected (N, {size[0]}, {size[1]})"
            )
        target_categories = self._category_ids(targets.labels, where, DatasetError, "ground truth")
        predicted_categories = self._category_ids(predictions.labels, where, ModelOutputError, "model")
        scores = predictions.scores.detach().double().cpu()
        if not bool(torch.isfinite(scores).all()):
            raise ModelOutputError(f"{where}: model returned NaN or infinite instance scores")

        _, mask_utils = _coco_libraries()
        # The ground truth's encoding is looked up by its bits: the same masks in another cell
        # (a photometric corruption leaves them as they are) are encoded once per process.
        truths = self.encodings.encode(mask_utils, targets.masks)
        found = encode_masks(mask_utils, predictions.masks)
        target_boxes = targets.boxes.detach().double().cpu().tolist()
        crowd = targets.iscrowd.detach().cpu().tolist()

        self.images.append({"id": image_id, "height": size[0], "width": size[1]})
        self._image_ids.add(image_id)
        # COCO's area of a ground truth is its mask area; it decides the area range.
        for category_id, rle, area, (x0, y0, x1, y1), is_crowd in zip(
            target_categories, truths.rles(), truths.areas, target_boxes, crowd
        ):
            self.ground_truths.append(
                {
                    "image_id": image_id,
                    "category_id": category_id,
                    "segmentation": rle,
                    "area": area,
                    "bbox": [x0, y0, x1 - x0, y1 - y0],
                    "iscrowd": int(bool(is_crowd)),
                }
            )
        # A detection's box is the tight box of its mask, as COCO derives it from the RLE.
        for category_id, rle, box, score in zip(predicted_categories, found.rles(), found.boxes, scores.tolist()):
            self.detections.append(
                {
                    "image_id": image_id,
                    "category_id": category_id,
                    "segmentation": rle,
                    "bbox": list(box),
                    "score": score,
                }
            )

    def merge(self, other: CocoMAP) -> None:
        """Add the images of ``other`` (e.g. a worker's share); image ids must not overlap."""
        if [c["id"] for c in other.categories] != [c["id"] for c in self.categories]:
            raise ValueError("cannot merge CocoMAP states with different categories")
        shared = self._image_ids & other._image_ids
        if shared:
            raise ValueError(f"cannot merge CocoMAP states that share images {sorted(shared)[:5]}")
        self.images.extend(dict(image) for image in other.images)
        self.ground_truths.extend(dict(annotation) for annotation in other.ground_truths)
        self.detections.extend(dict(annotation) for annotation in other.detections)
        self._image_ids |= other._image_ids

    def state_dict(self) -> dict[str, Any]:
        """JSON-safe state: categories, IoU types, image records and annotation dicts."""
        return {
            "categories": [dict(category) for category in self.categories],
            "iou_types": list(self.iou_types),
            "images": [dict(image) for image in self.images],
            "ground_truths": [dict(annotation) for annotation in self.ground_truths],
            "detections": [dict(annotation) for annotation in self.detections],
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> CocoMAP:
        metric = cls(state["categories"], state["iou_types"])
        metric.images = [dict(image) for image in state["images"]]
        metric.ground_truths = [dict(annotation) for annotation in state["ground_truths"]]
        metric.detections = [dict(annotation) for annotation in state["detections"]]
        metric._image_ids = {image["id"] for image in metric.images}
        return metric

    def match_rows(self) -> np.ndarray:
        """Every image's COCO matches of its masks (the ``segm`` headline), one row per kept
        detection and per image and category with ground truth to miss: what
        :func:`~pytest_segrobust.metrics.coco_matches.resampled_map` re-accumulates for any
        multiset of the images. Image ``i`` is the ``i``-th in id order."""
        _, mask_utils = _coco_libraries()
        category_ids = [category["id"] for category in self.categories]
        return match_rows(self.images, self.ground_truths, self.detections, category_ids, mask_utils)

    def compute(self) -> MAPResult:
        """COCO AP, AP50, AP75 and AP per category of everything added so far."""
        segm = self._evaluate("segm")
        if "bbox" not in self.iou_types:
            return segm
        return MAPResult(segm.ap, segm.ap50, segm.ap75, segm.per_class, bbox=self._evaluate("bbox"))

    def _category_ids(self, labels: torch.Tensor, where: str, error: type[Exception], whose: str) -> list[int]:
        values = labels.detach().cpu().long().tolist()
        count = len(self.categories)
        for label in values:
            if not 1 <= label <= count:
                raise error(f"{where}: {whose} instance label {label} outside 1..{count}")
        return [self._category_id_of_label[label] for label in values]

    def _evaluate(self, iou_type: str) -> MAPResult:
        names = [category["name"] for category in self.categories]
        nothing_added = MAPResult(math.nan, math.nan, math.nan, dict.fromkeys(names))
        if not self.images:
            return nothing_added
        faster_coco_eval, _ = _coco_libraries()
        # The engine adds keys to the dicts it is given (ids, areas, decoded RLEs), so it gets
        # fresh ones and the state stays as it was.
        ground_truth = faster_coco_eval.COCO(
            {
                "images": sorted((dict(image) for image in self.images), key=lambda image: image["id"]),
                # COCO reserves annotation id 0 for "unmatched": ids start at 1.
                "annotations": [dict(annotation, id=index) for index, annotation in enumerate(self.ground_truths, 1)],
                "categories": [dict(category) for category in self.categories],
            },
            print_function=_LOG.debug,
        )
        # A detection carries only the geometry that is scored: with a box next to a mask, COCO
        # would take the box area as the detection's area.
        geometry = "segmentation" if iou_type == "segm" else "bbox"
        detections = [
            {
                "image_id": annotation["image_id"],
                "category_id": annotation["category_id"],
                geometry: _copy_geometry(annotation[geometry]),
                "score": annotation["score"],
            }
            for annotation in self.detections
        ]
        results = ground_truth.loadRes(detections)
        evaluation = faster_coco_eval.COCOeval_faster(ground_truth, results, iou_type, print_function=_LOG.debug)
        evaluation.evaluate()
        evaluation.accumulate()
        return _summarize(evaluation, names)


def _summarize(evaluation: Any, names: list[str]) -> MAPResult:
    """AP numbers from the accumulated precision array, as pycocotools' ``summarize`` reads it.

    Shape:
        ``evaluation.eval["precision"]``: ``(T, R, K, A, M)`` (IoU thresholds, recall
        thresholds, categories, area ranges, max detections); -1 marks cells without ground truth.
    """
    params = evaluation.params
    precision = np.asarray(evaluation.eval["precision"])
    area = list(params.areaRngLbl).index(_AREA_RANGE)
    max_dets = list(params.maxDets).index(_MAX_DETECTIONS)
    precision = precision[:, :, :, area, max_dets]  # (T, R, K)
    thresholds = np.asarray(params.iouThrs)

    def mean_valid(values: np.ndarray) -> float | None:
        valid = values[values > -1]
        return float(np.mean(valid)) * 100 if valid.size else None

    def at(threshold: float) -> np.ndarray:
        return precision[np.isclose(thresholds, threshold)]

    def headline(values: np.ndarray) -> float:
        mean = mean_valid(values)
        return math.nan if mean is None else mean

    per_class = {name: mean_valid(precision[:, :, index]) for index, name in enumerate(names)}
    return MAPResult(headline(precision), headline(at(0.5)), headline(at(0.75)), per_class)


def _copy_geometry(geometry: Any) -> Any:
    return dict(geometry) if isinstance(geometry, dict) else list(geometry)


@register_metric
class MaskAP(Metric):
    """COCO mask AP@[.50:.95] in percent; AP50, AP75 and box AP as details.

    Images are numbered by their position in the dataset, so that the records of any
    split of the dataset (batches, workers) merge into the records of the whole.
    """

    name = "map"
    label = "mask AP"
    accepts = (InstanceMasks,)
    detail_labels: ClassVar[dict[str, str]] = {
        "ap50": "AP50", "ap75": "AP75", "bbox_ap": "box AP", "bbox_ap50": "box AP50", "bbox_ap75": "box AP75"
    }
    requires = (COCO,)

    def __init__(self, context: MetricContext) -> None:
        super().__init__(context)
        self.categories = instance_categories(context)
        self.coco = CocoMAP(self.categories, ("segm", "bbox"))
        for name in ("images", "ground_truths", "detections"):
            self.add_state(name, [], Reduction.CONCAT)

    # The declared states are the COCO records' lists: setting one (a reset, a merge) sets the
    # CocoMAP's, which keeps its image ids with them.
    images = property(lambda self: self.coco.images, lambda self, value: self._set("images", value))
    ground_truths = property(lambda self: self.coco.ground_truths, lambda self, v: self._set("ground_truths", v))
    detections = property(lambda self: self.coco.detections, lambda self, value: self._set("detections", value))

    def _set(self, name: str, value: list[dict[str, Any]]) -> None:
        setattr(self.coco, name, list(value))
        if name == "images":
            ids = [image["id"] for image in self.coco.images]
            if len(set(ids)) != len(ids):
                raise ValueError("merged COCO records share image ids; each image may be added once")
            self.coco._image_ids = set(ids)

    def update(self, predictions: Sequence[InstancePredictions], batch: Batch) -> None:
        instances, index = field_of(batch, InstanceMasks), field_of(batch, SampleIndex)
        for position, target, predicted in zip(index.positions, instances.targets, predictions, strict=True):
            self.coco.update(position, instances.height, instances.width, target, predicted)

    def image_statistics(self) -> np.ndarray:
        """COCO's per-image matches of the masks, ``(rows, 6)``: :meth:`CocoMAP.match_rows`.

        Image ``i`` is the dataset's ``i``-th image added (the records are numbered by position)."""
        return self.coco.match_rows()

    @classmethod
    def resampled_scores(cls, statistics: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """Mask AP of each weighted multiset of the images, re-accumulated as COCO accumulates."""
        return resampled_map(statistics, weights)

    def compute(self) -> MetricResult:
        result = self.coco.compute()
        per_class = (None, *(result.per_class[c["name"]] for c in self.categories))
        details = {"ap50": result.ap50, "ap75": result.ap75}
        if result.bbox is not None:
            details |= {"bbox_ap": result.bbox.ap, "bbox_ap50": result.bbox.ap50, "bbox_ap75": result.bbox.ap75}
        return MetricResult(result.ap, per_class, details)
