"""A cell's worst images: the images whose score fell most, picked from the cell's own evaluation.

The evaluation loop scores each of the first images on its own with the suite's headline
metric, clean and corrupted (:attr:`~pytest_segrobust.engine.evaluation.EvalSettings.scored_images`,
:attr:`~pytest_segrobust.engine.evaluation.EvalResult.image_scores`), from the predictions it makes
anyway. The images whose score fell most are picked from those numbers alone
(:func:`pick_worst`); only the few picked are then run again, one at a time and exactly as the
suite ran them (same collation, same per-image seed, same output checks), to draw them: what a
picture needs (the images, the predictions) is not kept for every image of every cell. They
come out as a :class:`~pytest_segrobust.pictures.values.WorstImages`; the report draws it
(:func:`pytest_segrobust.report.overlays.render_worst`). What a picture shows of a prediction and of
the ground truth is the task's :attr:`~pytest_segrobust.tasks.base.Task.picture_view` (class views,
or a promptable task's panels with their prompts); the search asks the view, whatever the task.

An image's clean picture is the same in every cell of one model and dataset: a
:class:`CleanViews` kept for the run predicts it once.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from pytest_segrobust.core.types import Batch, Expressions, Image, field_of
from pytest_segrobust.corruptions import Corruption
from pytest_segrobust.corruptions.functional import to_uint8
from pytest_segrobust.data.base import Sample, SegmentationDataset
from pytest_segrobust.engine.evaluation import CellResult
from pytest_segrobust.metrics import METRICS
from pytest_segrobust.models.base import model_device
from pytest_segrobust.pictures.task_views import Drawing, PictureView
from pytest_segrobust.pictures.values import ImageLoss, WorstImages
from pytest_segrobust.pictures.views import NoClassView, still
from pytest_segrobust.randomness.seeding import sample_seed
from pytest_segrobust.tasks import Task

# Images scored on their own per evaluation, and rows drawn: enough to find a telling one, cheap to run.
CONSIDERED = 16
SHOWN = 3


# -- the picks, from the evaluation's numbers -------------------------------------------------


@dataclass(frozen=True)
class ImageScores:
    """A cell's first images scored on their own, clean and corrupted, by its evaluations.

    Attributes:
        clean: The clean evaluation's scores, in dataset order (NaN where undefined).
        corrupted: The corrupted evaluation's.
    """

    clean: tuple[float, ...]
    corrupted: tuple[float, ...]

    @classmethod
    def of(cls, result: CellResult) -> ImageScores:
        return cls(result.clean.image_scores, result.corrupted.image_scores)

    @property
    def considered(self) -> int:
        """How many images have both scores: the first ``considered`` the suite evaluated."""
        return min(len(self.clean), len(self.corrupted))


@dataclass(frozen=True)
class ImagePick:
    """One image picked for a cell's worst images, with its numbers.

    Attributes:
        position: The image's position in the dataset.
        clean_score: Its headline score on its own, clean.
        corrupted_score: Corrupted.
        drop: How far the score fell, in the metric's direction (positive: worse).
    """

    position: int
    clean_score: float
    corrupted_score: float
    drop: float


def pick_worst(scores: ImageScores, *, higher_is_better: bool, shown: int = SHOWN) -> list[ImagePick]:
    """The ``shown`` images whose score fell most, worst first.

    Images whose score is undefined clean or corrupted (no object of a class to find) are
    passed over; among equal drops the earlier image comes first.
    """
    picks = []
    for position in range(scores.considered):
        clean, corrupted = scores.clean[position], scores.corrupted[position]
        drop = clean - corrupted if higher_is_better else corrupted - clean
        if math.isfinite(drop):
            picks.append(ImagePick(position, clean, corrupted, drop))
    picks.sort(key=lambda pick: -pick.drop)  # stable: among equal drops, the earlier image first
    return picks[:shown]


# -- the clean side of the pictures, once per model and dataset -----------------------------


@dataclass
class CleanImage:
    """One image of a dataset, collated and predicted clean on its own, as a picture shows it.

    The view of the prediction is made when first asked and kept: a task without one must fail there.

    Shape:
        image: ``(3, H, W)``, uint8, on the CPU; truth: ``(H, W)``, int64.
    """

    sample: Sample
    image: torch.Tensor
    truth: torch.Tensor | None
    text: str | None
    batch: Batch | None
    predictions: Any
    view: PictureView
    _prediction: Drawing | None = field(default=None, repr=False)

    def prediction(self) -> Drawing:
        """The task's view of the clean prediction.

        Raises:
            NoClassView: when the task's predictions have none.
        """
        if self._prediction is None:
            assert self.batch is not None
            self._prediction = self.view.prediction(self.batch, self.predictions)
            self.batch = self.predictions = None  # the view is all a picture needs
        return self._prediction


@dataclass
class _Entry:
    model: Any  # held, so that the identity the entry is keyed by cannot be reused
    dataset: SegmentationDataset
    images: dict[int, CleanImage] = field(default_factory=dict)


class CleanViews:
    """The clean pictures of the picked images, per model and dataset, kept for one process.

    Keyed by the model's and the dataset's identity and by the task with its setting (two suites
    of one model and dataset under two prompt protocols see different clean predictions), so the
    caller passes the same warm objects it evaluates with (a workbench's cached model and dataset
    of a split). It holds them until :meth:`clear`: drop it, or clear it, when the models go.
    """

    def __init__(self) -> None:
        self._entries: dict[tuple[int, int, str, str], _Entry] = {}

    def image(self, model: Any, dataset: SegmentationDataset, position: int, *, task: Task) -> CleanImage:
        """The image at ``position``, predicted the first time it is asked for."""
        key = (id(model), id(dataset), task.name, task.setting)
        entry = self._entries.get(key)
        if entry is None or entry.model is not model or entry.dataset is not dataset:
            entry = self._entries[key] = _Entry(model, dataset)
        if position not in entry.images:
            entry.images[position] = _clean(model, dataset, position, task=task)
        return entry.images[position]

    def computed(self) -> int:
        """How many clean images are held, over every model and dataset."""
        return sum(len(entry.images) for entry in self._entries.values())

    def clear(self) -> None:
        self._entries.clear()


def _clean(model: Any, dataset: SegmentationDataset, position: int, *, task: Task) -> CleanImage:
    sample = dataset[position]
    batch = task.collate([sample], [position], dataset, model_device(model))
    predictions = task.check_predictions(task.predict(model, batch), batch)
    shown, shown_predictions = still(batch, predictions)  # a clip is drawn by its middle frame
    return CleanImage(
        sample=sample,
        image=to_uint8(field_of(shown, Image).data[0]).cpu(),
        truth=task.picture_view.truth(shown),
        text=_text(batch),
        batch=shown,
        predictions=shown_predictions,
        view=task.picture_view,
    )


# -- one cell --------------------------------------------------------------------------------


def worst_images(
    model: Any,
    dataset: SegmentationDataset,
    corruption: Corruption[Any],
    severity: int,
    picks: Sequence[ImagePick],
    *,
    task: Task,
    seed: int,
    clean_views: CleanViews | None = None,
) -> list[ImageLoss]:
    """The pictures of the ``picks`` (:func:`pick_worst`), in their order, with their numbers.

    Each picked image is collated, corrupted (with the seed it gets in the suite) and predicted
    on its own, so the pictures are the ones the cell scored; no other image is run.

    Args:
        model: The suite's (adapted) model.
        dataset: The cell's dataset.
        corruption: The cell's corruption.
        severity: The cell's severity, 1..5.
        picks: The images to draw.
        task: The suite's task as its plan binds it (:meth:`~pytest_segrobust.tasks.base.Task.for_suite`:
            a promptable suite's prompt protocol), so the picked images are collated as the cell collated them.
        seed: The suite's global seed.
        clean_views: The run's clean pictures, shared by the cells of a model and dataset
            (``None``: made for this call alone; the result is the same).

    Raises:
        NoClassView: when the task's predictions have no view (before any corrupted image is run).
    """
    device = model_device(model)
    views = CleanViews() if clean_views is None else clean_views
    view = task.picture_view
    found: list[ImageLoss] = []
    for pick in picks:
        clean = views.image(model, dataset, pick.position, task=task)
        drawn = clean.prediction()
        sample = clean.sample
        batch = task.collate([sample], [pick.position], dataset, device)
        corrupted = corruption(batch, severity, [sample_seed(seed, sample.sample_id, corruption.name, severity)])
        predictions = task.check_predictions(task.predict(model, corrupted), corrupted)
        frame, frame_predictions = still(corrupted, predictions)  # a clip is drawn by its middle frame
        corrupted_drawn = view.prediction(frame, frame_predictions)
        found.append(
            ImageLoss(
                sample_id=sample.sample_id,
                clean_score=pick.clean_score,
                corrupted_score=pick.corrupted_score,
                drop=pick.drop,
                clean_image=clean.image,
                corrupted_image=to_uint8(field_of(frame, Image).data[0]).cpu(),
                clean_prediction=drawn.maps,
                corrupted_prediction=corrupted_drawn.maps,
                truth=clean.truth,
                moved_truth=_moved(clean.truth, view.truth(frame), corruption),
                clean_text=clean.text,
                corrupted_text=_text(corrupted),
                panels=drawn.panels,
                clean_prompts=drawn.prompts,
                corrupted_prompts=corrupted_drawn.prompts,
            )
        )
    return found


def describe_worst(
    model: Any,
    dataset: SegmentationDataset,
    corruption: Corruption[Any],
    severity: int,
    scores: ImageScores,
    *,
    task: Task,
    metric: str,
    seed: int,
    gamma_r: float | None,
    clean_views: CleanViews | None = None,
    shown: int = SHOWN,
) -> WorstImages:
    """One cell's images that lost most, as the report's evidence of it: picked from ``scores``
    (:func:`pick_worst`), then drawn (:func:`worst_images`).

    A task whose predictions have no view gets the numbers of no image and a note saying why,
    not an error; so does a cell none of whose images has a defined score. The legend's names
    are the view's (:meth:`~pytest_segrobust.pictures.task_views.PictureView.legend`).

    Args:
        scores: The cell's first images scored on their own, clean and corrupted.
        metric: The suite's headline metric, which scored them.
        gamma_r: The cell's relative robustness, shown with its images.
        shown: How many images to draw.
        The others: as :func:`worst_images`.
    """
    kind = METRICS.get(metric)
    found = WorstImages(
        corruption=corruption.name,
        severity=severity,
        gamma_r=gamma_r,
        considered=scores.considered,
        metric_label=kind.label,
        class_names=tuple(str(name) for name in dataset.class_names),
    )
    picks = pick_worst(scores, higher_is_better=kind.higher_is_better, shown=shown)
    if not picks:
        return replace(
            found,
            note=f"no pictures: no image among the first {scores.considered} has a defined {kind.label} clean and corrupted",
        )
    try:
        losses = worst_images(
            model, dataset, corruption, severity, picks, task=task, seed=seed, clean_views=clean_views
        )
    except NoClassView as exc:
        return replace(found, note=f"no pictures: {exc}")
    return replace(found, images=tuple(losses), class_names=task.picture_view.legend(found.class_names, losses))


def picture_of(sample: Sample, task: Task, dataset: SegmentationDataset) -> torch.Tensor:
    """The image that stands for ``sample`` in a gallery: its image, or a clip's middle frame
    (``task``: the suite's, as its plan binds it).

    Shape:
        return: ``(3, H, W)``, ``uint8``, on the CPU.
    """
    if sample.image is not None:
        return sample.image
    batch = task.collate([sample], [0], dataset, torch.device("cpu"))
    shown, _ = still(batch)
    return to_uint8(field_of(shown, Image).data[0])


def _moved(truth: torch.Tensor | None, shown: torch.Tensor | None, corruption: Corruption[Any]) -> torch.Tensor | None:
    """The ground truth as the corruption left it, where it may have moved: always for a geometric or
    temporal corruption, and for any other (a dynamic mixture of clips) where it did move."""
    if corruption.geometric or corruption.temporal:
        return shown
    return None if shown is None or truth is None or torch.equal(shown, truth) else shown


def _text(batch: Batch) -> str | None:
    """The first sample's referring expression, if the batch has expressions."""
    found = [f for f in batch.values() if isinstance(f, Expressions)]
    return found[0].texts[0] if found else None
