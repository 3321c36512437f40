"""What the decoded-sample cache saves: a model's cells evaluated with the cache off and on.

A run is what one process does for one model of a suite: its clean cell, then its
corrupted cells, all on one dataset. Without the cache every cell reads and decodes every
file again; with it the first cell decodes and the others copy from memory. Runs with the
cache off and on alternate (``--repeats`` rounds, min and median shown) in this one process,
so a busy machine slows both alike; CPU time (one torch thread) is what a loaded machine
disturbs least. One more run of each is profiled with cProfile for the
share of the time spent reading and decoding (the dataset's ``__getitem__``) and copying out
of the cache.

Datasets: ``folder``, a SemanticFolder of photo-like 512x512 PNGs with PNG label maps
written once under ``--root`` (decoding matters), and ``demo``, the embedded demo scenes
(64 procedurally generated 128x128 images). The model is a per-pixel colour binner, a few
operations per pixel, so that the harness's own time shows.

    python benchmarks/decode_cache.py [--dataset folder|demo] [--images 200] [--size 512] [--repeats 2]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import time
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from pytest_segrobust.corruptions import REGISTRY
from pytest_segrobust.data.base import SegmentationDataset
from pytest_segrobust.data.demo import DemoScenes
from pytest_segrobust.data.sample_cache import MEBIBYTE, SampleCache
from pytest_segrobust.data.semantic_folder import SemanticFolder
from pytest_segrobust.engine.evaluation import EvalHooks, EvalSettings, evaluate
from pytest_segrobust.models import as_segmentation_model

# Cheap cells, so that the harness's reading shows; the noise and blur families cost more.
CELLS = [(None, 0), ("contrast", 3), ("jpeg_compression", 3), ("rotate", 3), ("brightness", 3)]
CLASSES = 8


class ColourBinner(torch.nn.Module):
    """Class = the red channel's bin: a model that costs next to nothing per pixel."""

    def __init__(self, classes: int) -> None:
        super().__init__()
        self.classes = classes

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        bins = (images[:, 0] * self.classes).long().clamp_(max=self.classes - 1)
        return torch.nn.functional.one_hot(bins, self.classes).permute(0, 3, 1, 2).float()


