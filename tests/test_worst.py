"""A cell's worst images: picked from the evaluation's own per-image scores, drawn without a second pass."""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from pytest_segrobust.core.prompts import PromptSet
from pytest_segrobust.corruptions import REGISTRY, Corruption
from pytest_segrobust.data.base import SegmentationDataset
from pytest_segrobust.engine.evaluation import EvalSettings, evaluate
from pytest_segrobust.engine.worst_images import (
    CONSIDERED,
    CleanViews,
    ImagePick,
    ImageScores,
    describe_worst,
    pick_worst,
    worst_images,
)
from pytest_segrobust.metrics import METRICS, MetricContext
from pytest_segrobust.metrics.promptable import PromptableMIoU
from pytest_segrobust.models.adapters import adapt_model
from pytest_segrobust.pictures.values import WorstImages
from pytest_segrobust.pictures.views import NoClassView
from pytest_segrobust.randomness.seeding import sample_seed
from pytest_segrobust.report import WorstEntry
from pytest_segrobust.tasks import get_task
from tests.fakes import BandScenes, RedBinner
from tests.test_tasks_promptable import Oracle, Squares


class CountingBinner(RedBinner):
    """The binner, counting the images it is asked to predict."""

    def __init__(self) -> None:
        super().__init__(smoothing=1)
        self.images = 0

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        self.images += images.shape[0]
        return super().forward(images)


def binner_model(network: torch.nn.Module | None = None) -> object:
    return adapt_model(network or RedBinner(smoothing=1), get_task("semantic"), device=torch.device("cpu"))


def scores_of(
    model: object,
    dataset: SegmentationDataset,
    corruption: Corruption,
    severity: int,
    *,
    seed: int = 0,
    limit: int | None = None,
    batch_size: int = 4,
) -> ImageScores:
    """The cell's first images' own scores, as the suite's evaluations record them."""
    settings = EvalSettings.of(
        "semantic", ["miou"], seed=seed, limit=limit, batch_size=batch_size, scored_images=CONSIDERED
    )
    clean = evaluate(model, dataset, None, 0, settings)
    return ImageScores(clean.image_scores, evaluate(model, dataset, corruption, severity, settings).image_scores)


def describe(model: object, dataset: SegmentationDataset, name: str, severity: int, **options: object) -> WorstImages:
    corruption = REGISTRY.get(name)
    seed = int(options.pop("seed", 0))  # type: ignore[call-overload]
    limit = options.pop("limit", None)
    scores = scores_of(model, dataset, corruption, severity, seed=seed, limit=limit)  # type: ignore[arg-type]
    return describe_worst(
        model, dataset, corruption, severity, scores, task=get_task("semantic"), metric="miou", seed=seed, **options
    )  # type: ignore[arg-type]


def alone(
    model: object, dataset: SegmentationDataset, position: int, corruption: Corruption | None, severity: int
) -> float:
    """What the report used to measure: the image collated, corrupted, predicted and scored on its own."""
    task = get_task("semantic")
    sample = dataset[position]
    batch = task.collate([sample], [position], dataset, torch.device("cpu"))
    if corruption is not None:
        batch = corruption(batch, severity, [sample_seed(0, sample.sample_id, corruption.name, severity)])
    scorer = METRICS.get("miou")(MetricContext.of(dataset, torch.device("cpu")))
    scorer.update(task.check_predictions(task.predict(model, batch), batch), batch)
    return float(scorer.compute().score)


def test_the_evaluation_scores_its_first_images_each_on_its_own_whatever_the_batch() -> None:
    dataset, noise, model = BandScenes(size=6, height=24, width=24), REGISTRY.get("gaussian_noise"), binner_model()
    by_batch = {size: scores_of(model, dataset, noise, 5, batch_size=size) for size in (1, 4, 16)}
    expected = ImageScores(
        tuple(alone(model, dataset, p, None, 0) for p in range(6)),
        tuple(alone(model, dataset, p, noise, 5) for p in range(6)),
    )
    for scores in by_batch.values():
        assert scores == expected  # bit for bit: the numbers the report shows
    assert scores_of(model, dataset, noise, 5, limit=2).considered == 2
    default = evaluate(model, dataset, None, 0, EvalSettings.of("semantic", ["miou"]))
    assert default.image_scores == ()  # only asked for where the report's pictures are measured


