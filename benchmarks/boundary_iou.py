"""What boundary IoU costs per batch, next to mIoU on the same batch.

Label maps of blocks (cityscapes-like: 19 classes, some ignored pixels) and a prediction that
differs near the block edges; ``update`` is timed alone (median of ``--repeats``), after a
warm-up call.

    python benchmarks/boundary_iou.py [--batch 16] [--size 512 512] [--classes 19] [--device cpu|cuda]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from pytest_segrobust.core.types import SemanticMask
from pytest_segrobust.metrics.base import Metric, MetricContext
from pytest_segrobust.metrics.boundary_iou import BoundaryIoU, boundary_width
from pytest_segrobust.metrics.miou import MeanIoU


def clock(device: torch.device) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter()


def label_maps(
    batch: int, height: int, width: int, classes: int, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    """Ground truth of 32-pixel blocks with 2% ignored pixels, and a prediction shifted by 3 pixels."""
    g = torch.Generator().manual_seed(0)
    blocks = torch.randint(0, classes, (batch, 1, height // 32 + 1, width // 32 + 1), generator=g)
    gt = torch.nn.functional.interpolate(blocks.float(), scale_factor=32, mode="nearest")[:, 0, :height, :width].long()
    pred = torch.roll(gt, shifts=(3, 3), dims=(1, 2))
    gt = torch.where(torch.rand(gt.shape, generator=g) < 0.02, 255, gt)
    return pred.to(device), gt.to(device)


def time_update(metric: Metric, pred: torch.Tensor, batch: dict[str, SemanticMask], repeats: int) -> float:
    metric.update(pred, batch)  # warm-up
    times = []
    for _ in range(repeats):
        start = clock(pred.device)
        metric.update(pred, batch)
        times.append(clock(pred.device) - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--size", type=int, nargs=2, default=(512, 512), metavar=("H", "W"))
    parser.add_argument("--classes", type=int, default=19)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()

    device = torch.device(args.device)
    height, width = args.size
    pred, gt = label_maps(args.batch, height, width, args.classes, device)
    batch = {"mask": SemanticMask(gt, 255)}
    context = MetricContext(tuple(f"c{k}" for k in range(args.classes)), 255, device=device)
    print(f"{args.batch} x {height}x{width}, {args.classes} classes, band width {boundary_width(height, width)} px,")
    print(f"device {device}, {torch.get_num_threads()} CPU threads")
    for metric in (BoundaryIoU(context), MeanIoU(context)):
        seconds = time_update(metric, pred, batch, args.repeats)
        print(f"  {metric.label:>12}: update {seconds * 1000:8.1f} ms, score {metric.compute().score:6.2f}")


if __name__ == "__main__":
    main()
