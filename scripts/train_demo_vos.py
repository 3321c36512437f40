"""Train the demo VOS model (mask propagation) on the demo clips and write its weights.

Usage::

    python scripts/train_demo_vos.py                     # writes the packaged weights
    python scripts/train_demo_vos.py --steps 50 --out /tmp/tiny_vos.pt

Each step runs the model as it runs at test time (:meth:`TinyVOSNet.slot_logits`: every
object given in its first frame, propagated from its own soft predictions through a random
window of the clip) and backpropagates the per-pixel cross-entropy over background and
objects through the whole window. Training sees clean clips only; the one augmentation is a
horizontal flip. The run is reproducible on one machine: fixed seeds, deterministic
algorithms, fixed thread count.

At the end it prints the validation J, F and J&F (``vos_jf`` of :mod:`pytest_segrobust.metrics.video`)
clean, and unless ``--no-robustness`` under Gaussian noise and defocus blur at severities 1, 3, 5.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from pytest_segrobust.core.types import SampleIndex
from pytest_segrobust.corruptions import REGISTRY
from pytest_segrobust.data.demo_video import DemoClips, given_masks, stack_clips
from pytest_segrobust.metrics.base import MetricContext
from pytest_segrobust.metrics.video import RegionAndBoundary
from pytest_segrobust.models.demo_video import VOS_WEIGHTS_PATH, ObjectLayout, TinyVOSNet

PACKAGE = Path(__file__).resolve().parent.parent / "pytest_segrobust" / "models"
DEFAULT_OUT = PACKAGE.joinpath(*VOS_WEIGHTS_PATH)
CORRUPTIONS = ("gaussian_noise", "defocus_blur")


def parse_args() -> argparse.Namespace:
    """Read the command line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=600, help="optimiser steps")
    parser.add_argument("--batch-size", type=int, default=4, help="clips per step")
    parser.add_argument("--window", type=int, default=6, help="frames per training window")
    parser.add_argument("--lr", type=float, default=4e-3, help="peak learning rate of the one-cycle schedule")
    parser.add_argument("--train-clips", type=int, default=None, help="training clips (default: the split's)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where to write the state dict")
    parser.add_argument("--no-robustness", action="store_true", help="report clean validation metrics only")
    return parser.parse_args()


def load_clips(dataset: DemoClips) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Every clip of ``dataset``: frames ``(N, T, 3, H, W)`` uint8, masks and references ``(N, T, H, W)`` uint8."""
    frames, masks, references = [], [], []
    for index in range(len(dataset)):
        objects = dataset[index].field("objects")
        frames.append(dataset[index].field("video").frames)
        masks.append(objects.masks.to(torch.uint8))
        references.append(given_masks(objects.masks, objects.object_ids, objects.first_frames).to(torch.uint8))
    return torch.stack(frames), torch.stack(masks), torch.stack(references)


def window_batch(
    frames: torch.Tensor, masks: torch.Tensor, generator: torch.Generator, size: int, window: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Random windows of random clips, each object given in its first frame of the window, maybe flipped.

    Shape:
        return: clips ``(size, window, 3, H, W)`` float, masks and references ``(size, window, H, W)`` int64.
    """
    chosen = torch.randint(len(frames), (size,), generator=generator)
    starts = torch.randint(frames.shape[1] - window + 1, (size,), generator=generator)
    flips = torch.rand(size, generator=generator) < 0.5
    clips, truth, given = [], [], []
    for index, start, flip in zip(chosen.tolist(), starts.tolist(), flips.tolist(), strict=True):
        clip = frames[index, start : start + window].float() / 255.0
        mask = masks[index, start : start + window].long()
        if flip:
            clip, mask = clip.flip(-1), mask.flip(-1)
        ids = [int(i) for i in mask.unique().tolist() if i != 0]
        # Objects that show in the window only as a sliver are not given (nothing to follow).
        firsts, kept = [], []
        for object_id in ids:
            area = (mask == object_id).flatten(1).sum(dim=1)
            shown = area.nonzero()
            if len(shown) and int(area[shown[0, 0]]) >= 24:
                kept.append(object_id)
                firsts.append(int(shown[0, 0]))
        mask = torch.where(torch.isin(mask, torch.tensor(kept, dtype=torch.int64)), mask, 0)
        clips.append(clip)
        truth.append(mask)
        given.append(given_masks(mask, kept, firsts))
    return torch.stack(clips), torch.stack(truth), torch.stack(given)