def test_worst_images_are_the_images_that_fell_most_worst_first() -> None:
    dataset = BandScenes(size=6, height=24, width=24)
    model = binner_model()
    worst = describe(model, dataset, "gaussian_noise", 5, gamma_r=0.5, shown=2)
    losses = worst.images
    assert len(losses) == 2 and losses[0].drop >= losses[1].drop > 0 and worst.considered == 6
    assert losses[0].clean_score == pytest.approx(100.0)  # the binner is exact on clean images
    assert losses[0].clean_image.shape == (3, 24, 24) and losses[0].clean_image.dtype == torch.uint8
    assert losses[0].moved_truth is None  # noise moves nothing
    # The same images and scores whatever else is asked: they are the suite's own draws.
    again = describe(model, dataset, "gaussian_noise", 5, gamma_r=0.5, shown=6).images
    assert again[:2] == losses
    assert describe(model, dataset, "gaussian_noise", 5, gamma_r=0.5, limit=1).images[0].sample_id == "bands/0"


def test_picks_come_from_the_scores_alone_and_only_the_picked_images_are_run_again() -> None:
    dataset = BandScenes(size=8, height=24, width=24)
    network = CountingBinner()
    model = binner_model(network)
    noise = REGISTRY.get("gaussian_noise")
    scores = scores_of(model, dataset, noise, 5)
    assert network.images == 2 * 8  # the clean and the corrupted evaluation, one pass each
    picks = pick_worst(scores, higher_is_better=True, shown=3)
    worst = describe_worst(model, dataset, noise, 5, scores, task=get_task("semantic"), metric="miou", seed=0, gamma_r=0.5)
    # Only the three picked images, clean and corrupted: no second pass over the eight.
    assert network.images == 2 * 8 + 2 * 3
    assert [loss.sample_id for loss in worst.images] == [f"bands/{pick.position}" for pick in picks]
    assert [(loss.clean_score, loss.corrupted_score, loss.drop) for loss in worst.images] == [
        (pick.clean_score, pick.corrupted_score, pick.drop) for pick in picks
    ]


def test_picks_pass_over_undefined_scores_keep_the_earlier_of_equal_drops_and_follow_the_direction() -> None:
    nan = math.nan
    scores = ImageScores((90.0, nan, 80.0, 70.0, 60.0, 50.0), (40.0, 10.0, 30.0, 20.0, nan, 45.0, 99.0))
    picks = pick_worst(scores, higher_is_better=True, shown=3)
    # Drops: 50, undefined, 50, 50, undefined, 5; the seventh corrupted score has no clean one.
    assert [pick.position for pick in picks] == [0, 2, 3]
    assert picks[0] == ImagePick(0, 90.0, 40.0, 50.0) and scores.considered == 6
    assert [pick.position for pick in pick_worst(scores, higher_is_better=False, shown=6)] == [5, 0, 2, 3]
    assert pick_worst(ImageScores((nan,), (1.0,)), higher_is_better=True) == []


def test_a_geometric_cell_keeps_the_moved_ground_truth() -> None:
    dataset = BandScenes(size=3, height=20, width=30)
    worst = describe(binner_model(), dataset, "rotate", 5, gamma_r=0.5)
    assert worst.considered == 3 and worst.corruption == "rotate" and len(worst.images) == 3 and worst.note is None
    assert worst.metric_label == "mIoU" and worst.class_names == tuple(dataset.class_names)
    first = worst.images[0]
    assert first.moved_truth is not None and first.truth is not None and not torch.equal(first.truth, first.moved_truth)
    info = WorstEntry.of(worst).to_json()  # what the report's JSON says of the cell
    assert list(info) == ["corruption", "severity", "gamma_r", "considered", "images"]
    assert info["images"][0] == {
        "sample_id": first.sample_id,
        "clean": first.clean_score,
        "corrupted": first.corrupted_score,
        "drop": first.drop,
    }


def test_a_task_without_class_view_gets_a_note_not_an_error() -> None:
    class Opaque:
        device = torch.device("cpu")
        task = "semantic"

        def predict(self, images: torch.Tensor) -> torch.Tensor:
            return torch.zeros(images.shape[0], *images.shape[-2:], dtype=torch.int64)

        def fingerprint(self) -> str:
            return "opaque"

    from pytest_segrobust.pictures import views

    def refuse(value: object) -> list[torch.Tensor]:
        raise NoClassView("Tensor has no class view to draw")

    original = views.class_maps.registry[torch.Tensor]
    views.class_maps.register(torch.Tensor, refuse)
    try:
        worst = describe(Opaque(), BandScenes(size=2), "gaussian_noise", 1, gamma_r=0.9)
    finally:
        views.class_maps.register(torch.Tensor, original)
    assert worst.images == () and worst.note is not None and "no class view" in worst.note


