"""A promptable cell's worst images: each prompt kind's masks by instance, with the prompts the model got."""

from __future__ import annotations

import json

import pytest
import torch
from PIL import Image as PILImage

from pytest_segrobust.core.prompts import FOREGROUND, PromptedInstances, PromptSet
from pytest_segrobust.core.types import Batch, field_of
from pytest_segrobust.corruptions import REGISTRY
from pytest_segrobust.data.prompt_protocol import StandardProtocol, StandardProtocolSettings
from pytest_segrobust.engine.evaluation import EvalSettings, evaluate
from pytest_segrobust.engine.worst_images import CONSIDERED, CleanViews, ImageScores, describe_worst
from pytest_segrobust.metrics.promptable import PromptableMIoU
from pytest_segrobust.models.adapters import adapt_model
from pytest_segrobust.pictures.prompted import PROMPT_VIEW
from pytest_segrobust.pictures.task_views import Drawing, PictureView
from pytest_segrobust.pictures.values import (
    ImageLoss,
    PicturesFormatError,
    RunPictures,
    WorstImages,
)
from pytest_segrobust.pictures.views import NOTHING, class_maps, truth_maps
from pytest_segrobust.randomness.seeding import sample_seed
from pytest_segrobust.report.overlays import render_losses, render_worst
from pytest_segrobust.tasks import get_task
from pytest_segrobust.tasks.promptable import PromptableTask
from pytest_segrobust.tasks.semantic import SemanticTask
from tests.fakes import BandScenes, RedBinner
from tests.test_tasks_promptable import Oracle, Squares

PRESET = "coco-p-prompts"


def task_of(seed: int = 0) -> PromptableTask:
    """The promptable task of a suite asking one centre click and the tight box per instance."""
    return PromptableTask(StandardProtocol(StandardProtocolSettings(1, "center", True)), seed=seed)


def one_image(task: PromptableTask, position: int, corruption: str | None = None, severity: int = 5) -> Batch:
    """Image ``position`` of the squares collated, and corrupted as the suite corrupts it."""
    dataset = Squares()
    sample = dataset[position]
    batch = task.collate([sample], [position], dataset, torch.device("cpu"))  # type: ignore[arg-type]
    if corruption is None:
        return batch
    chosen = REGISTRY.get(corruption, PRESET)
    return chosen(batch, severity, [sample_seed(0, sample.sample_id, chosen.name, severity)])


def asked(batch: Batch, kind: str) -> list[PromptSet]:
    return [s for s in field_of(batch, PromptedInstances).targets[0].prompt_sets() if s.kind == kind and not s.empty]


@pytest.mark.parametrize("corruption", [None, "rotate", "point_displacement", "box_jitter"])
def test_each_prompt_kind_is_a_panel_of_its_masks_by_instance_with_the_prompts_as_the_model_got_them(
    corruption: str | None,
) -> None:
    batch = one_image(task_of(), 1, corruption)
    task = task_of()
    (masks,) = task.check_predictions(task.predict(Oracle(), batch), batch)
    drawing = PROMPT_VIEW.prediction(batch, [masks])
    target = field_of(batch, PromptedInstances).targets[0]
    every = target.prompt_sets()
    assert drawing.panels == ("points", "box") and drawing.maps.shape == (2, 64, 64)
    for panel, kind in enumerate(drawing.panels):
        marks, sets = drawing.prompts[panel], asked(batch, kind)
        # The prompts of the batch the model was asked with: moved by a rotation, changed by a perturbation.
        assert torch.equal(marks.points, torch.cat([s.points for s in sets]).reshape(-1, 2))
        assert marks.labels.tolist() == [int(label) for s in sets for label in s.labels]
        assert marks.point_owners.tolist() == [s.instance + 1 for s in sets for _ in s.labels]
        boxes = [s for s in sets if s.box is not None]
        assert torch.equal(marks.boxes, torch.stack([s.box for s in boxes]) if boxes else torch.zeros(0, 4))  # type: ignore[misc]
        assert marks.box_owners.tolist() == [s.instance + 1 for s in boxes]
        # Each set's mask painted by its instance (a later instance over an earlier); nothing where no set answered.
        for index, s in enumerate(every):
            if s.kind == kind:
                painted = drawing.maps[panel] == s.instance + 1
                assert bool((painted <= masks[index]).all()) and bool((masks[index] <= (drawing.maps[panel] != NOTHING)).all())
        assert torch.equal(drawing.maps[panel] != NOTHING, masks[[i for i, s in enumerate(every) if s.kind == kind]].any(dim=0))
        assert set(drawing.maps[panel].unique().tolist()) <= {NOTHING, *range(1, len(target) + 1)}
    if corruption is None:  # the oracle is exact on clean squares: every panel is the ground truth
        truth = PROMPT_VIEW.truth(batch)
        assert truth is not None and all(torch.equal(panel, truth) for panel in drawing.maps)
        assert truth.unique().tolist() == [NOTHING, 1, 2] and drawing.prompts[0].labels.tolist() == [FOREGROUND] * 2


