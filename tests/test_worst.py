"""A cell's worst images, measured: selection, numbers, and the clean side shared by a model's cells."""

from __future__ import annotations

import pytest
import torch

from pytest_segrobust.corruptions import REGISTRY
from pytest_segrobust.engine.worst_images import CleanViews, describe_worst, worst_images
from pytest_segrobust.models.adapters import adapt_model
from pytest_segrobust.pictures.values import WorstImages
from pytest_segrobust.pictures.views import NoClassView
from pytest_segrobust.tasks import get_task
from tests.fakes import BandScenes, RedBinner


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


def test_worst_images_are_the_images_that_fell_most_worst_first() -> None:
    dataset = BandScenes(size=6, height=24, width=24)
    noise = REGISTRY.get("gaussian_noise")
    losses = worst_images(binner_model(), dataset, noise, 5, task="semantic", metric="miou", seed=0, shown=2)
    assert len(losses) == 2 and losses[0].drop >= losses[1].drop > 0
    assert losses[0].clean_score == pytest.approx(100.0)  # the binner is exact on clean images
    assert losses[0].clean_image.shape == (3, 24, 24) and losses[0].clean_image.dtype == torch.uint8
    assert losses[0].moved_truth is None  # noise moves nothing
    # The same images and scores whatever else is asked: they are the suite's own draws.
    again = worst_images(binner_model(), dataset, noise, 5, task="semantic", metric="miou", seed=0, shown=6)
    assert again[:2] == losses
    assert (
        worst_images(binner_model(), dataset, noise, 5, task="semantic", metric="miou", seed=0, limit=1)[0].sample_id
        == "bands/0"
    )


def test_a_geometric_cell_keeps_the_moved_ground_truth() -> None:
    dataset = BandScenes(size=3, height=20, width=30)
    worst = describe_worst(
        binner_model(),
        dataset,
        REGISTRY.get("rotate"),
        5,
        task="semantic",
        metric="miou",
        seed=0,
        limit=None,
        gamma_r=0.5,
    )
    assert worst.considered == 3 and worst.corruption == "rotate" and len(worst.images) == 3 and worst.note is None
    assert worst.metric_label == "mIoU" and worst.class_names == tuple(dataset.class_names)
    first = worst.images[0]
    assert first.moved_truth is not None and first.truth is not None and not torch.equal(first.truth, first.moved_truth)
    info = worst.info()
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
        worst = describe_worst(
            Opaque(), BandScenes(size=2), REGISTRY.get("gaussian_noise"), 1, task="semantic", metric="miou",
            seed=0, limit=None, gamma_r=0.9,
        )  # fmt: skip
    finally:
        views.class_maps.register(torch.Tensor, original)
    assert worst.images == () and worst.info()["images"] == [] and "no class view" in worst.info()["note"]


def test_no_defined_score_is_a_note() -> None:
    class Blank(BandScenes):
        """Every pixel ignored: no image has a defined mIoU."""

        def __getitem__(self, index: int):  # type: ignore[no-untyped-def]
            sample = super().__getitem__(index)
            assert sample.target is not None
            sample.target.mask.fill_(self.ignore_index)
            return sample

    worst = describe_worst(
        binner_model(), Blank(size=2), REGISTRY.get("gaussian_noise"), 1, task="semantic", metric="miou",
        seed=0, limit=None, gamma_r=None,
    )  # fmt: skip
    assert worst.images == ()
    assert worst.note == "no pictures: no image among the first 2 has a defined mIoU clean and corrupted"


def test_shared_clean_views_give_the_evidence_of_a_fresh_search_and_predict_clean_images_once() -> None:
    dataset = BandScenes(size=5, height=24, width=24)
    cells = [("gaussian_noise", 5), ("rotate", 3), ("translate", 1), ("gaussian_noise", 2)]
    network = CountingBinner()
    model, views = binner_model(network), CleanViews()
    shared = [
        describe_worst(model, dataset, REGISTRY.get(name), severity, task="semantic", metric="miou", seed=3,
                       limit=4, gamma_r=0.5, clean_views=views)
        for name, severity in cells
    ]  # fmt: skip
    # 4 clean images once, then 4 corrupted ones per cell.
    assert network.images == 4 + 4 * len(cells) and views.computed() == 4
    fresh = [
        describe_worst(binner_model(), dataset, REGISTRY.get(name), severity, task="semantic", metric="miou", seed=3,
                       limit=4, gamma_r=0.5)
        for name, severity in cells
    ]  # fmt: skip
    assert shared == fresh and all(worst.images for worst in shared)
    # Another model, or another dataset, has clean images of its own.
    describe_worst(
        binner_model(), BandScenes(size=5, height=24, width=24), REGISTRY.get("rotate"), 1, task="semantic",
        metric="miou", seed=3, limit=2, gamma_r=None, clean_views=views,
    )  # fmt: skip
    assert views.computed() == 6
    views.clear()
    assert views.computed() == 0


def test_evidence_survives_json() -> None:
    worst = describe_worst(
        binner_model(), BandScenes(size=3, height=20, width=30), REGISTRY.get("rotate"), 4, task="semantic",
        metric="miou", seed=0, limit=None, gamma_r=0.25,
    )  # fmt: skip
    import json

    assert WorstImages.from_json(json.loads(json.dumps(worst.to_json()))) == worst
