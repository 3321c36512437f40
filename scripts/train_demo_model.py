"""Train the demo TinyUNet on the demo scenes and write its weights.

Usage::

    python scripts/train_demo_model.py                 # writes the packaged weights
    python scripts/train_demo_model.py --epochs 2 --out /tmp/tiny_unet.pt

Training sees clean images only (flips and quarter turns, no noise or blur) so that the
shipped model degrades visibly under corruptions, which is the point of the demo. The run
is reproducible on one machine: fixed seeds, deterministic algorithms, fixed thread count.
At the end it reports the validation mIoU on clean, noisy (Gaussian, std 0.38) and blurred
(Gaussian, sigma 3) images.
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from pytest_segrobust.data.demo import DemoScenes
from pytest_segrobust.models.demo import TinyUNet

DEFAULT_OUT = Path(__file__).resolve().parent.parent / "pytest_segrobust" / "models" / "weights" / "tiny_unet.pt"
NOISE_STD = 0.38
BLUR_SIGMA = 3.0


def parse_args() -> argparse.Namespace:
    """Read the command line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=5, help="passes over the training split")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--lr", type=float, default=4e-3, help="peak learning rate of the one-cycle schedule")
    parser.add_argument("--weight-decay", type=float, default=1e-4)
    parser.add_argument("--train-size", type=int, default=None, help="training scenes (default: the split's)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where to write the state dict")
    return parser.parse_args()


def load_split(dataset: DemoScenes) -> tuple[torch.Tensor, torch.Tensor]:
    """Generate a whole split into memory; the demo splits are small.

    Shape:
        return: images ``(N, 3, H, W)`` uint8; masks ``(N, H, W)`` int64.
    """
    samples = [dataset[i] for i in range(len(dataset))]
    return torch.stack([s.image for s in samples]), torch.stack([s.target.mask for s in samples])


