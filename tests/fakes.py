"""Test doubles: a synthetic dataset and a model whose robustness can be dialled.

The image's red channel encodes the label (``(label + 0.5) / K``), so a model that bins
red is exact on clean images and degrades under noise; averaging before binning makes it
more robust. Used directly and, through ``FAKES_SOURCE``, inside pytester projects.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import torch

from pytest_segrobust.core.types import Batch, SemanticMask, field_of
from pytest_segrobust.data.base import Sample, SemanticTarget
from pytest_segrobust.metrics.base import Metric, MetricContext, MetricResult, Reduction
from pytest_segrobust.models.base import InstancePredictions

FAKES_SOURCE = Path(__file__).read_text()
CLASS_NAMES = ("background", "a", "b", "c")


class BandScenes:
    """Rectangles of random classes; red channel = class code, green/blue = texture."""

    ignore_index = 255
    class_names = CLASS_NAMES

    def __init__(self, size: int = 8, height: int = 32, width: int = 32, seed: int = 0) -> None:
        self.size, self.height, self.width, self.seed = size, height, width, seed
        self.name = f"bands-{size}-{height}x{width}-{seed}"

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> Sample:
        if not 0 <= index < self.size:
            raise IndexError(index)
        g = torch.Generator().manual_seed(self.seed * 100_003 + index)
        k = len(self.class_names)
        mask = torch.zeros(self.height, self.width, dtype=torch.int64)
        for _ in range(4):
            y0, x0 = (int(v) for v in torch.randint(0, self.height // 2, (2,), generator=g))
            h, w = (int(v) for v in torch.randint(4, self.height // 2, (2,), generator=g))
            mask[y0 : y0 + h, x0 : x0 + w] = int(torch.randint(1, k, (1,), generator=g))
        red = (mask.float() + 0.5) / k
        texture = torch.rand(2, self.height, self.width, generator=g)
        image = (torch.cat([red[None], texture]) * 255).round().to(torch.uint8)
        return Sample(f"bands/{index}", image, SemanticTarget(mask))

    def fingerprint(self) -> str:
        return self.name


class RedBinner(torch.nn.Module):
    """Logits that peak at ``floor(red * K)``; ``smoothing`` averages red over a window first."""

    def __init__(self, num_classes: int = len(CLASS_NAMES), smoothing: int = 1) -> None:
        super().__init__()
        self.num_classes = num_classes
        self.smoothing = smoothing
        self.register_buffer("centres", (torch.arange(num_classes) + 0.5) / num_classes)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        red = images[:, :1]
        if self.smoothing > 1:
            red = torch.nn.functional.avg_pool2d(red, self.smoothing, stride=1, padding=self.smoothing // 2)
            red = red[..., : images.shape[-2], : images.shape[-1]]
        return -((red - self.centres.view(1, -1, 1, 1)) ** 2)


class InstanceBinner:
    """An instance model from :class:`RedBinner`: one instance per class present, scored by its area share."""

    device = torch.device("cpu")

    def __init__(self, smoothing: int = 1) -> None:
        self.smoothing = smoothing
        self.binner = RedBinner(smoothing=smoothing)

    def predict(self, images: torch.Tensor) -> list[InstancePredictions]:
        out = []
        for label_map in self.binner(images).argmax(dim=1):
            classes = [k for k in range(1, self.binner.num_classes) if bool((label_map == k).any())]
            masks = torch.stack([label_map == k for k in classes]) if classes else torch.zeros(0, *label_map.shape, dtype=torch.bool)
            scores = masks.flatten(1).float().mean(dim=1)
            out.append(InstancePredictions(masks, torch.tensor(classes, dtype=torch.int64), scores))
        return out

    def fingerprint(self) -> str:
        return f"instance-binner-{self.smoothing}"


def instance_binner(smoothing: int = 1) -> InstanceBinner:
    return InstanceBinner(smoothing)


def write_coco_bands(root: Path, size: int = 6) -> tuple[Path, Path]:
    """BandScenes written as a COCO dataset: PNG images, one RLE instance per class present.

    Category ids are 10, 20, 30 (not contiguous) under two supercategories; image 1 shows no
    object and has no annotation, and image 0 has a crowd region.
    """
    import json

    import numpy as np
    from PIL import Image
    from pycocotools import mask as mask_utils

    images_dir = root / "images"
    images_dir.mkdir(parents=True, exist_ok=True)
    scenes = BandScenes(size)
    images, annotations = [], []
    for index in range(size):
        sample = scenes[index]
        pixels = sample.image.permute(1, 2, 0).numpy().copy()
        if index == 1:  # an image without objects: background's red code everywhere, no annotation
            pixels[..., 0] = round(0.5 / len(CLASS_NAMES) * 255)
        name = f"{index:04d}.png"
        Image.fromarray(pixels).save(images_dir / name)
        images.append({"id": 100 + index, "file_name": name, "height": scenes.height, "width": scenes.width})
        if index == 1:
            continue
        if index == 0:  # a crowd region on background, where the model predicts nothing: it must not count
            crowd = (sample.target.mask == 0).numpy() & (np.arange(scenes.height)[:, None] < 3)
            annotations.append(_coco_annotation(mask_utils, len(annotations) + 1, 100 + index, 10, crowd, 1))
        for label in range(1, len(CLASS_NAMES)):
            region = (sample.target.mask == label).numpy()
            if region.any():
                annotations.append(_coco_annotation(mask_utils, len(annotations) + 1, 100 + index, 10 * label, region, 0))
    categories = [
        {"id": 10 * k, "name": name, "supercategory": "vowel" if name in "aeiou" else "consonant"}
        for k, name in enumerate(CLASS_NAMES[1:], 1)
    ]
    annotation_file = root / "instances.json"
    annotation_file.write_text(json.dumps({"images": images, "annotations": annotations, "categories": categories}))
    return images_dir, annotation_file


def _coco_annotation(mask_utils, annotation_id, image_id, category_id, region, iscrowd):  # type: ignore[no-untyped-def]
    import numpy as np

    rle = mask_utils.encode(np.asfortranarray(region.astype(np.uint8)))
    segmentation = {"size": [int(v) for v in rle["size"]], "counts": rle["counts"].decode("ascii")}
    return {"id": annotation_id, "image_id": image_id, "category_id": category_id, "segmentation": segmentation, "iscrowd": iscrowd}


class WrongShapeModel:
    """Follows the protocol but returns a label map of the wrong size."""

    device = torch.device("cpu")

    def predict(self, images: torch.Tensor) -> torch.Tensor:
        return torch.zeros(images.shape[0], 3, 3, dtype=torch.int64)

    def fingerprint(self) -> str:
        return "wrong-shape"


class CrashingModel(RedBinner):
    def forward(self, images: torch.Tensor) -> torch.Tensor:
        raise RuntimeError("CUDA out of memory (simulated)")


class RepeatedIdScenes(BandScenes):
    """BandScenes whose sample at index 5 carries the id of the one at index 2, as a copy-paste slip would."""

    def __getitem__(self, index: int) -> Sample:
        sample = super().__getitem__(index)
        return Sample("bands/2", sample.image, sample.target) if index == 5 else sample


def band_scenes(size: int = 8, height: int = 32, width: int = 32, seed: int = 0) -> BandScenes:
    return BandScenes(size, height, width, seed)


def repeated_id_scenes(size: int = 8) -> RepeatedIdScenes:
    return RepeatedIdScenes(size)


def red_binner(smoothing: int = 1) -> RedBinner:
    return RedBinner(smoothing=smoothing)


def wrong_shape_model() -> WrongShapeModel:
    return WrongShapeModel()


def crashing_model() -> CrashingModel:
    return CrashingModel()


def digest(tensor: torch.Tensor) -> str:
    return hashlib.blake2b(tensor.contiguous().numpy().tobytes(), digest_size=8).hexdigest()


def file_binner(path: str) -> RedBinner:
    """A binner whose class centres are weights read from a file (to test weight fingerprints)."""
    model = RedBinner(smoothing=3)
    model.centres.copy_(torch.load(path, weights_only=True))
    return model


class ExitOnBlack(RedBinner):
    """Kills its process (as a segfault would) when it sees an all-black batch."""

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        if not bool(images.any()):
            import os

            os._exit(3)
        return super().forward(images)


def exit_on_black() -> ExitOnBlack:
    return ExitOnBlack(smoothing=5)


class NanBinner(RedBinner):
    """A broken network: its logits are NaN, which an argmax would quietly turn into class 0."""

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return super().forward(images) * float("nan")


def nan_binner() -> NanBinner:
    return NanBinner()


class WrongClassBinner(RedBinner):
    """Reads every pixel's class and answers the next one: no pixel right, a clean mIoU of 0."""

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return super().forward(images).roll(1, dims=1)


