"""Philox on a CPU: the torch path (int64 tensor ops) against the numpy path (uint32 lanes), side by side.

Both give the same bits (tests/test_philox_numpy.py); this measures what the numpy path
saves, on the raw words, the draws built on them and the corruptions that draw most (the
noise corruptions and elastic transform, severity 3). A second table measures Poisson
counts found by walking from the mode alone (what every value did before the CDF tables)
against the CDF tables, which give the same bits (tests/test_poisson.py): on 8-bit images
times a photon count (few distinct rates) and on a smooth float image (about one rate per
value, where the tables stand aside and both walk), and ``shot_noise``. Every repeat runs
each row's two paths one after the other, alternating which goes first, in one process, so
that a busy machine weighs on both alike; the tables give the minimum and the median CPU
milliseconds per image (noise only ever adds time, so the minimum is the better estimate
of the cost). A first table sets the draws of a ``(3, size, size)`` field beside the
generators of torch (``torch.rand``, ``torch.randn``: MT19937 on CPUs) and numpy
(``default_rng``'s PCG64, float32 ziggurat normals), which are neither counter-based nor the
same on every device, and says how far the numpy path's normals are from the torch path's:

A fourth table times draws of a few blocks (a sign, an angle, a corruption's parameters) made
with Python integers (the default up to ``_PYTHON_MAX_BLOCKS`` blocks per seed) against the
numpy rounds, in microseconds, with warm caches and with cold ones (64 MiB of other data
written before each call, as a model's forward pass between two images leaves them).

A third table times the normal draws and the two corruptions made of them with the Box-Muller
steps around ``log`` and ``polarToCart`` as numpy ufuncs against numba's loops (the default
where numba is installed; the same bits, tests/test_philox_kernel.py).

    OMP_NUM_THREADS=1 python benchmarks/philox.py [--size 512] [--batch 1] [--repeats 15]

Times are the CPU time of the calling thread (``time.thread_time``).

The torch path is what GPUs run; it is forced on the CPU here by the one switch that picks
the path (``pytest_segrobust.randomness.philox._uses_numpy``); the walk alone by
``_poisson_inversion(..., tables=False)``.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import math
import statistics
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from unittest import mock

import numpy as np
import torch

from pytest_segrobust.corruptions import REGISTRY
from pytest_segrobust.randomness import philox

CORRUPTIONS = ("gaussian_noise", "shot_noise", "impulse_noise", "speckle_noise", "elastic_transform")


def seconds(fn: Callable[[], object], forced: Callable[[], AbstractContextManager[object]] | None) -> float:
    """CPU seconds of one call of ``fn``, inside ``forced()`` if given (with one thread, what a busy machine disturbs least)."""
    with forced() if forced else contextlib.nullcontext():
        start = time.thread_time()
        fn()
        return time.thread_time() - start


def torch_path() -> AbstractContextManager[object]:
    """Philox words from int64 tensor ops, as on a GPU."""
    return mock.patch.object(philox, "_uses_numpy", lambda device: False)


def numpy_box_muller() -> AbstractContextManager[object]:
    """The Box-Muller steps of the numpy path by numpy's ufuncs, without the compiled loops."""
    return mock.patch.object(philox, "_compiled_box_muller", lambda: None)


def walk_alone() -> AbstractContextManager[object]:
    """Poisson counts by the walk from the mode for every value, without CDF tables."""
    return mock.patch.object(philox, "_poisson_inversion", functools.partial(philox._poisson_inversion, tables=False))


def side_by_side(
    rows: dict[str, Callable[[], object]],
    repeats: int,
    batch: int,
    old: Callable[[], AbstractContextManager[object]],
    names: tuple[str, str],
) -> None:
    """Print one table row per entry: min and median ms per image of the ``old()`` path and the default one, and the speed-up of the minima."""
    print(f"| row | {names[0]} min / median ms | {names[1]} min / median ms | speed-up (min) |")
    print("|---|---:|---:|---:|")
    for name, fn in rows.items():
        times: dict[bool, list[float]] = {True: [], False: []}
        for forced in (True, False):  # warm-up: lazy imports, caches
            seconds(fn, old if forced else None)
        for repeat in range(repeats):
            for forced in (True, False) if repeat % 2 else (False, True):
                times[forced].append(seconds(fn, old if forced else None) / batch * 1e3)
        before, after = times[True], times[False]
        print(
            f"| {name} | {min(before):.2f} / {statistics.median(before):.2f} "
            f"| {min(after):.2f} / {statistics.median(after):.2f} | {min(before) / min(after):.2f}x |"
        )


