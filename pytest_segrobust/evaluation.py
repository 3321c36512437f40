"""Run a model over a (corrupted) dataset and accumulate its metric.

Samples stream from the dataset into batches of equal image size; each batch moves to the
model's device once, is corrupted there with one seed per sample (geometric corruptions
move the annotations along), predicted, and added to the metric's sufficient statistics:
a confusion matrix on the device for ``miou``, COCO records for ``map``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

from pytest_segrobust.corruptions import Corruption
from pytest_segrobust.data.base import InstanceTarget, Sample, SegmentationDataset, instance_categories
from pytest_segrobust.errors import DatasetError, ModelOutputError
from pytest_segrobust.metrics import ConfusionMatrix
from pytest_segrobust.metrics.coco_map import CocoMAP
from pytest_segrobust.models.base import InstancePredictions, InstanceSegmentationModel, SegmentationModel, model_device
from pytest_segrobust.scores import absolute_robustness, relative_robustness
from pytest_segrobust.seeding import sample_seed
from pytest_segrobust.types import Field, Image, InstanceMasks, SemanticMask

CLEAN = "clean"
# Bump when a change to this module can change a result: it invalidates cached clean results.
EVALUATOR_VERSION = "2"
# The metric each task is scored with; the first is the default.
METRICS: dict[str, tuple[str, ...]] = {"semantic": ("miou",), "instance": ("map",)}
METRIC_LABELS = {"miou": "mIoU", "map": "mask AP"}

Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class EvalResult:
    """The metric of one model on one (possibly corrupted) dataset.

    Attributes:
        score: The metric in percent: mIoU for ``miou``, mask AP@[.50:.95] for ``map``.
        per_class: The metric per class of the dataset's ``class_names``, ``None`` where it
            is undefined (a class absent from ground truth and prediction; background and
            classes without ground-truth instances under ``map``).
        num_images: Images evaluated.
        seconds: Wall time of the evaluation.
        details: Further numbers of the metric by name; for ``map``: ``ap50``, ``ap75``,
            ``bbox_ap``, ``bbox_ap50``, ``bbox_ap75``.
    """

    score: float
    per_class: tuple[float | None, ...]
    num_images: int
    seconds: float
    details: dict[str, float] = field(default_factory=dict)


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
    model: SegmentationModel | InstanceSegmentationModel,
    dataset: SegmentationDataset,
    corruption: Corruption | None = None,
    severity: int = 0,
    *,
    metric: str = "miou",
    seed: int = 0,
    batch_size: int = 16,
    limit: int | None = None,
    progress: Progress | None = None,
    loader_workers: int = 0,
) -> EvalResult:
    """Evaluate ``model`` on ``dataset`` under ``corruption`` at ``severity``.

    Args:
        model: A semantic model for ``miou``, an instance model for ``map``; its ``device``
            decides where all the work happens.
        dataset: The samples, streamed one at a time (with instances, for ``map``).
        corruption: ``None`` (or severity 0) evaluates clean images.
        severity: 0 to 5.
        metric: ``"miou"`` (semantic) or ``"map"`` (instance, COCO mask and box AP).
        seed: Global seed; with the sample id it fixes every random draw.
        batch_size: Images per forward pass; results do not depend on it.
        limit: Evaluate only the first ``limit`` images.
        progress: Called with ``(images done, total)`` after each batch.
        loader_workers: Processes that read samples ahead of the model (0: read inline).

    Raises:
        DatasetError: for a sample whose annotation does not match its image.
        ModelOutputError: for predictions of the wrong type, shape, dtype or class range.
    """
    start = time.perf_counter()
    device = model_device(model)
    total = len(dataset) if limit is None else min(limit, len(dataset))
    if total == 0:
        raise DatasetError(f"{dataset.name}: the dataset has no samples; there is nothing to evaluate")
    scorer = _scorer(metric, dataset, device)
    name = CLEAN if corruption is None or severity == 0 else corruption.name
    done = 0
    for batch in _batches(_samples(dataset, total, loader_workers), batch_size, dataset):
        images = torch.stack([s.image for s in batch]).to(device, non_blocking=True).float().div_(255.0)
        masks = torch.stack([s.target.mask for s in batch]).to(device, non_blocking=True)
        instances = scorer.instances(batch, device)
        if corruption is not None and severity > 0:
            seeds = [sample_seed(seed, s.sample_id, name, severity) for s in batch]
            fields: dict[str, Field] = {"image": Image(images), "mask": SemanticMask(masks, dataset.ignore_index)}
            if instances is not None:
                fields["instances"] = InstanceMasks(tuple(instances), *images.shape[-2:])
            corrupted = corruption(fields, severity, seeds)
            images, masks = corrupted["image"].data, corrupted["mask"].data
            instances = None if instances is None else list(corrupted["instances"].targets)
        try:
            predictions = model.predict(images)
        except ModelOutputError as exc:
            raise ModelOutputError(f"{exc} (batch starting at sample {batch[0].sample_id})") from None
        scorer.update(predictions, images, masks, instances, batch, first_index=done)
        done += len(batch)
        if progress is not None:
            progress(done, total)
    score, per_class, details = scorer.compute()
    return EvalResult(
        score=score,
        per_class=per_class,
        num_images=done,
        seconds=time.perf_counter() - start,
        details=details,
    )


class _Scorer(Protocol):
    """Binds a metric to the evaluation loop: what a batch needs, how predictions are added."""

    def instances(self, batch: list[Sample], device: torch.device) -> list[InstanceTarget] | None: ...

    def update(
        self,
        predictions: Any,
        images: torch.Tensor,
        masks: torch.Tensor,
        instances: list[InstanceTarget] | None,
        batch: list[Sample],
        first_index: int,
    ) -> None: ...

    def compute(self) -> tuple[float, tuple[float | None, ...], dict[str, float]]: ...


def _scorer(metric: str, dataset: SegmentationDataset, device: torch.device) -> _Scorer:
    if metric == "miou":
        return _MIoUScorer(dataset, device)
    if metric == "map":
        return _MAPScorer(dataset)
    known = sorted(m for metrics in METRICS.values() for m in metrics)
    raise ValueError(f"unknown metric {metric!r}; expected one of {', '.join(known)}")


class _MIoUScorer:
    """Label maps into a confusion matrix that stays on the model's device."""

    def __init__(self, dataset: SegmentationDataset, device: torch.device) -> None:
        self.matrix = ConfusionMatrix(len(dataset.class_names), dataset.ignore_index, device=device)

    def instances(self, batch: list[Sample], device: torch.device) -> None:
        return None

    def update(self, predictions, images, masks, instances, batch, first_index):  # type: ignore[no-untyped-def]
        self.matrix.update(_checked(predictions, images, batch), masks)

    def compute(self) -> tuple[float, tuple[float | None, ...], dict[str, float]]:
        iou = self.matrix.compute()
        return iou.miou, iou.per_class, {}


