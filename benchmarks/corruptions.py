"""Corruption throughput: ours (batched torch) against the reference (per-image numpy), side by side.

Images of 512x512, severity 3. Ours runs a batch of 16 on the chosen device; the reference
runs image by image (as it must). Run in the throwaway environment of
benchmarks/_reference.py (``--no-reference`` runs ours alone, anywhere):

    python benchmarks/corruptions.py [--device cpu|cuda] [--batch 16] [--size 512] [--only glass_blur,frost]

``--schedules`` compares, on CPU and without the reference, how ours spends its time per image:
a batch of one, the batch corrupted whole (what GPUs run) and image by image (what CPUs
run), interleaved, minimum CPU time of ``--repeats``:

    python benchmarks/corruptions.py --no-reference --schedules --only gaussian_noise,rotate
"""

from __future__ import annotations

import argparse
import functools
import time

import numpy as np
import torch

from pytest_segrobust.corruptions import REGISTRY, Corruption
from pytest_segrobust.corruptions.base import whole_batches


def timed(fn, repeats: int) -> float:  # type: ignore[no-untyped-def]
    fn()  # warm-up: kernels, caches, lazy imports
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return (time.perf_counter() - start) / repeats


def cpu_timed(fn) -> float:  # type: ignore[no-untyped-def]
    """CPU seconds of one call after a warm-up: with one torch thread, what a busy machine disturbs least."""
    fn()
    start = time.process_time()
    fn()
    return time.process_time() - start


def schedules(corruptions: list[Corruption], images: torch.Tensor, severity: int, repeats: int) -> None:
    """Per image: each image as a batch of one, the batch whole and the batch image by image (CPU ms), interleaved.

    Every image has its own seed, as in the harness; the three are timed over the same 16
    images, so that on a busy machine time slices weigh on each alike.
    """
    batch = len(images)
    seeds = list(range(batch))
    print(f"| corruption | b1 ms/image | whole b{batch} ms/image | image by image b{batch} ms/image | whole / image by image |")
    print("|---|---:|---:|---:|---:|")
    totals = [0.0, 0.0, 0.0]
    for corruption in corruptions:
        best = [float("inf")] * 3
        for _ in range(repeats):
            alone = [functools.partial(corruption, images[i : i + 1], severity, seeds[i : i + 1]) for i in range(batch)]
            best[0] = min(best[0], cpu_timed(lambda: [one() for one in alone]) / batch)  # noqa: B023
            with whole_batches():
                best[1] = min(best[1], cpu_timed(functools.partial(corruption, images, severity, seeds)) / batch)
            best[2] = min(best[2], cpu_timed(functools.partial(corruption, images, severity, seeds)) / batch)
        totals = [t + b for t, b in zip(totals, best)]
        print(f"| {corruption.name} | {best[0] * 1e3:.1f} | {best[1] * 1e3:.1f} | {best[2] * 1e3:.1f} | {best[1] / best[2]:.2f}x |",
              flush=True)  # fmt: skip
    print(f"| **all** | {totals[0] * 1e3:.1f} | {totals[1] * 1e3:.1f} | {totals[2] * 1e3:.1f} | {totals[1] / totals[2]:.2f}x |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--size", type=int, default=512)
    parser.add_argument("--severity", type=int, default=3)
    parser.add_argument("--preset", default="imagenet-c")
    parser.add_argument("--no-reference", action="store_true")
    parser.add_argument("--only", default="", help="comma-separated corruption names")
    parser.add_argument("--repeats", type=int, default=2, help="timed runs of ours per corruption")
    parser.add_argument("--schedules", action="store_true", help="b1, whole batch and image by image (CPU)")
    args = parser.parse_args()

    device = torch.device(args.device)
    g = torch.Generator().manual_seed(0)
    coarse = torch.rand(args.batch, 3, args.size // 16, args.size // 16, generator=g)
    images = torch.nn.functional.interpolate(coarse, size=(args.size, args.size), mode="bilinear")
    images = ((0.8 * images + 0.2 * torch.rand(images.shape, generator=g)) * 255).round() / 255
    images = images.to(device)
    seeds = list(range(args.batch))
    wanted = set(args.only.split(",")) if args.only else None
    if args.schedules:
        chosen = [c for c in REGISTRY.available(args.preset) if wanted is None or c.name in wanted]
        print(f"{args.preset}, {args.size}x{args.size}, severity {args.severity}, on {device}, "
              f"torch threads {torch.get_num_threads()}\n")  # fmt: skip
        schedules(chosen, images, args.severity, args.repeats)
        return
    reference = None if args.no_reference else __import__("_reference").load_reference()
    host = (images[0].permute(1, 2, 0).cpu().numpy() * 255).astype(np.uint8)

    print(f"{args.preset}, {args.size}x{args.size}, severity {args.severity}, ours: batch {args.batch} on {device}\n")
    print("| corruption | ours ms/image | ours images/s | reference ms/image | speed-up |")
    print("|---|---:|---:|---:|---:|")
    ours_total = reference_total = 0.0
    for corruption in REGISTRY.available(args.preset):
        if wanted is not None and corruption.name not in wanted:
            continue
        per_batch = timed(lambda c=corruption: c(images, args.severity, seeds), repeats=args.repeats)
        ours = per_batch / args.batch
        ours_total += ours
        if reference is None:
            print(f"| {corruption.name} | {ours * 1e3:.2f} | {1 / ours:.0f} | – | – |")
            continue
        repeats = 1 if corruption.name == "glass_blur" else 3
        theirs = timed(lambda name=corruption.name: reference(host, name, args.severity), repeats=repeats)
        reference_total += theirs
        print(f"| {corruption.name} | {ours * 1e3:.2f} | {1 / ours:.0f} | {theirs * 1e3:.1f} | {theirs / ours:.1f}x |")
    if reference is not None:
        print(f"| **all** | {ours_total * 1e3:.1f} | {1 / ours_total:.1f} | {reference_total * 1e3:.0f} | "
              f"{reference_total / ours_total:.1f}x |")
    else:
        print(f"| **all** | {ours_total * 1e3:.1f} | {1 / ours_total:.1f} | – | – |")


if __name__ == "__main__":
    main()
