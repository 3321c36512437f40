"""What J and J&F cost per clip, next to vos-benchmark (the DAVIS F code on OpenCV) on the same frames.

A DAVIS-sized clip (480x854 by default, several objects that drift; ``--ragged`` flips a share
of pixels, which puts boundary pixels everywhere), a prediction shifted by a few pixels. Rounds are interleaved (ours, then the reference, then ours again ...) and each
is timed in CPU seconds of one thread (torch and OpenCV are held to one thread), which a
shared machine disturbs least; on CUDA the time is wall-clock with a synchronise.

vos-benchmark is optional: ``pip install --target DIR vos-benchmark scikit-image lazy_loader``
and ``PYTHONPATH=$PWD:DIR``.

    python benchmarks/video_metrics.py [--frames 20] [--size 480 854] [--objects 3] [--rounds 3] [--ragged 0.01] [--device cpu|cuda]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np
import torch

from pytest_segrobust.core.types import VideoMasks
from pytest_segrobust.metrics.base import MetricContext
from pytest_segrobust.metrics.video import RegionAndBoundary, RegionSimilarity, boundary_radius


def clip(frames: int, height: int, width: int, objects: int, ragged: float) -> tuple[np.ndarray, np.ndarray]:
    """True ids of drifting ellipses (a share ``ragged`` of pixels flipped), and a prediction shifted by (4, 6) pixels."""
    rng = np.random.default_rng(0)
    y, x = np.mgrid[:height, :width]
    truth = np.zeros((frames, height, width), dtype=np.int64)
    for object_id in range(1, objects + 1):
        cy, cx = rng.uniform(0.2, 0.8) * height, rng.uniform(0.2, 0.8) * width
        ry, rx = rng.uniform(0.1, 0.3) * height, rng.uniform(0.1, 0.3) * width
        vy, vx = rng.uniform(-2, 2, size=2)
        for t in range(frames):
            inside = ((y - cy - vy * t) / ry) ** 2 + ((x - cx - vx * t) / rx) ** 2 <= 1
            truth[t][inside ^ (rng.uniform(size=inside.shape) < ragged)] = object_id
    return np.roll(truth, (4, 6), axis=(1, 2)), truth


def timed(run: Callable[[], object], device: torch.device) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize()
        start = time.perf_counter()
        run()
        torch.cuda.synchronize()
        return time.perf_counter() - start
    start = time.thread_time()
    run()
    return time.thread_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=20)
    parser.add_argument("--size", type=int, nargs=2, default=(480, 854), metavar=("H", "W"))
    parser.add_argument("--objects", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--ragged", type=float, default=0.0, help="share of pixels flipped (boundaries everywhere)")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    torch.set_num_threads(1)
    device = torch.device(args.device)
    height, width = args.size
    predicted, truth = clip(args.frames, height, width, args.objects, args.ragged)
    ids = tuple(range(1, args.objects + 1))
    masks = VideoMasks.of(torch.from_numpy(truth)[None].to(device))
    masks = VideoMasks(masks.data, (ids,), masks.annotated, masks.frame_ids, masks.ignore_index)
    batch, prediction = {"masks": masks}, torch.from_numpy(predicted)[None].to(device)
    context = MetricContext(("background", "object"), 255, device=device)

    def ours(kind: type) -> Callable[[], object]:
        def run() -> object:
            metric = kind(context)
            metric.update(prediction, batch)
            return metric.compute()

        return run

    runs: dict[str, Callable[[], object]] = {
        "vos_jf (J and F)": ours(RegionAndBoundary),
        "vos_j (J only)": ours(RegionSimilarity),
    }
    try:
        import cv2
        from vos_benchmark.evaluator import Evaluator

        cv2.setNumThreads(1)

        def reference() -> object:
            evaluator = Evaluator()
            for t in range(args.frames):
                evaluator.feed_frame(predicted[t].astype(np.uint8), truth[t].astype(np.uint8))
            return evaluator.conclude()

        runs["vos-benchmark (J and F)"] = reference
    except ImportError as exc:
        print(f"vos-benchmark not importable ({exc}): timing ours only")

    seconds: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(args.rounds):
        for name, run in runs.items():
            seconds[name].append(timed(run, device))
    print(
        f"1 clip of {args.frames} frames, {height}x{width}, {args.objects} objects, F radius {boundary_radius(height, width)} px"
    )
    print(f"device {device}, 1 thread, {args.rounds} interleaved rounds (median)")
    print(f"{'':>26} {'per clip (s)':>13} {'per frame (ms)':>15}")
    for name, times in seconds.items():
        median = statistics.median(times)
        print(f"{name:>26} {median:13.3f} {1000 * median / args.frames:15.1f}")


if __name__ == "__main__":
    main()
