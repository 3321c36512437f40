"""Train the demo promptable model's head on the demo scenes and write its weights.

Usage::

    python scripts/train_demo_promptable.py                   # writes the packaged head weights
    python scripts/train_demo_promptable.py --steps 50 --out /tmp/tiny_promptable.pt

The image side is the demo TinyUNet (``models/weights/tiny_unet.pt``), frozen, so each training
scene's features are computed once and only the prompt head learns. Each example is one
instance of a training scene with one prompt set: one to three foreground clicks (the first at
the instance's innermost pixel half of the time, the others uniform in its mask) or its tight
box. Clean images and clean prompts only. The run is reproducible on one machine: its own
seeded generator, deterministic algorithms, a fixed thread count.

At the end it reports the clean validation mIoU per prompt kind through
:func:`pytest_segrobust.engine.evaluation.evaluate`.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from pytest_segrobust.core.prompts import BOX, FOREGROUND, POINTS, PromptSet
from pytest_segrobust.data.demo import demo_dataset
from pytest_segrobust.data.prompt_protocol import StandardProtocol, StandardProtocolSettings, innermost_pixel
from pytest_segrobust.engine.evaluation import EvalSettings, evaluate
from pytest_segrobust.models.demo import WEIGHTS_PATH as UNET_WEIGHTS_PATH
from pytest_segrobust.models.demo import load_weights
from pytest_segrobust.models.demo_promptable import TinyPromptable, TinyPromptableNet, prompt_maps
from pytest_segrobust.tasks.promptable import PromptableTask

DEFAULT_OUT = Path(__file__).resolve().parent.parent / "pytest_segrobust" / "models" / "weights" / "tiny_promptable.pt"


def parse_args() -> argparse.Namespace:
    """Read the command line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=150, help="optimiser steps")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=1e-2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--scenes", type=int, default=96, help="training scenes used (evenly spaced)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--resume", type=Path, default=None, help="start from this head's weights")
    return parser.parse_args()