@pytest.fixture(scope="module")
def displaced() -> tuple[WorstImages, list[ImageScores], list[object]]:
    """The worst images of a promptable cell whose clicks a perturbation moved, and what the cell measured."""
    dataset, corruption = Squares(), REGISTRY.get("rotate+point_displacement", PRESET)
    runs = []
    for batch_size in (1, 2):  # as two processes would batch it
        settings = EvalSettings(task_of(), ("promptable_miou",), batch_size=batch_size, scored_images=CONSIDERED)
        clean, corrupted = (evaluate(Oracle(), dataset, c, 5, settings) for c in (None, corruption))  # type: ignore[arg-type]
        runs.append((clean, corrupted))
    scores = [ImageScores(clean.image_scores, corrupted.image_scores) for clean, corrupted in runs]
    worst = describe_worst(Oracle(), dataset, corruption, 5, scores[0], task=task_of(), metric="promptable_miou",  # type: ignore[arg-type]
                           seed=0, gamma_r=0.5)  # fmt: skip
    return worst, scores, [r for run in runs for r in run]


def test_a_promptable_cells_worst_images_carry_its_own_per_image_scores_and_prompts(displaced: tuple) -> None:
    worst, _, results = displaced
    clean, corrupted = results[0], results[1]
    assert worst.note is None and len(worst.images) == 2
    assert worst.class_names == ("no instance", "instance 1", "instance 2")
    for loss in worst.images:
        position = int(loss.sample_id.removeprefix("img"))
        # The table's numbers are the cell's per-image scores: the statistics the gate resamples, per image.
        for result, shown in ((clean, loss.clean_score), (corrupted, loss.corrupted_score)):
            rows = result.statistics["promptable_miou"]
            assert shown == pytest.approx(float(PromptableMIoU.score_of(rows[position])), abs=1e-9)
        assert loss.panels == ("points", "box") and loss.clean_prediction.shape == (2, 64, 64)
        # The prompts drawn are the corrupted batch's, as the cell asked them: moved, then displaced.
        batch = one_image(task_of(), position, "rotate+point_displacement")
        assert torch.equal(loss.corrupted_prompts[0].points, torch.cat([s.points for s in asked(batch, "points")]))
        assert torch.equal(loss.corrupted_prompts[1].boxes, torch.stack([s.box for s in asked(batch, "box")]))  # type: ignore[misc]
        assert not torch.equal(loss.corrupted_prompts[0].points, loss.clean_prompts[0].points)
        assert loss.moved_truth is not None and torch.equal(loss.moved_truth, PROMPT_VIEW.truth(batch))  # type: ignore[arg-type]
    assert worst.images[0].drop >= worst.images[1].drop > 0


def test_the_pictures_do_not_depend_on_the_batching_nor_on_the_process(displaced: tuple) -> None:
    worst, scores, _ = displaced
    assert scores[0] == scores[1]
    # Another process: its own task, model and clean pictures, its cell measured in batches of two.
    again = describe_worst(Oracle(), Squares(), REGISTRY.get("rotate+point_displacement", PRESET), 5, scores[1],  # type: ignore[arg-type]
                           task=task_of(), metric="promptable_miou", seed=0, gamma_r=0.5, clean_views=CleanViews())  # fmt: skip
    assert again == worst


def test_promptable_pictures_round_trip_through_a_shards_json_and_draw_the_same(displaced: tuple) -> None:
    worst = displaced[0]
    run = RunPictures(worst={"prompted::oracle::rotate+point_displacement[5]": worst})
    back = RunPictures.from_json(json.loads(json.dumps(run.to_json(), allow_nan=False)))
    assert back.worst == run.worst and back.worst[next(iter(run.worst))].images[0].clean_prompts
    first, second = (render_worst(w, "oracle") for w in (worst, next(iter(back.worst.values()))))
    assert first is not None and second is not None and first.tobytes() == second.tobytes()