class _MAPScorer:
    """Scored instance masks into COCO records; images are numbered by their dataset index."""

    def __init__(self, dataset: SegmentationDataset) -> None:
        self.dataset = dataset
        self.categories = instance_categories(dataset)
        self.metric = CocoMAP(self.categories, ("segm", "bbox"))

    def instances(self, batch: list[Sample], device: torch.device) -> list[InstanceTarget]:
        targets = []
        for sample in batch:
            if sample.instances is None:
                raise DatasetError(
                    f"{self.dataset.name}: sample {sample.sample_id} has no instance annotations; "
                    "an instance (map) evaluation needs a dataset with instances, e.g. COCO-format data"
                )
            if tuple(sample.instances.masks.shape[1:]) != tuple(sample.image.shape[1:]):
                raise DatasetError(
                    f"{self.dataset.name}: sample {sample.sample_id}: instance masks of size "
                    f"{tuple(sample.instances.masks.shape[1:])} differ from image size {tuple(sample.image.shape[1:])}"
                )
            targets.append(sample.instances.to(device, non_blocking=True))
        return targets

    def update(self, predictions, images, masks, instances, batch, first_index):  # type: ignore[no-untyped-def]
        height, width = images.shape[-2:]
        checked = _checked_instances(predictions, batch)
        for offset, (target, predicted) in enumerate(zip(instances, checked, strict=True)):
            self.metric.update(first_index + offset, height, width, target, predicted)

    def compute(self) -> tuple[float, tuple[float | None, ...], dict[str, float]]:
        result = self.metric.compute()
        per_class = (None, *(result.per_class[c["name"]] for c in self.categories))
        box = result.bbox
        details = {"ap50": result.ap50, "ap75": result.ap75}
        if box is not None:
            details |= {"bbox_ap": box.ap, "bbox_ap50": box.ap50, "bbox_ap75": box.ap75}
        return result.ap, per_class, details


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


def _checked_instances(predictions: Any, batch: list[Sample]) -> Sequence[InstancePredictions]:
    if isinstance(predictions, torch.Tensor) or not isinstance(predictions, Sequence):
        raise ModelOutputError(
            f"model returned {type(predictions).__name__}, expected a list of {len(batch)} InstancePredictions "
            "(one per image) from an instance model"
        )
    if len(predictions) != len(batch):
        raise ModelOutputError(
            f"model returned {len(predictions)} instance predictions for a batch of {len(batch)} "
            f"(first sample {batch[0].sample_id})"
        )
    for sample, predicted in zip(batch, predictions):
        if not isinstance(predicted, InstancePredictions):
            raise ModelOutputError(
                f"model returned {type(predicted).__name__} for sample {sample.sample_id}, expected InstancePredictions"
            )
    return predictions


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
