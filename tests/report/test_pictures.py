"""The report's pictures, drawn from measured values: worst-image overlays, the gallery, bounded plots."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from pytest_segrobust.corruptions import REGISTRY
from pytest_segrobust.engine.evaluation import EvalSettings, evaluate
from pytest_segrobust.engine.suite_pictures import describe_frames
from pytest_segrobust.engine.worst_images import CONSIDERED, ImageScores, describe_worst
from pytest_segrobust.models.adapters import adapt_model
from pytest_segrobust.pictures.values import GalleryTiles, WorstImages
from pytest_segrobust.report import (
    FrameKept,
    ImageDrop,
    WorstEntry,
    build_report,
    plots,
    render_markdown,
    suite_sections,
    write_report,
)
from pytest_segrobust.report.gallery import render_gallery
from pytest_segrobust.report.overlays import NOTHING, overlay, palette, render_worst
from pytest_segrobust.tasks import get_task
from tests.fakes import BandScenes, RedBinner
from tests.report.test_report import SCORES_A, SCORES_B, cells

# -- drawing the measured values -------------------------------------------------------------


def test_overlay_blends_classes_and_leaves_other_pixels() -> None:
    image = torch.full((3, 1, 2), 100, dtype=torch.uint8)
    colours = palette(3)
    assert colours[:3] == [(0, 0, 0), (128, 0, 0), (0, 128, 0)]
    shown = overlay(image, torch.tensor([[1, NOTHING]]), colours)
    assert shown.getpixel((1, 0)) == (100, 100, 100)
    assert shown.getpixel((0, 0))[0] > 100 > shown.getpixel((0, 0))[1]


def binner_model() -> object:
    return adapt_model(RedBinner(smoothing=1), get_task("semantic"), device=torch.device("cpu"))


def rotated_worst() -> WorstImages:
    model, dataset, rotate = binner_model(), BandScenes(size=3, height=20, width=30), REGISTRY.get("rotate")
    settings = EvalSettings.of("semantic", ["miou"], scored_images=CONSIDERED)
    clean, rotated = evaluate(model, dataset, None, 0, settings), evaluate(model, dataset, rotate, 5, settings)
    scores = ImageScores(clean.image_scores, rotated.image_scores)
    return describe_worst(model, dataset, rotate, 5, scores, task=get_task("semantic"), metric="miou", seed=0, gamma_r=0.5)


def test_worst_cell_picture_shows_moved_ground_truth_for_geometric_corruptions() -> None:
    worst = rotated_worst()
    picture = render_worst(worst, "binner")
    assert picture is not None
    # 6 tiles of 128 x 85 (the longest side of 30 x 20 enlarged to SMALLEST_TILE) beside the row labels.
    assert picture.size[0] > 6 * 128 and picture.size[1] > 3 * 85
    assert picture.size[0] < 6 * 256  # small images are not enlarged further
    # Drawn from the value alone: after a trip through JSON, the same picture.
    again = render_worst(WorstImages.from_json(json.loads(json.dumps(worst.to_json()))), "binner")
    assert again is not None and again.tobytes() == picture.tobytes()
    assert render_worst(WorstImages("fog", 1, 0.5, 3, "mIoU", ("a",), note="no pictures: none"), "binner") is None


def test_the_gallery_lays_out_the_tiles_it_is_given() -> None:
    g = torch.Generator().manual_seed(0)

    def tile() -> np.ndarray:
        return torch.randint(0, 256, (20, 30, 3), generator=g, dtype=torch.uint8).numpy()

    names = ("fog", "rotate", "translate")
    tiles = GalleryTiles(names, (1, 3, 5), tile(), tuple((tile(), tile(), tile()) for _ in names))
    grid = render_gallery(tiles)
    # Two blocks of rows (2 and 1 corruptions), each a label then four tiles of 30 x 20.
    assert grid.size[1] == 16 + 2 * (20 + 4) + 4
    pixels = np.asarray(grid)
    found = [(y, x) for y in range(grid.size[1] - 19) for x in range(grid.size[0] - 29)
             if np.array_equal(pixels[y : y + 20, x : x + 30], tiles.tiles[2][2])]  # fmt: skip
    assert len(found) == 1  # translate at severity 5, pasted as given
    assert Image.fromarray(pixels).size == grid.size


# -- the report with its pictures --------------------------------------------------------------


def test_pictures_are_written_linked_and_explained(tmp_path: Path) -> None:
    report = build_report(cells("a", 80.0, SCORES_A) + cells("b", 75.0, SCORES_B), {})
    frames = describe_frames([REGISTRY.get("rotate")], 32, 32, [1, 5], 0, "x")
    assert frames is not None
    report = report.with_suite("s", frame_kept=FrameKept.from_json(frames))
    report = report.with_suite(
        "s",
        worst_images={
            "a": WorstEntry(
                "gaussian_noise", 5, 0.5, 16, (ImageDrop("img/3", 81.0, 12.5, 68.5),), figure="worst-a"
            ),
            "b": WorstEntry("gaussian_noise", 5, 0.27, 16, note="no pictures: Thing has no class view to draw"),
        },
    )
    worst = rotated_worst()
    done = write_report(report, tmp_path / "out", pictures={"s": {"worst-a": worst}})
    report, written = done.report, done.files
    assert tmp_path / "out-figures" / "s-worst-a.png" in written
    # Drawn by the report from the value, titled with the row that names the figure.
    drawn = render_worst(worst, "a")
    assert drawn is not None and Image.open(tmp_path / "out-figures" / "s-worst-a.png").tobytes() == drawn.tobytes()
    markdown = render_markdown(report)
    assert "### Images whose score fell most in each model's worst cell" in markdown
    assert "| a | gaussian_noise s5 | 0.500 | img/3 | 81.00 | 12.50 | -68.50 |" in markdown
    assert "b: no pictures: Thing has no class view to draw" in markdown
    assert "![a: images that lost most under gaussian_noise s5](out-figures/s-worst-a.png)" in markdown
    assert "clean image | clean prediction | corrupted image" in markdown
    assert "### How much of the frame geometric corruptions keep" in markdown
    titles = [section.title for section in suite_sections(report.suites["s"])]
    assert titles.index("Images whose score fell most in each model's worst cell") < titles.index("Baseline comparison")
    assert (
        json.loads((tmp_path / "out.json").read_text())["suites"]["s"]["figures"]["worst-a"]
        == "out-figures/s-worst-a.png"
    )


def test_a_value_that_cannot_be_drawn_is_a_warning_not_a_failure(tmp_path: Path) -> None:
    report = build_report(cells("a", 80.0, SCORES_A), {})
    worst = rotated_worst()
    first = worst.images[0]
    broken = type(first)(**{**first.__dict__, "clean_prediction": torch.zeros(2, 2, dtype=torch.int64)})
    bad = WorstImages(**{**worst.__dict__, "images": (broken,)})
    report = report.with_suite("s", worst_images={"a": WorstEntry.of(bad, "worst-a")})
    tiles = GalleryTiles(("fog",), (1,), np.zeros((4, 4, 3), np.uint8), ((np.zeros((4, 4, 3), np.uint8),),))
    done = write_report(report, tmp_path / "out", galleries={"s": tiles}, pictures={"s": {"worst-a": bad}})
    report, written = done.report, done.files
    assert tmp_path / "out-figures" / "s-gallery.png" in written
    assert tmp_path / "out-figures" / "s-worst-a.png" not in written
    assert any(w.startswith("figure worst-a of suite s not drawn: RuntimeError") for w in report.warnings)
    assert "worst-a" not in report.suites["s"].figures and "gallery" in report.suites["s"].figures


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
