"""Clean mIoU of the demo model on each demo split: the size of the natural shift.

The ``ood-easy`` and ``ood-hard`` splits of the embedded demo are meant to cost the demo
model a mild and a clear drop against ``val`` (no corruption applied). This prints the
clean mIoU and the IoU per class on every split, to check that ordering after a change to
the generator or to the model.

    python benchmarks/natural_shift.py [--size 64] [--splits val ood-easy ood-hard] [--device cpu]
"""

from __future__ import annotations

import argparse

import torch

from pytest_segrobust.data.demo import CLASS_NAMES, DemoScenes
from pytest_segrobust.metrics import ConfusionMatrix
from pytest_segrobust.metrics.miou import IoUResult
from pytest_segrobust.models import as_segmentation_model
from pytest_segrobust.models.demo import tiny_unet


def clean_iou(split: str, size: int | None, device: str, batch_size: int = 16) -> IoUResult:
    """mIoU of the demo model on one split, without corruption."""
    model = as_segmentation_model(tiny_unet(device=device), device=device)
    dataset = DemoScenes(split, size=size)
    matrix = ConfusionMatrix(len(dataset.class_names), dataset.ignore_index, device=model.device)
    for start in range(0, len(dataset), batch_size):
        samples = [dataset[i] for i in range(start, min(start + batch_size, len(dataset)))]
        images = torch.stack([sample.image for sample in samples]).to(model.device).float() / 255.0
        targets = torch.stack([sample.target.mask for sample in samples]).to(model.device)
        matrix.update(model.predict(images), targets)
    return matrix.compute()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=None, help="scenes per split (default: the split's)")
    parser.add_argument("--splits", nargs="+", default=["val", "ood-easy", "ood-hard"])
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    print("| split | mIoU | " + " | ".join(CLASS_NAMES) + " |")
    print("|---|---:|" + "---:|" * len(CLASS_NAMES))
    for split in args.splits:
        result = clean_iou(split, args.size, args.device)
        per_class = " | ".join("-" if iou is None else f"{iou:.1f}" for iou in result.per_class)
        print(f"| {split} | {result.miou:.1f} | {per_class} |")


if __name__ == "__main__":
    main()
