"""COCO mask AP: our metric next to faster-coco-eval called directly, on the same masks.

    python benchmarks/mask_ap.py [--images 500] [--height 480] [--width 640] [--repeats 3] [--profile] [--no-opencv]

The data is a COCO-like synthetic set made here, deterministically: per image about
``--instances`` ground-truth instances (ellipses and rectangles of 80 categories, one in 30 a
crowd region) and 20 to 100 scored detections (jittered copies of the ground truth, some with
the wrong category, and shapes anywhere), as boolean ``(N, H, W)`` torch masks, the way a
model adapter hands them to the metric. Only the images' masks are made per image and
dropped after it (500 images of masks would be gigabytes).

Three ways to the same AP, interleaved image by image in this one process, so that a busy
machine slows them alike (their order rotates from image to image):

* ``direct``: what a user of faster-coco-eval writes: ``pycocotools.mask.encode`` of each
  image's masks into annotation dicts, then ``COCO``, ``loadRes`` and ``COCOeval_faster``'s
  evaluate, accumulate and summarize for ``segm``.
* ``ours``: :class:`~pytest_segrobust.metrics.coco_map.MaskAP`'s ``update`` per image and
  ``compute`` (mask AP and, as its details, box AP), as ``evaluate`` runs it with ``statistics=False``:
  in a model's first cell, which encodes the ground truth, and in a later cell, which finds
  it encoded (:class:`~pytest_segrobust.metrics.coco_masks.EncodingCache`; the cache is
  filled before the rounds, untimed).
* ``ours+stats``: the same in a later cell, then ``image_statistics`` (COCO's per-image
  matches, which a suite with ``gate:`` keeps), as ``evaluate`` runs it with ``statistics=True``.

Mask generation is not timed. Each way's time is the sum of its per-image work and its final
evaluation; ``--repeats`` rounds give min and median. ``--profile`` adds a cProfile summary of
one more round of ``ours+stats`` in a first cell: where our time goes. ``--no-opencv`` times
ours as an install without OpenCV runs it (numpy transposes the masks for pycocotools).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import math
import pstats
import statistics
import time
from collections.abc import Callable

import numpy as np
import torch
from faster_coco_eval import COCO, COCOeval_faster
from pycocotools import mask as mask_utils

from pytest_segrobust.core.types import InstanceMasks, InstanceTarget, SampleIndex
from pytest_segrobust.metrics import coco_masks
from pytest_segrobust.metrics.base import MetricContext
from pytest_segrobust.metrics.coco_map import MaskAP
from pytest_segrobust.metrics.coco_masks import EncodingCache
from pytest_segrobust.models.base import InstancePredictions

CATEGORIES = 80


def shapes(rng: np.random.Generator, count: int, height: int, width: int) -> torch.Tensor:
    """``count`` random ellipses and rectangles, ``(count, height, width)`` bool."""
    y = torch.arange(height, dtype=torch.float32)[:, None]
    x = torch.arange(width, dtype=torch.float32)[None, :]
    masks = torch.zeros(count, height, width, dtype=torch.bool)
    for i in range(count):
        cy, cx = rng.uniform(0, height), rng.uniform(0, width)
        ry, rx = rng.uniform(4, height / 4), rng.uniform(4, width / 4)
        if rng.random() < 0.5:
            masks[i] = ((y - cy) / ry) ** 2 + ((x - cx) / rx) ** 2 <= 1
        else:
            masks[i] = ((y - cy).abs() <= ry) & ((x - cx).abs() <= rx)
    return masks


def image(index: int, height: int, width: int, instances: float) -> tuple[InstanceTarget, InstancePredictions]:
    """Image ``index``'s ground truth and detections, the same for every call."""
    rng = np.random.default_rng([2026, index])
    truths = max(1, int(rng.poisson(instances)))
    masks = shapes(rng, truths, height, width)
    masks = masks[masks.flatten(1).any(dim=1)]
    labels = torch.as_tensor(rng.integers(1, CATEGORIES + 1, size=len(masks)), dtype=torch.long)
    crowd = torch.as_tensor(rng.random(len(masks)) < 1 / 30)
    target = InstanceTarget.from_masks(masks, labels, crowd)
    found = int(rng.integers(20, 101))
    # Jittered copies of the ground truth (rolled by a few pixels), the rest anywhere.
    copies = min(found, 3 * len(masks))
    source = rng.integers(0, len(masks), size=copies)
    jittered = torch.stack(
        [torch.roll(masks[s], (int(rng.integers(-12, 13)), int(rng.integers(-12, 13))), dims=(0, 1)) for s in source]
    )
    detections = torch.cat([jittered, shapes(rng, found - copies, height, width)])
    predicted_labels = torch.as_tensor(rng.integers(1, CATEGORIES + 1, size=found), dtype=torch.long)
    predicted_labels[:copies] = torch.where(
        torch.as_tensor(rng.random(copies) < 0.8), labels[source], predicted_labels[:copies]
    )
    scores = torch.as_tensor(rng.random(found), dtype=torch.float32)
    scores[:copies] = scores[:copies] * 0.5 + 0.5
    return target, InstancePredictions(detections, predicted_labels, scores)