def photo_like(rng: np.random.Generator, size: int) -> tuple[np.ndarray, np.ndarray]:
    """A smooth colour field with rectangles and sensor noise (compresses like a photo), and its labels."""
    coarse = rng.uniform(0, 255, (size // 32 + 1, size // 32 + 1, 3)).astype(np.float32)
    smooth = np.asarray(Image.fromarray(coarse.astype(np.uint8)).resize((size, size), Image.BICUBIC), dtype=np.float32)
    labels = np.zeros((size, size), np.uint8)
    for label in range(1, CLASSES):
        y, x = rng.integers(0, size * 3 // 4, 2)
        h, w = rng.integers(size // 16, size // 3, 2)
        labels[y : y + h, x : x + w] = label
        smooth[y : y + h, x : x + w, 0] = (label + 0.5) * 255 / CLASSES
    pixels = np.clip(smooth + rng.normal(0, 6, smooth.shape), 0, 255).astype(np.uint8)
    return pixels, labels


def folder_dataset(root: Path, images: int, size: int) -> SemanticFolder:
    """The synthetic folder under ``root`` (written on first use)."""
    image_dir, mask_dir = root / f"{images}x{size}" / "images", root / f"{images}x{size}" / "masks"
    if len(list(image_dir.glob("*.png"))) != images:
        image_dir.mkdir(parents=True, exist_ok=True)
        mask_dir.mkdir(parents=True, exist_ok=True)
        rng = np.random.default_rng(0)
        for index in range(images):
            pixels, labels = photo_like(rng, size)
            Image.fromarray(pixels).save(image_dir / f"{index:05d}.png")
            Image.fromarray(labels).save(mask_dir / f"{index:05d}.png")
    return SemanticFolder(image_dir, mask_dir, tuple(f"class{k}" for k in range(CLASSES)), name=f"synthetic-{size}")


def run(model: object, dataset: SegmentationDataset, budget_mb: int, batch: int) -> tuple[float, float, list[float]]:
    """One model's cells in order, with a fresh cache of ``budget_mb``: wall and CPU seconds, each cell's score."""
    cache = SampleCache(budget_mb * MEBIBYTE) if budget_mb > 0 else None
    wall, cpu = time.perf_counter(), time.process_time()
    scores = [
        evaluate(
            model,
            dataset,
            None if name is None else REGISTRY.get(name),
            severity,
            settings=EvalSettings.of(batch_size=batch),
            hooks=EvalHooks(sample_cache=cache),
        ).score
        for name, severity in CELLS
    ]
    return time.perf_counter() - wall, time.process_time() - cpu, scores


def read_share(model: object, dataset: SegmentationDataset, budget_mb: int, batch: int) -> tuple[float, float]:
    """Shares of a profiled run's time in the dataset's ``__getitem__`` and in copies out of the cache."""
    profile = cProfile.Profile()
    profile.enable()
    run(model, dataset, budget_mb, batch)
    profile.disable()
    stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    total = max(entry[3] for entry in stats.values())  # the outermost call's cumulative time
    getitem = type(dataset).__getitem__.__code__
    copies = sum(
        entry[3]
        for (path, _, function), entry in stats.items()
        if function == "_copy"
        and path.endswith("sample_cache.py")
        and not any(caller[2] == "_copy" for caller in entry[4])  # count the outermost copy only
    )
    reads = sum(entry[3] for (path, line, function), entry in stats.items()
                if (path, line, function) == (getitem.co_filename, getitem.co_firstlineno, getitem.co_name))  # fmt: skip
    return reads / total, copies / total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", choices=("folder", "demo"), default="folder")
    parser.add_argument("--images", type=int, default=200, help="folder images (demo: scenes)")
    parser.add_argument("--size", type=int, default=512)
    parser.add_argument("--root", type=Path, default=Path("/tmp/segrobust-decode-bench"))
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--budgets", default="0,1024", help="comma-separated cache budgets in MiB (0: off)")
    args = parser.parse_args()

    if args.dataset == "folder":
        dataset: SegmentationDataset = folder_dataset(args.root, args.images, args.size)
    else:
        dataset = DemoScenes("val", size=args.images)
    model = as_segmentation_model(ColourBinner(len(dataset.class_names)))
    budgets = [int(b) for b in args.budgets.split(",")]
    run(model, dataset, 0, args.batch)  # warm-up: imports, kernels, the file system's cache

    walls: dict[int, list[float]] = {b: [] for b in budgets}
    cpus: dict[int, list[float]] = {b: [] for b in budgets}
    scores: dict[int, list[float]] = {}
    for _ in range(args.repeats):
        for budget in budgets:
            wall, cpu, scores[budget] = run(model, dataset, budget, args.batch)
            walls[budget].append(wall)
            cpus[budget].append(cpu)
    if len({tuple(s) for s in scores.values()}) != 1:
        raise SystemExit(f"the cache changed a score: {scores}")

    height, width = dataset[0].image.shape[1:]
    print(f"{dataset.name}: {len(dataset)} images {height}x{width}, {len(CELLS)} cells "
          f"(clean, {', '.join(f'{n}[{s}]' for n, s in CELLS[1:])}), batch {args.batch}, {args.repeats} rounds, "
          f"torch threads {torch.get_num_threads()}\n")  # fmt: skip
    print("| sample cache | wall min s | wall median s | CPU min s | CPU median s | read+decode share | copy share |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for budget in budgets:
        reads, copies = read_share(model, dataset, budget, args.batch)
        label = "off" if budget == 0 else f"{budget} MiB"
        print(f"| {label} | {min(walls[budget]):.2f} | {statistics.median(walls[budget]):.2f} | {min(cpus[budget]):.2f} | "
              f"{statistics.median(cpus[budget]):.2f} | {reads:.0%} | {copies:.1%} |")  # fmt: skip


if __name__ == "__main__":
    main()
