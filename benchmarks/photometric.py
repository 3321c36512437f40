"""The photometric and codec rows beside the plain library call doing their core operation.

Ours at batch 1 and at batch 16 (image by image, as the CPU harness runs), and the one
OpenCV, numpy or torch call that does the row's core work on the same 512x512 photo-like
image (float32 unless the codec needs uint8), severity 3. Thread CPU time, one thread,
interleaved rounds; min and median per image. malloc is tuned as the gate tunes it
(``--malloc system`` to see glibc's defaults, which fault in a fresh batch output every call).

    PYTHONPATH=. python benchmarks/photometric.py [--rounds 15] [--malloc tuned|system]
"""

from __future__ import annotations

import os

for _variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[_variable] = "1"

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).parent))
from peers import photo_like

from pytest_segrobust import allocator
from pytest_segrobust.corruptions import REGISTRY


def plain_calls(cv2: Any, photo: np.ndarray, size: int) -> dict[str, tuple[str, Callable[[], Any]]]:
    """Per row, what the plain call computes and the call, on an HWC image (float32 unless said)."""
    hwc = photo.astype(np.float32) / 255.0
    chw = torch.from_numpy(np.ascontiguousarray(hwc.transpose(2, 0, 1)))
    small = int(size * 0.4)
    hsv_round_trip = (
        "cv2.cvtColor RGB2HSV, HSV2RGB",
        lambda: cv2.cvtColor(cv2.cvtColor(hwc, cv2.COLOR_RGB2HSV), cv2.COLOR_HSV2RGB),
    )
    blend = ("cv2.mean, cv2.addWeighted", lambda: cv2.addWeighted(hwc, 0.2, hwc, 0.0, 0.8 * cv2.mean(hwc)[0]))
    return {
        "saturate": hsv_round_trip,
        "brightness": hsv_round_trip,
        "contrast": blend,
        "darkness": ("cv2.multiply", lambda: cv2.multiply(hwc, 0.7)),
        "pixelate": (
            "cv2.resize INTER_AREA, INTER_NEAREST",
            lambda: cv2.resize(
                cv2.resize(hwc, (small, small), interpolation=cv2.INTER_AREA),
                (size, size),
                interpolation=cv2.INTER_NEAREST,
            ),
        ),
        "jpeg_compression": (
            "cv2.imencode, imdecode (uint8)",
            lambda: cv2.imdecode(cv2.imencode(".jpg", photo, (cv2.IMWRITE_JPEG_QUALITY, 15))[1], cv2.IMREAD_COLOR),
        ),
        "impulse_noise": ("torch.rand, two compares, clamp", lambda: _salt_and_pepper(chw)),
    }


def _salt_and_pepper(images: torch.Tensor) -> torch.Tensor:
    draw = torch.rand(images.shape)
    return torch.clamp(images, min=(draw >= 0.955).float(), max=(draw >= 0.045).float())


ROWS = (
    ("saturate", "imagenet-c"),
    ("brightness", "imagenet-c"),
    ("contrast", "imagenet-c"),
    ("contrast", "coco-p"),
    ("darkness", "coco-p"),
    ("pixelate", "imagenet-c"),
    ("jpeg_compression", "imagenet-c"),
    ("impulse_noise", "imagenet-c"),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=512)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--malloc", choices=allocator.CHOICES, default=allocator.DEFAULT)
    args = parser.parse_args()
    if args.malloc == "tuned":
        allocator.configure("tuned")
    torch.set_num_threads(1)
    import cv2

    cv2.setNumThreads(1)
    photo = photo_like(args.size)
    single = torch.from_numpy(photo).permute(2, 0, 1)[None].contiguous().to(torch.float32) / 255.0
    batch = single.expand(args.batch, -1, -1, -1).contiguous()
    plain = plain_calls(cv2, photo, args.size)

    contenders: list[tuple[int, str, int, Callable[[], Any]]] = []
    for index, (name, preset) in enumerate(ROWS):
        corruption = REGISTRY.get(name, preset)
        seeds = list(range(args.batch))
        contenders.append((index, "b1", 1, lambda c=corruption: c(single, 3, [0])))
        contenders.append((index, "b16", args.batch, lambda c=corruption, s=seeds: c(batch, 3, s)))
        contenders.append((index, "plain", 1, plain[name][1]))
    for *_, call in contenders:
        call()
    times: dict[tuple[int, str], list[float]] = {(i, column): [] for i, column, _, _ in contenders}
    for _ in range(args.rounds):
        for index, column, per, call in contenders:
            start = time.thread_time()
            call()
            times[index, column].append((time.thread_time() - start) * 1e3 / per)

    print(f"\n{args.size}x{args.size}, severity 3, thread CPU ms per image, min / median of {args.rounds} rounds, "
          f"malloc {args.malloc}; torch {torch.__version__}, OpenCV {cv2.__version__}\n")  # fmt: skip
    print(f"| row | ours b1 | ours b{args.batch} | plain call | plain call's time | b1 / plain |")
    print("|---|---:|---:|---|---:|---:|")
    for index, (name, preset) in enumerate(ROWS):
        cells = [f"{min(times[index, c]):.2f} / {statistics.median(times[index, c]):.2f}" for c in ("b1", "b16")]
        ratio = min(times[index, "b1"]) / min(times[index, "plain"])
        print(f"| {name} ({preset}) | {cells[0]} | {cells[1]} | {plain[name][0]} | "
              f"{min(times[index, 'plain']):.2f} | {ratio:.1f}x |")  # fmt: skip


if __name__ == "__main__":
    main()
