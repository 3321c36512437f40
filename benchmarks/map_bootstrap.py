"""The statistical gate's costs for COCO mask AP: bootstrap time and sidecar size of one cell.

    python benchmarks/map_bootstrap.py [--images 500] [--categories 80] [--detections 20] [--resamples 1000]

mAP is not a sum of per-image numbers: each resample re-accumulates COCO's precision from the
images' stored matches (``pytest_segrobust.metrics.coco_matches``). The synthetic matches stand
in for a detector's on COCO: each image shows a few categories (``--per-image``) with a few
ground truths each (one in 20 a crowd region), and about ``--detections`` scored detections,
of which the better-scored tend to match, at the IoU thresholds up to a random one. Rows are
built directly (no masks): the cost measured is the gate's, not the evaluation's.

Prints one table: per shape, the rows of one run, the seconds to score one run in every
resample (``Metric.resampled_scores``), the seconds of a model's first cell's paired checks
(its four runs: baseline and candidate, clean and corrupted, each scored once) and of each
further cell's (the clean runs are scored once per model), and the sidecar's bytes per cell
(a cell stores its corrupted run; the model's clean run is stored once). The second shape
puts every detection in one category: the longest cumulative sums, scored in chunks.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from pytest_segrobust.core.statistics import RunScores, paired_change, paired_gamma_r_change, resample_weights
from pytest_segrobust.metrics.coco_map import MaskAP
from pytest_segrobust.metrics.coco_matches import COLUMNS, IOU_THRESHOLDS, MAX_DETECTIONS
from pytest_segrobust.store.sidecar import SidecarEntry, write_sidecar


def match_rows(rng: np.random.Generator, images: int, categories: int, detections: int, per_image: int) -> np.ndarray:
    """Synthetic rows of :data:`~pytest_segrobust.metrics.coco_matches.COLUMNS` for ``images`` images."""
    thresholds = len(IOU_THRESHOLDS)
    rows = []
    for image in range(images):
        shown = rng.choice(categories, size=min(per_image, categories), replace=False)
        found = rng.poisson(detections)
        for category in shown:
            truths = int(rng.integers(1, 6))
            crowd = int(rng.random() < 0.05)
            rows.append([image, category, 0, 0, 0, truths])
            count = min(MAX_DETECTIONS, max(1, round(found / len(shown) * rng.uniform(0.5, 1.5))))
            scores = np.sort(rng.random(count).astype(np.float32).astype(np.float64))[::-1]
            # The better-scored detections match, each up to some threshold; the first `truths` at most.
            reach = np.where(np.arange(count) < truths, rng.integers(0, thresholds + 1, size=count), 0)
            matched = (1 << reach) - 1
            ignored = np.where((matched == 0) & (rng.random(count) < 0.5 * crowd), (1 << thresholds) - 1, 0)
            for score, m, i in zip(scores, matched, ignored, strict=True):
                rows.append([image, category, score, m | i, i, 0])
    return np.asarray(rows, dtype=np.float64)


def measure(rows: list[np.ndarray], images: int, resamples: int) -> dict[str, float]:
    """``rows``: baseline clean, baseline corrupted, candidate clean, candidate corrupted."""
    weights = resample_weights(images, resamples, seed=1)
    start = time.perf_counter()
    RunScores.of(rows[1], MaskAP.resampled_scores, weights)
    one = time.perf_counter() - start
    start = time.perf_counter()
    runs = [RunScores.of(r, MaskAP.resampled_scores, weights) for r in rows]
    paired_change(runs[1], runs[3])
    paired_gamma_r_change(*runs)
    cell = time.perf_counter() - start
    # A further cell of the model: its clean runs were scored with the first (the gate keeps them).
    start = time.perf_counter()
    corrupted = [RunScores.of(r, MaskAP.resampled_scores, weights) for r in (rows[1], rows[3])]
    paired_change(*corrupted)
    paired_gamma_r_change(runs[0], corrupted[0], runs[2], corrupted[1])
    further = time.perf_counter() - start
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "suite.stats.npz"
        write_sidecar(path, "suite", [SidecarEntry("m::c::1", "map", rows[1], rows[0], images)])
        both = path.stat().st_size
        write_sidecar(path, "suite", [SidecarEntry("m::c::2", "map", rows[3], rows[0], images)])
        per_cell = path.stat().st_size - both
    return {"rows": len(rows[1]), "one": one, "cell": cell, "further": further, "both": both, "per_cell": per_cell}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=500)
    parser.add_argument("--categories", type=int, default=80)
    parser.add_argument("--detections", type=int, default=20)
    parser.add_argument("--per-image", type=int, default=4)
    parser.add_argument("--resamples", type=int, default=1000)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    shapes = [
        (f"{args.images} images, {args.categories} categories", args.categories, args.per_image),
        (f"{args.images} images, 1 category", 1, 1),
    ]
    print(f"columns: {', '.join(COLUMNS)}; {args.resamples} resamples")
    print(
        "| shape | rows per run | one run, all resamples (s) | first cell: 4 runs + checks (s) | further cell: 2 runs (s) "
        "| sidecar: cell + clean | per further cell |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for label, categories, per_image in shapes:
        rows = [match_rows(rng, args.images, categories, args.detections, per_image) for _ in range(4)]
        m = measure(rows, args.images, args.resamples)
        print(
            f"| {label} | {m['rows']} | {m['one']:.2f} | {m['cell']:.2f} | {m['further']:.2f} | {m['both'] / 1e3:.0f} kB | "
            f"{m['per_cell'] / 1e3:.0f} kB |"
        )


if __name__ == "__main__":
    main()
