"""Train ShapesNet on the package's procedural training scenes and write ``shapes_net.pt``.

Usage (from this folder; a few CPU-minutes)::

    python train.py                    # rewrites shapes_net.pt
    python train.py --epochs 2 --out /tmp/shapes_net.pt

Training sees clean scenes only (flips and quarter turns), so corruptions hurt the model, which
is what the suite measures. Every draw comes from generators seeded by ``--seed``: the same
machine writes the same weights. At the end it prints the clean mIoU of the image folder.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
import torch.nn.functional as F
from shapes_net import CLASS_NAMES, WEIGHTS, ShapesNet

from pytest_segrobust.data.demo import DemoScenes
from pytest_segrobust.data.semantic_folder import SemanticFolder

HERE = Path(__file__).resolve().parent


def parse_args() -> argparse.Namespace:
    """Read the command line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=12, help="passes over the training scenes")
    parser.add_argument("--scenes", type=int, default=512, help="training scenes (64x64)")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=5e-3, help="peak learning rate of the one-cycle schedule")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=WEIGHTS, help="where to write the state dict")
    return parser.parse_args()


def initialise(model: ShapesNet, generator: torch.Generator) -> None:
    """He-normal weights and zero biases, drawn from ``generator`` (never torch's global one)."""
    for name, parameter in model.named_parameters():
        if name.endswith("bias"):
            torch.nn.init.zeros_(parameter)
        else:
            torch.nn.init.kaiming_normal_(parameter, nonlinearity="relu", generator=generator)


def augment(images: torch.Tensor, masks: torch.Tensor, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """A random flip and quarter turn of the whole batch (geometry only).

    Shape:
        images: ``(B, 3, H, W)``; masks: ``(B, H, W)``; return: same.
    """
    if int(torch.randint(0, 2, (1,), generator=generator)):
        images, masks = images.flip(-1), masks.flip(-1)
    turns = int(torch.randint(0, 4, (1,), generator=generator))
    return torch.rot90(images, turns, dims=(-2, -1)), torch.rot90(masks, turns, dims=(-2, -1))


@torch.no_grad()
def folder_miou(model: ShapesNet) -> float:
    """Clean mIoU in percent on ``data/`` (classes present in truth or prediction)."""
    folder = SemanticFolder(HERE / "data" / "images", HERE / "data" / "masks", CLASS_NAMES)
    matrix = torch.zeros(len(CLASS_NAMES), len(CLASS_NAMES), dtype=torch.int64)
    for index in range(len(folder)):
        sample = folder[index]
        predicted = model(sample.image[None].float() / 255).argmax(1)[0]
        pairs = sample.target.mask.flatten() * len(CLASS_NAMES) + predicted.flatten()
        matrix += torch.bincount(pairs, minlength=len(CLASS_NAMES) ** 2).view(len(CLASS_NAMES), -1)
    hits = matrix.diag().double()
    union = matrix.sum(0).double() + matrix.sum(1).double() - hits
    return float((hits[union > 0] / union[union > 0]).mean() * 100)


def main() -> None:
    """Train, write the weights, print the clean mIoU of the image folder."""
    args = parse_args()
    torch.use_deterministic_algorithms(True)
    generator = torch.Generator().manual_seed(args.seed)
    scenes = DemoScenes("train", size=args.scenes, image_size=64)
    samples = [scenes[index] for index in range(len(scenes))]
    images = torch.stack([sample.image for sample in samples]).float() / 255
    masks = torch.stack([sample.target.mask for sample in samples])
    model = ShapesNet()
    initialise(model, generator)
    steps = args.epochs * (len(images) // args.batch_size)
    optimiser = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=1e-4)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimiser, max_lr=args.lr, total_steps=steps)
    model.train()
    for epoch in range(args.epochs):
        order = torch.randperm(len(images), generator=generator)
        total = 0.0
        for start in range(0, len(order) - args.batch_size + 1, args.batch_size):
            chosen = order[start : start + args.batch_size]
            batch, truth = augment(images[chosen], masks[chosen], generator)
            loss = F.cross_entropy(model(batch), truth)
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            schedule.step()
            total += float(loss.detach())
        print(f"epoch {epoch + 1}/{args.epochs}: loss {total / (len(order) // args.batch_size):.3f}")
    model.eval()
    torch.save(model.state_dict(), args.out)
    print(f"wrote {args.out}; clean mIoU on data/: {folder_miou(model):.1f}")


if __name__ == "__main__":
    main()
