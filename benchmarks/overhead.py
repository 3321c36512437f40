"""What the harness costs on top of inference: the same model on the same images, side by side.

(a) bare: the model's forward passes alone, on batches already in memory on the device;
(b) harness: ``evaluate()`` for the same cells, streaming samples, corrupting on the
    device, predicting and accumulating the confusion matrix.
The overhead is (b - a) / a. Components are also timed alone: reading samples, corrupting,
the metric. ``--model wide`` uses a TinyUNet 8x wider (about 64x the compute per pixel) as
a stand-in for a real-size network; the demo's tiny U-Net is the worst case.
``--task instance`` wraps the network in connected components (part of the model, so of
the bare time) and scores COCO mask and box AP.

    python benchmarks/overhead.py [--images 64] [--model tiny|wide] [--task semantic|instance] [--device cpu|cuda]
"""

from __future__ import annotations

import argparse
import time

import torch

from pytest_segrobust.corruptions import REGISTRY
from pytest_segrobust.data.base import instance_categories
from pytest_segrobust.data.demo import DemoScenes
from pytest_segrobust.evaluation import evaluate
from pytest_segrobust.metrics import ConfusionMatrix
from pytest_segrobust.metrics.coco_map import CocoMAP
from pytest_segrobust.models import ComponentInstances, as_instance_model, as_segmentation_model
from pytest_segrobust.models.demo import DEFAULT_WIDTHS, TinyUNet, tiny_unet
from pytest_segrobust.seeding import sample_seed
from pytest_segrobust.types import Image, SemanticMask

CELLS = [("gaussian_noise", 3), ("shot_noise", 3), ("defocus_blur", 3), ("jpeg_compression", 3), ("contrast", 3), ("rotate", 3)]


def clock(device: torch.device) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=64)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--model", choices=("tiny", "wide"), default="tiny")
    parser.add_argument("--task", choices=("semantic", "instance"), default="semantic")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()

    device = torch.device(args.device)
    module = tiny_unet() if args.model == "tiny" else TinyUNet(widths=tuple(8 * w for w in DEFAULT_WIDTHS))
    instance = args.task == "instance"
    model = as_instance_model(ComponentInstances(module), device) if instance else as_segmentation_model(module, device)
    metric_name = "map" if instance else "miou"
    dataset = DemoScenes("val", size=args.images)
    samples = [dataset[i] for i in range(args.images)]
    batches = [
        torch.stack([s.image for s in samples[i : i + args.batch]]).to(device).float() / 255
        for i in range(0, args.images, args.batch)
    ]
    masks = [torch.stack([s.target.mask for s in samples[i : i + args.batch]]).to(device) for i in range(0, args.images, args.batch)]
    evaluate(model, dataset, REGISTRY.get("rotate"), 1, metric=metric_name, batch_size=args.batch, limit=args.batch)

    print(f"{args.task} model {args.model} on {device}, {args.images} demo images of 128x128, batch {args.batch}, severity 3\n")
    print("| cell | bare inference s | harness s | overhead | read samples s | corrupt s | metric s |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    total_bare = total_harness = 0.0
    for name, severity in CELLS:
        corruption = REGISTRY.get(name)
        start = clock(device)
        predictions = [model.predict(b) for b in batches]
        bare = clock(device) - start

        start = clock(device)
        evaluate(model, dataset, corruption, severity, metric=metric_name, batch_size=args.batch)
        harness = clock(device) - start

        start = clock(device)
        for i in range(args.images):
            dataset[i]
        read = clock(device) - start

        start = clock(device)
        for k, b in enumerate(batches):
            ids = samples[k * args.batch : (k + 1) * args.batch]
            corruption({"image": Image(b), "mask": SemanticMask(masks[k])}, severity, [sample_seed(0, s.sample_id, name, severity) for s in ids])
        corrupt = clock(device) - start

        start = clock(device)
        if instance:
            coco = CocoMAP(instance_categories(dataset), ("segm", "bbox"))
            for index, (sample, predicted) in enumerate(zip(samples, (p for batch in predictions for p in batch))):
                coco.update(index, *sample.image.shape[1:], sample.instances, predicted)
            coco.compute()
        else:
            metric = ConfusionMatrix(len(dataset.class_names), device=device)
            for p, m in zip(predictions, masks):
                metric.update(p, m)
            metric.compute()
        metric_time = clock(device) - start

        total_bare += bare
        total_harness += harness
        print(
            f"| {name}::{severity} | {bare:.3f} | {harness:.3f} | {100 * (harness - bare) / bare:+.0f}% | "
            f"{read:.3f} | {corrupt:.3f} | {metric_time:.4f} |"
        )
    print(f"| **all** | {total_bare:.3f} | {total_harness:.3f} | {100 * (total_harness - total_bare) / total_bare:+.0f}% | | | |")


if __name__ == "__main__":
    main()
