"""A cell's worst images: the images whose score fell most, measured where the model runs.

For one cell (a model, a corruption, a severity) the first images of the dataset are run
clean and corrupted, one at a time, exactly as the suite runs them (same collation, same
per-image seed, same output checks), and each is scored with the suite's headline metric on
its own. The images whose score fell most are kept, with what a picture of them needs, as a
:class:`~pytest_segrobust.pictures.values.WorstImages`; the report draws it
(:func:`pytest_segrobust.report.overlays.render_worst`).

An image's clean prediction and score are the same in every cell of one model and dataset:
a :class:`CleanViews` kept for the run computes them once, and each cell then predicts only
its corrupted images.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from pytest_segrobust.core.types import Batch, Expressions, Image, field_of
from pytest_segrobust.corruptions import Corruption
from pytest_segrobust.corruptions.functional import to_uint8
from pytest_segrobust.data.base import Sample, SegmentationDataset
from pytest_segrobust.metrics import METRICS, MetricContext
from pytest_segrobust.models.base import model_device
from pytest_segrobust.pictures.values import ImageLoss, WorstImages
from pytest_segrobust.pictures.views import NoClassView, class_maps, still, truth_maps
from pytest_segrobust.randomness.seeding import sample_seed
from pytest_segrobust.tasks import get_task

# Images looked at per cell, and rows drawn: enough to find a telling one, cheap to run.
CONSIDERED = 16
SHOWN = 3


# -- the clean side, once per model and dataset ---------------------------------------------


@dataclass
class CleanImage:
    """One image of a dataset, collated, predicted and scored clean on its own.

    The class view of the prediction is made when first asked and kept: a cell asks for it
    only for an image it shows, and a task without a class view must fail there, as it would
    without this record.

    Shape:
        image: ``(3, H, W)``, uint8, on the CPU; truth: ``(H, W)``, int64.
    """

    sample: Sample
    score: float
    image: torch.Tensor
    truth: torch.Tensor | None
    text: str | None
    predictions: Any
    _prediction: torch.Tensor | None = field(default=None, repr=False)

    def prediction(self) -> torch.Tensor:
        """The class view of the clean prediction.

        Raises:
            NoClassView: when the task's predictions have none.
        """
        if self._prediction is None:
            self._prediction = class_maps(self.predictions)[0]
            self.predictions = None  # the view is all a picture needs
        return self._prediction


@dataclass
class _Entry:
    model: Any  # held, so that the identity the entry is keyed by cannot be reused
    dataset: SegmentationDataset
    images: list[CleanImage] = field(default_factory=list)


class CleanViews:
    """The clean side of the worst-image search, per model and dataset, kept for one process.

    Keyed by the model's and the dataset's identity (and the task and metric), so the caller
    passes the same warm objects it evaluates with (a workbench's cached model and dataset of a
    split). It holds them until :meth:`clear`: drop it, or clear it, when the models go.
    """

    def __init__(self) -> None:
        self._entries: dict[tuple[int, int, str, str], _Entry] = {}

    def image(self, model: Any, dataset: SegmentationDataset, position: int, *, task: str, metric: str) -> CleanImage:
        """The image at ``position`` (images are computed in order, each once)."""
        key = (id(model), id(dataset), task, metric)
        entry = self._entries.get(key)
        if entry is None or entry.model is not model or entry.dataset is not dataset:
            entry = self._entries[key] = _Entry(model, dataset)
        while len(entry.images) <= position:
            # Appended whole: one interrupted (a time limit) leaves the images before it intact.
            entry.images.append(_clean(model, dataset, len(entry.images), task=task, metric=metric))
        return entry.images[position]

    def computed(self) -> int:
        """How many clean images are held, over every model and dataset."""
        return sum(len(entry.images) for entry in self._entries.values())

    def clear(self) -> None:
        self._entries.clear()


def _clean(model: Any, dataset: SegmentationDataset, position: int, *, task: str, metric: str) -> CleanImage:
    chosen_task = get_task(task)
    device = model_device(model)
    sample = dataset[position]
    batch = chosen_task.collate([sample], [position], dataset, device)
    predictions = chosen_task.check_predictions(chosen_task.predict(model, batch), batch)
    score = _score(predictions, batch, dataset, device, metric)
    shown, shown_predictions = still(batch, predictions)  # a clip is drawn by its middle frame
    return CleanImage(
        sample=sample,
        score=score,
        image=to_uint8(field_of(shown, Image).data[0]).cpu(),
        truth=_first(truth_maps(shown)),
        text=_text(batch),
        predictions=shown_predictions,
    )


def _score(predictions: Any, batch: Batch, dataset: SegmentationDataset, device: torch.device, metric: str) -> float:
    scorer = METRICS.get(metric)(MetricContext.of(dataset, device))
    scorer.update(predictions, batch)
    return float(scorer.compute().score)


# -- one cell --------------------------------------------------------------------------------


def worst_images(
    model: Any,
    dataset: SegmentationDataset,
    corruption: Corruption[Any],
    severity: int,
    *,
    task: str,
    metric: str,
    seed: int,
    considered: int = CONSIDERED,
    shown: int = SHOWN,
    limit: int | None = None,
    clean_views: CleanViews | None = None,
) -> list[ImageLoss]:
    """Among the first ``considered`` images, the ``shown`` whose ``metric`` fell most, worst first.

    Each image is collated, corrupted (with the seed it gets in the suite) and predicted on
    its own, so the pictures are the ones the cell scored. Images whose score is undefined
    clean or corrupted (no object of a class to find) are passed over; among equal drops the
    earlier image comes first.

    Args:
        model: The suite's (adapted) model.
        dataset: The cell's dataset.
        corruption: The cell's corruption.
        severity: The cell's severity, 1..5.
        task: The suite's task.
        metric: The suite's headline metric, scored per image.
        seed: The suite's global seed.
        considered: How many of the first images to look at.
        shown: How many to return.
        limit: The suite's ``limit``: images beyond it were never evaluated.
        clean_views: The run's clean predictions, shared by the cells of a model and dataset
            (``None``: computed for this call alone; the result is the same).

    Raises:
        NoClassView: when the task's predictions have no class view.
    """
    chosen_task = get_task(task)
    higher_is_better = METRICS.get(metric).higher_is_better
    device = model_device(model)
    views = CleanViews() if clean_views is None else clean_views
    found: list[ImageLoss] = []
    for position in range(considered_count(dataset, limit, considered)):
        clean = views.image(model, dataset, position, task=task, metric=metric)
        sample = clean.sample
        batch = chosen_task.collate([sample], [position], dataset, device)
        corrupted = corruption(batch, severity, [sample_seed(seed, sample.sample_id, corruption.name, severity)])
        predictions = chosen_task.check_predictions(chosen_task.predict(model, corrupted), corrupted)
        corrupted_score = _score(predictions, corrupted, dataset, device, metric)
        drop = clean.score - corrupted_score if higher_is_better else corrupted_score - clean.score
        if not math.isfinite(drop):
            continue
        if len(found) == shown and drop <= found[-1].drop:
            continue
        frame, frame_predictions = still(corrupted, predictions)  # a clip is drawn by its middle frame
        found.append(
            ImageLoss(
                sample_id=sample.sample_id,
                clean_score=clean.score,
                corrupted_score=corrupted_score,
                drop=drop,
                clean_image=clean.image,
                corrupted_image=to_uint8(field_of(frame, Image).data[0]).cpu(),
                clean_prediction=clean.prediction(),
                corrupted_prediction=class_maps(frame_predictions)[0],
                truth=clean.truth,
                moved_truth=_moved(clean.truth, _first(truth_maps(frame)), corruption),
                clean_text=clean.text,
                corrupted_text=_text(corrupted),
            )
        )
        found.sort(key=lambda loss: -loss.drop)  # stable: among equal drops, the earlier image first
        del found[shown:]
    return found


def considered_count(dataset: SegmentationDataset, limit: int | None, considered: int = CONSIDERED) -> int:
    """How many images :func:`worst_images` looks at: the first ``considered`` the suite evaluated."""
    return min(considered, len(dataset), considered if limit is None else limit)


def describe_worst(
    model: Any,
    dataset: SegmentationDataset,
    corruption: Corruption[Any],
    severity: int,
    *,
    task: str,
    metric: str,
    seed: int,
    limit: int | None,
    gamma_r: float | None,
    clean_views: CleanViews | None = None,
    considered: int = CONSIDERED,
    shown: int = SHOWN,
) -> WorstImages:
    """One cell's images that lost most, as the report's evidence of it (see :func:`worst_images`).

    A task whose predictions have no class view gets the numbers of no image and a note
    saying why, not an error; so does a cell none of whose images has a defined score.

    Args:
        gamma_r: The cell's relative robustness, shown with its images.
        The others: as :func:`worst_images`.
    """
    kind = METRICS.get(metric)
    count = considered_count(dataset, limit, considered)
    found = WorstImages(
        corruption=corruption.name,
        severity=severity,
        gamma_r=gamma_r,
        considered=count,
        metric_label=kind.label,
        class_names=tuple(str(name) for name in dataset.class_names),
    )
    try:
        losses = worst_images(
            model,
            dataset,
            corruption,
            severity,
            task=task,
            metric=metric,
            seed=seed,
            considered=considered,
            shown=shown,
            limit=limit,
            clean_views=clean_views,
        )
    except NoClassView as exc:
        return replace(found, note=f"no pictures: {exc}")
    if not losses:
        return replace(
            found, note=f"no pictures: no image among the first {count} has a defined {kind.label} clean and corrupted"
        )
    return replace(found, images=tuple(losses))


def picture_of(sample: Sample, task: str, dataset: SegmentationDataset) -> torch.Tensor:
    """The image that stands for ``sample`` in a gallery: its image, or a clip's middle frame.

    Shape:
        return: ``(3, H, W)``, ``uint8``, on the CPU.
    """
    if sample.image is not None:
        return sample.image
    batch = get_task(task).collate([sample], [0], dataset, torch.device("cpu"))
    shown, _ = still(batch)
    return to_uint8(field_of(shown, Image).data[0])


def _moved(truth: torch.Tensor | None, shown: torch.Tensor | None, corruption: Corruption[Any]) -> torch.Tensor | None:
    """The ground truth as the corruption left it, where it may have moved: always for a geometric or
    temporal corruption, and for any other (a dynamic mixture of clips) where it did move."""
    if corruption.geometric or corruption.temporal:
        return shown
    return None if shown is None or truth is None or torch.equal(shown, truth) else shown


def _first(maps: list[torch.Tensor] | None) -> torch.Tensor | None:
    return None if maps is None else maps[0]


def _text(batch: Batch) -> str | None:
    """The first sample's referring expression, if the batch has expressions."""
    found = [f for f in batch.values() if isinstance(f, Expressions)]
    return found[0].texts[0] if found else None