def test_no_defined_score_is_a_note() -> None:
    class Blank(BandScenes):
        """Every pixel ignored: no image has a defined mIoU."""

        def __getitem__(self, index: int):  # type: ignore[no-untyped-def]
            sample = super().__getitem__(index)
            assert sample.target is not None
            sample.target.mask.fill_(self.ignore_index)
            return sample

    worst = describe(binner_model(), Blank(size=2), "gaussian_noise", 1, gamma_r=None)
    assert worst.images == ()
    assert worst.note == "no pictures: no image among the first 2 has a defined mIoU clean and corrupted"


def test_shared_clean_views_give_the_evidence_of_a_fresh_search_and_predict_clean_images_once() -> None:
    dataset = BandScenes(size=5, height=24, width=24)
    cells = [("gaussian_noise", 5), ("rotate", 3), ("translate", 1), ("gaussian_noise", 2)]
    network = CountingBinner()
    model, views = binner_model(network), CleanViews()
    scores = {cell: scores_of(model, dataset, REGISTRY.get(cell[0]), cell[1], seed=3, limit=4) for cell in cells}
    network.images = 0
    shared = [
        describe_worst(model, dataset, REGISTRY.get(name), severity, scores[name, severity], task=get_task("semantic"),
                       metric="miou", seed=3, gamma_r=0.5, clean_views=views, shown=2)
        for name, severity in cells
    ]  # fmt: skip
    picked = {pick.position for cell in cells for pick in pick_worst(scores[cell], higher_is_better=True, shown=2)}
    # Each picked image predicted clean once, whichever cells picked it, and two corrupted ones per cell.
    assert network.images == len(picked) + 2 * len(cells) and views.computed() == len(picked) < 2 * len(cells)
    fresh = [
        worst_images(binner_model(), dataset, REGISTRY.get(name), severity,
                     pick_worst(scores[name, severity], higher_is_better=True, shown=2), task=get_task("semantic"), seed=3)
        for name, severity in cells
    ]  # fmt: skip
    assert [worst.images for worst in shared] == [tuple(losses) for losses in fresh] and all(fresh)
    # Another model, or another dataset, has clean images of its own.
    other = BandScenes(size=5, height=24, width=24)
    worst_images(binner_model(), other, REGISTRY.get("rotate"), 1, [ImagePick(0, 1.0, 0.0, 1.0)], task=get_task("semantic"),
                 seed=3, clean_views=views)  # fmt: skip
    assert views.computed() == len(picked) + 1
    views.clear()
    assert views.computed() == 0


def test_evidence_survives_json() -> None:
    worst = describe(binner_model(), BandScenes(size=3, height=20, width=30), "rotate", 4, gamma_r=0.25)
    assert WorstImages.from_json(json.loads(json.dumps(worst.to_json()))) == worst


# -- a run: the cells measured, then their pictures -----------------------------------------

BUILT: list[CountingBinner] = []


def counting_binner() -> CountingBinner:
    """A suite's model factory that keeps what it built, for the test to count its predictions."""
    BUILT.append(CountingBinner())
    return BUILT[-1]


RUN_SUITE = """\
name: bands
dataset: {factory: tests.fakes:band_scenes, kwargs: {size: 10, height: 24, width: 24}}
models:
  - {name: binner, factory: tests.test_worst:counting_binner}
corruptions: [gaussian_noise, rotate]
severities: [1, 5]
batch_size: 4
"""


@contextlib.contextmanager
def suite_runner(tmp_path: Path, name: str, text: str) -> Iterator[tuple[Any, Any]]:
    """A cell runner in ``tmp_path`` and the suite ``text`` it loaded from ``suites/<name>.yaml``; closed after."""
    from pytest_segrobust.engine.runner import CellRunner
    from pytest_segrobust.runtime.options import Options

    (tmp_path / "suites").mkdir()
    (tmp_path / "suites" / f"{name}.yaml").write_text(text)
    options = Options(True, False, tmp_path / "suites", tmp_path / "baselines", tmp_path / "report")
    runner = CellRunner(options, tmp_path)
    try:
        yield runner, runner.load(tmp_path / "suites" / f"{name}.yaml")
    finally:
        runner.close()


