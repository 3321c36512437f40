"""Our imagenet-c corruptions against the reference implementation, on the same images.

Deterministic corruptions are compared pixel by pixel (PSNR, dB, on 8-bit images; goal
>= 35 dB). Stochastic ones cannot match pixel by pixel (different random streams), so we
compare what they do to an image: the mean absolute change ``mean |corrupted - clean|``
and its spread ``std |corrupted - clean|`` per image, averaged over the images, each as
our relative difference to the reference (goal within 5%), and whether the severities
order the same way (by mean absolute change) as the reference's.

Run in the throwaway environment described in benchmarks/_reference.py:

    python benchmarks/fidelity.py [--images 8] [--size 224]             # demo scenes
    python benchmarks/fidelity.py --photos [--size 256] [--only glass_blur,spatter,frost,snow]

``--photos`` uses three real photographs shipped with scikit-image (astronaut, coffee,
chelsea), centre-cropped to ``--size``. ``--reference-seeds 2`` also runs the reference
with a second numpy seed and prints its own seed-to-seed difference, the floor any match
can reach.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

import numpy as np
import torch

from pytest_segrobust.corruptions import REGISTRY
from pytest_segrobust.corruptions.functional import to_uint8
from pytest_segrobust.randomness.seeding import sample_seed

DETERMINISTIC = {"defocus_blur", "gaussian_blur", "zoom_blur", "jpeg_compression", "pixelate", "contrast", "brightness", "saturate"}
GOAL_DB = 35.0
GOAL_RELATIVE = 0.05


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return math.inf if mse == 0 else 10 * math.log10(255.0**2 / mse)


def change_stats(clean: np.ndarray, corrupted: np.ndarray) -> tuple[float, float]:
    """Mean absolute change and its spread (std of the absolute change), 8-bit units."""
    change = np.abs(corrupted.astype(np.float64) - clean.astype(np.float64))
    return float(change.mean()), float(change.std())


def relative(ours: float, theirs: float) -> float:
    return ours / theirs - 1 if theirs else (0.0 if ours == 0 else math.inf)


def order(values: list[float]) -> str:
    """Severities sorted by increasing value, e.g. ``1<2<3<5<4``."""
    return "<".join(str(i + 1) for i in np.argsort(values, kind="stable"))


def same_order(ours: list[float], theirs: list[float], tie: float = 0.02) -> bool:
    """Every pair of severities the reference separates by more than ``tie`` (relative) is ordered alike."""
    for i in range(len(theirs)):
        for j in range(len(theirs)):
            if theirs[j] > theirs[i] * (1 + tie) and not ours[j] > ours[i]:
                return False
    return True


def photographs(size: int) -> tuple[list[str], list[np.ndarray]]:
    import skimage.data

    names = ["astronaut", "coffee", "chelsea"]
    images = []
    for name in names:
        image = getattr(skimage.data, name)()
        top, left = (image.shape[0] - size) // 2, (image.shape[1] - size) // 2
        if top < 0 or left < 0:
            raise SystemExit(f"--size {size} is larger than {name} ({image.shape[0]}x{image.shape[1]})")
        images.append(np.ascontiguousarray(image[top : top + size, left : left + size]))
    return names, images


def demo_scenes(count: int, size: int) -> tuple[list[str], list[np.ndarray]]:
    from pytest_segrobust.data.demo import DemoScenes

    scenes = DemoScenes("val", size=count, image_size=size)
    samples = [scenes[i] for i in range(count)]
    return [s.sample_id for s in samples], [s.image.permute(1, 2, 0).numpy() for s in samples]


def run_reference(
    reference: Callable[[np.ndarray, str, int], np.ndarray],
    clean: list[np.ndarray],
    name: str,
    severity: int,
    seed: int,
) -> list[np.ndarray]:
    np.random.seed(seed)  # the reference draws from numpy's global generator
    return [to_uint8_host(reference(image, name, severity)) for image in clean]


def to_uint8_host(image: np.ndarray) -> np.ndarray:
    # The reference returns float images in [0, 255] for most corruptions: round as saving would.
    return np.clip(np.rint(np.asarray(image, dtype=np.float64)), 0, 255).astype(np.uint8)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=8, help="demo scenes (ignored with --photos)")
    parser.add_argument("--size", type=int, default=None, help="image side (224 demo, 256 photos)")
    parser.add_argument("--photos", action="store_true", help="three real photographs instead of demo scenes")
    parser.add_argument("--only", default="", help="comma-separated corruption names")
    parser.add_argument("--repeats", type=int, default=1, help="corrupt each image this many times (other seeds)")
    parser.add_argument("--reference-seeds", type=int, default=1, choices=(1, 2))
    args = parser.parse_args()

    from _reference import load_reference

    reference = load_reference()
    size = args.size or (256 if args.photos else 224)
    ids, clean = photographs(size) if args.photos else demo_scenes(args.images, size)
    if args.repeats > 1:
        # The same images again under other seeds: more draws of each corruption's randomness.
        ids = [f"{i}#{r}" if r else i for r in range(args.repeats) for i in ids]
        clean = clean * args.repeats
    batch = torch.stack([torch.from_numpy(image).permute(2, 0, 1) for image in clean]).float() / 255
    names = [c.name for c in REGISTRY.available("imagenet-c")]
    if args.only:
        wanted = args.only.split(",")
        names = [n for n in names if n in wanted]

    source = "photographs " + ", ".join(ids[: len(ids) // args.repeats]) if args.photos else f"{len(ids)} demo images"
    if args.repeats > 1:
        source += f", each {args.repeats} times"
    print(f"imagenet-c fidelity, {source}, {size}x{size}, severities 1..5")
    print(f"PSNR for deterministic corruptions (goal >= {GOAL_DB:.0f} dB); otherwise our relative difference to")
    print(f"the reference in mean |Δ| and in std |Δ| (goal within {GOAL_RELATIVE:.0%}), and the severity order")
    print("(severities whose reference values lie within 2% of each other count as tied).\n")
    print("| corruption | kind | s1 | s2 | s3 | s4 | s5 | order ours / ref | verdict |")
    print("|---|---|---:|---:|---:|---:|---:|---|---|")
    details = []
    for name in names:
        corruption = REGISTRY.get(name, "imagenet-c")
        cells, ok = [], True
        ours_mean, ref_mean = [], []
        for severity in range(1, 6):
            theirs = run_reference(reference, clean, name, severity, seed=severity)
            seeds = [sample_seed(0, i, name, severity) for i in ids]
            ours = to_uint8(corruption(batch, severity, seeds)).permute(0, 2, 3, 1).numpy()
            if name in DETERMINISTIC:
                value = float(np.mean([psnr(o, t) for o, t in zip(ours, theirs)]))
                ok &= value >= GOAL_DB
                cells.append(f"{value:.1f} dB")
                continue
            mine = np.mean([change_stats(c, o) for c, o in zip(clean, ours)], axis=0)
            ref = np.mean([change_stats(c, t) for c, t in zip(clean, theirs)], axis=0)
            mean_diff, spread_diff = relative(mine[0], ref[0]), relative(mine[1], ref[1])
            ok &= abs(mean_diff) <= GOAL_RELATIVE and abs(spread_diff) <= GOAL_RELATIVE
            ours_mean.append(mine[0])
            ref_mean.append(ref[0])
            cells.append(f"{mean_diff:+.1%} / {spread_diff:+.1%}")
            floor = ""
            if args.reference_seeds == 2:
                again = run_reference(reference, clean, name, severity, seed=1000 + severity)
                other = np.mean([change_stats(c, t) for c, t in zip(clean, again)], axis=0)
                floor = f"{relative(other[0], ref[0]):+.1%} / {relative(other[1], ref[1]):+.1%}"
            details.append((name, severity, mine, ref, floor))
        if ours_mean:
            orders = f"{order(ours_mean)} / {order(ref_mean)}"
            ok &= same_order(ours_mean, ref_mean)
        else:
            orders = "–"
        kind = "PSNR" if name in DETERMINISTIC else "|Δ| / std|Δ|"
        print(f"| {name} | {kind} | " + " | ".join(cells) + f" | {orders} | {'meets goal' if ok else 'MISSES goal'} |")

    if details:
        print(
            "\n| corruption | s | ours mean |Δ| | ref mean |Δ| | diff | ours std |Δ| | ref std |Δ| | diff "
            "| ref vs ref (other seed) |"
        )
        print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
        for name, severity, mine, ref, floor in details:
            print(
                f"| {name} | {severity} | {mine[0]:.2f} | {ref[0]:.2f} | {relative(mine[0], ref[0]):+.1%} | "
                f"{mine[1]:.2f} | {ref[1]:.2f} | {relative(mine[1], ref[1]):+.1%} | {floor or '–'} |"
            )


if __name__ == "__main__":
    main()