def _prompt_set(mask: torch.Tensor, generator: torch.Generator, centre: int) -> PromptSet:
    """A random prompt set of one instance: clicks or its tight box."""
    width = int(mask.shape[1])
    if bool(torch.rand((), generator=generator) < 0.5):
        ys, xs = mask.any(dim=1).nonzero().flatten(), mask.any(dim=0).nonzero().flatten()
        box = torch.tensor([float(xs[0]), float(ys[0]), float(xs[-1]) + 1, float(ys[-1]) + 1])
        return PromptSet(torch.zeros(0, 2), torch.zeros(0, dtype=torch.int64), box, BOX, 0)
    pixels = mask.flatten().nonzero().flatten()
    count = int(torch.randint(1, 4, (), generator=generator))
    chosen = pixels[torch.randint(0, pixels.numel(), (count,), generator=generator)]
    if bool(torch.rand((), generator=generator) < 0.5):
        chosen[0] = centre
    points = torch.stack([chosen % width, chosen // width], dim=1).float()
    return PromptSet(points, torch.full((count,), FOREGROUND), None, POINTS, 0)


def _calibrate(net: TinyPromptableNet, scenes: list, instances: list, generator: torch.Generator) -> None:
    """Shift the head's last bias so that logits above 0 give the best mean IoU on 256 training prompt sets.

    A short run leaves the soft Dice loss content with probabilities just below one half inside the
    objects; the shift moves the decision to where the masks are best, as a threshold chosen on
    training data would.
    """
    picks = torch.randint(0, len(instances), (256,), generator=generator).tolist()
    chosen = [instances[i] for i in picks]
    sets = [_prompt_set(mask, generator, centre) for _, mask, centre in chosen]
    targets = F.avg_pool2d(torch.stack([mask for _, mask, _ in chosen]).float()[:, None], 2)[:, 0] > 0.5
    with torch.no_grad():
        features = torch.stack([scenes[scene] for scene, _, _ in chosen])
        logits = net.head(features, prompt_maps(sets, 128, 128, torch.device("cpu")))
    best, best_iou = 0.0, -1.0
    for shift in [0.25 * k for k in range(41)]:
        predicted = logits + shift > 0
        inter = (predicted & targets).flatten(1).sum(1).float()
        union = (predicted | targets).flatten(1).sum(1).float().clamp(min=1)
        iou = float((inter / union).mean())
        if iou > best_iou:
            best, best_iou = shift, iou
    with torch.no_grad():
        net.head.layers[-1].bias += best
    print(f"calibrated: last bias shifted by {best} (mean IoU {100 * best_iou:.1f} on 256 training sets)", flush=True)


def _save(net: TinyPromptableNet, out: Path) -> None:
    """Write the head's weights (the U-Net's ship apart)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    torch.save({k: v.detach().clone() for k, v in net.head.state_dict().items()}, out)


def main() -> None:
    """Train, report, write."""
    args = parse_args()
    torch.set_num_threads(args.threads)
    torch.use_deterministic_algorithms(True)
    generator = torch.Generator().manual_seed(args.seed)
    net = TinyPromptableNet()
    load_weights(net.unet, None, UNET_WEIGHTS_PATH, "cpu")  # the shipped U-Net, frozen; the head learns
    if args.resume is None:
        torch.nn.init.zeros_(net.head.layers[-1].weight)
    else:
        net.head.load_state_dict(torch.load(args.resume, map_location="cpu", weights_only=True))
    train = demo_dataset(split="train")
    scenes, instances = [], []
    start = time.perf_counter()
    chosen_scenes = range(0, len(train), len(train) // args.scenes) if args.scenes < len(train) else range(len(train))
    samples = [train[index] for index in chosen_scenes]
    with torch.no_grad():
        for first in range(0, len(samples), 32):
            part = samples[first : first + 32]
            images = torch.stack([s.image for s in part if s.image is not None]).float() / 255.0
            scenes.extend(net.features(images).unbind(0))
    for scene, sample in enumerate(samples):
        assert sample.instances is not None
        for mask in sample.instances.masks[~sample.instances.iscrowd].bool():
            if int(mask.sum()) >= 4:
                instances.append((scene, mask, innermost_pixel(mask)))
    print(f"{len(scenes)} scenes, {len(instances)} instances, features in {time.perf_counter() - start:.1f}s", flush=True)
    optimiser = torch.optim.Adam(net.head.parameters(), lr=args.lr)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimiser, args.steps)
    net.head.train()
    for step in range(args.steps):
        picks = torch.randint(0, len(instances), (args.batch_size,), generator=generator).tolist()
        chosen = [instances[i] for i in picks]
        sets = [_prompt_set(mask, generator, centre) for _, mask, centre in chosen]
        features = torch.stack([scenes[scene] for scene, _, _ in chosen])
        # The loss is taken at the head's half resolution (the fraction of each 2x2 block inside): a quarter of the work.
        targets = F.avg_pool2d(torch.stack([mask for _, mask, _ in chosen]).float()[:, None], 2)[:, 0]
        logits = net.head(features, prompt_maps(sets, 128, 128, torch.device("cpu")))
        probabilities = logits.sigmoid()
        dice = 1 - (2 * (probabilities * targets).flatten(1).sum(1) + 1) / (
            probabilities.flatten(1).sum(1) + targets.flatten(1).sum(1) + 1
        )
        loss = F.binary_cross_entropy_with_logits(logits, targets) + dice.mean()
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        schedule.step()
        if step % 25 == 0 or step == args.steps - 1:
            _save(net, args.out)  # a run cut short leaves its last weights
            print(f"step {step}: loss {loss.item():.4f} ({time.perf_counter() - start:.0f}s)", flush=True)
    net.head.eval()
    _calibrate(net, scenes, instances, generator)
    _save(net, args.out)
    print(f"wrote {args.out} ({args.out.stat().st_size} bytes)", flush=True)
    protocol = StandardProtocol(StandardProtocolSettings(1, "center", True))
    settings = EvalSettings(PromptableTask(protocol, seed=0), ("promptable_miou",), batch_size=16)
    result = evaluate(TinyPromptable(net), demo_dataset(split="val"), settings=settings).metrics["promptable_miou"]
    print(f"clean val mIoU {result.score:.1f}: " + ", ".join(f"{k} {v:.1f}" for k, v in result.details.items()), flush=True)


if __name__ == "__main__":
    main()
