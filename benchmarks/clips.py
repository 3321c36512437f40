"""What perturbing a clip costs: temporal corruptions, static clips (drawn per clip or per frame) and dynamic mixtures.

Clips of ``--frames`` frames of ``--size`` pixels, ``--batch`` clips, severity 3, on the CPU with
one thread. Every variant runs once per round, the rounds interleaved; the table gives the
minimum CPU time (``time.thread_time``) over ``--repeats`` rounds, per clip, and the ratio to
the static clip drawn once per clip; a mixture's ratio is to what its drawn parts cost as static
clips drawn per frame, frame by frame (at severity 3: the drawn levels may differ), a temporal
corruption's to the mean static clip of the parts:

    python benchmarks/clips.py [--batch 2] [--frames 16] [--size 128] [--repeats 5]

The dynamic mixture corrupts each frame with its own perturbation and level, grouping the
frames that drew the same; its cost is the mean of its parts' per-frame costs plus the
cutting and joining of frames.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import torch

from pytest_segrobust.core.types import Field, Video, VideoMasks
from pytest_segrobust.corruptions import REGISTRY, Corruption
from pytest_segrobust.corruptions.dynamic import StaticMode, dynamic
from pytest_segrobust.randomness.seeding import FrameDraws
from pytest_segrobust.testing.strategies import make_batch

PARTS = ("gaussian_noise", "motion_blur", "fog", "rotate")


def clip_batch(batch: int, frames: int, size: int) -> tuple[dict[str, Field], list[int]]:
    made = make_batch(batch * frames, size, size, classes=4, seed=3)
    fields: dict[str, Field] = {
        "video": Video.of(made.images.unflatten(0, (batch, frames))),
        "masks": VideoMasks.of(made.masks.unflatten(0, (batch, frames))),
    }
    return fields, made.seeds[:batch]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--frames", type=int, default=16)
    parser.add_argument("--size", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    fields, seeds = clip_batch(args.batch, args.frames, args.size)

    variants: dict[str, Corruption[Any]] = {}
    for corruption in REGISTRY.preset("video-temporal"):
        variants[f"{corruption.name} (temporal)"] = corruption
    for name in PARTS:
        corruption = REGISTRY.get(name)
        variants[f"{name} static per clip"] = StaticMode().apply(corruption)
        variants[f"{name} static per frame"] = StaticMode(FrameDraws.FRAME).apply(corruption)
    parts = [REGISTRY.get(name) for name in PARTS]
    variants["dynamic, types per frame"] = dynamic(parts)
    variants["dynamic, types per clip"] = dynamic(parts, "per_clip")

    runs: dict[str, Callable[[], object]] = {
        label: (lambda c=corruption: c(fields, 3, seeds)) for label, corruption in variants.items()
    }
    best = dict.fromkeys(runs, float("inf"))
    for run in runs.values():
        run()  # warm-up
    for _ in range(args.repeats):
        for label, run in runs.items():
            start = time.thread_time()
            run()
            best[label] = min(best[label], time.thread_time() - start)

    static_mean = sum(best[f"{name} static per clip"] for name in PARTS) / len(PARTS)
    # A mixture's own baseline: its drawn parts' static per-frame costs (at severity 3), frame by frame.
    drawn: dict[str, float] = {}
    for label, corruption in variants.items():
        if label.startswith("dynamic"):
            chosen, _ = corruption.choices(seeds, args.frames)
            per_frame = [
                best[f"{PARTS[int(k)]} static per frame"] / (args.batch * args.frames) for k in chosen.flatten()
            ]
            drawn[label] = sum(per_frame)
    print(
        f"{args.batch} clips x {args.frames} frames x {args.size}x{args.size}, severity 3, 1 thread, "
        f"min of {args.repeats} interleaved rounds (CPU ms per clip)"
    )
    print(f"{'variant':<36} {'ms/clip':>9} {'vs static':>10}")
    for label, seconds in best.items():
        if "static" in label:
            base = best[label.replace("per frame", "per clip")]
        else:
            base = drawn.get(label, static_mean)
        print(f"{label:<36} {1000 * seconds / args.batch:>9.2f} {seconds / base:>9.2f}x")


if __name__ == "__main__":
    main()
