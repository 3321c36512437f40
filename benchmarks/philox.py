"""Philox on a CPU: the torch path (int64 tensor ops) against the numpy path (uint32 lanes), side by side.

Both give the same bits (tests/test_philox_numpy.py); this measures what the numpy path
saves, on the raw words, the draws built on them and the corruptions that draw most (the
noise corruptions and elastic transform, severity 3). Every repeat runs each row's two paths
one after the other, alternating which goes first, in one process, so that a busy machine
weighs on both alike; the table gives the minimum and the median CPU milliseconds per image
(noise only ever adds time, so the minimum is the better estimate of the cost):

    OMP_NUM_THREADS=1 python benchmarks/philox.py [--size 512] [--batch 1] [--repeats 15]

The torch path is what GPUs run; it is forced on the CPU here by the one switch that picks
the path (``pytest_segrobust.philox._uses_numpy``).
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time
from collections.abc import Callable
from unittest import mock

import torch

from pytest_segrobust import philox
from pytest_segrobust.corruptions import REGISTRY

CORRUPTIONS = ("gaussian_noise", "shot_noise", "impulse_noise", "speckle_noise", "elastic_transform")


def seconds(fn: Callable[[], object], torch_path: bool) -> float:
    """CPU seconds of one call of ``fn`` on the chosen path (with one thread, what a busy machine disturbs least)."""
    with mock.patch.object(philox, "_uses_numpy", lambda device: False) if torch_path else contextlib.nullcontext():
        start = time.process_time()
        fn()
        return time.process_time() - start


def side_by_side(rows: dict[str, Callable[[], object]], repeats: int, batch: int) -> None:
    """Print one table row per entry: min and median ms per image of each path, and the speed-up of the minima."""
    print("| row | torch path min / median ms | numpy path min / median ms | speed-up (min) |")
    print("|---|---:|---:|---:|")
    for name, fn in rows.items():
        times: dict[bool, list[float]] = {True: [], False: []}
        for torch_path in (True, False):  # warm-up: lazy imports, caches
            seconds(fn, torch_path)
        for repeat in range(repeats):
            for torch_path in (True, False) if repeat % 2 else (False, True):
                times[torch_path].append(seconds(fn, torch_path) / batch * 1e3)
        old, new = times[True], times[False]
        print(
            f"| {name} | {min(old):.2f} / {statistics.median(old):.2f} | {min(new):.2f} / {statistics.median(new):.2f} "
            f"| {min(old) / min(new):.2f}x |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=512)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--severity", type=int, default=3)
    parser.add_argument("--preset", default="imagenet-c")
    parser.add_argument("--repeats", type=int, default=15, help="timed runs of each path per row")
    args = parser.parse_args()

    # 8-bit images, as decoded photos are (a Poisson rate field then has few distinct rates).
    g = torch.Generator().manual_seed(0)
    coarse = torch.rand(args.batch, 3, args.size // 16, args.size // 16, generator=g)
    images = torch.nn.functional.interpolate(coarse, size=(args.size, args.size), mode="bilinear")
    images = ((0.8 * images + 0.2 * torch.rand(images.shape, generator=g)) * 255).round() / 255
    seeds = list(range(args.batch))
    shape = (3, args.size, args.size)
    rows: dict[str, Callable[[], object]] = {
        "philox words": lambda: philox.random_bits(seeds, 3 * args.size * args.size, "cpu"),
        "uniform float32": lambda: philox.uniform(seeds, shape, "cpu"),
        "normal": lambda: philox.normal(seeds, shape, "cpu"),
        "integers": lambda: philox.integers(seeds, 0, 49, shape, "cpu"),
    }
    for name in CORRUPTIONS:
        corruption = next(c for c in REGISTRY.available(args.preset) if c.name == name)
        rows[name] = lambda corruption=corruption: corruption(images, args.severity, seeds)
    print(
        f"{args.size}x{args.size}, batch {args.batch}, severity {args.severity} ({args.preset}), "
        f"torch threads {torch.get_num_threads()}, {args.repeats} repeats; CPU ms per image\n"
    )
    side_by_side(rows, args.repeats, args.batch)


if __name__ == "__main__":
    main()