class Direct:
    """faster-coco-eval as a user calls it: encode each image's masks, evaluate at the end."""

    def __init__(self, categories: list[dict]) -> None:
        self.categories = categories
        self.images: list[dict] = []
        self.truths: list[dict] = []
        self.found: list[dict] = []

    def update(
        self, image_id: int, height: int, width: int, target: InstanceTarget, predicted: InstancePredictions
    ) -> None:
        self.images.append({"id": image_id, "height": height, "width": width})
        truths = mask_utils.encode(np.asfortranarray(target.masks.numpy().transpose(1, 2, 0).astype(np.uint8)))
        areas = mask_utils.area(truths)
        for rle, area, label, crowd in zip(truths, areas, target.labels.tolist(), target.iscrowd.tolist()):
            self.truths.append(
                {
                    "id": len(self.truths) + 1, "image_id": image_id, "category_id": label, "segmentation": rle,
                    "area": float(area), "iscrowd": int(crowd), "bbox": list(mask_utils.toBbox(rle)),
                }
            )
        found = mask_utils.encode(np.asfortranarray(predicted.masks.numpy().transpose(1, 2, 0).astype(np.uint8)))
        for rle, label, score in zip(found, predicted.labels.tolist(), predicted.scores.tolist()):
            self.found.append({"image_id": image_id, "category_id": label, "segmentation": rle, "score": score})

    def compute(self) -> float:
        truth = COCO(print_function=lambda *_: None)
        truth.dataset = {"images": self.images, "annotations": self.truths, "categories": self.categories}
        truth.createIndex()
        results = truth.loadRes(self.found)
        evaluation = COCOeval_faster(truth, results, "segm", print_function=lambda *_: None)
        evaluation.evaluate()
        evaluation.accumulate()
        evaluation.summarize()
        return 100 * float(evaluation.stats[0])


class Ours:
    """MaskAP as ``evaluate`` drives it, its ground truth's encodings kept in ``encodings``;
    with ``statistics``, its per-image matches too."""

    def __init__(self, categories: list[dict], encodings: EncodingCache, statistics: bool) -> None:
        names = ("background", *(c["name"] for c in categories))
        self.metric = MaskAP(MetricContext(names, 255, tuple(categories)))
        self.metric.coco.encodings = encodings
        self.statistics = statistics

    def update(
        self, image_id: int, height: int, width: int, target: InstanceTarget, predicted: InstancePredictions
    ) -> None:
        batch = {
            "index": SampleIndex((image_id,), (str(image_id),)),
            "instances": InstanceMasks((target,), height, width),
        }
        self.metric.update([predicted], batch)

    def compute(self) -> float:
        score = self.metric.compute().score
        if self.statistics:
            self.metric.image_statistics()
        return score