def wrong_class_binner() -> WrongClassBinner:
    return WrongClassBinner()


class StringDeviceBinner:
    """Follows the protocol with ``device = "cpu"``, a string, as many hand-written wrappers do."""

    device = "cpu"

    def __init__(self) -> None:
        self.binner = RedBinner(smoothing=5)

    def predict(self, images: torch.Tensor) -> torch.Tensor:
        return self.binner(images).argmax(dim=1)

    def fingerprint(self) -> str:
        return "string-device-binner"


def string_device_binner() -> StringDeviceBinner:
    return StringDeviceBinner()


WOKE = "sleepy-binner-woke"  # what a SleepyBinner leaves in the working directory (the rootdir) if its sleep ends


class SleepyBinner(RedBinner):
    """Hangs (sleeps far longer than any test) on the first batch it sees."""

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        import time

        time.sleep(60)
        Path(WOKE).touch()  # a time limit interrupts the sleep: never reached
        return super().forward(images)


def sleepy_binner() -> SleepyBinner:
    return SleepyBinner()


class PixelError(Metric):
    """The share of scored pixels classified wrong: an error metric (lower is better) on a 0..1
    scale, with per-image statistics (wrong, scored pixels) that add up. Not registered: a test
    registers it where it needs it."""

    name = "pixel_error"
    label = "pixel error"
    higher_is_better = False
    bounds = (0.0, 1.0)
    accepts = (SemanticMask,)
    images: list[torch.Tensor]

    def __init__(self, context: MetricContext) -> None:
        super().__init__(context)
        self.add_state("images", [], Reduction.CONCAT)

    def update(self, predictions: torch.Tensor, batch: Batch) -> None:
        mask = field_of(batch, SemanticMask)
        scored = mask.data != mask.ignore_index
        wrong = (predictions != mask.data) & scored
        self.images.append(torch.stack([wrong.flatten(1).sum(1), scored.flatten(1).sum(1)], dim=1).cpu())

    def compute(self) -> MetricResult:
        totals = self.image_statistics().sum(axis=0)
        return MetricResult(float(self.score_of(totals)), ())

    def image_statistics(self) -> np.ndarray:
        return torch.cat(self.images).numpy().astype(np.float64) if self.images else np.zeros((0, 2))

    @classmethod
    def score_of(cls, summed: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            return summed[..., 0] / summed[..., 1]
