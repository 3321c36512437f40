"""Train the demo audio-visual model on the demo AVS clips and write its weights.

Usage::

    python scripts/train_demo_avs.py                       # writes the packaged weights
    python scripts/train_demo_avs.py --steps 200 --out /tmp/tiny_avs.pt --no-baseline

Training sees clean clips only (no augmentation of frames or sound), one frame at a time: the
log-mel bands of every training frame's second of sound are computed once by the model's own
front end, then each step reads a batch of frames with their bands. The run is reproducible on
one machine: a seeded generator for the initial weights and the batches, deterministic
algorithms, a fixed thread count.

At the end it prints the validation mIoU (AVSBench's: per-frame IoU of the sounding mask, a
frame with an empty truth scoring the share of true negatives; averaged over frames) on clean
clips and under a few acoustic and visual perturbations, and (unless ``--no-baseline``) the
clean mIoU of a visual-only baseline: the same network trained the same way with its audio
embedding replaced by one learnt vector, the best it can do without listening.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from pytest_segrobust.core.types import Audio, Field, Video
from pytest_segrobust.corruptions import REGISTRY
from pytest_segrobust.data.demo_avs import FRAMES, SAMPLE_RATE, DemoAVSClips
from pytest_segrobust.models.demo_avs import TinyAVSNet
from pytest_segrobust.randomness.seeding import sample_seed

PACKAGE = Path(__file__).resolve().parent.parent / "pytest_segrobust" / "models"
DEFAULT_OUT = PACKAGE / "weights" / "tiny_avs.pt"
# (preset, corruption, level) shown at the end.
PERTURBED = (
    ("avs-acoustic", "audio_gaussian_noise", 3),
    ("avs-acoustic", "audio_gaussian_noise", 5),
    ("avs-acoustic", "low_pass", 5),
    ("avs-acoustic", "time_mask", 5),
    ("avs-acoustic", "gain", 5),
    ("coco-p", "gaussian_noise", 3),
    ("coco-p", "defocus_blur", 3),
)


def parse_args() -> argparse.Namespace:
    """Read the command line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=400, help="optimiser steps")
    parser.add_argument("--batch-size", type=int, default=16, help="frames per step")
    parser.add_argument("--train-clips", type=int, default=320, help="training clips (the split's default is 48)")
    parser.add_argument("--lr", type=float, default=3e-3, help="peak learning rate of the one-cycle schedule")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where to write the state dict")
    parser.add_argument("--no-baseline", action="store_true", help="skip the visual-only baseline")
    return parser.parse_args()


def frame_iou(logits: torch.Tensor, truth: torch.Tensor) -> torch.Tensor:
    """AVSBench's per-frame IoU of the sounding mask; an empty truth scores the share of true negatives.

    Shape:
        logits, truth: ``(N, H, W)``; return: ``(N,)``.
    """
    predicted = logits > 0
    truth = truth.bool()
    intersection = (predicted & truth).flatten(1).sum(1).float()
    union = (predicted | truth).flatten(1).sum(1).float()
    empty = truth.flatten(1).sum(1) == 0
    negatives = (~predicted).flatten(1).float().mean(1)
    return torch.where(empty, negatives, intersection / union.clamp(min=1))


def load_split(dataset: DemoAVSClips) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, tuple[str, ...]]:
    """Every clip of ``dataset``: frames (uint8), sounding masks, waveforms, sample ids."""
    samples = [dataset[i] for i in range(len(dataset))]
    frames = torch.stack([s.extra["video"].frames for s in samples])
    masks = torch.stack([s.extra["objects"].masks for s in samples]).bool()
    waves = torch.stack([s.extra["audio"].waveform for s in samples])
    return frames, masks, waves, tuple(s.sample_id for s in samples)


@torch.no_grad()
def log_mel_of(model: TinyAVSNet, waves: torch.Tensor, batch_size: int = 32) -> torch.Tensor:
    """The front end's bands of every frame. Shape: waves ``(N, 1, S)`` -> ``(N, T, MEL_BANDS)``."""
    parts = []
    for start in range(0, len(waves), batch_size):
        audio = Audio.of(waves[start : start + batch_size], SAMPLE_RATE, FRAMES)
        parts.append(model.front_end(audio.data, audio.frame_bounds, SAMPLE_RATE))
    return torch.cat(parts)