def test_a_format_1_image_reads_back_without_panels_and_broken_panels_are_refused(displaced: tuple) -> None:
    loss = displaced[0].images[0]
    plain = ImageLoss(loss.sample_id, 1.0, 0.5, 0.5, loss.clean_image, loss.corrupted_image, loss.clean_prediction[0],
                      loss.corrupted_prediction[0], loss.truth, None)  # fmt: skip
    old = plain.to_json()  # format 1 had no panels and wrote the same keys
    assert ImageLoss.from_json(old) == plain and "panels" not in old["pictures"]
    assert WorstImages.from_json({**WorstImages("rotate", 5, None, 2, "mIoU", ()).to_json(), "format": 1}).images == ()
    broken = loss.to_json()
    broken["pictures"]["clean_prediction"] = broken["pictures"]["clean_prediction"][:1]
    with pytest.raises(PicturesFormatError, match="2 panels"):
        ImageLoss.from_json(broken)
    marks = loss.to_json()
    marks["pictures"]["clean_prompts"][0]["labels"] = [1, 1, 1]
    with pytest.raises(PicturesFormatError, match="prompt marks: 2 points, 3 labels"):
        ImageLoss.from_json(marks)


def colours_of(picture: PILImage.Image) -> set[tuple[int, int, int]]:
    return {colour for _, colour in picture.getcolors(maxcolors=1 << 20)}  # type: ignore[union-attr]


def test_the_picture_draws_the_clicks_by_label_and_the_boxes_over_a_column_per_prompt_kind(displaced: tuple) -> None:
    worst = displaced[0]
    names = worst.class_names
    drawn = render_losses(worst.images, names, metric="mIoU", title="t")
    without = [
        ImageLoss(**{**loss.__dict__, "clean_prompts": (), "corrupted_prompts": ()}) for loss in worst.images
    ]
    bare = render_losses(without, names, metric="mIoU", title="t")
    one_panel = [
        ImageLoss(**{**loss.__dict__, "panels": (), "clean_prompts": (), "corrupted_prompts": (),
                     "clean_prediction": loss.clean_prediction[0], "corrupted_prediction": loss.corrupted_prediction[0]})
        for loss in worst.images
    ]  # fmt: skip
    # Two more columns than a picture with one prediction; the clicks' green only where prompts are drawn.
    assert drawn.size[0] - render_losses(one_panel, names, metric="mIoU", title="t").size[0] >= 2 * 64
    assert (40, 220, 60) in colours_of(drawn) and (40, 220, 60) not in colours_of(bare)


class ErrorsView(PictureView):
    """A plugin's view of semantic predictions: the classes, and beside them the pixels predicted wrong."""

    def prediction(self, batch: Batch, predictions: object) -> Drawing:
        predicted, truth = class_maps(predictions)[0], self.truth(batch)
        wrong = torch.where((predicted != truth) & (truth != NOTHING), predicted, NOTHING)
        return Drawing(torch.stack([predicted, wrong]), ("classes", "errors"))

    def truth(self, batch: Batch) -> torch.Tensor:
        return truth_maps(batch)[0]  # type: ignore[index]


def test_the_search_draws_whatever_view_a_task_declares() -> None:
    task = type("ErrorsTask", (SemanticTask,), {"picture_view": ErrorsView()})()
    model = adapt_model(RedBinner(smoothing=1), get_task("semantic"), device=torch.device("cpu"))
    dataset, noise = BandScenes(size=3, height=20, width=20), REGISTRY.get("gaussian_noise")
    settings = EvalSettings(task, ("miou",), scored_images=CONSIDERED)
    clean, corrupted = (evaluate(model, dataset, c, 5, settings) for c in (None, noise))  # type: ignore[arg-type]
    worst = describe_worst(model, dataset, noise, 5, ImageScores(clean.image_scores, corrupted.image_scores),
                           task=task, metric="miou", seed=0, gamma_r=0.5)  # fmt: skip
    assert worst.images and all(loss.panels == ("classes", "errors") for loss in worst.images)
    for loss in worst.images:
        classes, errors = loss.corrupted_prediction
        assert loss.truth is not None and torch.equal(errors != NOTHING, (classes != loss.truth) & (loss.truth != NOTHING))
    assert render_worst(worst, "binner") is not None
