"""The statistical gate's costs: sidecar size and bootstrap time, on the demo's shape and on a large suite's.

    python benchmarks/statistical_gate.py [--cells 85] [--images 2000] [--classes 150] [--resamples 2000]
        [--pair baselines/demo.stats.npz tiny-unet tiny-unet-smoothed]

Per-image mIoU statistics are (images, classes, 3) counts. A real image shows a handful of
the classes, so most counts are zero: the synthetic statistics put ``--present`` classes in
each image, with pixel counts of a 512x512 image. Prints one table: for each shape, the
sidecar's bytes (and per cell), the time to bootstrap every cell (paired score and gamma_r
changes).

``--pair SIDECAR BASE CANDIDATE`` also reads a suite's stored statistics and treats one model
as the baseline of another (the demo's two networks: as if a release changed the one into the
other), and prints the smallest margin each cell could confirm at 80% power from that pairing,
at the suite's Bonferroni level, with the bootstrap time of the whole suite.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from pytest_segrobust.core.statistics import RunScores, paired_change, paired_gamma_r_change, resample_weights
from pytest_segrobust.metrics.miou import MeanIoU
from pytest_segrobust.store.sidecar import SidecarEntry, read_sidecar, write_sidecar


def statistics(rng: np.random.Generator, images: int, classes: int, present: int, pixels: int) -> np.ndarray:
    counts = np.zeros((images, classes, 3), dtype=np.int64)
    for i in range(images):
        chosen = rng.choice(classes, size=min(present, classes), replace=False)
        area = rng.dirichlet(np.ones(len(chosen))) * pixels
        tp = (area * rng.uniform(0.5, 0.95, len(chosen))).astype(np.int64)
        counts[i, chosen, 0] = tp
        counts[i, chosen, 1] = (area * rng.uniform(0, 0.2, len(chosen))).astype(np.int64)
        counts[i, chosen, 2] = area.astype(np.int64) - tp
    return counts


def measure(cells: int, images: int, classes: int, present: int, pixels: int, resamples: int) -> dict[str, float]:
    rng = np.random.default_rng(0)
    clean = statistics(rng, images, classes, present, pixels)
    corrupted = [statistics(rng, images, classes, present, pixels) for _ in range(cells)]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "suite.stats.npz"
        start = time.perf_counter()
        write_sidecar(path, "suite", [SidecarEntry(f"m::c::{i}", "miou", c, clean, images) for i, c in enumerate(corrupted)])
        write_seconds = time.perf_counter() - start
        size = path.stat().st_size
    weights = resample_weights(images, resamples, seed=1)
    start = time.perf_counter()
    for c in corrupted:  # baseline and candidate: the same arrays stand in for both (the cost is the same)
        runs = [RunScores.of(a, MeanIoU.resampled_scores, weights) for a in (clean, c)]
        paired_change(runs[1], runs[1])
        paired_gamma_r_change(*runs, *runs)
    seconds = time.perf_counter() - start
    return {"bytes": size, "per_cell": size / cells, "write": write_seconds, "bootstrap": seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cells", type=int, default=85)
    parser.add_argument("--images", type=int, default=2000)
    parser.add_argument("--classes", type=int, default=150)
    parser.add_argument("--present", type=int, default=10)
    parser.add_argument("--resamples", type=int, default=2000)
    parser.add_argument("--pair", nargs=3, metavar=("SIDECAR", "BASE", "CANDIDATE"), default=None)
    parser.add_argument("--confidence", type=float, default=0.95)
    args = parser.parse_args()
    if args.pair:
        pair(Path(args.pair[0]), args.pair[1], args.pair[2], args.resamples, args.confidence)
        return
    shapes = [
        ("demo (64 images, 6 classes, 128x128)", 61, 64, 6, 6, 128 * 128),
        (
            f"{args.images} images, {args.classes} classes, 512x512",
            args.cells, args.images, args.classes, args.present, 512 * 512,
        ),
    ]
    print(f"| shape | cells | sidecar | per cell | write s | bootstrap s ({args.resamples} resamples, all cells) |")
    print("|---|---:|---:|---:|---:|---:|")
    for label, cells, images, classes, present, pixels in shapes:
        m = measure(cells, images, classes, present, pixels, args.resamples)
        print(
            f"| {label} | {cells} | {m['bytes'] / 1e6:.2f} MB | {m['per_cell'] / 1e3:.1f} kB | {m['write']:.2f} | "
            f"{m['bootstrap']:.2f} |"
        )


def pair(path: Path, base: str, candidate: str, resamples: int, confidence: float) -> None:
    cells = read_sidecar(path)
    mine = sorted(c for c in cells if c.startswith(f"{candidate}::"))
    family = sum(2 if c.count("::") == 2 else 1 for c in mine)
    level = 1 - (1 - confidence) / family
    start = time.perf_counter()
    found: dict[str, list[float]] = {"score": [], "gamma_r": []}
    for cell in mine:
        other = cells.get(cell.replace(f"{candidate}::", f"{base}::", 1), {}).get("miou")
        if other is None:
            continue
        stats = cells[cell]["miou"]
        weights = resample_weights(stats.images, resamples, seed=1)
        runs = [
            RunScores.of(a, MeanIoU.resampled_scores, weights) for a in (other.clean, other.corrupted, stats.clean, stats.corrupted)
        ]
        found["score"].append(paired_change(runs[1], runs[3]).detectable(level))
        if cell.count("::") == 2:
            change = paired_gamma_r_change(*runs)
            found["gamma_r"].append(change.detectable(level))
    seconds = time.perf_counter() - start
    print(f"{path}: {candidate} against {base}, {len(mine)} cells, {family} numbers, each at {level:.5f}")
    print("| number | median smallest margin (80% power) | largest | bootstrap of the suite |")
    print("|---|---:|---:|---:|")
    for number, values in found.items():
        print(f"| {number} | {np.median(values):.4g} | {max(values):.4g} | {seconds:.2f} s |")


if __name__ == "__main__":
    main()