def few_blocks(repeats: int) -> None:
    """Print one row per draw size: microseconds of the numpy rounds and of Python integers, warm and cold."""
    other = np.zeros(64 << 20, dtype=np.uint8)

    def micros(blocks: int, python: bool, cold: bool) -> float:
        limit = blocks if python else 0
        with (
            mock.patch.object(philox, "_PYTHON_MAX_BLOCKS", limit),
            mock.patch.object(philox, "_compiled_for", lambda b: None),
        ):
            draw = functools.partial(philox.random_bits, [7], 4 * blocks, "cpu", 3)
            if cold:
                np.add(other, 1, out=other)
            else:
                draw()  # the same draw just before: code and data in cache
            start = time.thread_time()
            draw()
            return (time.thread_time() - start) * 1e6

    print(
        "| blocks per seed | numpy rounds warm | Python warm | numpy rounds cold | Python cold | speed-up warm / cold (min) |"
    )
    print("|---:|---:|---:|---:|---:|---:|")
    for blocks in (1, 2, 4, 8, 12, 16):
        times: dict[tuple[bool, bool], list[float]] = {(p, c): [] for p in (False, True) for c in (False, True)}
        for key in times:
            micros(blocks, *key)  # warm-up
        for repeat in range(max(repeats, 30)):
            for python, cold in times if repeat % 2 else reversed(list(times)):
                times[python, cold].append(micros(blocks, python, cold))
        cells = " | ".join(
            f"{min(times[p, c]):.0f} / {statistics.median(times[p, c]):.0f}"
            for c in (False, True)
            for p in (False, True)
        )
        gains = " / ".join(f"{min(times[False, c]) / min(times[True, c]):.1f}x" for c in (False, True))
        print(f"| {blocks} | {cells} | {gains} |")


def beside_peers(size: int, batch: int, repeats: int) -> None:
    """Print ours (the numpy path) beside torch's and numpy's own generators, ms per ``(3, size, size)`` field."""
    seeds, shape = list(range(batch)), (3, size, size)
    torch_generator, numpy_generator = torch.Generator().manual_seed(0), np.random.default_rng(0)
    rows: dict[str, dict[str, Callable[[], object]]] = {
        "32-bit words": {
            "ours": lambda: philox.random_bits(seeds, math.prod(shape), "cpu"),
            "torch": lambda: torch.randint(0, 2**32, (batch, *shape), generator=torch_generator),
            "numpy": lambda: numpy_generator.integers(0, 2**32, (batch, *shape), dtype=np.uint32),
        },
        "uniform float32": {
            "ours": lambda: philox.uniform(seeds, shape, "cpu"),
            "torch": lambda: torch.rand((batch, *shape), generator=torch_generator),
            "numpy": lambda: numpy_generator.random((batch, *shape), dtype=np.float32),
        },
        "normal float32": {
            "ours": lambda: philox.normal(seeds, shape, "cpu"),
            "torch": lambda: torch.randn((batch, *shape), generator=torch_generator),
            "numpy": lambda: numpy_generator.standard_normal((batch, *shape), dtype=np.float32),
        },
    }
    names = ("ours", "torch", "numpy")
    print("| draw | ours min / median ms | torch min / median ms | numpy min / median ms | ours / torch (min) |")
    print("|---|---:|---:|---:|---:|")
    for row, fns in rows.items():
        times: dict[str, list[float]] = {name: [] for name in names}
        for fn in fns.values():  # warm-up
            fn()
        for repeat in range(repeats):
            order = names[repeat % 3 :] + names[: repeat % 3]
            for name in order:
                times[name].append(seconds(fns[name], None) / batch * 1e3)
        cells = " | ".join(f"{min(times[n]):.2f} / {statistics.median(times[n]):.2f}" for n in names)
        print(f"| {row} | {cells} | {min(times['ours']) / min(times['torch']):.2f}x |")
    fields = [philox.normal([seed], shape, "cpu", 3) for seed in range(8)]
    with torch_path():
        torch_fields = [philox.normal([seed], shape, "cpu", 3) for seed in range(8)]
    differing = sum(int((a != b).sum()) for a, b in zip(fields, torch_fields))
    largest = max(float((a - b).abs().max()) for a, b in zip(fields, torch_fields))
    print(
        f"\nnormals, numpy path against torch path: {differing} of {8 * math.prod(shape)} values differ, "
        f"max |diff| {largest:.3g} (cos and sin by {philox._polar_to_cartesian().__name__})\n"
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
    smooth = torch.nn.functional.interpolate(coarse, size=(args.size, args.size), mode="bilinear")
    images = ((0.8 * smooth + 0.2 * torch.rand(smooth.shape, generator=g)) * 255).round() / 255
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
    beside_peers(args.size, args.batch, args.repeats)
    side_by_side(rows, args.repeats, args.batch, torch_path, ("torch path", "numpy path"))
    print()
    normal_rows = {name: rows[name] for name in ("normal", "gaussian_noise", "speckle_noise")}
    side_by_side(normal_rows, args.repeats, args.batch, numpy_box_muller, ("numpy ufunc steps", "compiled steps"))
    print()
    shot_noise = next(c for c in REGISTRY.available(args.preset) if c.name == "shot_noise")
    poisson_rows: dict[str, Callable[[], object]] = {
        f"poisson, 8-bit image x {photons:g}": lambda photons=photons: philox.poisson(seeds, images * photons)
        for photons in (3.0, 12.0, 60.0, 250.0)
    }
    poisson_rows["poisson, float image x 12"] = lambda: philox.poisson(seeds, smooth * 12.0)
    poisson_rows[f"shot_noise (severity {args.severity})"] = lambda: shot_noise(images, args.severity, seeds)
    side_by_side(poisson_rows, args.repeats, args.batch, walk_alone, ("walk alone", "CDF tables"))
    print("\nDraws of a few blocks, one seed: microseconds per draw, min / median\n")
    few_blocks(args.repeats)


if __name__ == "__main__":
    main()
