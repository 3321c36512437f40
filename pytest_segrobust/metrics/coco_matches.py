"""COCO mAP of any weighted multiset of images, from each image's matches: the paired
statistics of :class:`~pytest_segrobust.metrics.coco_map.MaskAP`.

COCO's evaluation has two steps (pycocotools ``COCOeval``). ``evaluateImg`` treats every
(image, category) on its own: it keeps the image's 100 best-scored detections of the category,
matches them greedily to the ground truth at each of the 10 IoU thresholds, and marks which
detections are ignored (matched to a crowd region) and how many ground truths can be missed
(the non-crowd ones). ``accumulate`` then concatenates the images' results per category, sorts
the detections by score (a stable sort over that concatenation), counts true and false
positives cumulatively, and reads the interpolated precision at 101 recall points. mAP
(``stats[0]``) is the mean of that precision over thresholds, recall points and the
categories that have ground truth to miss.

The first step is per image, so :func:`match_rows` stores its outcome, one row per kept
detection and one per (image, category) count of ground truths (:data:`COLUMNS`). The second
step is not a sum, but it is a cumulative count: for a multiset that holds image ``i``
``w_i`` times, the true and false positive counts become cumulative sums of ``w_i`` and the
number of ground truths a weighted sum. :func:`resampled_map` does that for many multisets at
once. It equals COCO on the multiset's images written out with their copies next to each other
(copies get new ids that sort right after the original's): the copies of a detection then form
a run of equal scores whose last point alone decides the interpolated precision. The one
exception is two detections of one image and category with exactly the same score and
different outcomes: written out, COCO would interleave their copies, here each one's copies
stay together. Model scores are continuous, so such ties are not expected; they change a
resample's mAP, never the observed one (weights of one).

Only the headline is re-accumulated: area range "all" (nothing is ignored for its area) and at
most 100 detections per image and category.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

# COCO's thresholds: IoU 0.50:0.05:0.95 and recall 0:0.01:1, computed as pycocotools computes them.
IOU_THRESHOLDS = np.linspace(0.5, 0.95, int(np.round((0.95 - 0.5) / 0.05)) + 1, endpoint=True)
RECALL_THRESHOLDS = np.linspace(0.0, 1.00, int(np.round((1.00 - 0.0) / 0.01)) + 1, endpoint=True)
MAX_DETECTIONS = 100

# The columns of a match row. A detection row has GROUND_TRUTHS 0 and bit t of MATCHED (of
# IGNORED) set when it matched a ground truth (a crowd region) at IoU_THRESHOLDS[t]; a
# ground-truth row counts the non-crowd ground truths of its image and category (> 0) and
# has SCORE, MATCHED and IGNORED 0.
COLUMNS = ("image", "category", "score", "matched", "ignored", "ground_truths")
IMAGE, CATEGORY, SCORE, MATCHED, IGNORED, GROUND_TRUTHS = range(len(COLUMNS))

# How many (resample, detection) numbers one step of resampled_map holds per array (float64):
# resamples are scored in chunks, so memory stays bounded (tens of MB) for any R and D.
_CHUNK_ELEMENTS = 1 << 21


def greedy_matches(ious: np.ndarray, crowd: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """COCO's matching of one image and category, at every IoU threshold.

    Detections in score order each take, among the ground truths still free (a crowd region
    never is taken), the one of highest IoU at or above the threshold (the last of equals),
    preferring a non-crowd one; a detection that takes a crowd region is ignored.

    Args:
        ious: IoU of each kept detection (in score order) with each ground truth, as
            ``pycocotools.mask.iou`` gives it (a crowd region's IoU is the share of the
            detection inside it).
        crowd: Which ground truths are crowd regions.

    Shape:
        ious: ``(D, G)``; crowd: ``(G,)``; return: matched and ignored, ``(T, D)`` bool each.
    """
    thresholds = np.minimum(IOU_THRESHOLDS, 1 - 1e-10)[:, None]  # (T, 1), as COCO caps them
    count, size = ious.shape
    matched = np.zeros((len(IOU_THRESHOLDS), count), dtype=bool)
    ignored = np.zeros_like(matched)
    taken = np.zeros((len(IOU_THRESHOLDS), size), dtype=bool)
    if size == 0:  # nothing to match: every detection is a false positive
        return matched, ignored
    for detection in range(count):
        free = (ious[detection][None, :] >= thresholds) & (~taken | crowd[None, :])  # (T, G)
        for group in (~crowd, crowd):  # a crowd region only when no other ground truth fits
            candidates = np.where(free & group[None, :] & ~matched[:, detection, None], ious[detection][None, :], -np.inf)
            found = np.isfinite(candidates.max(axis=1))
            best = size - 1 - np.argmax(candidates[:, ::-1], axis=1)  # the last of the highest
            matched[found, detection] = True
            ignored[found, detection] = crowd[best[found]]
            taken[found, best[found]] = True
    return matched, ignored


def match_rows(
    images: Sequence[dict[str, Any]],
    ground_truths: Sequence[dict[str, Any]],
    detections: Sequence[dict[str, Any]],
    category_ids: Sequence[int],
    mask_utils: Any,
) -> np.ndarray:
    """Every image's COCO matches of its masks, as rows of :data:`COLUMNS`.

    Args:
        images: COCO image records; an image's index is its position in id order.
        ground_truths, detections: COCO annotation dicts with RLE ``segmentation`` (counts as
            ``str``), ``iscrowd`` for ground truths and ``score`` for detections.
        category_ids: The COCO category ids; a row's category is the position of its id here.
        mask_utils: ``pycocotools.mask``.

    Shape:
        return: ``(rows, len(COLUMNS))``, float64 (whole numbers but the score).
    """
    index_of_image = {image["id"]: index for index, image in enumerate(sorted(images, key=lambda image: image["id"]))}
    index_of_category = {category_id: index for index, category_id in enumerate(category_ids)}
    by_pair: dict[tuple[int, int], tuple[list[dict[str, Any]], list[dict[str, Any]]]] = {}
    for annotation in ground_truths:
        by_pair.setdefault((annotation["image_id"], annotation["category_id"]), ([], []))[0].append(annotation)
    for annotation in detections:
        by_pair.setdefault((annotation["image_id"], annotation["category_id"]), ([], []))[1].append(annotation)
    rows: list[np.ndarray] = []
    bits = 1 << np.arange(len(IOU_THRESHOLDS))
    for image_id, category_id in sorted(by_pair, key=lambda pair: (index_of_image[pair[0]], index_of_category[pair[1]])):
        truths, found = by_pair[image_id, category_id]
        where = [index_of_image[image_id], index_of_category[category_id]]
        # As COCO: ground truths non-crowd first, detections by score (both stable), the best 100 kept.
        truths = sorted(truths, key=lambda annotation: int(bool(annotation["iscrowd"])))
        order = np.argsort([-annotation["score"] for annotation in found], kind="mergesort")[:MAX_DETECTIONS]
        kept = [found[i] for i in order]
        crowd = np.array([bool(annotation["iscrowd"]) for annotation in truths], dtype=bool)
        if kept and truths:
            ious = np.asarray(
                mask_utils.iou(
                    [dict(a["segmentation"]) for a in kept], [dict(a["segmentation"]) for a in truths], crowd.astype(np.uint8)
                ),
                dtype=np.float64,
            ).reshape(len(kept), len(truths))
        else:
            ious = np.zeros((len(kept), len(truths)))
        matched, ignored = greedy_matches(ious, crowd)
        if kept:
            block = np.zeros((len(kept), len(COLUMNS)))
            block[:, [IMAGE, CATEGORY]] = where
            block[:, SCORE] = [annotation["score"] for annotation in kept]
            block[:, MATCHED] = bits @ matched
            block[:, IGNORED] = bits @ ignored
            rows.append(block)
        if (~crowd).any():
            rows.append(np.array([[*where, 0, 0, 0, int((~crowd).sum())]], dtype=np.float64))
    return np.concatenate(rows) if rows else np.zeros((0, len(COLUMNS)))


def check_rows(rows: np.ndarray, images: int) -> None:
    """Raise ``ValueError`` unless ``rows`` are match rows of ``images`` images."""
    if rows.ndim != 2 or rows.shape[1] != len(COLUMNS):
        raise ValueError(f"COCO match rows have {len(COLUMNS)} columns ({', '.join(COLUMNS)}), got shape {rows.shape}")
    whole = rows[:, [IMAGE, CATEGORY, MATCHED, IGNORED, GROUND_TRUTHS]]
    if not np.isfinite(rows).all() or (whole != np.round(whole)).any() or (whole < 0).any():
        raise ValueError("COCO match rows hold a non-finite, fractional or negative index, flag or count")
    if rows.size and rows[:, IMAGE].max() >= images:
        raise ValueError(f"COCO match rows name image {int(rows[:, IMAGE].max())} of {images} images")
    if (rows[:, [MATCHED, IGNORED]] >= 1 << len(IOU_THRESHOLDS)).any():
        raise ValueError(f"COCO match rows hold match flags beyond {len(IOU_THRESHOLDS)} IoU thresholds")


def resampled_map(rows: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """COCO mAP in percent of each weighted multiset of the images (NaN without ground truth).

    Args:
        rows: :func:`match_rows` of ``N`` images.
        weights: How many copies of each image each multiset holds, ``(R, N)`` whole counts.

    Shape:
        return: ``(R,)``, float64.

    Raises:
        ValueError: when ``rows`` are not match rows of ``N`` images.
    """
    check_rows(rows, weights.shape[1])
    weights = np.asarray(weights, dtype=np.float64)
    resamples = weights.shape[0]
    precision_sum, counted = np.zeros(resamples), np.zeros(resamples)
    is_truth = rows[:, GROUND_TRUTHS] > 0
    flags = 1 << np.arange(len(IOU_THRESHOLDS))[:, None]
    for category in np.unique(rows[:, CATEGORY]):
        mine = rows[:, CATEGORY] == category
        truths, found = rows[mine & is_truth], rows[mine & ~is_truth]
        missable = weights[:, truths[:, IMAGE].astype(np.intp)] @ truths[:, GROUND_TRUTHS]  # (R,)
        # COCO's order: by score, then by image, then by the image's own order (stable sorts).
        found = found[np.lexsort((np.arange(len(found)), found[:, IMAGE], -found[:, SCORE]))]
        matched = (found[:, MATCHED].astype(np.int64)[None, :] & flags) > 0  # (T, D)
        ignored = (found[:, IGNORED].astype(np.int64)[None, :] & flags) > 0
        step = max(1, _CHUNK_ELEMENTS // max(1, len(found)))
        for start in range(0, resamples, step):
            chunk = slice(start, start + step)
            has_truth = missable[chunk] > 0
            if not has_truth.any():
                continue
            copies = weights[chunk][:, found[:, IMAGE].astype(np.intp)]  # (r, D)
            total = precision_sum_of(copies, matched & ~ignored, ignored, np.where(has_truth, missable[chunk], 1.0))
            precision_sum[chunk] += np.where(has_truth, total / (len(IOU_THRESHOLDS) * len(RECALL_THRESHOLDS)), 0.0)
            counted[chunk] += has_truth
    with np.errstate(invalid="ignore", divide="ignore"):
        return 100.0 * precision_sum / counted


def precision_sum_of(copies: np.ndarray, true_positive: np.ndarray, ignored: np.ndarray, missable: np.ndarray) -> np.ndarray:
    """The sum of COCO's interpolated precision over IoU thresholds and recall points, of one
    category in each weighted multiset.

    Precision at recall ``r`` is the highest precision of any point (a detection, in score
    order) whose recall is at least ``r``, 0 where none is (COCO's running maximum from the
    end, read at the first point of recall ``>= r``). Only true positives raise the recall,
    and a point that is not one has the recall of the last true positive before it and no
    more precision (or recall and precision 0), so the true positives' points alone decide
    it: their cumulative counts are all that is computed. Every count is a whole number in
    float64, exact, with COCO's formulas for recall and precision.

    Args:
        copies: How often each detection (in COCO's order) is drawn in each multiset.
        true_positive, ignored: Each detection's flags per IoU threshold.
        missable: Each multiset's ground truths to miss (> 0).

    Shape:
        copies: ``(r, D)``; true_positive, ignored: ``(T, D)``; missable: ``(r,)``; return: ``(r,)``.
    """
    drawn = np.cumsum(copies, axis=1)  # (r, D): every detection so far
    total = np.zeros(copies.shape[0])
    for threshold in range(true_positive.shape[0]):
        hits = np.flatnonzero(true_positive[threshold])
        if hits.size == 0:
            continue  # no recall at all: precision 0 at every recall point
        true_positives = np.cumsum(copies[:, hits], axis=1)
        false_positives = drawn[:, hits] - true_positives
        skipped = np.flatnonzero(ignored[threshold])
        if skipped.size:  # ignored detections are neither true nor false positives
            before = np.concatenate([np.zeros((copies.shape[0], 1)), np.cumsum(copies[:, skipped], axis=1)], axis=1)
            false_positives -= before[:, np.searchsorted(skipped, hits)]
        total += interpolated_precision_sum(true_positives, false_positives, missable)
    return total


def interpolated_precision_sum(true_positives: np.ndarray, false_positives: np.ndarray, missable: np.ndarray) -> np.ndarray:
    """The sum of the precision at COCO's 101 recall points, from the cumulative counts at the
    true positives.

    The precision at recall point ``k`` is the running maximum from the end (``best_after``)
    at the first point that reaches it. Recall never falls along the points, so point ``j``
    is the first to reach the points that it reaches and the point before it does not: the
    sum weighs ``best_after[j]`` by their number. Points never reached add 0.

    Shape:
        true_positives, false_positives: ``(r, P)``; missable: ``(r,)``; return: ``(r,)``.
    """
    recall = true_positives / missable[:, None]
    precision = true_positives / (false_positives + true_positives + np.spacing(1))
    best_after = np.maximum.accumulate(precision[:, ::-1], axis=1)[:, ::-1]
    reached = recall_points_reached(recall)
    first_reached = np.diff(reached, axis=1, prepend=0)
    return (best_after * first_reached).sum(axis=1)


def recall_points_reached(recall: np.ndarray) -> np.ndarray:
    """How many of COCO's recall points are at most each recall: ``np.searchsorted(RECALL_THRESHOLDS,
    recall, side="right")``, several times faster.

    The points are ``k / 100`` to within an ulp, so ``floor(100 * recall)`` is the last point
    reached give or take one: every point below the window ``[c, c + 2]`` that starts one
    lower is reached, none above it is, and the window's three are compared as they are.

    Shape:
        recall: any, in ``[0, 1]``; return: the same, int64.
    """
    last = len(RECALL_THRESHOLDS) - 1
    start = np.clip(np.floor(recall * last).astype(np.int64) - 1, 0, last - 2)
    return start + sum((RECALL_THRESHOLDS[start + offset] <= recall).astype(np.int64) for offset in range(3))
