"""Corruptions side by side with peer libraries: ms per image, one thread each, interleaved.

Ours runs at batch 1 and at batch 16 (the harness's default batch) on the CPU; the peers
(albumentations 2.0.8, kornia) run on the same 512x512 photo-like image at the nearest
equivalent of severity 3. Every round times each row once, in turn, so load from other
processes spreads over all of them; min and median over the rounds are printed. A peer
that cannot be imported is skipped. The peers are not dependencies: install them in a
throwaway environment (never albumentationsx, which is AGPL), for example

    python3 -m venv /tmp/peers && /tmp/peers/bin/pip install torch==2.13.0
    /tmp/peers/bin/pip install albumentations==2.0.8 kornia opencv-python-headless numpy pyyaml scipy pillow
    PYTHONPATH=. /tmp/peers/bin/python benchmarks/peers.py [--rounds 7] [--only gaussian_blur,jpeg_compression]
"""

from __future__ import annotations

import os

for _variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[_variable] = "1"  # before numpy, torch and OpenCV start their pools

import argparse
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from pytest_segrobust.corruptions import REGISTRY

SEVERITY = 3


def photo_like(size: int, seed: int = 0) -> np.ndarray:
    """A deterministic stand-in for a photo: 1/f texture, smooth shading and hard-edged shapes.

    Natural images have a roughly 1/f amplitude spectrum and sharp object boundaries; blur,
    codec and warp costs (and JPEG's entropy coding above all) depend on both, which a
    uniform-noise or flat test image would get wrong.

    Shape:
        return: ``(size, size, 3)`` uint8, RGB.
    """
    rng = np.random.default_rng(seed)
    fy = np.fft.fftfreq(size)[:, None]
    fx = np.fft.rfftfreq(size)[None, :]
    amplitude = 1.0 / np.maximum(np.hypot(fy, fx), 1.0 / size)
    image = np.empty((size, size, 3))
    for channel in range(3):
        phase = rng.uniform(0, 2 * np.pi, amplitude.shape)
        texture = np.fft.irfft2(amplitude * np.exp(1j * phase), s=(size, size))
        image[..., channel] = (texture - texture.mean()) / texture.std()
    y, x = np.mgrid[0:size, 0:size] / size
    image = 0.5 + 0.08 * image + 0.25 * (y - 0.5)[..., None] * np.array([0.6, 0.8, 1.0])
    for _ in range(12):
        colour = rng.uniform(0.05, 0.95, 3)
        cy, cx, radius = rng.uniform(0.1, 0.9), rng.uniform(0.1, 0.9), rng.uniform(0.04, 0.2)
        if rng.uniform() < 0.5:
            inside = (y - cy) ** 2 + (x - cx) ** 2 < radius**2
        else:
            inside = (abs(y - cy) < radius) & (abs(x - cx) < 0.6 * radius)
        image[inside] = 0.7 * colour + 0.3 * image[inside]
    return (np.clip(image, 0.0, 1.0) * 255).round().astype(np.uint8)


@dataclass(frozen=True)
class Row:
    """One corruption: ours by registry name and preset, and the peers' closest equivalents.

    A peer factory takes the imported peer module and returns a callable on the image in
    that peer's own format (HWC uint8 for albumentations, ``(1, 3, H, W)`` float for kornia).
    """

    label: str
    name: str
    preset: str
    albumentations: Callable[[Any], Callable[[Any], Any]] | None
    kornia: Callable[[Any], Callable[[Any], Any]] | None


def _albu(make: Callable[[Any], Any]) -> Callable[[Any], Callable[[np.ndarray], Any]]:
    def factory(module: Any) -> Callable[[np.ndarray], Any]:
        transform = make(module)
        return lambda image: transform(image=image)["image"]

    return factory


def _kornia_motion(kornia: Any) -> Callable[[torch.Tensor], torch.Tensor]:
    return lambda image: kornia.filters.motion_blur(image, 31, 20.0, 0.0, border_type="replicate")


