"""The warp rows on CPU: OpenCV 5's float32 warps against the ``grid_sample`` / ``interpolate`` path.

Per row, ours at batch 1 and batch 16 (ms per image, thread CPU time, one thread, severity 3,
interleaved rounds; min / median) with OpenCV's warps and with them switched off (what
OpenCV 4.x gets), on images alone and on images with a label map (there also with the
label map moved by tensor ops instead of numba's nearest-neighbour loops); then the largest
``|OpenCV - torch|`` over every severity on a photo-like and a uniform-noise image:

    PYTHONPATH=. python benchmarks/warps.py [--size 512] [--rounds 7] [--only rotate,zoom_blur]
"""

from __future__ import annotations

import os

for _variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[_variable] = "1"  # before numpy, torch and OpenCV start their pools

import argparse
import contextlib
import statistics
import time
from collections.abc import Callable
from typing import Any
from unittest import mock

import numpy as np
import torch

from benchmarks.peers import photo_like
from pytest_segrobust.core.types import Image, SemanticMask
from pytest_segrobust.corruptions import REGISTRY
from pytest_segrobust.corruptions.functional import geometry, opencv
from pytest_segrobust.runtime import allocator

ROWS = (
    ("rotate", "coco-p"),
    ("shear", "coco-p"),
    ("translate", "coco-p"),
    ("geometric_distortion", "cityscapes-c"),
    ("elastic_transform", "imagenet-c"),
    ("zoom_blur", "imagenet-c"),
    ("zoom_blur", "coco-p"),
)
SEVERITY = 3


def torch_warps() -> contextlib.AbstractContextManager[object]:
    """The warps as on OpenCV 4.x: ``grid_sample`` and ``interpolate`` (every other OpenCV kernel stays)."""
    return mock.patch.object(opencv, "exact_bilinear", lambda cv2: False)


def tensor_labels() -> contextlib.AbstractContextManager[object]:
    """Label maps moved by tensor ops (``floor``, ``gather``, ``where``) instead of numba's loops."""
    return mock.patch.object(geometry, "_compiled_nearest_for", lambda labels, coords: None)


PATHS = {"opencv": contextlib.nullcontext, "torch": torch_warps, "tensor labels": tensor_labels}


def thread_ms(call: Callable[[], Any]) -> float:
    start = time.thread_time()
    call()
    return (time.thread_time() - start) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=512)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--only", default="")
    parser.add_argument(
        "--malloc", choices=allocator.CHOICES, default=allocator.DEFAULT, help="as pytest --segrobust runs by default"
    )
    args = parser.parse_args()
    malloc = allocator.configure(args.malloc)
    torch.set_num_threads(1)

    photo = torch.from_numpy(photo_like(args.size)).permute(2, 0, 1)[None].contiguous().float() / 255
    noise = torch.from_numpy(np.random.default_rng(1).random((1, 3, args.size, args.size), dtype=np.float32))
    batch = photo.expand(args.batch, -1, -1, -1).contiguous()
    labels = (photo[:, 0] * 5).long()
    batch_labels = labels.expand(args.batch, -1, -1).contiguous()
    wanted = set(args.only.split(",")) if args.only else None
    rows = [row for row in ROWS if wanted is None or row[0] in wanted]

    contenders: list[tuple[tuple[str, str], str, int, Callable[[], Any]]] = []
    for name, preset in rows:
        corruption = REGISTRY.get(name, preset)
        seeds = list(range(args.batch))
        for labelled in (False, True) if corruption.geometric else (False,):
            one: Any = {"image": Image(photo), "mask": SemanticMask(labels)} if labelled else photo
            many: Any = {"image": Image(batch), "mask": SemanticMask(batch_labels)} if labelled else batch
            tag = " +labels" if labelled else ""
            contenders.append(((name, preset), f"b1{tag}", 1, lambda c=corruption, x=one: c(x, SEVERITY, [0])))
            contenders.append(
                (
                    (name, preset),
                    f"b{args.batch}{tag}",
                    args.batch,
                    lambda c=corruption, x=many, s=seeds: c(x, SEVERITY, s),
                )
            )

    def paths(column: str) -> list[str]:
        return list(PATHS) if "labels" in column else ["opencv", "torch"]

    times: dict[tuple[Any, str, str], list[float]] = {}
    for _, column, _, call in contenders:
        for path in paths(column):
            with PATHS[path]():
                call()  # warm-up
    for _ in range(args.rounds):
        for row, column, per, call in contenders:
            for path in paths(column):
                with PATHS[path]():
                    times.setdefault((row, column, path), []).append(thread_ms(call) / per)

    print(
        f"\n{args.size}x{args.size}, severity {SEVERITY}, one thread, thread CPU ms per image, min / median of {args.rounds}"
    )
    print("interleaved rounds; OpenCV", opencv.opencv().__version__, "(torch path = OpenCV's warps off);")
    print(f"malloc {malloc.describe()}\n")
    print("| corruption | batch | torch path | OpenCV path | torch / OpenCV | OpenCV, labels by tensor ops |")
    print("|---|---|---:|---:|---:|---:|")
    for (name, preset), column in dict.fromkeys((row, column) for row, column, _, _ in contenders):
        before, after = times[(name, preset), column, "torch"], times[(name, preset), column, "opencv"]
        labelled = times.get(((name, preset), column, "tensor labels"))
        print(
            f"| {name} ({preset}) | {column} | {min(before):.2f} / {statistics.median(before):.2f} "
            f"| {min(after):.2f} / {statistics.median(after):.2f} | {min(before) / min(after):.2f}x | "
            + (f"{min(labelled):.2f} / {statistics.median(labelled):.2f} |" if labelled else "- |")
        )

    print(f"\nmax |OpenCV - torch| over severities 1-5, {args.size}x{args.size}, seeds 0-3\n")
    print("| corruption | photo-like | uniform noise |")
    print("|---|---:|---:|")
    for name, preset in rows:
        corruption = REGISTRY.get(name, preset)
        cells = []
        for image in (photo, noise):
            worst = 0.0
            for severity in range(1, 6):
                for seed in range(4):
                    fast = corruption(image, severity, [seed])
                    with torch_warps():
                        slow = corruption(image, severity, [seed])
                    worst = max(worst, float((fast - slow).abs().max()))
            cells.append(f"{worst:.2e}")
        print(f"| {name} ({preset}) | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
