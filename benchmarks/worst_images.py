"""What a model's worst images cost per cell, with and without the clean side shared, and their size.

For one model and dataset of the demo, each cell's worst images are searched
(:func:`pytest_segrobust.engine.worst_images.describe_worst`) over the first 16 images: ``fresh`` predicts
each image clean and corrupted in every cell (what the report did before :class:`CleanViews`),
``shared`` keeps one :class:`~pytest_segrobust.engine.worst_images.CleanViews` for all the cells, so each cell
predicts its corrupted images only. Both must give the same evidence (checked). Rounds are
interleaved and timed in CPU seconds of this one thread (``time.thread_time``), which load on a
shared machine disturbs least.

Then the size of the evidence as it crosses a process or a file (``WorstImages.to_json``, and a
suite's ``SuitePictures.to_json``, compact JSON), for the demo's 128 x 128 images and 512 x 512 ones.

    python benchmarks/worst_images.py [--rounds 3] [--cells 6]
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from pytest_segrobust.corruptions import REGISTRY
from pytest_segrobust.data.demo import DemoScenes
from pytest_segrobust.engine.suite_pictures import suite_pictures
from pytest_segrobust.engine.worst_images import CleanViews, describe_worst
from pytest_segrobust.models.adapters import adapt_model
from pytest_segrobust.models.demo import tiny_unet
from pytest_segrobust.tasks import get_task

CORRUPTIONS = ("gaussian_noise", "shot_noise", "defocus_blur", "jpeg_compression", "contrast", "rotate")


def cells(count: int) -> list[tuple[str, int]]:
    every = [(name, severity) for severity in (5, 3, 1, 2, 4) for name in CORRUPTIONS]
    return every[:count]


def search(model: object, dataset: DemoScenes, chosen: list[tuple[str, int]], views: CleanViews | None) -> list:
    return [
        describe_worst(
            model, dataset, REGISTRY.get(name), severity, task="semantic", metric="miou", seed=0, limit=None,
            gamma_r=None, clean_views=views,
        )
        for name, severity in chosen
    ]  # fmt: skip


def size(value: object) -> int:
    return len(json.dumps(value.to_json(), separators=(",", ":")).encode())  # type: ignore[attr-defined]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cells", type=int, default=6, help="cells of one model searched per round (at most 30)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    model = adapt_model(tiny_unet(), get_task("semantic"), device=torch.device("cpu"))
    dataset = DemoScenes("val")
    chosen = cells(args.cells)
    search(model, dataset, chosen[:1], None)  # warm up
    times: dict[str, list[float]] = {"fresh": [], "shared": []}
    for _ in range(args.rounds):
        results = {}
        for mode in ("fresh", "shared"):
            start = time.thread_time()
            results[mode] = search(model, dataset, chosen, CleanViews() if mode == "shared" else None)
            times[mode].append(time.thread_time() - start)
        assert results["fresh"] == results["shared"], "shared clean views changed the evidence"
    print(f"worst images of {len(chosen)} cells of tiny-unet on the demo (16 images each), CPU s of one thread")
    print(f"{'mode':<8} {'min':>7} {'median':>7} {'per cell':>9}")
    for mode, seconds in times.items():
        ordered = sorted(seconds)
        print(f"{mode:<8} {ordered[0]:>7.2f} {ordered[len(ordered) // 2]:>7.2f} {ordered[0] / len(chosen):>9.3f}")
    print(f"shared / fresh (min): {min(times['shared']) / min(times['fresh']):.2f}")
    print()
    print(f"{'evidence':<44} {'bytes (JSON)':>12}")
    for side in (128, 512):
        data = dataset if side == 128 else DemoScenes("val", size=16, image_size=side)
        worst = search(model, data, [("rotate", 5)], None)[0]
        first = data[0]
        noise_like = [REGISTRY.get(name) for name in CORRUPTIONS]
        pictures = suite_pictures("demo", first.image, first.sample_id, noise_like, severities=[1, 2, 3, 4, 5], seed=0)
        print(f"{f'WorstImages, 3 images of {side}x{side} (rotate 5)':<44} {size(worst):>12,}")
        print(f"{f'SuitePictures, {len(noise_like)} corruptions, {side}x{side}':<44} {size(pictures):>12,}")


if __name__ == "__main__":
    main()
