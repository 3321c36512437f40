"""The GPU in one run: corruption throughput, CPU-vs-CUDA pixels, and the harness over bare inference.

One prepared script for a lent GPU machine, meant to finish in under five minutes. It prints
three tables:

1. **Throughput**: images per second of every built-in corruption (each preset's rows, a
   corruption listed once per distinct definition) at ``--size`` squared, batch ``--batch``,
   severity 3, on the device: one warm-up batch, then the best of ``--repeats`` timed batches
   (``torch.cuda.synchronize`` around each).
2. **CPU vs CUDA**: the same rows at severities 1, 3 and 5 on a few photo-like images, the
   CPU's output against the device's: the largest difference, the mean difference and the
   share of values more than 1e-4 apart. Every random draw is the same on both devices
   (Philox streams), so what differs is float arithmetic, and the quantisation steps that a
   threshold or an 8-bit round trip inside a corruption turns it into.
3. **Harness overhead**: ``benchmarks/overhead.py`` with SegFormer-B0 (random weights through
   the transformers adapter, nothing downloaded) on the device: the harness's cost over a
   bare ``predict`` loop on the same batches.

    python benchmarks/gpu.py [--device cuda] [--size 512] [--batch 64] [--only rotate,fog] [--no-overhead]

On a machine without CUDA it runs on ``--device cpu`` for a dry run (the comparison table
then compares the CPU with itself: every difference must be 0).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import torch

from pytest_segrobust.core.types import Image
from pytest_segrobust.corruptions import REGISTRY, Corruption

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from peers import photo_like  # a sibling script; it sets OMP_NUM_THREADS=1, undone in main()


def rows(only: set[str] | None) -> list[tuple[str, Corruption]]:
    """Every built-in corruption once per distinct definition, labelled with the presets that share it."""
    chosen: dict[tuple[type, str, str], tuple[list[str], Corruption]] = {}
    for preset in REGISTRY.presets():
        for corruption in REGISTRY.available(preset):
            if (only is not None and corruption.name not in only) or not corruption.accepts(Image):
                continue
            key = (type(corruption), corruption.name, repr(getattr(corruption, "table", None)))
            chosen.setdefault(key, ([], corruption))[0].append(preset)
    labelled = [(f"{corruption.name} ({', '.join(presets)})", corruption) for presets, corruption in chosen.values()]
    return sorted(labelled, key=lambda row: row[0])


def photo_batch(batch: int, size: int) -> torch.Tensor:
    """``batch`` distinct photo-like images, float in [0, 1], ``(batch, 3, size, size)`` on the CPU."""
    distinct = [torch.from_numpy(photo_like(size, seed)).permute(2, 0, 1) for seed in range(min(batch, 8))]
    return torch.stack([distinct[i % len(distinct)] for i in range(batch)]).float() / 255


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def throughput(table: list[tuple[str, Corruption]], device: torch.device, size: int, batch: int, repeats: int) -> None:
    images = photo_batch(batch, size).to(device)
    seeds = list(range(batch))
    print(f"## Throughput: {size}x{size}, batch {batch}, severity 3, on {device_name(device)}\n")
    print("| corruption | images/s | ms/image |")
    print("|---|---:|---:|")
    total = 0.0
    for label, corruption in table:
        corruption(images, 3, seeds)  # warm-up: kernels, caches, lazy imports
        best = float("inf")
        for _ in range(repeats):
            synchronize(device)
            start = time.perf_counter()
            corruption(images, 3, seeds)
            synchronize(device)
            best = min(best, time.perf_counter() - start)
        total += best / batch
        print(f"| {label} | {batch / best:,.0f} | {1000 * best / batch:.3f} |")
    print(f"| **all, one after another** | {1 / total:,.0f} | {1000 * total:.3f} |\n")


def cpu_vs_device(table: list[tuple[str, Corruption]], device: torch.device, size: int, images_count: int) -> None:
    images = photo_batch(images_count, size)
    seeds = [11, 2**62 + 3, 987_654_321, 5][:images_count]
    print(f"## CPU vs {device_name(device)}: {images_count} photo-like images of {size}x{size}\n")
    print("| corruption | severity | max abs diff | mean abs diff | share > 1e-4 |")
    print("|---|---:|---:|---:|---:|")
    worst = 0.0
    for label, corruption in table:
        for severity in (1, 3, 5):
            on_cpu = corruption(images, severity, seeds)
            on_device = corruption(images.to(device), severity, seeds).cpu()
            difference = (on_cpu - on_device).abs()
            largest = float(difference.max())
            worst = max(worst, largest)
            share = float((difference > 1e-4).double().mean())
            print(f"| {label} | {severity} | {largest:.3g} | {float(difference.mean()):.3g} | {share:.2e} |")
    print(f"\nLargest difference over every row: {worst:.3g}\n")


def harness_overhead(device: torch.device) -> None:
    print(f"## Harness overhead: SegFormer-B0 (random weights) on {device_name(device)}\n", flush=True)
    command = [
        sys.executable, str(HERE / "overhead.py"), "--model", "segformer-b0", "--device", str(device),
        "--images", "64", "--batch", "16", "--size", "512", "--repeats", "3", "--phases",
    ]  # fmt: skip
    # peers.py set OMP_NUM_THREADS=1 in this process's environment: the child gets every core back.
    environment = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    subprocess.run([*command, "--threads", str(torch.get_num_threads())], check=False, env=environment)


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return f"{torch.cuda.get_device_name(device)} (torch {torch.__version__})"
    return f"{device} (torch {torch.__version__}, {torch.get_num_threads()} threads)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--size", type=int, default=512)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--compare-size", type=int, default=256, help="image size of the CPU-vs-device table")
    parser.add_argument("--compare-images", type=int, default=4)
    parser.add_argument("--only", default="", help="comma-separated corruption names")
    parser.add_argument("--threads", type=int, default=0, help="torch's CPU threads; 0: one per core")
    parser.add_argument("--no-overhead", action="store_true", help="skip the SegFormer-B0 harness table")
    args = parser.parse_args()

    torch.set_num_threads(args.threads or os.cpu_count() or 1)  # the CPU side of the comparison uses every core
    device = torch.device(args.device)
    table = rows(set(args.only.split(",")) if args.only else None)
    started = time.perf_counter()
    throughput(table, device, args.size, args.batch, args.repeats)
    cpu_vs_device(table, device, args.compare_size, args.compare_images)
    if not args.no_overhead:
        harness_overhead(device)
    print(f"\n(whole script: {time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