def one_round(
    args: argparse.Namespace, ways: dict[str, Callable[[], object]], profiler: cProfile.Profile | None = None
) -> dict[str, tuple[float, float]]:
    """Every way over every image (interleaved), then each one's final evaluation: ``(seconds, AP)``.

    ``profiler`` is on while the ways run (not while masks are made)."""
    on = profiler.enable if profiler is not None else lambda: None
    off = profiler.disable if profiler is not None else lambda: None
    made = {name: make() for name, make in ways.items()}
    seconds = dict.fromkeys(made, 0.0)
    names = list(made)
    for index in range(args.images):
        target, predicted = image(index, args.height, args.width, args.instances)
        for name in names[index % len(names) :] + names[: index % len(names)]:
            on()
            start = time.perf_counter()
            made[name].update(index, args.height, args.width, target, predicted)
            seconds[name] += time.perf_counter() - start
            off()
    results = {}
    for name in names:
        on()
        start = time.perf_counter()
        ap = made[name].compute()
        results[name] = (seconds[name] + time.perf_counter() - start, ap)
        off()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=500)
    parser.add_argument("--height", type=int, default=480)
    parser.add_argument("--width", type=int, default=640)
    parser.add_argument("--instances", type=float, default=7.0, help="mean ground-truth instances per image")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--profile", action="store_true", help="profile one more round of ours+stats (first cell)")
    parser.add_argument("--no-opencv", action="store_true", help="ours as without OpenCV installed (numpy's transpose)")
    args = parser.parse_args()
    if args.no_opencv:
        coco_masks.opencv = lambda: None
    torch.set_num_threads(1)
    categories = [{"id": k, "name": f"category {k}", "supercategory": "thing"} for k in range(1, CATEGORIES + 1)]
    # A model's first cell encodes the ground truth (an empty cache each round); its later
    # cells find it encoded (a cache filled before the rounds, as the first cell fills it).
    cached = EncodingCache()
    for index in range(args.images):
        cached.encode(mask_utils, image(index, args.height, args.width, args.instances)[0].masks)
    ways: dict[str, Callable[[], object]] = {
        "direct": lambda: Direct(categories),
        "ours, first cell": lambda: Ours(categories, EncodingCache(), statistics=False),
        "ours, later cell": lambda: Ours(categories, cached, statistics=False),
        "ours+stats, later cell": lambda: Ours(categories, cached, statistics=True),
    }
    times: dict[str, list[float]] = {name: [] for name in ways}
    aps: dict[str, float] = {}
    for _ in range(args.repeats):
        for name, (seconds, ap) in one_round(args, ways).items():
            times[name].append(seconds)
            aps[name] = ap
    print(
        f"{args.images} images of {args.height}x{args.width}, {CATEGORIES} categories, {args.repeats} rounds; "
        f"one torch thread; ours {'without' if coco_masks.opencv() is None else 'with'} OpenCV"
    )
    print("| way | min (s) | median (s) | min / direct | mask AP |")
    print("|---|---:|---:|---:|---:|")
    for name in ways:
        best, middle = min(times[name]), statistics.median(times[name])
        ratio = best / min(times["direct"])
        print(f"| {name} | {best:.2f} | {middle:.2f} | {ratio:.2f}x | {aps[name]:.3f} |")
    for name, ap in aps.items():
        if not math.isclose(aps["direct"], ap, abs_tol=1e-9):
            raise SystemExit(f"{name} gives mask AP {ap}, faster-coco-eval {aps['direct']}")
    if args.profile:
        profiler = cProfile.Profile()
        first = {"ours+stats, first cell": lambda: Ours(categories, EncodingCache(), statistics=True)}
        one_round(args, first, profiler)
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(15)
        print("\nours+stats, first cell, one round, by own time (cProfile):")
        print("\n".join(line for line in text.getvalue().splitlines() if line.strip())[:6000])


if __name__ == "__main__":
    main()
