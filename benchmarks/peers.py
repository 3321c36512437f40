"""Corruptions side by side with peer libraries: ms per image, one thread each, interleaved.

Ours runs at batch 1 and at batch 16 (the harness's default batch) on the CPU; the peers
(albumentations 2.0.8, kornia) run on the same 512x512 photo-like image at the nearest
equivalent of severity 3. Times are the CPU time of the calling thread (``time.thread_time``,
what load from other processes disturbs least); every round times each row once, in turn,
so what load remains spreads over all of them; min and median over the rounds are printed.
The last column is the largest ``|ours - torch path|`` at batch 1: ours on the CPU against
the path an accelerator takes (no OpenCV kernels, no numpy planes, Philox words from int64
tensor ops), forced on the CPU by :func:`torch_path`; the one after it what albumentations computes on (its
data type, and its operation where it is not ours). The "plain call" column is the library
call doing the row's core operation on the float32 image (:func:`plain_calls`, listed under
the table; "-" where no library call does it), timed next to ours at batch 1 (each first
in every other round), and "b1 / plain" ours at batch 1 over it: the median over rounds of
the two times taken back to back (:func:`plain_ratio`), which a slow spell of the machine
disturbs far less than a ratio of the two columns' minima. The last two lines name
the rows over 1.5x the plain call and the rows behind the best peer, with what that peer
computes on. A peer that cannot be imported is skipped. The process's allocator is
tuned as ``pytest --segrobust`` tunes it by default (``--malloc system`` keeps glibc's own: then
batch 16 costs about 1.5 ms more per image than batch 1 on every row, each image's result
faulting in fresh pages, which the harness never pays). The peers are not dependencies: install them in a
throwaway environment (never albumentationsx, which is AGPL), for example

    python3 -m venv /tmp/peers && /tmp/peers/bin/pip install torch==2.13.0
    /tmp/peers/bin/pip install albumentations==2.0.8 kornia opencv-python-headless numpy pyyaml scipy pillow
    PYTHONPATH=. /tmp/peers/bin/python benchmarks/peers.py [--rounds 7] [--only gaussian_blur,jpeg_compression]

or, to time ours with this project's own environment (numba, OpenCV 5), put only the peers'
packages behind it: a folder of links to ``albumentations``, ``albucore``, ``kornia``,
``kornia_rs``, ``simsimd*`` and ``stringzilla*`` from that environment's site-packages, then
``PYTHONPATH=.:/that/folder .venv/bin/python benchmarks/peers.py``.

``--against-kornia`` prints another table instead: on each row kornia has an equivalent of
(its filter, enhance or geometry function, or its augmentation, on the ``(B, C, H, W)``
batch tensor, with a parameter per image where ours draws one), ours at ``--batch`` as the
harness calls it next to kornia's batched path, same thread count, in turn, with the median
of the rounds' ratios ours / kornia and a last line naming the rows behind kornia. It needs
kornia (``pip install -e '.[bench]'``) and says so when it is missing. kornia's noise and
weather augmentations draw from torch's global generator; ours from per-sample streams.

``--profile`` then explains every row where ours at batch 1 (what the CPU harness runs: it
corrupts image by image) is slower than the best peer: the calls where our time goes, by
self time under cProfile (torch ops, OpenCV and numpy calls alike, as Python sees them) and
the ATen operators under torch.profiler, each as a share of the profiled time, and one line
on what the peer computes instead (read from albumentations 2.0.8's source). Both profiles
run in the same process, after the timed rounds.
"""

from __future__ import annotations

import os

for _variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[_variable] = "1"  # before numpy, torch and OpenCV start their pools

import argparse
import contextlib
import cProfile
import math
import pstats
import re
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any
from unittest import mock

import numpy as np
import torch
from PIL import Image

