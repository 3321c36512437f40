"""Our imagenet-c corruptions against the reference implementation, on the same images.

Deterministic corruptions are compared pixel by pixel (PSNR, dB, on 8-bit images; goal
>= 35 dB). Stochastic ones cannot match pixel by pixel (different random streams), so we
compare what the noise does: the mean and standard deviation of (corrupted - clean) per
pixel, and the mean absolute change, each as our/reference ratio (goal within 2%).

Run in the throwaway environment described in benchmarks/_reference.py:

    python benchmarks/fidelity.py [--images 8] [--size 224]
"""

from __future__ import annotations

import argparse
import math

import numpy as np
import torch

from pytest_segrobust.corruptions import REGISTRY
from pytest_segrobust.corruptions.functional import to_uint8
from pytest_segrobust.data.demo import DemoScenes
from pytest_segrobust.seeding import sample_seed

DETERMINISTIC = {"defocus_blur", "gaussian_blur", "zoom_blur", "jpeg_compression", "pixelate", "contrast", "brightness", "saturate"}


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return math.inf if mse == 0 else 10 * math.log10(255.0**2 / mse)


def noise_stats(clean: np.ndarray, corrupted: np.ndarray) -> tuple[float, float, float]:
    delta = corrupted.astype(np.float64) - clean.astype(np.float64)
    return float(delta.mean()), float(delta.std()), float(np.abs(delta).mean())


def ratio(ours: float, theirs: float) -> float:
    return ours / theirs if theirs else (1.0 if ours == 0 else math.inf)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=8)
    parser.add_argument("--size", type=int, default=224)
    args = parser.parse_args()

    from _reference import load_reference

    reference = load_reference()
    scenes = DemoScenes("val", size=args.images, image_size=args.size)
    samples = [scenes[i] for i in range(args.images)]
    clean = [s.image.permute(1, 2, 0).numpy() for s in samples]
    batch = torch.stack([s.image for s in samples]).float() / 255

    print(f"imagenet-c fidelity, {args.images} demo images of {args.size}x{args.size}, severities 1..5\n")
    print("| corruption | kind | s1 | s2 | s3 | s4 | s5 | verdict |")
    print("|---|---|---:|---:|---:|---:|---:|---|")
    for name in [c.name for c in REGISTRY.available("imagenet-c")]:
        corruption = REGISTRY.get(name, "imagenet-c")
        cells, ok = [], True
        for severity in range(1, 6):
            np.random.seed(severity)  # the reference draws from numpy's global generator
            theirs = [reference(image, name, severity) for image in clean]
            seeds = [sample_seed(0, s.sample_id, name, severity) for s in samples]
            ours = to_uint8(corruption(batch, severity, seeds)).permute(0, 2, 3, 1).numpy()
            if name in DETERMINISTIC:
                value = float(np.mean([psnr(o, t) for o, t in zip(ours, theirs)]))
                ok &= value >= 35
                cells.append(f"{value:.1f} dB")
            else:
                mine = np.mean([noise_stats(c, o) for c, o in zip(clean, ours)], axis=0)
                ref = np.mean([noise_stats(c, t) for c, t in zip(clean, theirs)], axis=0)
                std_ratio, mad_ratio = ratio(mine[1], ref[1]), ratio(mine[2], ref[2])
                ok &= abs(std_ratio - 1) <= 0.02 and abs(mad_ratio - 1) <= 0.02
                cells.append(f"σ×{std_ratio:.3f} |Δ|×{mad_ratio:.3f}")
        kind = "PSNR" if name in DETERMINISTIC else "noise stats"
        print(f"| {name} | {kind} | " + " | ".join(cells) + f" | {'meets goal' if ok else 'MISSES goal'} |")


if __name__ == "__main__":
    main()
