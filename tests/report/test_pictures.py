"""The report's pictures: frame kept by geometric corruptions, worst-image overlays, bounded plots."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from PIL import Image

from pytest_segrobust.corruptions import REGISTRY
from pytest_segrobust.models.adapters import adapt_model
from pytest_segrobust.models.base import InstancePredictions, PanopticPredictions
from pytest_segrobust.report import build_report, plots, render_markdown, suite_sections, tables, write_report
from pytest_segrobust.report.frame import describe_frames, frame_kept
from pytest_segrobust.report.overlays import (
    NOTHING,
    NoClassView,
    class_map,
    class_maps,
    describe_worst,
    overlay,
    palette,
    worst_images,
)
from pytest_segrobust.tasks import get_task
from pytest_segrobust.types import InstanceMasks, InstanceTarget, PanopticMap, PanopticTarget, SemanticMask
from tests.fakes import BandScenes, RedBinner
from tests.report.test_report import SCORES_A, SCORES_B, cells

# -- frame kept -------------------------------------------------------------------------------


def test_translation_keeps_less_of_a_smaller_frame_and_is_flagged_in_pixels() -> None:
    corruptions = [REGISTRY.get(name) for name in ("gaussian_noise", "rotate", "translate")]
    frames = describe_frames(corruptions, 64, 64, [5, 1], seed=0, sample_id="x")
    assert frames is not None and frames["severities"] == [1, 5]
    assert list(frames["corruptions"]) == ["rotate", "translate"]  # photometric ones keep the whole frame
    translate = frames["corruptions"]["translate"]
    # 20 px off each axis of 64: (44/64)^2; 100 px leaves nothing.
    assert translate["kept"] == pytest.approx([(44 / 64) ** 2, 0.0])
    assert translate["in_pixels"]
    rotate = frames["corruptions"]["rotate"]
    assert 0.8 < rotate["kept"][0] < 0.95 and not rotate["in_pixels"]
    table = tables.frame_kept(frames)
    assert table.header == ("corruption", "s1", "s5", "depends on image size", "parameters")
    assert table.rows[1] == ("translate", "47%", "0%", "yes: constants in pixels", "pixels=20 … pixels=100")


def test_a_mirroring_warp_keeps_the_whole_frame() -> None:
    elastic = REGISTRY.get("elastic_transform", "imagenet-c")
    assert frame_kept(elastic, 32, 48, [1, 5], seed=0, sample_id="x") == [1.0, 1.0]
    assert describe_frames([REGISTRY.get("gaussian_noise")], 32, 32, [1], 0, "x") is None


# -- class views and overlays ---------------------------------------------------------------


def test_class_views_of_every_built_in_target_and_prediction() -> None:
    mask = SemanticMask(torch.tensor([[[0, 255], [2, 1]]]), ignore_index=255)
    assert class_maps(mask)[0].tolist() == [[0, NOTHING], [2, 1]]
    masks = torch.tensor([[[True, True], [False, False]], [[False, True], [False, False]]])
    instances = InstanceMasks((InstanceTarget.from_masks(masks, torch.tensor([1, 3])),), 2, 2)
    assert class_maps(instances)[0].tolist() == [[1, 3], [NOTHING, NOTHING]]
    # Predicted instances: below SHOWN_SCORE left out, the most confident painted on top.
    predicted = InstancePredictions(masks, torch.tensor([1, 3]), torch.tensor([0.9, 0.6]))
    assert class_map(predicted).tolist() == [[1, 1], [NOTHING, NOTHING]]
    weak = InstancePredictions(masks, torch.tensor([1, 3]), torch.tensor([0.2, 0.6]))
    assert class_maps([weak])[0].tolist() == [[NOTHING, 3], [NOTHING, NOTHING]]
    segments = torch.tensor([[0, 7], [9, 9]])
    panoptic = PanopticPredictions(segments, torch.tensor([7, 9]), torch.tensor([2, 4]))
    assert class_map(panoptic).tolist() == [[NOTHING, 2], [4, 4]]
    target = PanopticMap((PanopticTarget(segments, torch.tensor([7, 9]), torch.tensor([2, 4]), torch.tensor([False, False])),))
    assert class_maps(target)[0].tolist() == [[NOTHING, 2], [4, 4]]
    with pytest.raises(NoClassView, match="str has no class view"):
        class_maps("nope")


def test_overlay_blends_classes_and_leaves_other_pixels() -> None:
    image = torch.full((3, 1, 2), 100, dtype=torch.uint8)
    colours = palette(3)
    assert colours[:3] == [(0, 0, 0), (128, 0, 0), (0, 128, 0)]
    shown = overlay(image, torch.tensor([[1, NOTHING]]), colours)
    assert shown.getpixel((1, 0)) == (100, 100, 100)
    assert shown.getpixel((0, 0))[0] > 100 > shown.getpixel((0, 0))[1]


def binner_model() -> object:
    return adapt_model(RedBinner(smoothing=1), get_task("semantic"), device=torch.device("cpu"))


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
    assert [loss.to_json() for loss in again[:2]] == [loss.to_json() for loss in losses]
    assert worst_images(binner_model(), dataset, noise, 5, task="semantic", metric="miou", seed=0, limit=1)[0].sample_id == "bands/0"


def test_worst_cell_picture_shows_moved_ground_truth_for_geometric_corruptions() -> None:
    dataset = BandScenes(size=3, height=20, width=30)
    info, picture = describe_worst(
        binner_model(), dataset, REGISTRY.get("rotate"), 5, task="semantic", metric="miou", label="mIoU",
        seed=0, limit=None, row="binner", gamma_r=0.5,
    )
    assert info["considered"] == 3 and info["corruption"] == "rotate" and len(info["images"]) == 3
    assert picture is not None
    # 6 tiles of 128 x 85 (the longest side of 30 x 20 enlarged to SMALLEST_TILE) beside the row labels.
    assert picture.size[0] > 6 * 128 and picture.size[1] > 3 * 85
    assert picture.size[0] < 6 * 256  # small images are not enlarged further


def test_a_task_without_class_view_gets_a_note_not_an_error() -> None:
    class Opaque:
        device = torch.device("cpu")
        task = "semantic"

        def predict(self, images: torch.Tensor) -> torch.Tensor:
            return torch.zeros(images.shape[0], *images.shape[-2:], dtype=torch.int64)

        def fingerprint(self) -> str:
            return "opaque"

    import pytest_segrobust.report.overlays as overlays

    def refuse(value: object) -> list[torch.Tensor]:
        raise NoClassView("Tensor has no class view to draw")

    original = overlays.class_maps.registry[torch.Tensor]
    overlays.class_maps.register(torch.Tensor, refuse)
    try:
        info, picture = describe_worst(
            Opaque(), BandScenes(size=2), REGISTRY.get("gaussian_noise"), 1, task="semantic", metric="miou",
            label="mIoU", seed=0, limit=None, row="m", gamma_r=0.9,
        )
    finally:
        overlays.class_maps.register(torch.Tensor, original)
    assert picture is None and info["images"] == [] and "no class view" in info["note"]


# -- the report with its pictures --------------------------------------------------------------


def test_pictures_are_written_linked_and_explained(tmp_path: Path) -> None:
    report = build_report(cells("a", 80.0, SCORES_A) + cells("b", 75.0, SCORES_B), {})
    suite = report["suites"]["s"]
    suite["frame_kept"] = describe_frames([REGISTRY.get("rotate")], 32, 32, [1, 5], 0, "x")
    suite["worst_images"] = {
        "a": {"corruption": "gaussian_noise", "severity": 5, "gamma_r": 0.5, "considered": 16, "figure": "worst-a",
              "images": [{"sample_id": "img/3", "clean": 81.0, "corrupted": 12.5, "drop": 68.5}]},
        "b": {"corruption": "gaussian_noise", "severity": 5, "gamma_r": 0.27, "considered": 16, "images": [],
              "note": "no pictures: Thing has no class view to draw"},
    }
    written = write_report(report, tmp_path / "out", pictures={"s": {"worst-a": Image.new("RGB", (8, 8))}})
    assert tmp_path / "out-figures" / "s-worst-a.png" in written
    markdown = render_markdown(report)
    assert "### Images whose score fell most in each model's worst cell" in markdown
    assert "| a | gaussian_noise s5 | 0.500 | img/3 | 81.00 | 12.50 | -68.50 |" in markdown
    assert "b: no pictures: Thing has no class view to draw" in markdown
    assert "![a: images that lost most under gaussian_noise s5](out-figures/s-worst-a.png)" in markdown
    assert "clean image | clean prediction | corrupted image" in markdown
    assert "### How much of the frame geometric corruptions keep" in markdown
    titles = [section.title for section in suite_sections(suite)]
    assert titles.index("Images whose score fell most in each model's worst cell") < titles.index("Baseline comparison")
    assert json.loads((tmp_path / "out.json").read_text())["suites"]["s"]["figures"]["worst-a"] == "out-figures/s-worst-a.png"


def test_severity_plot_stays_bounded_with_many_models(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    models = {f"model-{i}": cells(f"model-{i}", 80.0 - i, SCORES_A) for i in range(10)}
    path = plots.severity_plot(models, "mIoU", tmp_path / "severity.png")
    assert path is not None
    width, height = Image.open(path).size
    # Four panels a row, three rows: no wider than the cap, as tall as three panels.
    assert width <= plots.MAX_FIGURE[0] * 120 and height <= (3 * plots.PANEL_SIZE[1] + 1) * 120
    one = plots.severity_plot({"m": models["model-0"]}, "mIoU", tmp_path / "one.png")
    assert one is not None and Image.open(one).size[0] < 800  # one panel plus the legend, not 6 inches per model


def heatmap_norm(models: dict, path: Path, near_chance: list[str] | None = None) -> object:
    """The colour normalisation :func:`plots.heatmap` draws ``models`` with."""
    axes = pytest.importorskip("matplotlib.axes")
    seen: dict = {}
    axes_class = axes.Axes
    original = axes_class.imshow

    def spy(self: object, *args: object, **kwargs: object) -> object:
        seen.update(kwargs)
        return original(self, *args, **kwargs)

    axes_class.imshow = spy  # type: ignore[method-assign]
    try:
        assert plots.heatmap(models, path, near_chance=near_chance or []) is not None
    finally:
        axes_class.imshow = original  # type: ignore[method-assign]
    return seen["norm"]


def test_heatmap_scale_is_not_capped_at_one(tmp_path: Path) -> None:
    # Model b gains under rotate (gamma_r 1.2): it must not share the colour of "unchanged".
    gains = cells("b", 50.0, {("rotate", "camera", 1): 60.0, ("gaussian_noise", "noise", 1): 50.0})
    norm = heatmap_norm({"b": gains}, tmp_path / "heat.png", near_chance=["b"])
    # White at 1, as far towards blue at 1.2 as towards red at 0.8; nothing saturates at 1.
    assert norm(1.0) == pytest.approx(0.5) and norm(1.2) - 0.5 == pytest.approx(0.5 - norm(0.8))
    assert norm.vmin == pytest.approx(0.0) and norm.vmax == pytest.approx(2.0)
    # A near-chance model can triple its score: the scale reaches it instead of clipping.
    next(r for r in gains if r.corruption == "rotate").gamma_r = 3.0
    norm = heatmap_norm({"b": gains}, tmp_path / "heat.png")
    assert norm.vmin == pytest.approx(-1.0) and norm.vmax == pytest.approx(3.0)
