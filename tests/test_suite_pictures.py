"""A suite's pictures measured on its first image: the gallery's tiles and the frame kept."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pytest_segrobust.corruptions import REGISTRY
from pytest_segrobust.corruptions.functional import to_uint8
from pytest_segrobust.engine.suite_pictures import describe_frames, frame_kept, gallery_tiles, suite_pictures
from pytest_segrobust.pictures.values import SuitePictures
from pytest_segrobust.randomness.seeding import sample_seed
from pytest_segrobust.report import tables
from pytest_segrobust.report.model import FrameKept

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
    table = tables.frame_kept(FrameKept.from_json(frames))  # the report's typed leaf, as the report builds it
    assert table.header == ("corruption", "s1", "s5", "depends on image size", "parameters")
    assert table.rows[1] == ("translate", "47%", "0%", "yes: constants in pixels", "pixels=20 … pixels=100")


def test_a_mirroring_warp_keeps_the_whole_frame() -> None:
    elastic = REGISTRY.get("elastic_transform", "imagenet-c")
    assert frame_kept(elastic, 32, 48, [1, 5], seed=0, sample_id="x") == [1.0, 1.0]
    assert describe_frames([REGISTRY.get("gaussian_noise")], 32, 32, [1], 0, "x") is None


# -- the gallery's tiles ----------------------------------------------------------------------


def image(height: int = 40, width: int = 60) -> torch.Tensor:
    return torch.randint(0, 256, (3, height, width), generator=torch.Generator().manual_seed(3), dtype=torch.uint8)


def test_tiles_are_corrupted_at_full_size_with_the_suites_draw_then_shrunk() -> None:
    noise, rotate = REGISTRY.get("gaussian_noise"), REGISTRY.get("rotate")
    tiles = gallery_tiles(image(), [noise, rotate], seed=7, sample_id="img/0", tile=30)
    assert tiles.corruptions == ("gaussian_noise", "rotate") and tiles.severities == (1, 3, 5)
    assert tiles.clean.shape == (20, 30, 3) and tiles.clean.dtype == np.uint8
    assert all(tile.shape == (20, 30, 3) for row in tiles.tiles for tile in row) and len(tiles.tiles[1]) == 3
    # At full size (no tile), a tile is exactly the image the suite's cell corrupts for this sample.
    full = gallery_tiles(image(), [noise], severities=[5], seed=7, sample_id="img/0")
    batch = image()[None].float() / 255.0
    expected = to_uint8(noise(batch, 5, [sample_seed(7, "img/0", "gaussian_noise", 5)])[0])
    assert np.array_equal(full.tiles[0][0], expected.permute(1, 2, 0).numpy())
    assert np.array_equal(full.clean, image().permute(1, 2, 0).numpy())
    # A small image is never enlarged.
    assert gallery_tiles(image(), [noise], tile=500).clean.shape == (40, 60, 3)


def test_suite_pictures_hold_gallery_and_frame_table_and_name_what_failed() -> None:
    rotate = REGISTRY.get("rotate")
    pictures = suite_pictures("s", image(), "img/0", [rotate], severities=[1, 5], seed=0, tile=32)
    assert pictures.warnings == () and pictures.gallery is not None
    assert pictures.frame_kept == describe_frames([rotate], 40, 60, [1, 5], 0, "img/0")
    assert SuitePictures.from_json(pictures.to_json()) == pictures

    class Broken:
        name = "broken"
        geometric = True

        def __call__(self, *args: object) -> object:
            raise RuntimeError("no")

    failed = suite_pictures("s", image(), "img/0", [Broken()], severities=[1], seed=0)  # type: ignore[list-item]
    assert failed.gallery is None and failed.frame_kept is None
    assert failed.warnings == (
        "no gallery for suite s: RuntimeError: no",
        "no frame table for suite s: RuntimeError: no",
    )


# -- spectrograms of sound --------------------------------------------------------------------


def test_a_full_scale_sine_reads_0_db_in_its_bin_and_silence_the_floor() -> None:
    from pytest_segrobust.engine.suite_pictures import log_spectrogram, spectrogram_picture

    rate, hz = 16000, 1000.0  # bin 32 of a 512-point FFT at 16 kHz
    wave = torch.sin(2 * torch.pi * hz * torch.arange(rate, dtype=torch.float64) / rate)[None]
    decibels = log_spectrogram(wave)
    middle = decibels[:, decibels.shape[1] // 2]
    assert decibels.shape[0] == 257 and int(middle.argmax()) == 32
    assert float(middle[32]) == pytest.approx(0.0, abs=0.01)
    assert float(middle[100]) < -80.0
    assert float(log_spectrogram(torch.zeros(1, rate)).max()) == pytest.approx(-240.0)
    picture = spectrogram_picture(decibels, (40, 25))
    assert picture.shape == (25, 40, 3) and picture.dtype == np.uint8
    row = 24 - round(32 / 256 * 24)  # the tone's row, counted from the top (high frequencies first)
    assert picture[row - 1 : row + 2].mean() > picture[:5].mean()  # the tone is lighter than the silent top


def test_spectrogram_tiles_show_each_level_alike_at_every_call() -> None:
    from pytest_segrobust.engine.suite_pictures import spectrogram_tiles
    from pytest_segrobust.tasks import get_task
    from tests.av_fakes import listed_audio_clips

    dataset = listed_audio_clips(3)
    batch = get_task("avs").collate([dataset[0]], [0], dataset, torch.device("cpu"))
    chosen = [REGISTRY.get(name, "avs-acoustic") for name in ("gain", "background_noise")]
    tiles = spectrogram_tiles(batch, chosen, seed=4, sample_id="av000", tile=32)
    assert tiles.corruptions == ("gain", "background_noise") and tiles.severities == (1, 2, 3, 4, 5)
    assert tiles.clean.shape == (20, 32, 3)
    for row in tiles.tiles:
        assert not any(np.array_equal(tiles.clean, tile) for tile in row)
    assert spectrogram_tiles(batch, chosen, seed=4, sample_id="av000", tile=32) == tiles
    assert spectrogram_tiles(batch, chosen, seed=5, sample_id="av000", tile=32) != tiles
