"""What a model's worst images cost per cell: scoring the first images in the evaluation, drawing the picks; their size.

For one model and dataset of the demo, each cell is evaluated with and without its first 16
images scored on their own (``EvalSettings.scored_images``: what the suite's evaluations record
for the report), and its worst images are then drawn from those scores
(:func:`pytest_segrobust.engine.worst_images.describe_worst`): ``fresh`` predicts the picked images
clean in every cell, ``shared`` keeps one :class:`~pytest_segrobust.engine.worst_images.CleanViews`
for all the cells. Both must give the same evidence (checked). Rounds are interleaved and timed
in CPU seconds of this one thread (``time.thread_time``), which load on a shared machine disturbs least.

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
from pytest_segrobust.engine.evaluation import EvalSettings, evaluate
from pytest_segrobust.engine.suite_pictures import suite_pictures
from pytest_segrobust.engine.worst_images import CONSIDERED, CleanViews, ImageScores, describe_worst
from pytest_segrobust.models.adapters import adapt_model
from pytest_segrobust.models.demo import tiny_unet
from pytest_segrobust.tasks import get_task

CORRUPTIONS = ("gaussian_noise", "shot_noise", "defocus_blur", "jpeg_compression", "contrast", "rotate")


def cells(count: int) -> list[tuple[str, int]]:
    every = [(name, severity) for severity in (5, 3, 1, 2, 4) for name in CORRUPTIONS]
    return every[:count]


def scores(model: object, dataset: DemoScenes, chosen: list[tuple[str, int]], scored: int) -> list[ImageScores]:
    """Each cell evaluated as the suite evaluates it, its first ``scored`` images scored on their own."""
    settings = EvalSettings.of("semantic", ["miou"], scored_images=scored)
    clean = evaluate(model, dataset, None, 0, settings).image_scores
    return [
        ImageScores(clean, evaluate(model, dataset, REGISTRY.get(name), severity, settings).image_scores)
        for name, severity in chosen
    ]


Cells = list[tuple[str, int]]


def search(model: object, data: DemoScenes, chosen: Cells, found: list[ImageScores], views: CleanViews | None) -> list:
    return [
        describe_worst(model, data, REGISTRY.get(name), severity, cell, task="semantic", metric="miou", seed=0,
                       gamma_r=None, clean_views=views)
        for (name, severity), cell in zip(chosen, found, strict=True)
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
    found = scores(model, dataset, chosen, CONSIDERED)
    search(model, dataset, chosen[:1], found[:1], None)  # warm up
    times: dict[str, list[float]] = {"evaluate": [], f"evaluate, {CONSIDERED} scored": [], "fresh": [], "shared": []}
    for _ in range(args.rounds):
        for scored in (0, CONSIDERED):
            start = time.thread_time()
            scores(model, dataset, chosen, scored)
            times["evaluate" if scored == 0 else f"evaluate, {CONSIDERED} scored"].append(time.thread_time() - start)
        results = {}
        for mode in ("fresh", "shared"):
            start = time.thread_time()
            results[mode] = search(model, dataset, chosen, found, CleanViews() if mode == "shared" else None)
            times[mode].append(time.thread_time() - start)
        assert results["fresh"] == results["shared"], "shared clean views changed the evidence"
    print(f"{len(chosen)} cells of tiny-unet on the demo, and their clean cell: CPU s of one thread")
    print(f"{'mode':<22} {'min':>7} {'median':>7} {'per cell':>9}")
    for mode, seconds in times.items():
        ordered = sorted(seconds)
        print(f"{mode:<22} {ordered[0]:>7.2f} {ordered[len(ordered) // 2]:>7.2f} {ordered[0] / len(chosen):>9.3f}")
    print(f"shared / fresh (min): {min(times['shared']) / min(times['fresh']):.2f}")
    print()
    print(f"{'evidence':<44} {'bytes (JSON)':>12}")
    for side in (128, 512):
        data = dataset if side == 128 else DemoScenes("val", size=16, image_size=side)
        worst = search(model, data, [("rotate", 5)], scores(model, data, [("rotate", 5)], CONSIDERED), None)[0]
        first = data[0]
        noise_like = [REGISTRY.get(name) for name in CORRUPTIONS]
        pictures = suite_pictures("demo", first.image, first.sample_id, noise_like, severities=[1, 2, 3, 4, 5], seed=0)
        print(f"{f'WorstImages, 3 images of {side}x{side} (rotate 5)':<44} {size(worst):>12,}")
        print(f"{f'SuitePictures, {len(noise_like)} corruptions, {side}x{side}':<44} {size(pictures):>12,}")


if __name__ == "__main__":
    main()