def test_a_runs_worst_images_run_the_model_on_the_picked_images_alone(tmp_path: Path) -> None:
    from pytest_segrobust.store.baselines import CellKey

    BUILT.clear()
    with suite_runner(tmp_path, "bands", RUN_SUITE) as (runner, suite):
        cells = [("clean", 0), ("gaussian_noise", 1), ("gaussian_noise", 5), ("rotate", 1), ("rotate", 5)]
        for name, severity in cells:
            runner.measure(suite, CellKey("bands", "binner", name, severity), f"bands::binner::{name}[{severity}]")
        (network,) = BUILT
        assert network.images == 10 * len(cells)  # one pass per cell, the clean one included
        pictures = runner.pictures()
    (worst,) = pictures.worst.values()
    assert len(worst.images) == 3 and worst.considered == 10
    # The three picked images, clean and corrupted, and nothing else: the picks came from the cells' passes.
    assert network.images == 10 * len(cells) + 2 * 3


# -- a promptable run: the picked images asked as the suite asked them -----------------------


class RecordingOracle(Oracle):
    """The promptable oracle, keeping each call's images, prompt sets and answers."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[torch.Tensor, list[list[PromptSet]], list[Any]]] = []

    def predict(self, images: torch.Tensor, prompts: Any) -> list[Any]:
        answers = super().predict(images, prompts)
        self.calls.append((images, prompts, answers))
        return answers


ORACLES: list[RecordingOracle] = []


def recording_oracle() -> RecordingOracle:
    """A suite's model factory that keeps what it built, for the test to read its calls."""
    ORACLES.append(RecordingOracle())
    return ORACLES[-1]


PROMPTED_SUITE = """\
name: prompted
task: promptable
preset: coco-p-prompts
prompts: {points: {count: 2, where: random}}
seed: 7
dataset: {factory: tests.test_tasks_promptable:Squares}
models:
  - {name: oracle, factory: tests.test_worst:recording_oracle}
corruptions: [point_displacement]
severities: [5]
batch_size: 2
"""


def test_a_promptable_runs_worst_images_are_asked_with_the_suites_prompt_protocol(tmp_path: Path) -> None:
    from pytest_segrobust.engine.plan import Plan
    from pytest_segrobust.store.baselines import CellKey

    ORACLES.clear()
    with suite_runner(tmp_path, "prompted", PROMPTED_SUITE) as (runner, suite):
        runner.measure(suite, CellKey("prompted", "oracle", "clean", 0), "prompted::oracle::clean[0]")
        key = CellKey("prompted", "oracle", "point_displacement", 5)
        cell = runner.measure(suite, key, "prompted::oracle::point_displacement[5]")
        (oracle,) = ORACLES
        measured = len(oracle.calls)
        assert measured == 2  # one batch of both images per cell
        pictures = runner.pictures()
    # Each picked image, asked again clean and corrupted, with the suite's prompt sets (two random clicks
    # drawn with the suite's seed, no box), not the default protocol's (one centre click and the box).
    again = oracle.calls[measured:]
    (worst,) = pictures.worst.values()
    assert len(again) == 2 * len(worst.images) == 4
    dataset = Squares()
    task = Plan.of(suite).task
    results = cell.result
    assert results is not None
    for loss, clean_call, corrupted_call in zip(worst.images, again[::2], again[1::2]):
        (position,) = [p for p, sample in enumerate(dataset.samples) if torch.equal(clean_call[0][0], sample.image / 255.0)]
        assert loss.sample_id == dataset.samples[position].sample_id
        for (_, asked, _), (_, prompts, _) in zip(oracle.calls[:measured], (clean_call, corrupted_call)):  # the cells' batches
            assert [s.kind for s in prompts[0]] == [s.kind for s in asked[position]] == ["points", "points"]
            assert all(torch.equal(a.points, b.points) for a, b in zip(prompts[0], asked[position]))
        # Scored as the cell scored them, the answers give the image's own scores in the cell, which the pictures show.
        batch = task.collate([dataset[position]], [position], dataset, torch.device("cpu"))  # type: ignore[arg-type]
        for (_, _, answers), expected, shown in (
            (clean_call, results.clean.image_scores, loss.clean_score),
            (corrupted_call, results.corrupted.image_scores, loss.corrupted_score),
        ):
            scorer = PromptableMIoU(MetricContext(dataset.class_names, dataset.ignore_index))
            scorer.update(task.check_predictions(answers, batch), batch)  # the clicks moved, the masks did not
            assert scorer.compute().score == pytest.approx(expected[position], abs=1e-9) == shown
    assert worst.images[0].drop > 0 and worst.images[0].panels == ("points",)
    position = int(worst.images[0].sample_id.removeprefix("img"))
    assert results.corrupted.image_scores[position] < results.clean.image_scores[position]
