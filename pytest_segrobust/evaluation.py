"""Run a model over a (corrupted) dataset and accumulate its metric.

Samples stream from the dataset into batches of equal image size; each batch moves to the
model's device once, is corrupted there with one seed per sample, predicted, and added to
a confusion matrix that stays on the device.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch

from pytest_segrobust.corruptions import Corruption
from pytest_segrobust.data.base import Sample, SegmentationDataset
from pytest_segrobust.errors import DatasetError, ModelOutputError
from pytest_segrobust.metrics import ConfusionMatrix
from pytest_segrobust.models import SegmentationModel
from pytest_segrobust.scores import absolute_robustness, relative_robustness
from pytest_segrobust.seeding import sample_seed

CLEAN = "clean"
# Bump when a change to this module can change a result: it invalidates cached clean results.
EVALUATOR_VERSION = "1"

Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class EvalResult:
    """The metric of one model on one (possibly corrupted) dataset.

    Attributes:
        score: mIoU in percent.
        per_class: IoU per class in percent, ``None`` where a class never occurs.
        confusion: The confusion matrix (rows ground truth), JSON-safe.
        num_images: Images evaluated.
        seconds: Wall time of the evaluation.
    """

    score: float
    per_class: tuple[float | None, ...]
    confusion: list[list[int]]
    num_images: int
    seconds: float


@dataclass(frozen=True)
class CellResult:
    """A corrupted result next to its clean reference, with the robustness scores."""

    corrupted: EvalResult
    clean: EvalResult

    @property
    def score(self) -> float:
        return self.corrupted.score

    @property
    def clean_score(self) -> float:
        return self.clean.score

    @property
    def gamma_r(self) -> float:
        return relative_robustness(self.clean.score, self.corrupted.score)

    @property
    def gamma_a(self) -> float:
        return absolute_robustness(self.clean.score, self.corrupted.score)


def evaluate(
    model: SegmentationModel,
    dataset: SegmentationDataset,
    corruption: Corruption | None = None,
    severity: int = 0,
    *,
    seed: int = 0,
    batch_size: int = 16,
    limit: int | None = None,
    progress: Progress | None = None,
    loader_workers: int = 0,
) -> EvalResult:
    """Evaluate ``model`` on ``dataset`` under ``corruption`` at ``severity``.

    Args:
        model: The model; its ``device`` decides where all the work happens.
        dataset: The samples, streamed one at a time.
        corruption: ``None`` (or severity 0) evaluates clean images.
        severity: 0 to 5.
        seed: Global seed; with the sample id it fixes every random draw.
        batch_size: Images per forward pass; results do not depend on it.
        limit: Evaluate only the first ``limit`` images.
        progress: Called with ``(images done, total)`` after each batch.
        loader_workers: Processes that read samples ahead of the model (0: read inline).

    Raises:
        DatasetError: for a sample whose mask does not match its image.
        ModelOutputError: for predictions of the wrong shape, dtype, or class range.
    """
    start = time.perf_counter()
    total = len(dataset) if limit is None else min(limit, len(dataset))
    metric = ConfusionMatrix(len(dataset.class_names), dataset.ignore_index, device=model.device)
    name = CLEAN if corruption is None or severity == 0 else corruption.name
    done = 0
    for batch in _batches(_samples(dataset, total, loader_workers), batch_size, dataset):
        images = torch.stack([s.image for s in batch]).to(model.device, non_blocking=True).float().div_(255.0)
        masks = torch.stack([s.target.mask for s in batch]).to(model.device, non_blocking=True)
        if corruption is not None and severity > 0:
            seeds = [sample_seed(seed, s.sample_id, name, severity) for s in batch]
            corrupted = corruption(images, severity, seeds, masks, ignore_index=dataset.ignore_index)
            images, masks = corrupted.images, corrupted.masks
        predictions = _checked(model.predict(images), images, batch)
        metric.update(predictions, masks)
        done += len(batch)
        if progress is not None:
            progress(done, total)
    iou = metric.compute()
    return EvalResult(
        score=iou.miou,
        per_class=iou.per_class,
        confusion=metric.state_dict(),
        num_images=done,
        seconds=time.perf_counter() - start,
    )


def _samples(dataset: SegmentationDataset, total: int, workers: int) -> Iterator[Sample]:
    """The first ``total`` samples in order, read inline or by ``workers`` loader processes."""
    if workers == 0:
        return (dataset[index] for index in range(total))
    loader = torch.utils.data.DataLoader(
        torch.utils.data.Subset(dataset, range(total)),  # type: ignore[arg-type]
        batch_size=None,
        num_workers=workers,
        collate_fn=_as_is,
        prefetch_factor=4,
    )
    return iter(loader)


def _as_is(sample: Sample) -> Sample:
    return sample


def _batches(samples: Iterator[Sample], batch_size: int, dataset: SegmentationDataset) -> Iterator[list[Sample]]:
    """Consecutive samples grouped into batches of one image size."""
    batch: list[Sample] = []
    for sample in samples:
        _check_sample(sample, dataset)
        if batch and (len(batch) == batch_size or batch[0].image.shape != sample.image.shape):
            yield batch
            batch = []
        batch.append(sample)
    if batch:
        yield batch


def _check_sample(sample: Sample, dataset: SegmentationDataset) -> None:
    image, mask = sample.image, sample.target.mask
    if image.dim() != 3 or image.shape[0] != 3 or image.dtype != torch.uint8:
        raise DatasetError(
            f"{dataset.name}: sample {sample.sample_id}: expected a uint8 image of shape (3, H, W), "
            f"got {image.dtype} {tuple(image.shape)}"
        )
    if mask.shape != image.shape[1:]:
        raise DatasetError(
            f"{dataset.name}: sample {sample.sample_id}: mask size {tuple(mask.shape)} differs from "
            f"image size {tuple(image.shape[1:])}"
        )


def _checked(predictions: torch.Tensor, images: torch.Tensor, batch: list[Sample]) -> torch.Tensor:
    expected = (images.shape[0], *images.shape[-2:])
    if not isinstance(predictions, torch.Tensor):
        raise ModelOutputError(f"model returned {type(predictions).__name__}, expected a tensor of shape {expected}")
    if tuple(predictions.shape) != expected:
        raise ModelOutputError(
            f"model returned predictions of shape {tuple(predictions.shape)}, expected {expected} "
            f"(class ids per pixel; first sample {batch[0].sample_id})"
        )
    if predictions.is_floating_point():
        if not bool(torch.isfinite(predictions).all()):
            raise ModelOutputError(f"model returned NaN or infinite values (batch starting at {batch[0].sample_id})")
        if not bool((predictions == predictions.round()).all()):
            raise ModelOutputError("model returned fractional values; expected integer class ids")
    return predictions


