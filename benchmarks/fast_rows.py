"""The CPU fast paths of zoom blur, pixelate, saturate, brightness and contrast against the paths they replace.

Each row runs one corruption on the same 512x512 photo-like image (``benchmarks/peers.py``'s)
three ways in one process: the fast path as shipped (numba's compiled loops, OpenCV's
``INTER_AREA`` at whole ratios), the path it replaces (``before``: the same code with that
fast path switched off, i.e. OpenCV 5's ``warpAffine`` zooms, Pillow's box sums, the numpy
planes and torch's in-place blends), and the torch path an accelerator takes
(:func:`benchmarks.peers.torch_path`). Times are the CPU time of the calling thread, one
thread; every round times each contender once, in turn (interleaved, so that load from
other processes spreads over all of them); min and median over the rounds are printed,
with the largest ``|fast - torch path|`` and ``|fast - before|``:

    OMP_NUM_THREADS=1 PYTHONPATH=. python benchmarks/fast_rows.py [--rounds 15]
"""

from __future__ import annotations

import os

for _variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[_variable] = "1"

import argparse
import contextlib
import statistics
import time
from collections.abc import Callable, Iterator

import torch

from benchmarks.peers import photo_like, torch_path
from pytest_segrobust.core.opencv import opencv
from pytest_segrobust.corruptions import REGISTRY
from pytest_segrobust.corruptions.functional import blur, codec, color


@contextlib.contextmanager
def before() -> Iterator[None]:
    """The fast paths of this table off: what ran before them."""
    with contextlib.ExitStack() as stack:
        for module, name, replacement in (
            (blur, "_compiled_zoom", lambda: None),
            (codec, "_aligned_blocks", lambda in_size, out_size: False),
            (color, "_compiled_color_for", lambda images: None),
        ):
            stack.enter_context(_patched(module, name, replacement))
        yield


@contextlib.contextmanager
def _patched(module: object, name: str, value: object) -> Iterator[None]:
    saved = getattr(module, name)
    setattr(module, name, value)
    try:
        yield
    finally:
        setattr(module, name, saved)


ROWS = (
    ("zoom_blur", "imagenet-c", 3),
    ("zoom_blur", "coco-p", 3),
    ("pixelate", "imagenet-c", 2),  # factor 0.5: a whole ratio
    ("pixelate", "imagenet-c", 5),  # factor 0.25
    ("pixelate", "imagenet-c", 3),  # factor 0.4: box sums either way
    ("saturate", "imagenet-c", 3),
    ("brightness", "imagenet-c", 3),
    ("contrast", "imagenet-c", 3),
    ("contrast", "coco-p", 3),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=512)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    torch.set_num_threads(1)
    cv2 = opencv()
    if cv2 is not None:
        cv2.setNumThreads(1)
    image = torch.from_numpy(photo_like(args.size)).permute(2, 0, 1)[None].contiguous().to(torch.float32) / 255.0

    contenders: list[tuple[int, str, Callable[[], torch.Tensor]]] = []
    for index, (name, preset, severity) in enumerate(ROWS):
        corruption = REGISTRY.get(name, preset)

        def run(corruption=corruption, severity=severity) -> torch.Tensor:
            return corruption(image, severity, [0])

        def run_before(run=run) -> torch.Tensor:
            with before():
                return run()

        def run_torch(run=run) -> torch.Tensor:
            with torch_path():
                return run()

        contenders += [(index, "fast", run), (index, "before", run_before), (index, "torch path", run_torch)]
    outputs = {(index, column): call() for index, column, call in contenders}  # also the warm-up
    times: dict[tuple[int, str], list[float]] = {(index, column): [] for index, column, _ in contenders}
    for _ in range(args.rounds):
        for index, column, call in contenders:
            start = time.thread_time()
            call()
            times[index, column].append((time.thread_time() - start) * 1e3)

    print(
        f"\n{args.size}x{args.size}, batch 1, one thread, {args.rounds} interleaved rounds; thread CPU ms, min / median\n"
    )
    print(
        "| corruption | severity | fast | before | torch path | before / fast | max \\|fast - torch path\\| | max \\|fast - before\\| |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for index, (name, preset, severity) in enumerate(ROWS):
        cells = [
            f"{min(times[index, c]):.2f} / {statistics.median(times[index, c]):.2f}"
            for c in ("fast", "before", "torch path")
        ]
        speedup = min(times[index, "before"]) / min(times[index, "fast"])
        fast = outputs[index, "fast"]
        to_torch = float((fast - outputs[index, "torch path"]).abs().max())
        to_before = float((fast - outputs[index, "before"]).abs().max())
        print(
            f"| {name} ({preset}) | {severity} | "
            + " | ".join(cells)
            + f" | {speedup:.1f}x | {to_torch:.1e} | {to_before:.1e} |"
        )


if __name__ == "__main__":
    main()