def augment(images: torch.Tensor, masks: torch.Tensor, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Random flip and quarter turn of a whole batch; geometry only, never pixel values.

    Shape:
        images: ``(B, 3, H, W)``; masks: ``(B, H, W)``; return: same (H = W).
    """
    flip = bool(torch.randint(0, 2, (1,), generator=generator).item())
    turns = int(torch.randint(0, 4, (1,), generator=generator).item())
    if flip:
        images, masks = images.flip(-1), masks.flip(-1)
    return torch.rot90(images, turns, dims=(-2, -1)), torch.rot90(masks, turns, dims=(-2, -1))


def gaussian_blur(images: torch.Tensor, sigma: float) -> torch.Tensor:
    """Separable Gaussian blur with a 3-sigma support and reflected borders.

    Shape:
        images: ``(B, C, H, W)`` float; return: same.
    """
    radius = math.ceil(3 * sigma)
    offsets = torch.arange(-radius, radius + 1, dtype=images.dtype)
    kernel = torch.exp(-(offsets**2) / (2 * sigma**2))
    kernel = kernel / kernel.sum()
    channels = images.shape[1]
    padded = F.pad(images, (radius, radius, radius, radius), mode="reflect")
    out = F.conv2d(padded, kernel.view(1, 1, -1, 1).expand(channels, 1, -1, 1), groups=channels)
    return F.conv2d(out, kernel.view(1, 1, 1, -1).expand(channels, 1, 1, -1), groups=channels)


def gaussian_noise(images: torch.Tensor, std: float, seed: int) -> torch.Tensor:
    """Additive Gaussian noise in ``[0, 1]`` scale, clamped; seeded so reports repeat.

    Shape:
        images: ``(B, C, H, W)`` float; return: same.
    """
    generator = torch.Generator().manual_seed(seed)
    return (images + std * torch.randn(images.shape, generator=generator)).clamp(0.0, 1.0)


@torch.no_grad()
def confusion_matrix(
    model: TinyUNet, images: torch.Tensor, masks: torch.Tensor, corrupt: str, ignore_index: int, batch_size: int
) -> torch.Tensor:
    """Dataset-level confusion matrix (rows: ground truth, columns: prediction).

    Args:
        model: Model in eval mode.
        images: The split's images.
        masks: The split's label maps.
        corrupt: ``"clean"``, ``"noise"`` or ``"blur"``.
        ignore_index: Label of pixels that are not scored.
        batch_size: Images per forward pass.

    Shape:
        images: ``(N, 3, H, W)`` uint8; masks: ``(N, H, W)``; return: ``(K, K)`` int64.
    """
    num_classes = model.num_classes
    matrix = torch.zeros(num_classes, num_classes, dtype=torch.int64)
    for start in range(0, len(images), batch_size):
        batch = images[start : start + batch_size].float() / 255.0
        if corrupt == "noise":
            batch = gaussian_noise(batch, NOISE_STD, seed=start)
        elif corrupt == "blur":
            batch = gaussian_blur(batch, BLUR_SIGMA)
        predicted = model(batch).argmax(dim=1).flatten()
        truth = masks[start : start + batch_size].flatten()
        scored = truth != ignore_index
        pairs = truth[scored] * num_classes + predicted[scored]
        matrix += torch.bincount(pairs, minlength=num_classes**2).view(num_classes, num_classes)
    return matrix


def mean_iou(matrix: torch.Tensor) -> float:
    """Mean IoU in percent over the classes present in ground truth or prediction."""
    true_positive = matrix.diag().double()
    union = matrix.sum(0).double() + matrix.sum(1).double() - true_positive
    present = union > 0
    return float((true_positive[present] / union[present]).mean() * 100)


def evaluate(model: TinyUNet, images: torch.Tensor, masks: torch.Tensor, corrupt: str, ignore_index: int) -> float:
    """Compute the validation mIoU in percent under one corruption (or ``"clean"``)."""
    model.eval()
    return mean_iou(confusion_matrix(model, images, masks, corrupt, ignore_index, batch_size=32))


def main() -> None:
    """Train, report and save."""
    args = parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    torch.use_deterministic_algorithms(True)
    generator = torch.Generator().manual_seed(args.seed)

    started = time.perf_counter()
    train_set, val_set = DemoScenes("train", size=args.train_size), DemoScenes("val")
    train_images, train_masks = load_split(train_set)
    val_images, val_masks = load_split(val_set)
    print(f"generated {len(train_set)} train + {len(val_set)} val scenes in {time.perf_counter() - started:.1f}s")

    model = TinyUNet(num_classes=len(train_set.class_names)).to(memory_format=torch.channels_last)
    print(f"TinyUNet: {sum(p.numel() for p in model.parameters())} parameters")
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    steps_per_epoch = math.ceil(len(train_images) / args.batch_size)
    schedule = torch.optim.lr_scheduler.OneCycleLR(
        optimizer, max_lr=args.lr, total_steps=args.epochs * steps_per_epoch, pct_start=0.15
    )

    for epoch in range(1, args.epochs + 1):
        model.train()
        order = torch.randperm(len(train_images), generator=generator)
        total_loss = 0.0
        for step in range(steps_per_epoch):
            chosen = order[step * args.batch_size : (step + 1) * args.batch_size]
            images, masks = augment(train_images[chosen], train_masks[chosen], generator)
            # channels_last runs the CPU convolutions noticeably faster.
            inputs = (images.float() / 255.0).contiguous(memory_format=torch.channels_last)
            loss = F.cross_entropy(model(inputs), masks, ignore_index=train_set.ignore_index)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            schedule.step()
            total_loss += loss.item()
        val_miou = evaluate(model, val_images, val_masks, "clean", val_set.ignore_index)
        print(
            f"epoch {epoch}/{args.epochs}  loss {total_loss / steps_per_epoch:.4f}  "
            f"val mIoU {val_miou:.1f}  ({time.perf_counter() - started:.0f}s)",
            flush=True,
        )

    model = model.to(memory_format=torch.contiguous_format)
    state = {name: tensor.detach().clone().contiguous() for name, tensor in model.state_dict().items()}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    torch.save(state, args.out)
    print(f"wrote {args.out} ({args.out.stat().st_size / 1e6:.2f} MB) after {time.perf_counter() - started:.0f}s")

    clean = evaluate(model, val_images, val_masks, "clean", val_set.ignore_index)
    noisy = evaluate(model, val_images, val_masks, "noise", val_set.ignore_index)
    blurred = evaluate(model, val_images, val_masks, "blur", val_set.ignore_index)
    print(f"val mIoU clean {clean:.1f}")
    print(f"val mIoU gaussian noise std {NOISE_STD}: {noisy:.1f}  (relative {noisy / clean:.2f})")
    print(f"val mIoU gaussian blur sigma {BLUR_SIGMA}: {blurred:.1f}  (relative {blurred / clean:.2f})")


if __name__ == "__main__":
    main()
