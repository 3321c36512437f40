"""What the harness costs on top of inference, measured so that the figure means something.

Two ways of scoring the same model on the same images run interleaved, repeated, in one
process:

(a) bare: the adapted model's ``predict`` alone, on batches already decoded, in memory on
    the device and scaled to [0, 1] (what a hand-written evaluation loop cannot do faster);
(b) harness: ``evaluate()`` of the clean cell, which reads and decodes every sample from
    disk, collates it onto the device, predicts, checks the predictions and accumulates
    the metric's statistics.

Each repeat runs (a) and (b) in alternating order (a b, then b a) so that a slow phase of
a shared machine hits both alike; the table gives min and median milliseconds per image and
the overhead ``(b - a) / a`` of the minima (the figure to quote: noise only ever adds time)
and of the medians. A corrupted cell is timed the same way and its corruption's share is
shown apart, since it is work the harness exists to do, not overhead.

Images are demo scenes rendered at ``--size`` and written as PNG files read through
``SemanticFolder``, so reading and decoding cost what they cost for a real dataset.
Models: ``tiny`` (the demo's U-Net, the worst case: almost no compute), ``wide`` (the
same U-Net 8x wider) and ``segformer-b0`` (SegFormer-B0's architecture with random
weights through the transformers adapter; needs the ``transformers`` extra).

    python benchmarks/overhead.py [--model segformer-b0] [--images 16] [--size 512] [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image as PILImage

from pytest_segrobust.corruptions import REGISTRY
from pytest_segrobust.data.demo import CLASS_NAMES, DemoScenes
from pytest_segrobust.data.semantic_folder import SemanticFolder
from pytest_segrobust.evaluation import evaluate
from pytest_segrobust.models import as_segmentation_model
from pytest_segrobust.models.demo import DEFAULT_WIDTHS, TinyUNet, tiny_unet
from pytest_segrobust.seeding import sample_seed
from pytest_segrobust.types import Image


def clock(device: torch.device) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter()


def write_dataset(folder: Path, images: int, size: int) -> SemanticFolder:
    """Demo scenes at ``size`` as PNG image and label files in ``folder``."""
    (folder / "images").mkdir()
    (folder / "masks").mkdir()
    scenes = DemoScenes("val", size=images, image_size=size)
    for index in range(images):
        sample = scenes[index]
        PILImage.fromarray(sample.image.permute(1, 2, 0).numpy()).save(folder / "images" / f"{index:04d}.png")
        PILImage.fromarray(sample.target.mask.numpy().astype(np.uint8)).save(folder / "masks" / f"{index:04d}.png")
    return SemanticFolder(folder / "images", folder / "masks", CLASS_NAMES, name="overhead")


def build_model(name: str, device: torch.device, folder: Path) -> Any:
    if name == "tiny":
        return as_segmentation_model(tiny_unet(), device)
    if name == "wide":
        torch.manual_seed(0)
        return as_segmentation_model(TinyUNet(widths=tuple(8 * w for w in DEFAULT_WIDTHS)).eval(), device)
    import transformers  # the transformers extra

    from pytest_segrobust.models.transformers import load_transformers

    names = list(CLASS_NAMES)
    config = transformers.SegformerConfig(
        num_labels=len(names), id2label=dict(enumerate(names)), label2id={n: i for i, n in enumerate(names)}
    )
    torch.manual_seed(0)
    checkpoint = folder / "segformer-b0"
    transformers.SegformerForSemanticSegmentation(config).save_pretrained(checkpoint)
    # No resize: the processor's size is the images' size, so inference is SegFormer-B0 at --size.
    size = int(PILImage.open(next((folder / "images").iterdir())).size[0])
    transformers.SegformerImageProcessorPil(size={"height": size, "width": size}).save_pretrained(checkpoint)
    return load_transformers(checkpoint, task="semantic", device=device, class_names=names, label_map=None, allow_download=False)


def timed(run: Callable[[], object], device: torch.device) -> float:
    start = clock(device)
    run()
    return clock(device) - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=("tiny", "wide", "segformer-b0"), default="segformer-b0")
    parser.add_argument("--images", type=int, default=16)
    parser.add_argument("--size", type=int, default=512)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--corruption", default="contrast", help="the corrupted cell's corruption (severity 3)")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()

    device = torch.device(args.device)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        dataset = write_dataset(folder, args.images, args.size)
        model = build_model(args.model, device, folder)
        samples = [dataset[i] for i in range(args.images)]
        batches = [
            torch.stack([s.image for s in samples[i : i + args.batch]]).to(device).float() / 255
            for i in range(0, args.images, args.batch)
        ]
        corruption = REGISTRY.get(args.corruption)
        seeds = [
            [sample_seed(0, s.sample_id, args.corruption, 3) for s in samples[i : i + args.batch]]
            for i in range(0, args.images, args.batch)
        ]

        def bare() -> None:
            with torch.inference_mode():
                for b in batches:
                    model.predict(b)

        def clean() -> None:
            evaluate(model, dataset, batch_size=args.batch)

        def corrupted() -> None:
            evaluate(model, dataset, corruption, 3, batch_size=args.batch)

        def corrupt_only() -> None:
            for b, s in zip(batches, seeds, strict=True):
                corruption({"image": Image(b)}, 3, s)

        runs: dict[str, Callable[[], None]] = {
            "bare": bare, "harness clean": clean, "harness corrupted": corrupted, "corruption alone": corrupt_only
        }
        for run in runs.values():  # warm-up: lazy imports, allocator, first-call kernels
            run()
        times: dict[str, list[float]] = {name: [] for name in runs}
        order = list(runs)
        for repeat in range(args.repeats):
            for name in order if repeat % 2 == 0 else reversed(order):
                times[name].append(1000 * timed(runs[name], device) / args.images)

    print(
        f"model {args.model} on {device}, {args.images} PNG images of {args.size}x{args.size}, batch {args.batch}, "
        f"{args.repeats} interleaved repeats, torch threads {torch.get_num_threads()}\n"
    )
    print("| run | min ms/img | median ms/img | overhead (min) | overhead (median) |")
    print("|---|---:|---:|---:|---:|")
    bare_min, bare_median = min(times["bare"]), statistics.median(times["bare"])
    for name, values in times.items():
        low, mid = min(values), statistics.median(values)
        if name in ("harness clean",):
            over = f"{100 * (low - bare_min) / bare_min:+.1f}% | {100 * (mid - bare_median) / bare_median:+.1f}%"
        elif name == "harness corrupted":
            net_low = low - min(times["corruption alone"])
            net_mid = mid - statistics.median(times["corruption alone"])
            over = (
                f"{100 * (net_low - bare_min) / bare_min:+.1f}% | {100 * (net_mid - bare_median) / bare_median:+.1f}% "
                "(corruption's time taken out)"
            )
        else:
            over = " | "
        print(f"| {name} | {low:.1f} | {mid:.1f} | {over} |")


if __name__ == "__main__":
    main()
