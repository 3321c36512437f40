"""Train the demo R-VOS model on the demo clips' referring expressions and write its weights.

Usage::

    python scripts/train_demo_rvos.py                     # writes the packaged weights
    python scripts/train_demo_rvos.py --steps 50 --out /tmp/tiny_rvos.pt

Each step runs the model as at test time (every frame segmented, the previous frame's mask
carried over) on a random window of (clip, expression) pairs, two by two from one clip (so
only the words tell their objects apart), and backpropagates a
per-pixel binary cross-entropy plus a soft Dice loss on the named object's masks through the
window. Training sees clean clips and clean expressions only, and a horizontal flip (no
expression names a side). The run is reproducible on one machine: fixed seeds, deterministic
algorithms, fixed thread count.

At the end it prints the validation J, F and J&F (``vos_jf_all``: R-VOS is given no frame, so
every frame is scored) clean, and unless ``--no-robustness`` under Gaussian noise at severities
1, 3, 5.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from pytest_segrobust.core.types import SampleIndex
from pytest_segrobust.corruptions import REGISTRY
from pytest_segrobust.data.demo_video import DemoReferringClips, stack_clips
from pytest_segrobust.metrics.base import MetricContext
from pytest_segrobust.metrics.video import RegionAndBoundaryAllFrames
from pytest_segrobust.models.demo_video import RVOS_WEIGHTS_PATH, TinyRVOSNet

PACKAGE = Path(__file__).resolve().parent.parent / "pytest_segrobust" / "models"
DEFAULT_OUT = PACKAGE.joinpath(*RVOS_WEIGHTS_PATH)


def parse_args() -> argparse.Namespace:
    """Read the command line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=1200, help="optimiser steps")
    parser.add_argument("--batch-size", type=int, default=8, help="(clip, expression) pairs per step")
    parser.add_argument("--window", type=int, default=6, help="frames per training window")
    parser.add_argument("--lr", type=float, default=6e-3, help="peak learning rate of the one-cycle schedule")
    parser.add_argument("--train-clips", type=int, default=None, help="training clips (default: the split's)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where to write the state dict")
    parser.add_argument("--no-robustness", action="store_true", help="report clean validation metrics only")
    return parser.parse_args()


def load_pairs(dataset: DemoReferringClips) -> tuple[torch.Tensor, torch.Tensor, list[str]]:
    """Every pair of ``dataset``: its clip's frames ``(N, T, 3, H, W)`` uint8, the named object's masks ``(N, T, H, W)`` bool, the text."""
    frames, masks, texts = [], [], []
    for index in range(len(dataset)):
        sample = dataset[index]
        expression = sample.field("expression")
        frames.append(sample.field("video").frames)
        masks.append(sample.field("objects").masks == expression.object_id)
        texts.append(expression.text)
    return torch.stack(frames), torch.stack(masks), texts


def dice_loss(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Soft Dice over each frame's mask, with a small constant so empty frames score well when empty."""
    probabilities = logits.sigmoid().flatten(2)
    target = target.flatten(2)
    overlap = (probabilities * target).sum(dim=2)
    return (1 - (2 * overlap + 1) / (probabilities.sum(dim=2) + target.sum(dim=2) + 1)).mean()


@torch.no_grad()
def evaluate_pairs(
    model: TinyRVOSNet, dataset: DemoReferringClips, corruption: str | None = None, severity: int = 0
) -> dict[str, float]:
    """J&F over every frame on ``dataset`` (clean, or with ``corruption`` at ``severity``)."""
    metric = RegionAndBoundaryAllFrames(MetricContext(dataset.class_names, dataset.ignore_index))
    metric.reset()
    for start in range(0, len(dataset), 16):
        samples = [dataset[i] for i in range(start, min(start + 16, len(dataset)))]
        video, masks, _ = stack_clips(samples, named_only=True)
        ids = tuple(s.sample_id for s in samples)
        batch = {"video": video, "objects": masks, "index": SampleIndex(tuple(range(len(samples))), ids)}
        if corruption is not None:
            batch = REGISTRY.get(corruption)(batch, severity, [start + i for i in range(len(samples))])
        texts = [s.field("expression").text for s in samples]
        metric.update((model(batch["video"].data, texts) > 0).long(), batch)
    result = metric.compute()
    return {"J&F": result.score, "J": result.details["j_mean"], "F": result.details["f_mean"]}


def main() -> None:
    args = parse_args()
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    torch.use_deterministic_algorithms(True)
    began = time.perf_counter()
    train = DemoReferringClips("train", args.train_clips)
    val = DemoReferringClips("val")
    frames, masks, texts = load_pairs(train)
    clip_of = train.clip_indices
    by_clip: dict[int, list[int]] = {}
    for pair, clip in enumerate(clip_of):
        by_clip.setdefault(clip, []).append(pair)
    siblings = [by_clip[clip] for clip in clip_of]
    print(f"{len(train)} training expressions over {train.clips} clips in {time.perf_counter() - began:.0f} s")

    model = TinyRVOSNet()
    optimiser = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=1e-4)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimiser, max_lr=args.lr, total_steps=args.steps)
    generator = torch.Generator().manual_seed(args.seed)
    model.train()
    running = 0.0
    for step in range(1, args.steps + 1):
        # Pairs come two by two from one clip: only reading the words tells their objects apart.
        first = torch.randint(len(frames), (args.batch_size // 2,), generator=generator)
        second = [siblings[i][int(torch.randint(len(siblings[i]), (1,), generator=generator))] for i in first.tolist()]
        chosen = torch.stack([first, torch.tensor(second)], dim=1).flatten()
        start = int(torch.randint(frames.shape[1] - args.window + 1, (1,), generator=generator))
        clips = frames[chosen, start : start + args.window].float() / 255.0
        target = masks[chosen, start : start + args.window].float()
        if bool(torch.rand(1, generator=generator) < 0.5):
            clips, target = clips.flip(-1), target.flip(-1)
        logits = model(clips, [texts[i] for i in chosen.tolist()])
        loss = F.binary_cross_entropy_with_logits(logits, target) + dice_loss(logits, target)
        optimiser.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        optimiser.step()
        schedule.step()
        running = 0.95 * running + 0.05 * loss.item() if step > 1 else loss.item()
        if step % 50 == 0 or step == args.steps:
            print(f"step {step:5d}  loss {running:.4f}  {time.perf_counter() - began:.0f} s", flush=True)
    model.eval()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    torch.save(model.state_dict(), args.out)
    print(f"wrote {args.out} ({args.out.stat().st_size / 1024:.0f} KiB)")

    clean = evaluate_pairs(model, val)
    print(f"val clean          J&F {clean['J&F']:.1f}  J {clean['J']:.1f}  F {clean['F']:.1f}")
    if not args.no_robustness:
        for severity in (1, 3, 5):
            scores = evaluate_pairs(model, val, "gaussian_noise", severity)
            print(f"gaussian_noise@{severity}   J&F {scores['J&F']:.1f}  J {scores['J']:.1f}  F {scores['F']:.1f}")


if __name__ == "__main__":
    main()
