"""The pictures' values: what crosses a process or a file comes back exactly."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from pytest_segrobust.pictures.values import (
    GalleryTiles,
    ImageLoss,
    PicturesFormatError,
    RunPictures,
    SuitePictures,
    WorstImages,
    pack_classes,
    unpack_classes,
)


def classes(high: int, seed: int = 0, shape: tuple[int, int] = (5, 7)) -> torch.Tensor:
    return torch.randint(-1, high, shape, generator=torch.Generator().manual_seed(seed))


def loss(index: int, high: int = 21, moved: bool = True, text: bool = False) -> ImageLoss:
    g = torch.Generator().manual_seed(index)
    return ImageLoss(
        sample_id=f"img/{index}",
        clean_score=81.25 + index / 3,
        corrupted_score=1 / 3,
        drop=80.0 + index / 7,
        clean_image=torch.randint(0, 256, (3, 5, 7), generator=g, dtype=torch.uint8),
        corrupted_image=torch.randint(0, 256, (3, 5, 7), generator=g, dtype=torch.uint8),
        clean_prediction=classes(high, index),
        corrupted_prediction=classes(high, index + 1),
        truth=classes(high, index + 2),
        moved_truth=classes(high, index + 3) if moved else None,
        clean_text="the dog on the left" if text else None,
        corrupted_text="teh dgo on the lfet" if text else None,
    )


def through_json(value: dict) -> dict:
    return json.loads(json.dumps(value, allow_nan=False))


@pytest.mark.parametrize("high", [21, 300, 70_000], ids=["8-bit", "16-bit", "npy"])
def test_class_maps_round_trip_whatever_their_ids(high: int) -> None:
    original = classes(high).numpy()
    original[0, 0] = high - 1
    back = unpack_classes(through_json(pack_classes(original)))
    assert back.dtype == np.int64 and np.array_equal(back, original)
    assert ("npy" in pack_classes(original)) == (high > 65_535)


def test_worst_images_round_trip_exactly() -> None:
    worst = WorstImages(
        corruption="rotate",
        severity=5,
        gamma_r=0.123456789,
        considered=16,
        metric_label="mIoU",
        class_names=("background", "cat"),
        images=(loss(0), loss(1, high=300, moved=False), loss(2, text=True)),
    )
    back = WorstImages.from_json(through_json(worst.to_json()))
    assert back == worst
    assert back.images[1].moved_truth is None and back.images[2].clean_text == "the dog on the left"
    assert back.images[0].clean_image.dtype == torch.uint8 and back.images[0].truth.dtype == torch.int64  # type: ignore[union-attr]
    # Equality looks at the arrays: one pixel apart is another value.
    changed = loss(0)
    changed.clean_prediction[0, 0] += 1
    assert WorstImages(**{**worst.__dict__, "images": (changed, *worst.images[1:])}) != worst


def test_a_cell_without_pictures_round_trips_with_its_note() -> None:
    worst = WorstImages("fog", 1, None, 4, "mIoU", ("a",), note="no pictures: Thing has no class view to draw")
    assert WorstImages.from_json(through_json(worst.to_json())) == worst


def test_another_format_is_refused() -> None:
    data = WorstImages("fog", 1, None, 4, "mIoU", ("a",)).to_json()
    with pytest.raises(PicturesFormatError, match="format 99"):
        WorstImages.from_json({**data, "format": 99})
    broken = WorstImages("fog", 1, 0.5, 4, "mIoU", ("a",), images=(loss(0),)).to_json()
    broken["images"][0]["pictures"]["clean_image"] = "bm90IGEgcG5n"
    with pytest.raises(PicturesFormatError, match="not a packed PNG"):
        WorstImages.from_json(broken)


def test_suite_pictures_round_trip_exactly() -> None:
    g = torch.Generator().manual_seed(1)

    def tile() -> np.ndarray:
        return torch.randint(0, 256, (6, 9, 3), generator=g, dtype=torch.uint8).numpy()

    gallery = GalleryTiles(("fog", "rotate"), (1, 3, 5), tile(), ((tile(), tile(), tile()), (tile(), tile(), tile())))
    frames = {"size": [6, 9], "severities": [1], "corruptions": {"rotate": {"kept": [0.5], "in_pixels": False}}}
    pictures = SuitePictures(gallery, frames, ("no frame table for suite s: boom",))
    back = SuitePictures.from_json(through_json(pictures.to_json()))
    assert back == pictures and back.gallery is not None and back.gallery.tiles[1][2].dtype == np.uint8
    other = GalleryTiles(gallery.corruptions, gallery.severities, gallery.clean, (gallery.tiles[0], gallery.tiles[0]))
    assert other != gallery
    assert SuitePictures.from_json(through_json(SuitePictures(None, None).to_json())) == SuitePictures(None, None)


def test_run_pictures_keep_a_suites_gallery_whichever_process_came_first() -> None:
    # A shard run with --segrobust-figures=none sends its suites' frame tables without a gallery.
    frames = {"size": [6, 9], "severities": [1], "corruptions": {}}
    tile = np.zeros((6, 9, 3), dtype=np.uint8)
    drawn = RunPictures(suites={"s": SuitePictures(GalleryTiles(("fog",), (1,), tile, ((tile,),)), frames)})
    bare = RunPictures(suites={"s": SuitePictures(None, frames)}, left_out={"s.yaml::m::fog[1]": "2/2"})
    for first, second in ((drawn, bare), (bare, drawn)):
        merged = RunPictures()
        merged.absorb(RunPictures.from_json(through_json(first.to_json())))
        merged.absorb(RunPictures.from_json(through_json(second.to_json())))
        assert merged.suites == drawn.suites and merged.left_out == {"s.yaml::m::fog[1]": "2/2"}
    older = bare.to_json()
    del older["left_out"]  # pictures from before the field: nothing was left out on purpose
    assert RunPictures.from_json(through_json(older)).left_out == {}