def train(
    listen: bool, frames: torch.Tensor, masks: torch.Tensor, log_mel: torch.Tensor, args: argparse.Namespace
) -> TinyAVSNet:
    """One model trained on single frames with a BCE + soft Dice loss."""
    generator = torch.Generator().manual_seed(args.seed)
    torch.manual_seed(args.seed)  # the initial weights: nn.init reads the default generator
    model = TinyAVSNet(listen=listen)
    optimiser = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=1e-4)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimiser, max_lr=args.lr, total_steps=args.steps)
    flat_frames, flat_masks = frames.flatten(0, 1), masks.flatten(0, 1).float()
    flat_mel = log_mel.flatten(0, 1)
    model.train()
    started = time.process_time()
    for step in range(1, args.steps + 1):
        chosen = torch.randint(len(flat_frames), (args.batch_size,), generator=generator)
        images = flat_frames[chosen].float() / 255.0
        logits = model.fuse(model.see(images), model.hear(flat_mel[chosen][:, None])[:, 0])
        target = flat_masks[chosen]
        probabilities = logits.sigmoid()
        dice = 1 - (2 * (probabilities * target).flatten(1).sum(1) + 1) / (
            (probabilities + target).flatten(1).sum(1) + 1
        )
        loss = F.binary_cross_entropy_with_logits(logits, target) + dice.mean()
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        schedule.step()
        if step % 100 == 0 or step == args.steps:
            print(
                f"  {'av' if listen else 'visual-only'} step {step}: loss {loss.item():.4f} ({time.process_time() - started:.0f} s CPU)"
            )
    return model.eval()


@torch.no_grad()
def evaluate(
    model: TinyAVSNet,
    frames: torch.Tensor,
    masks: torch.Tensor,
    waves: torch.Tensor,
    ids: tuple[str, ...],
    perturbation: tuple[str, str, int] | None = None,
    batch_size: int = 8,
) -> float:
    """Validation mIoU in percent, through ``predict`` (the protocol), clean or under one perturbation."""
    scores = []
    for start in range(0, len(frames), batch_size):
        part = slice(start, start + batch_size)
        batch: dict[str, Field] = {
            "video": Video.of(frames[part].float() / 255.0),
            "audio": Audio.of(waves[part], SAMPLE_RATE, FRAMES),
        }
        if perturbation is not None:
            preset, name, level = perturbation
            corruption = REGISTRY.get(name, preset)
            seeds = [sample_seed(0, sample_id, name, level) for sample_id in ids[part]]
            batch = corruption(batch, level, seeds)
        logits = model.predict(batch["video"].data, batch["audio"])  # type: ignore[union-attr,arg-type]
        scores.append(frame_iou(logits.flatten(0, 1), masks[part].flatten(0, 1)))
    return 100.0 * float(torch.cat(scores).mean())


def main() -> None:
    args = parse_args()
    torch.set_num_threads(args.threads)
    torch.use_deterministic_algorithms(True)
    began = time.process_time()
    frames, masks, waves, _ = load_split(DemoAVSClips("train", clips=args.train_clips))
    val = load_split(DemoAVSClips("val"))
    log_mel = log_mel_of(TinyAVSNet(), waves)
    print(f"data: {len(frames)} train clips, {len(val[0])} val clips ({time.process_time() - began:.0f} s CPU)")

    model = train(True, frames, masks, log_mel, args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    torch.save(model.state_dict(), args.out)
    print(f"wrote {args.out} ({args.out.stat().st_size / 1024:.0f} KiB)")
    print(f"clean val mIoU: {evaluate(model, *val):.1f}")
    for perturbation in PERTURBED:
        print(f"  {perturbation[1]}@{perturbation[2]}: {evaluate(model, *val, perturbation=perturbation):.1f}")
    if not args.no_baseline:
        blind = train(False, frames, masks, log_mel, args)
        print(f"visual-only baseline, clean val mIoU: {evaluate(blind, *val):.1f}")
    print(f"total {time.process_time() - began:.0f} s CPU")


if __name__ == "__main__":
    main()