from pytest_segrobust.corruptions import REGISTRY
from pytest_segrobust.corruptions.functional import codec, color
from pytest_segrobust.corruptions.functional import opencv as functional_opencv
from pytest_segrobust.corruptions.functional.weather import _spatter
from pytest_segrobust.randomness import philox
from pytest_segrobust.runtime import allocator

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
    ``albumentations_does`` says in one line how albumentations computes it, for ``--profile``;
    ``albumentations_computes`` is the table's short form: the data type it computes on and,
    where it is not ours, the operation.
    """

    label: str
    name: str
    preset: str
    albumentations: Callable[[Any], Callable[[Any], Any]] | None
    kornia: Callable[[Any], Callable[[Any], Any]] | None
    albumentations_does: str = ""
    albumentations_computes: str = "uint8"


def _albu(make: Callable[[Any], Any]) -> Callable[[Any], Callable[[np.ndarray], Any]]:
    def factory(module: Any) -> Callable[[np.ndarray], Any]:
        transform = make(module)
        return lambda image: transform(image=image)["image"]

    return factory


def per_sample(images: torch.Tensor, *values: float) -> torch.Tensor:
    """A row's parameters repeated for every image of the batch, as kornia's batched path takes them.

    Shape:
        images: ``(B, C, H, W)``; return: ``(B,)`` for one value, ``(B, len(values))`` for several.
    """
    repeated = torch.tensor(values, dtype=torch.float32).repeat(images.shape[0], 1)
    return repeated[:, 0] if len(values) == 1 else repeated


_DISK = (torch.hypot(*torch.meshgrid(torch.arange(-8.0, 9.0), torch.arange(-8.0, 9.0), indexing="ij")) <= 6).float()
_DISK /= _DISK.sum()  # severity 3's radius, on ImageNet-C's 17x17 support


def _kornia_radial(kornia: Any) -> Callable[[torch.Tensor], torch.Tensor]:
    # Focal length the half-diagonal, principal point the centre: our normalisation of r.
    def distort(image: torch.Tensor) -> torch.Tensor:
        height, width = image.shape[-2:]
        focal = math.hypot((width - 1) / 2, (height - 1) / 2)
        camera = torch.tensor([[focal, 0.0, (width - 1) / 2], [0.0, focal, (height - 1) / 2], [0.0, 0.0, 1.0]])
        return kornia.geometry.calibration.undistort_image(
            image, camera.repeat(image.shape[0], 1, 1), per_sample(image, 0.10, 0.03, 0.0, 0.0)
        )

    return distort


def _kornia_motion(size: int, border: str) -> Callable[[Any], Callable[[torch.Tensor], torch.Tensor]]:
    # An angle and a direction per image, as ours draws them: a kernel per sample, one grouped
    # convolution over the batch.
    return lambda K: (
        lambda image: K.filters.motion_blur(
            image, size, per_sample(image, 20.0), per_sample(image, 0.0), border_type=border
        )
    )


ROWS = (
    Row(
        "gaussian_blur",
        "gaussian_blur",
        "imagenet-c",
        _albu(lambda A: A.GaussianBlur(blur_limit=(25, 25), sigma_limit=(3.0, 3.0), p=1.0)),
        lambda K: lambda image: K.filters.gaussian_blur2d(image, (25, 25), (3.0, 3.0), border_type="replicate"),
        albumentations_does="cv2.sepFilter2D of the uint8 HWC image with the 25-tap float kernel, rounded back to uint8",
    ),
    Row(
        "zoom_blur",
        "zoom_blur",
        "imagenet-c",
        _albu(lambda A: A.ZoomBlur(max_factor=(1.21, 1.21), step_factor=(0.02, 0.02), p=1.0)),
        None,
        albumentations_does="float32 HWC; per factor cv2.resize(INTER_LINEAR, half-pixel centres) of the centre crop, summed in float32",
        albumentations_computes="float32, half-pixel-centre resize (ours: aligned corners)",
    ),
    Row(
        "rotate",
        "rotate",
        "coco-p",
        _albu(lambda A: A.Rotate(limit=(40, 40), border_mode=0, p=1.0)),
        lambda K: lambda image: K.geometry.transform.rotate(image, per_sample(image, 40.0)),
        albumentations_does="cv2.warpAffine of the uint8 HWC image, INTER_LINEAR: 1/32-pixel coordinates, fixed-point weights",
    ),
    Row(
        "shear",
        "shear",
        "coco-p",
        _albu(lambda A: A.Affine(shear={"x": (15, 15), "y": (0, 0)}, p=1.0)),
        lambda K: lambda image: K.geometry.transform.shear(image, per_sample(image, 0.268, 0.0)),
        albumentations_does="cv2.warpAffine of the uint8 HWC image, INTER_LINEAR: 1/32-pixel coordinates, fixed-point weights",
    ),
    Row(
        "translate",
        "translate",
        "coco-p",
        _albu(lambda A: A.Affine(translate_px={"x": (60, 60), "y": (0, 0)}, p=1.0)),
        lambda K: lambda image: K.geometry.transform.translate(image, per_sample(image, 60.0, 0.0)),
        albumentations_does="cv2.warpAffine of the uint8 HWC image, INTER_LINEAR: 1/32-pixel coordinates, fixed-point weights",
    ),
    Row(
        "jpeg_compression",
        "jpeg_compression",
        "imagenet-c",
        _albu(lambda A: A.ImageCompression(quality_range=(15, 15), p=1.0)),
        lambda K: lambda image: K.enhance.jpeg_codec_differentiable(image, per_sample(image, 15.0)),
        albumentations_does="cv2.imencode/imdecode straight on the uint8 HWC array (RGB handed over as BGR), no float conversion",
    ),
    Row(
        "pixelate",
        "pixelate",
        "imagenet-c",
        _albu(
            lambda A: A.Downscale(
                scale_range=(0.4, 0.4), interpolation_pair={"downscale": 3, "upscale": 0}, p=1.0
            )  # cv2.INTER_AREA down, cv2.INTER_NEAREST up
        ),
        lambda K: (
            lambda image: K.geometry.transform.resize(
                K.geometry.transform.resize(
                    image, [int(0.4 * side) for side in image.shape[-2:]], interpolation="area"
                ),
                image.shape[-2:],
                interpolation="nearest",
            )
        ),
        albumentations_does="cv2.resize INTER_AREA down, INTER_NEAREST up, both on the uint8 HWC image",
        albumentations_computes="uint8, INTER_AREA (fractional weights; ours: Pillow's box)",
    ),
    Row(
        "contrast",
        "contrast",
        "imagenet-c",
        _albu(lambda A: A.RandomBrightnessContrast(brightness_limit=(0, 0), contrast_limit=(-0.8, -0.8), p=1.0)),
        # kornia's blend towards the grey mean (adjust_contrast alone only multiplies).
        lambda K: lambda image: K.enhance.adjust_contrast_with_mean_subtraction(image, 0.2),
        albumentations_does="mean of cv2.cvtColor(RGB2GRAY), then a 256-entry uint8 lookup table (albucore multiply_add_lut)",
        albumentations_computes="uint8 lookup table, grey mean (ours: channel means)",
    ),
    Row(
        "saturate",
        "saturate",
        "imagenet-c",
        _albu(lambda A: A.ColorJitter(brightness=0, contrast=0, saturation=(2.0, 2.0), hue=0, p=1.0)),
        lambda K: lambda image: K.enhance.adjust_saturation(image, 2.0),
        albumentations_does="cv2.cvtColor RGB2GRAY and GRAY2RGB, then cv2.addWeighted, all uint8 (saturating, rounded)",
        albumentations_computes="uint8, blend with grey (ours: HSV saturation)",
    ),
    Row(
        "brightness",
        "brightness",
        "imagenet-c",
        # Ours raises HSV value by 0.3 (a pixel's channels move together up to white); the
        # peers add 0.3 to every channel.
        _albu(lambda A: A.RandomBrightnessContrast(brightness_limit=(0.3, 0.3), contrast_limit=(0, 0), p=1.0)),
        lambda K: lambda image: K.enhance.adjust_brightness(image, 0.3),
        albumentations_does="adds 0.3 * 255 to every channel through a 256-entry uint8 lookup table (no HSV round trip)",
        albumentations_computes="uint8 lookup table, adds to RGB (ours: HSV value)",
    ),
    Row(
        "darkness",
        "darkness",
        "coco-p",
        _albu(lambda A: A.RandomBrightnessContrast(brightness_limit=(0, 0), contrast_limit=(-0.3, -0.3), p=1.0)),
        lambda K: lambda image: K.enhance.adjust_contrast(image, 0.7),
        albumentations_does="multiplies by 0.7 through a 256-entry uint8 lookup table",
    ),
    Row(
        "geometric_distortion",
        "geometric_distortion",
        "cityscapes-c",
        # k1 = k2 = k, r over the image width (corner r^2 = 1/2): k = 0.17 moves the corners
        # as far as our k1 = 0.10, k2 = 0.03 with r over the half-diagonal.
        _albu(lambda A: A.OpticalDistortion(distort_limit=(0.17, 0.17), mode="camera", p=1.0)),
        _kornia_radial,
        albumentations_does="cv2.initUndistortRectifyMap float32 maps, cv2.remap of the uint8 image (1/32-pixel bilinear)",
    ),
    Row(
        "elastic_transform",
        "elastic_transform",
        "imagenet-c",
        _albu(lambda A: A.ElasticTransform(alpha=21.25 * 512 / 244, sigma=512 * 0.01, p=1.0)),
        lambda K: (
            lambda image: K.geometry.transform.elastic_transform2d(
                image, torch.rand(image.shape[0], 2, *image.shape[-2:]) * 2 - 1, (63, 63), (5.12, 5.12), (44.6, 44.6)
            )
        ),
        albumentations_does="numpy float32 normal fields, cv2.GaussianBlur on them, cv2.remap of the uint8 image (1/32-pixel bilinear)",
    ),
    Row(
        "gaussian_noise",
        "gaussian_noise",
        "imagenet-c",
        _albu(lambda A: A.GaussNoise(std_range=(0.18, 0.18), p=1.0)),
        lambda K: K.augmentation.RandomGaussianNoise(std=0.18, p=1.0),
        albumentations_does="cv2.randn into a float64 HWC array, .astype(float32), cv2.add to the image as float32, clip, back to uint8",
        albumentations_computes="float32 add of cv2.randn, uint8 in and out",
    ),
    Row(
        "shot_noise",
        "shot_noise",
        "imagenet-c",
        # ImageNet-C's severity 3 is 12 photons per unit intensity: Poisson(12 x) / 12.
        _albu(lambda A: A.ShotNoise(scale_range=(1 / 12, 1 / 12), p=1.0)),
        None,  # kornia has no Poisson noise; the plain call is the formula
        albumentations_does="numpy Generator.poisson of the float32 image in linear light (cv2.pow 2.2), scaled back, gamma reapplied",
    ),
    Row(
        "impulse_noise",
        "impulse_noise",
        "imagenet-c",
        _albu(lambda A: A.SaltAndPepper(amount=(0.09, 0.09), salt_vs_pepper=(0.5, 0.5), p=1.0)),
        lambda K: K.augmentation.RandomSaltAndPepperNoise(amount=(0.09, 0.09), salt_vs_pepper=(0.5, 0.5), p=1.0),
        albumentations_does="Generator.choice of exactly 9% of the pixels (all channels at once; ours draws per value), np.where on uint8",
    ),
    Row(
        "speckle_noise",
        "speckle_noise",
        "imagenet-c",
        # Ours multiplies by 1 + 0.35 N(0, 1); albumentations draws uniform multipliers of the same spread.
        _albu(lambda A: A.MultiplicativeNoise(multiplier=(0.394, 1.606), per_channel=True, elementwise=True, p=1.0)),
        None,  # kornia has no multiplicative noise; the plain call is the formula
        albumentations_does="numpy Generator.uniform HWC multipliers (not normal), cv2.multiply in float32, clipped to uint8",
        albumentations_computes="float32, uniform multipliers (ours: normal), uint8 in and out",
    ),
    Row(
        "intensity_noise",
        "intensity_noise",
        "cityscapes-c",
        _albu(lambda A: A.ISONoise(color_shift=(0.03, 0.03), intensity=(0.12, 0.12), p=1.0)),
        None,  # kornia has no such noise; the plain call is the formula
        albumentations_does="float32 HLS round trip by cv2.cvtColor, numpy normal hue and lightness noise (not linear light)",
    ),
    Row(
        "defocus_blur",
        "defocus_blur",
        "imagenet-c",
        _albu(lambda A: A.Defocus(radius=(6, 6), alias_blur=(0.5, 0.5), p=1.0)),
        # kornia has no defocus: its filter2d with the 17x17 disk (a dense correlation, as ours).
        lambda K: lambda image: K.filters.filter2d(image, _DISK[None]),
        albumentations_does="cv2.filter2D of the uint8 image with a float32 disc kernel (itself cv2.GaussianBlur-ed)",
    ),
    Row(
        "glass_blur",
        "glass_blur",
        "imagenet-c",
        _albu(lambda A: A.GlassBlur(sigma=1.0, max_delta=2, iterations=3, p=1.0)),
        None,
        albumentations_does="cv2.GaussianBlur, a Python loop of pixel swaps, cv2.GaussianBlur again",
    ),
    Row(
        "fog",
        "fog",
        "imagenet-c",
        _albu(lambda A: A.RandomFog(fog_coef_range=(0.7, 0.7), alpha_coef=0.08, p=1.0)),
        # Kornia's plasma is a diamond-square map like ours; its roughness is our 1 / wibble_decay.
        lambda K: K.augmentation.RandomPlasmaBrightness(roughness=(0.59, 0.59), intensity=(0.7, 0.7), p=1.0),
        albumentations_does="no plasma: hundreds of cv2.circle discs, each cv2.addWeighted over a uint8 copy, then cv2.GaussianBlur",
    ),
    Row(
        "snow",
        "snow",
        "imagenet-c",
        _albu(lambda A: A.RandomSnow(snow_point_range=(0.5, 0.5), brightness_coeff=2.5, method="texture", p=1.0)),
        # Kornia's snow is a bleach: HLS lightness below the coefficient scaled up, no flakes.
        lambda K: K.augmentation.RandomSnow(snow_coefficient=(0.5, 0.5), brightness=(2.0, 2.0), p=1.0),
        albumentations_does="uint8 HSV brightening, a N(0.5, 0.3) field through cv2.GaussianBlur (sigma 1) twice, no zoom, no streaks",
    ),
    Row(
        "spatter",
        "spatter",
        "imagenet-c",
        _albu(
            lambda A: A.Spatter(
                mean=(0.65, 0.65),
                std=(0.3, 0.3),
                gauss_sigma=(2, 2),
                cutout_threshold=(0.68, 0.68),
                intensity=(0.5, 0.5),
                mode="rain",
                p=1.0,
            )
        ),
        None,
        albumentations_does="ImageNet-C's water recipe in OpenCV: float64 normal field, GaussianBlur (13 taps), Canny, "
        "distanceTransform, blurs, equalizeHist, emboss",
    ),
    Row(
        "motion_blur (trail, 31 taps)",
        "motion_blur",
        "imagenet-c",
        None,
        _kornia_motion(31, "replicate"),
    ),
    Row(
        "motion_blur (line, 13x13)",
        "motion_blur",
        "coco-p",
        _albu(lambda A: A.MotionBlur(blur_limit=(13, 13), p=1.0)),
        _kornia_motion(13, "reflect"),
        albumentations_does="cv2.filter2D of the uint8 image with a 13x13 line kernel",
    ),
)


def plain_calls(cv2: Any, photo: np.ndarray) -> dict[str, tuple[str, Callable[[], Any] | None]]:
    """Per row label, the plain library call doing the row's core operation, and what it is.

    The calls take the photo as a float32 image in ``[0, 1]`` (HWC for OpenCV, ``(1, 3, H, W)``
    for torch) and give float32 back, as ours does: where the operation needs 8-bit data
    (JPEG) the conversions are part of the call. Each does only the core operation, at the
    row's severity-3 constants: no per-image random parameters, no annotations, no checks.
    Where no library call does the row's operation (a composite of many steps, or a
    sequential loop), the callable is None and the text says why.
    """
    hwc = photo.astype(np.float32) / 255.0
    chw = torch.from_numpy(np.ascontiguousarray(hwc.transpose(2, 0, 1)))[None]
    height, width = hwc.shape[:2]
    centre = ((width - 1) / 2, (height - 1) / 2)
    rng = np.random.default_rng(0)
    linear, constant = cv2.INTER_LINEAR, cv2.BORDER_CONSTANT

    def warp(matrix: np.ndarray) -> Callable[[], Any]:
        return lambda: cv2.warpAffine(hwc, matrix, (width, height), flags=linear, borderMode=constant)

    def zoom_blur() -> np.ndarray:
        total = hwc.copy()
        for factor in np.arange(1, 1.21, 0.02):  # ImageNet-C's severity 3: 11 zooms about the centre
            matrix = cv2.getRotationMatrix2D(centre, 0.0, float(factor))
            cv2.accumulate(
                cv2.warpAffine(hwc, matrix, (width, height), flags=linear, borderMode=cv2.BORDER_REPLICATE), total
            )
        return total / 12.0

    def jpeg() -> np.ndarray:
        encoded = cv2.imencode(".jpg", cv2.convertScaleAbs(hwc, alpha=255.0), (cv2.IMWRITE_JPEG_QUALITY, 15))[1]
        return cv2.imdecode(encoded, cv2.IMREAD_COLOR).astype(np.float32) / 255.0

    small = int(0.4 * width)
    planes = [Image.fromarray(np.ascontiguousarray(hwc[..., channel])) for channel in range(3)]

    def pixelate() -> np.ndarray:
        # ImageNet-C's operation at a ratio that is not whole (512 to 204): Pillow's box
        # filter, not OpenCV's INTER_AREA, which weighs the pixels a window cuts by the
        # fraction it covers.
        return np.stack(
            [np.asarray(p.resize((small, small), Image.BOX).resize((width, height), Image.NEAREST)) for p in planes],
            axis=-1,
        )

    distortion_maps = cv2.initUndistortRectifyMap(
        np.array([[width / 1.4, 0, centre[0]], [0, width / 1.4, centre[1]], [0, 0, 1]]),
        np.array([-0.1, -0.03, 0.0, 0.0]),
        None,
        np.array([[width / 1.4, 0, centre[0]], [0, width / 1.4, centre[1]], [0, 0, 1]]),
        (width, height),
        cv2.CV_32FC1,
    )
    grid_x, grid_y = np.meshgrid(np.arange(width, dtype=np.float32), np.arange(height, dtype=np.float32))

    def elastic() -> np.ndarray:
        # Two uniform displacement fields, each smoothed by a Gaussian (sigma 0.01 of the side), then one remap.
        fields = rng.uniform(-0.005 * height, 0.005 * height, (2, height, width)).astype(np.float32)
        dx = cv2.GaussianBlur(fields[0], (0, 0), 0.01 * width, borderType=cv2.BORDER_REFLECT) * 21.25
        dy = cv2.GaussianBlur(fields[1], (0, 0), 0.01 * height, borderType=cv2.BORDER_REFLECT) * 21.25
        return cv2.remap(hwc, grid_x + dx, grid_y + dy, linear, borderMode=cv2.BORDER_REFLECT)

    disk = (np.hypot(*np.mgrid[-8:9, -8:9]) <= 6).astype(np.float32)
    disk = cv2.GaussianBlur(disk / disk.sum(), (3, 3), 0.5)
    trail = np.zeros((31, 31), np.float32)
    trail[15, 15:] = np.exp(-(np.arange(16) ** 2) / (2 * 8.0**2))  # one-sided, as Wand's motion blur
    trail /= trail.sum()
    line = np.zeros((13, 13), np.float32)
    line[6, :] = 1 / 13
    line = cv2.warpAffine(line, cv2.getRotationMatrix2D((6, 6), 20.0, 1.0), (13, 13))

    def contrast() -> np.ndarray:
        # ImageNet-C's contrast per channel: x * 0.2 + 0.8 * mean, as one 3x4 affine map of the channels.
        means = cv2.mean(hwc)[:3]
        return cv2.transform(hwc, np.hstack([0.2 * np.eye(3), 0.8 * np.array(means)[:, None]]))

    tan15 = math.tan(math.radians(15))
    hsv_round_trip = lambda: cv2.cvtColor(cv2.cvtColor(hwc, cv2.COLOR_RGB2HSV), cv2.COLOR_HSV2RGB)
    return {
        "gaussian_blur": (
            "cv2.GaussianBlur, sigma 3, 25 taps",
            lambda: cv2.GaussianBlur(hwc, (25, 25), 3.0, borderType=cv2.BORDER_REPLICATE),
        ),
        "zoom_blur": ("11 cv2.warpAffine zooms summed by cv2.accumulate", zoom_blur),
        "rotate": ("cv2.warpAffine", warp(cv2.getRotationMatrix2D(centre, 40.0, 1.0))),
        "shear": ("cv2.warpAffine", warp(np.array([[1.0, tan15, -tan15 * centre[1]], [0.0, 1.0, 0.0]]))),
        "translate": ("cv2.warpAffine", warp(np.array([[1.0, 0.0, 60.0], [0.0, 1.0, 0.0]]))),
        "jpeg_compression": ("cv2.convertScaleAbs to uint8, imencode, imdecode, back to float32", jpeg),
        "pixelate": (
            "Pillow's resize BOX down, NEAREST up, per float32 plane (INTER_AREA is another filter)",
            pixelate,
        ),
        "contrast": ("cv2.mean, cv2.transform (each channel scaled by 0.2 towards its own mean)", contrast),
        "saturate": ("cv2.cvtColor RGB2HSV, HSV2RGB", hsv_round_trip),
        "brightness": ("cv2.cvtColor RGB2HSV, HSV2RGB", hsv_round_trip),
        "darkness": ("cv2.multiply", lambda: cv2.multiply(hwc, 0.7)),
        "geometric_distortion": ("cv2.remap with the maps made once", lambda: cv2.remap(hwc, *distortion_maps, linear)),
        "elastic_transform": ("uniform fields, two cv2.GaussianBlur, cv2.remap", elastic),
        "gaussian_noise": ("torch.randn, add, clamp", lambda: (chw + 0.18 * torch.randn_like(chw)).clamp_(0.0, 1.0)),
        "shot_noise": (
            "torch.poisson of 12 x, / 12, clamp",
            lambda: (torch.poisson(chw * 12.0) / 12.0).clamp_(0.0, 1.0),
        ),
        "impulse_noise": ("torch.rand, two compares, clamp", lambda: _salt_and_pepper(chw)),
        "speckle_noise": (
            "torch.randn, multiply-add, clamp",
            lambda: (chw + chw * (0.35 * torch.randn_like(chw))).clamp_(0.0, 1.0),
        ),
        "intensity_noise": (
            "torch.exp2, two torch.randn, log2, clamp",
            lambda: torch.log2(torch.exp2(chw) + 0.06 * (torch.randn_like(chw[:, :1]) + torch.randn_like(chw))).clamp_(
                0.0, 1.0
            ),
        ),
        "defocus_blur": ("cv2.filter2D, 17x17 disk", lambda: cv2.filter2D(hwc, -1, disk)),
        "glass_blur": ("none: a sequential loop of pixel swaps between two blurs", None),
        "fog": ("none: a diamond-square plasma map, no library makes one", None),
        "snow": ("none: flakes drawn, motion-blurred, zoomed and blended (many calls)", None),
        "spatter": ("none: ImageNet-C's recipe of a dozen filters, Canny and a distance transform", None),
        "motion_blur (trail, 31 taps)": (
            "cv2.filter2D, one-sided 31x31 Gaussian trail",
            lambda: cv2.filter2D(hwc, -1, trail),
        ),
        "motion_blur (line, 13x13)": ("cv2.filter2D, 13x13 line", lambda: cv2.filter2D(hwc, -1, line)),
    }


def _salt_and_pepper(images: torch.Tensor) -> torch.Tensor:
    draw = torch.rand(images.shape)
    return torch.clamp(images, min=(draw >= 0.955).float(), max=(draw >= 0.045).float())


@contextlib.contextmanager
def torch_path() -> Iterator[None]:
    """Ours as an accelerator computes it, on the CPU: every OpenCV kernel, numpy plane, numba loop and numpy Philox word off."""
    with contextlib.ExitStack() as stack:
        for module, name, replacement in (
            (functional_opencv, "opencv", lambda: None),  # filters, warps, remaps
            (codec, "opencv", lambda: None),
            (_spatter, "_opencv", lambda: None),
            (color, "_numpy_planes", lambda images: None),
            (philox, "_uses_numpy", lambda device: False),
            (color, "_compiled_color_for", lambda images: None),  # numba's colour loops (same bits)
        ):
            stack.enter_context(mock.patch.object(module, name, replacement))
        yield


PLAIN_CALL_BOUND = 1.5
"""Ours at batch 1 may take at most this many times the plain call's CPU (issue 32's goal)."""


Times = dict[tuple[int, str], list[float]]
"""Per (row index, column), the thread CPU ms per image of every timed round."""

Contender = tuple[int, str, int, Callable[[], Any]]
"""One timed call: its row index, column, the images it handles (the divisor), the call."""


def paired_ratio(times: Times, index: int, numerator: str, denominator: str) -> float | None:
    """One column over another on a row: the median over rounds of the two times taken back to back.

    The two run next to each other in every round, so a slow spell of the machine (another
    tenant, frequency changes) weighs on both sides of each ratio; the minima of the two
    columns can come from different spells. ``None`` where the row lacks either column.
    """
    if (index, numerator) not in times or (index, denominator) not in times:
        return None
    return statistics.median(n / d for n, d in zip(times[index, numerator], times[index, denominator], strict=True))


def plain_ratio(times: Times, index: int) -> float | None:
    """Ours at batch 1 over the plain call (:func:`paired_ratio`); ``None`` where the row has no plain call."""
    return paired_ratio(times, index, "ours b1", "plain call")


def timed_rounds(orders: Sequence[Sequence[Contender]], rounds: int) -> Times:
    """Every contender once per round after one warm-up call each, in ``orders[round % len(orders)]``.

    Times are the calling thread's CPU (``time.thread_time``) per image, in ms. Alternating
    orders let each of a pair go first in every other round: whichever runs first finds the
    other's data and code out of the caches.
    """
    for _, _, _, call in orders[0]:
        call()  # warm-up: lazy imports, caches, first-call allocations
    times: Times = {(index, column): [] for index, column, _, _ in orders[0]}
    for round_ in range(rounds):
        for index, column, per, call in orders[round_ % len(orders)]:
            start = time.thread_time()
            call()
            times[index, column].append((time.thread_time() - start) * 1e3 / per)
    return times


def verdicts(rows: Sequence[Row], times: Times) -> list[str]:
    """The goal's two checks: rows over :data:`PLAIN_CALL_BOUND` times the plain call (by
    :func:`plain_ratio`), and rows behind the best peer on the minima, each with what that
    peer computes on."""
    over, behind = [], []
    for index, row in enumerate(rows):
        ours = min(times[index, "ours b1"])
        if (ratio := plain_ratio(times, index)) is not None and ratio > PLAIN_CALL_BOUND:
            over.append(f"{row.label} ({ratio:.2f}x)")
        peers = {
            column: min(times[index, column]) for column in ("albumentations", "kornia") if (index, column) in times
        }
        if peers and ours > min(peers.values()):
            best = min(peers, key=peers.__getitem__)
            computes = row.albumentations_computes if best == "albumentations" else "float32 (torch)"
            behind.append(f"{row.label} ({best}, {ours / peers[best]:.2f}x; it computes: {computes})")
    return [
        f"Over {PLAIN_CALL_BOUND}x the plain call: " + (", ".join(over) or "none"),
        "Behind the best peer at batch 1: " + (", ".join(behind) or "none"),
    ]


def _python_name(key: tuple[str, int, str]) -> str:
    """A cProfile entry's function as ``file.py:line(name)``, ``Type.method`` or the builtin's name."""
    filename, line, function = key
    if filename != "~":
        return f"{os.path.basename(filename)}:{line}({function})"
    # Builtins and C functions such as torch ops and cv2 calls: "<built-in method torch.conv2d>",
    # "<method 'add_' of 'torch._C.TensorBase' objects>".
    method = re.fullmatch(r"<method '(\w+)' of '([\w.]+)' objects>", function)
    if method is not None:
        owner = method[2].rsplit(".", 1)[-1].replace("TensorBase", "Tensor")
        return f"{owner}.{method[1]}"
    return function.strip("<>").removeprefix("built-in method ")


def profile(call: Callable[[], Any], calls: int, top: int) -> list[str]:
    """Where ``call``'s time goes: its top functions by self time, and its top ATen operators.

    cProfile sees every call made from Python, so OpenCV, numpy and torch calls all show up
    with their own (self) time; torch.profiler (shapes not recorded) breaks the torch calls
    down into the operators they run. Each share is of the time the ``calls`` calls took
    under that profiler, so the two lists are comparable with each other but not with the
    timed rounds (profiling adds overhead per call).

    Returns:
        Lines to print, most expensive first.
    """
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(calls):
        call()
    profiler.disable()
    entries = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    total = sum(entry[2] for entry in entries.values())
    by_self_time = sorted(entries.items(), key=lambda item: item[1][2], reverse=True)[:top]
    lines = ["self time: " + ", ".join(f"{_python_name(key)} {entry[2] / total:.0%}" for key, entry in by_self_time)]

    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=False) as torch_profile:
        start = time.perf_counter()  # inside, so that starting and stopping the profiler are not counted
        for _ in range(calls):
            call()
        elapsed_us = (time.perf_counter() - start) * 1e6
    operators = sorted(torch_profile.key_averages(), key=lambda event: event.self_cpu_time_total, reverse=True)
    lines.append(
        "ATen ops:  "
        + ", ".join(f"{event.key} {event.self_cpu_time_total / elapsed_us:.0%}" for event in operators[:top])
    )
    return lines


KORNIA_MISSING = (
    "kornia is not installed, so there is no kornia column: pip install -e '.[bench]' "
    "(or put kornia beside the peers, see this script's docstring)"
)


def _import(name: str, missing: str = "") -> Any:
    try:
        return __import__(name)
    except ImportError as exc:
        print(f"({missing or f'skipping {name}'}: {exc})")
        return None


def against_kornia(rows: Sequence[Row], kornia: Any, batch: torch.Tensor, rounds: int) -> list[str]:
    """Ours as the harness calls it on a CPU batch against kornia's batched path on the same batch.

    Only the rows kornia has an equivalent of. Ours is one call on the whole batch with a seed
    per image (image by image or whole, as the corruption's class chooses on the CPU); kornia's
    is its function or augmentation on the ``(B, C, H, W)`` tensor, with a parameter per image
    where ours draws one per image. The two take turns going first in each round.

    Returns:
        The table's lines, then one naming the rows where ours is behind (by :func:`paired_ratio`).
    """
    size, height, width = batch.shape[0], *batch.shape[-2:]
    seeds = list(range(size))
    contenders: list[Contender] = []
    for index, row in enumerate(rows):
        if row.kornia is None:
            continue
        corruption = REGISTRY.get(row.name, row.preset)
        transform = row.kornia(kornia)
        contenders.append((index, "ours", size, lambda c=corruption: c(batch, SEVERITY, seeds)))
        contenders.append((index, "kornia", size, lambda t=transform: t(batch)))
    swapped = [contenders[i + step] for i in range(0, len(contenders), 2) for step in (1, 0)]
    times = timed_rounds((contenders, swapped), rounds)
    lines = [
        (
            f"{width}x{height}, batch {size}, severity {SEVERITY}, torch threads {torch.get_num_threads()}, "
            f"{rounds} interleaved rounds; torch {torch.__version__}, kornia {kornia.__version__}"
        ),
        "thread CPU ms per image, min / median; ours / kornia: the median of the rounds' ratios\n",
        f"| corruption | ours b{size} | ours runs | kornia b{size} | ours / kornia |",
        "|---|---:|---|---:|---:|",
    ]
    behind = []
    for index, row in enumerate(rows):
        if (index, "kornia") not in times:
            continue
        ours, theirs = times[index, "ours"], times[index, "kornia"]
        ratio = paired_ratio(times, index, "ours", "kornia")
        assert ratio is not None  # both columns were timed
        schedule = "image by image" if REGISTRY.get(row.name, row.preset).image_by_image_on_cpu else "whole batch"
        lines.append(
            f"| {row.label} | {min(ours):.2f} / {statistics.median(ours):.2f} | {schedule} | "
            f"{min(theirs):.2f} / {statistics.median(theirs):.2f} | {ratio:.2f}x |"
        )
        if ratio > 1.0:
            behind.append(f"{row.label} ({ratio:.2f}x)")
    lines.append(f"\nBehind kornia's batched path at batch {size}: " + (", ".join(behind) or "none"))
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=512)
    parser.add_argument("--batch", type=int, default=16, help="the harness's batch for the second 'ours' column")
    parser.add_argument("--rounds", type=int, default=5, help="timed calls per row (after one warm-up)")
    parser.add_argument("--only", default="", help="comma-separated corruption names")
    parser.add_argument(
        "--profile", action="store_true", help="profile ours on every row where batch 1 is slower than the best peer"
    )
    parser.add_argument("--profile-calls", type=int, default=20, help="calls of ours per profile")
    parser.add_argument("--top", type=int, default=4, help="entries per profile list")
    parser.add_argument(
        "--malloc",
        choices=allocator.CHOICES,
        default=allocator.DEFAULT,
        help="the process's allocator, for every column alike: 'tuned' as pytest --segrobust runs by "
        "default, 'system' glibc's defaults (each image's result then faults in fresh pages)",
    )
    parser.add_argument(
        "--against-kornia",
        action="store_true",
        help="only ours at --batch against kornia's batched path on the same batch, on the rows kornia has",
    )
    args = parser.parse_args()

    malloc = allocator.configure(args.malloc)
    torch.set_num_threads(1)
    albumentations = None if args.against_kornia else _import("albumentations")
    kornia = _import("kornia", KORNIA_MISSING)
    cv2 = _import("cv2")
    if cv2 is not None:
        cv2.setNumThreads(1)

    photo = photo_like(args.size)
    # Contiguous (B, C, H, W), as the datasets hand images to the harness: the permuted view
    # alone would keep HWC strides through the division, a layout no harness call sees.
    single = torch.from_numpy(photo).permute(2, 0, 1)[None].contiguous().to(torch.float32) / 255.0
    batch = single.expand(args.batch, -1, -1, -1).contiguous()
    wanted = set(args.only.split(",")) if args.only else None
    rows = [row for row in ROWS if wanted is None or row.name in wanted]
    if args.against_kornia:
        if kornia is None:
            raise SystemExit(f"--against-kornia: {KORNIA_MISSING}")
        print(f"\nmalloc {malloc.describe()}")
        print("\n".join(against_kornia(rows, kornia, batch, args.rounds)))
        return

    plain = plain_calls(cv2, photo) if cv2 is not None else {}
    # Every contender as (row index, column, per-image divisor, callable). The plain call
    # runs next to ours at batch 1, so that both find the caches alike (ours at batch 16
    # streams 16 images through memory and leaves them cold).
    contenders: list[Contender] = []
    for index, row in enumerate(rows):
        corruption = REGISTRY.get(row.name, row.preset)
        seeds = list(range(args.batch))
        contenders.append((index, "ours b1", 1, lambda c=corruption: c(single, SEVERITY, [0])))
        if (call := plain.get(row.label, ("", None))[1]) is not None:
            contenders.append((index, "plain call", 1, call))
        contenders.append(
            (index, f"ours b{args.batch}", args.batch, lambda c=corruption, s=seeds: c(batch, SEVERITY, s))
        )
        if albumentations is not None and row.albumentations is not None:
            transform = row.albumentations(albumentations)
            contenders.append((index, "albumentations", 1, lambda t=transform: t(photo)))
        if kornia is not None and row.kornia is not None:
            transform = row.kornia(kornia)
            contenders.append((index, "kornia", 1, lambda t=transform: t(single)))

    # Every other round, each row's plain call goes before ours at batch 1.
    swapped = list(contenders)
    for i, (_, column, _, _) in enumerate(contenders):
        if column == "plain call":
            swapped[i - 1], swapped[i] = contenders[i], contenders[i - 1]
    times = timed_rounds((contenders, swapped), args.rounds)
    differences = {}
    for index, row in enumerate(rows):
        corruption = REGISTRY.get(row.name, row.preset)
        ours = corruption(single, SEVERITY, [0])
        with torch_path():
            theirs = corruption(single, SEVERITY, [0])
        differences[index] = float((ours - theirs).abs().max())

    columns = ["ours b1", f"ours b{args.batch}", "plain call", "albumentations", "kornia"]
    versions = ", ".join(f"{m.__name__} {m.__version__}" for m in (torch, albumentations, kornia, cv2) if m is not None)
    print(
        f"\n{args.size}x{args.size}, severity {SEVERITY}, one thread each, {args.rounds} interleaved rounds; {versions}"
    )
    print(f"thread CPU ms per image, min / median; malloc {malloc.describe()}\n")
    print(
        "| corruption | " + " | ".join(columns[:3]) + " | b1 / plain | " + " | ".join(columns[3:])
        + " | max \\|diff\\| vs the torch path | albumentations computes |"
    )  # fmt: skip
    print("|---|" + "---:|" * (len(columns) + 2) + "---|")
    for index, row in enumerate(rows):
        cells = []
        for column in columns:
            measured = times.get((index, column))
            cells.append(f"{min(measured):.2f} / {statistics.median(measured):.2f}" if measured else "-")
        ratio = plain_ratio(times, index)
        cells.insert(3, f"{ratio:.2f}x" if ratio is not None else "-")
        note = row.albumentations_computes if row.albumentations is not None else "-"
        print(f"| {row.label} | " + " | ".join(cells) + f" | {differences[index]:.1e} | {note} |")
    if plain:
        print("\nThe plain calls (float32 in and out, severity 3's constants):\n")
        for row in rows:
            print(f"- {row.label}: {plain[row.label][0]}")
    print("\n" + "\n".join(verdicts(rows, times)))

    if args.profile:
        print(
            f"\nWhere ours at batch 1 is slower than the best peer (min over rounds), {args.profile_calls} calls profiled:"
        )
        for index, row in enumerate(rows):
            ours = min(times[index, "ours b1"])
            peers = {
                column: min(times[index, column]) for column in ("albumentations", "kornia") if (index, column) in times
            }
            if not peers or ours <= min(peers.values()):
                continue
            best = min(peers, key=peers.__getitem__)
            print(f"\n{row.label}: ours {ours:.1f} ms, {best} {peers[best]:.1f} ms ({ours / peers[best]:.1f}x)")
            if best == "albumentations" and row.albumentations_does:
                print(f"  albumentations: {row.albumentations_does}")
            call = next(c for i, column, _, c in contenders if i == index and column == "ours b1")
            for line in profile(call, args.profile_calls, args.top):
                print(f"  {line}")


if __name__ == "__main__":
    main()