ROWS = (
    Row(
        "gaussian_blur",
        "gaussian_blur",
        "imagenet-c",
        _albu(lambda A: A.GaussianBlur(blur_limit=(25, 25), sigma_limit=(3.0, 3.0), p=1.0)),
        lambda K: lambda image: K.filters.gaussian_blur2d(image, (25, 25), (3.0, 3.0), border_type="replicate"),
    ),
    Row(
        "zoom_blur",
        "zoom_blur",
        "imagenet-c",
        _albu(lambda A: A.ZoomBlur(max_factor=(1.21, 1.21), step_factor=(0.02, 0.02), p=1.0)),
        None,
    ),
    Row(
        "rotate",
        "rotate",
        "coco-p",
        _albu(lambda A: A.Rotate(limit=(40, 40), border_mode=0, p=1.0)),
        lambda K: lambda image: K.geometry.transform.rotate(image, torch.tensor([40.0])),
    ),
    Row(
        "shear",
        "shear",
        "coco-p",
        _albu(lambda A: A.Affine(shear={"x": (15, 15), "y": (0, 0)}, p=1.0)),
        lambda K: lambda image: K.geometry.transform.shear(image, torch.tensor([[0.268, 0.0]])),
    ),
    Row(
        "translate",
        "translate",
        "coco-p",
        _albu(lambda A: A.Affine(translate_px={"x": (60, 60), "y": (0, 0)}, p=1.0)),
        lambda K: lambda image: K.geometry.transform.translate(image, torch.tensor([[60.0, 0.0]])),
    ),
    Row(
        "jpeg_compression",
        "jpeg_compression",
        "imagenet-c",
        _albu(lambda A: A.ImageCompression(quality_range=(15, 15), p=1.0)),
        lambda K: lambda image: K.enhance.jpeg_codec_differentiable(image, torch.tensor([15.0])),
    ),
    Row(
        "contrast",
        "contrast",
        "imagenet-c",
        _albu(lambda A: A.RandomBrightnessContrast(brightness_limit=(0, 0), contrast_limit=(-0.8, -0.8), p=1.0)),
        lambda K: lambda image: K.enhance.adjust_contrast(image, 0.2),
    ),
    Row(
        "saturate",
        "saturate",
        "imagenet-c",
        _albu(lambda A: A.ColorJitter(brightness=0, contrast=0, saturation=(2.0, 2.0), hue=0, p=1.0)),
        lambda K: lambda image: K.enhance.adjust_saturation(image, 2.0),
    ),
    Row(
        "elastic_transform",
        "elastic_transform",
        "imagenet-c",
        _albu(lambda A: A.ElasticTransform(alpha=21.25 * 512 / 244, sigma=512 * 0.01, p=1.0)),
        lambda K: (
            lambda image: K.geometry.transform.elastic_transform2d(
                image, torch.rand(1, 2, image.shape[-2], image.shape[-1]) * 2 - 1, (63, 63), (5.12, 5.12), (44.6, 44.6)
            )
        ),
    ),
    Row(
        "gaussian_noise",
        "gaussian_noise",
        "imagenet-c",
        _albu(lambda A: A.GaussNoise(std_range=(0.18, 0.18), p=1.0)),
        lambda K: lambda image: (image + 0.18 * torch.randn_like(image)).clamp_(0.0, 1.0),
    ),
    Row(
        "defocus_blur",
        "defocus_blur",
        "imagenet-c",
        _albu(lambda A: A.Defocus(radius=(6, 6), alias_blur=(0.5, 0.5), p=1.0)),
        None,
    ),
    Row(
        "glass_blur",
        "glass_blur",
        "imagenet-c",
        _albu(lambda A: A.GlassBlur(sigma=1.0, max_delta=2, iterations=3, p=1.0)),
        None,
    ),
    Row(
        "motion_blur (trail, 31 taps)",
        "motion_blur",
        "imagenet-c",
        None,
        _kornia_motion,
    ),
    Row(
        "motion_blur (line, 13x13)",
        "motion_blur",
        "coco-p",
        _albu(lambda A: A.MotionBlur(blur_limit=(13, 13), p=1.0)),
        lambda K: lambda image: K.filters.motion_blur(image, 13, 20.0, 0.0),
    ),
)


def _import(name: str) -> Any:
    try:
        return __import__(name)
    except ImportError as exc:
        print(f"(skipping {name}: {exc})")
        return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=512)
    parser.add_argument("--batch", type=int, default=16, help="the harness's batch for the second 'ours' column")
    parser.add_argument("--rounds", type=int, default=5, help="timed calls per row (after one warm-up)")
    parser.add_argument("--only", default="", help="comma-separated corruption names")
    args = parser.parse_args()

    torch.set_num_threads(1)
    albumentations = _import("albumentations")
    kornia = _import("kornia")
    cv2 = _import("cv2")
    if cv2 is not None:
        cv2.setNumThreads(1)

    photo = photo_like(args.size)
    single = torch.from_numpy(photo).permute(2, 0, 1)[None].to(torch.float32) / 255.0
    batch = single.expand(args.batch, -1, -1, -1).contiguous()
    wanted = set(args.only.split(",")) if args.only else None
    rows = [row for row in ROWS if wanted is None or row.name in wanted]

    # Every contender as (row index, column, per-image divisor, callable).
    contenders: list[tuple[int, str, int, Callable[[], Any]]] = []
    for index, row in enumerate(rows):
        corruption = REGISTRY.get(row.name, row.preset)
        seeds = list(range(args.batch))
        contenders.append((index, "ours b1", 1, lambda c=corruption: c(single, SEVERITY, [0])))
        contenders.append(
            (index, f"ours b{args.batch}", args.batch, lambda c=corruption, s=seeds: c(batch, SEVERITY, s))
        )
        if albumentations is not None and row.albumentations is not None:
            transform = row.albumentations(albumentations)
            contenders.append((index, "albumentations", 1, lambda t=transform: t(photo)))
        if kornia is not None and row.kornia is not None:
            transform = row.kornia(kornia)
            contenders.append((index, "kornia", 1, lambda t=transform: t(single)))

    for _, _, _, call in contenders:
        call()  # warm-up: lazy imports, caches, first-call allocations
    times: dict[tuple[int, str], list[float]] = {(i, column): [] for i, column, _, _ in contenders}
    for _ in range(args.rounds):
        for index, column, per, call in contenders:
            start = time.perf_counter()
            call()
            times[index, column].append((time.perf_counter() - start) * 1e3 / per)

    columns = ["ours b1", f"ours b{args.batch}", "albumentations", "kornia"]
    versions = ", ".join(f"{m.__name__} {m.__version__}" for m in (torch, albumentations, kornia, cv2) if m is not None)
    print(
        f"\n{args.size}x{args.size}, severity {SEVERITY}, one thread each, {args.rounds} interleaved rounds; {versions}"
    )
    print("ms per image, min / median\n")
    print("| corruption | " + " | ".join(columns) + " |")
    print("|---|" + "---:|" * len(columns))
    for index, row in enumerate(rows):
        cells = []
        for column in columns:
            measured = times.get((index, column))
            cells.append(f"{min(measured):.1f} / {statistics.median(measured):.1f}" if measured else "-")
        print(f"| {row.label} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
