"""Poisson counts on a CPU: the torch path against numba's loops, side by side, on the demo's fields.

``philox.poisson`` on batches of 8-bit images times a photon count (ImageNet-C's shot noise
levels: 60, 25, 12, 5 and 3 photons), at 128x128 (the demo's images, one and a batch of 16)
and 512x512, and ``shot_noise`` on them. "before" forces the torch path
(``_compiled_poisson_for`` answers None: CDF tables and walks as tensor operations), "after"
is the default (numba's loops, :mod:`pytest_segrobust.randomness.poisson_kernel`); both
draw their uniforms from the compiled Philox words. Every round runs both, alternating which
goes first, in one process, so that a busy machine weighs on both alike; the table gives
the median CPU milliseconds per call (``time.thread_time``) and whether both gave the same
bits.

    OMP_NUM_THREADS=1 python benchmarks/poisson.py [--rounds 7]
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import statistics
import time
from collections.abc import Callable
from unittest import mock

import torch

from pytest_segrobust.corruptions.functional.noise import shot_noise
from pytest_segrobust.randomness import philox
from pytest_segrobust.randomness.seeding import SampleStreams

SHAPES = ((1, 128), (16, 128), (1, 512))
PHOTONS = (60.0, 25.0, 12.0, 5.0, 3.0)


def eight_bit_images(batch: int, size: int) -> torch.Tensor:
    """Smooth shading plus grain, quantised to 8 bits: ``(batch, 3, size, size)`` float32 in ``[0, 1]``."""
    g = torch.Generator().manual_seed(batch * 1000 + size)
    coarse = torch.rand(batch, 3, 6, 6, generator=g)
    smooth = torch.nn.functional.interpolate(coarse, size=(size, size), mode="bilinear")
    return ((0.8 * smooth + 0.2 * torch.rand(smooth.shape, generator=g)) * 255).round() / 255


def timed(fn: Callable[[], torch.Tensor], before: bool) -> tuple[float, torch.Tensor]:
    """CPU milliseconds of one call of ``fn`` on the torch path (``before``) or the default one, and its result."""
    forced = mock.patch.object(philox, "_compiled_poisson_for", lambda lam, u: None)
    with forced if before else contextlib.nullcontext():
        start = time.thread_time()
        result = fn()
        return (time.thread_time() - start) * 1e3, result


def row(name: str, fn: Callable[[], torch.Tensor], rounds: int) -> None:
    """Print one table row: median ms before and after, the speed-up, and whether the bits agree."""
    times: dict[bool, list[float]] = {True: [], False: []}
    results: dict[bool, torch.Tensor] = {}
    for before in (True, False):  # warm-up: lazy imports, caches
        timed(fn, before)
    for repeat in range(rounds):
        for before in (True, False) if repeat % 2 else (False, True):
            elapsed, results[before] = timed(fn, before)
            times[before].append(elapsed)
    same = torch.equal(results[True].view(torch.int32), results[False].view(torch.int32))
    old, new = statistics.median(times[True]), statistics.median(times[False])
    print(f"| {name} | {old:.1f} | {new:.1f} | {old / new:.2f}x | {'yes' if same else 'NO'} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    if philox._compiled_poisson() is None:
        raise SystemExit("numba's Poisson loops are not available here (is numba installed?)")
    print(f"torch threads {torch.get_num_threads()}, {args.rounds} rounds; median CPU ms per call\n")
    print("| field | before (torch path) | after (numba loops) | speed-up | same bits |")
    print("|---|---:|---:|---:|---:|")
    for batch, size in SHAPES:
        images = eight_bit_images(batch, size)
        seeds = list(range(batch))
        field = f"{batch}x3x{size}x{size}"
        for photons in PHOTONS:
            row(
                f"poisson {field}, x {photons:g}",
                functools.partial(philox.poisson, seeds, images * photons),
                args.rounds,
            )
        row(f"shot_noise {field}, 60 photons", functools.partial(noisy, images, seeds), args.rounds)


def noisy(images: torch.Tensor, seeds: list[int]) -> torch.Tensor:
    """``shot_noise`` at 60 photons from fresh streams (a draw moves a SampleStreams on to its next stream)."""
    return shot_noise(images, 60.0, SampleStreams(seeds, "cpu"))


if __name__ == "__main__":
    main()