def loss_of(model: TinyVOSNet, clips: torch.Tensor, truth: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    """Cross-entropy over background and object slots, every frame after the first."""
    layout = ObjectLayout.of(reference)
    logits = model.slot_logits(clips, reference, layout)  # (B, S, T, H, W)
    slot_of_id = torch.zeros(clips.shape[0], 256, dtype=torch.int64)
    slot_of_id[layout.clip, layout.ids] = layout.slot
    target = torch.gather(slot_of_id, 1, truth.flatten(1)).view_as(truth)
    return F.cross_entropy(logits[:, :, 1:], target[:, 1:])


@torch.no_grad()
def evaluate_clips(model: TinyVOSNet, dataset: DemoClips, corruption: str | None = None, severity: int = 0) -> dict:
    """J&F on ``dataset`` (clean, or with ``corruption`` at ``severity`` applied to the clips)."""
    metric = RegionAndBoundary(MetricContext(dataset.class_names, dataset.ignore_index))
    metric.reset()
    for start in range(0, len(dataset), 8):
        samples = [dataset[i] for i in range(start, min(start + 8, len(dataset)))]
        video, masks, _ = stack_clips(samples)
        batch = {
            "video": video,
            "objects": masks,
            "index": SampleIndex(tuple(range(len(samples))), tuple(s.sample_id for s in samples)),
        }
        if corruption is not None:
            seeds = [start + i for i in range(len(samples))]
            batch = REGISTRY.get(corruption)(batch, severity, seeds)
        moved = batch["objects"]
        reference = torch.stack(
            [
                given_masks(moved.data[b], objects, _shown_first(moved.data[b], objects))
                for b, objects in enumerate(moved.object_ids)
            ]
        )
        metric.update(model(batch["video"].data, reference), batch)
    result = metric.compute()
    return {"J&F": result.score, "J": result.details["j_mean"], "F": result.details["f_mean"]}


def _shown_first(masks: torch.Tensor, objects: tuple[int, ...]) -> list[int]:
    """Each object's first frame that shows it (after a geometric corruption moved it), 0 if none."""
    firsts = []
    for object_id in objects:
        shown = (masks == object_id).flatten(1).any(dim=1).nonzero()
        firsts.append(int(shown[0, 0]) if len(shown) else 0)
    return firsts


def main() -> None:
    args = parse_args()
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    torch.use_deterministic_algorithms(True)
    began = time.perf_counter()
    train = DemoClips("train", args.train_clips)
    val = DemoClips("val")
    frames, masks, _ = load_clips(train)
    print(f"{len(train)} training clips generated in {time.perf_counter() - began:.0f} s")

    model = TinyVOSNet()
    optimiser = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=1e-4)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimiser, max_lr=args.lr, total_steps=args.steps)
    generator = torch.Generator().manual_seed(args.seed)
    model.train()
    running = 0.0
    for step in range(1, args.steps + 1):
        clips, truth, reference = window_batch(frames, masks, generator, args.batch_size, args.window)
        loss = loss_of(model, clips, truth, reference)
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

    clean = evaluate_clips(model, val)
    print(f"val clean       J&F {clean['J&F']:.1f}  J {clean['J']:.1f}  F {clean['F']:.1f}")
    if not args.no_robustness:
        for corruption in CORRUPTIONS:
            for severity in (1, 3, 5):
                scores = evaluate_clips(model, val, corruption, severity)
                print(f"{corruption}@{severity:<5} J&F {scores['J&F']:.1f}  J {scores['J']:.1f}  F {scores['F']:.1f}")


if __name__ == "__main__":
    main()
