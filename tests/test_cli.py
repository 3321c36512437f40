from __future__ import annotations

import itertools

import pytest

from pytest_segrobust.cli import main
from pytest_segrobust.corruptions import DEFAULT_PRESET, PRESETS, Modality
from pytest_segrobust.suite.catalogue import family_of


def test_list_prints_every_corruption_with_category_and_five_rows(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list", "--preset", "coco-p"]) == 0
    out = capsys.readouterr().out
    assert "preset coco-p (default)" in out
    assert "  gaussian_noise  [noise, photometric]" in out
    assert "  rotate  [camera, geometric]" in out
    assert "    s1: std=0.08" in out and "    s5: std=0.38" in out
    assert "    s5: radius=10, alias_blur=0.5" in out
    assert "not implemented yet" not in out  # coco-p is complete
    for name in ("impulse_noise", "zoom_blur", "pixelate", "shear", "translate", "darkness", "fog", "snow"):
        assert f"  {name}  [" in out


def test_list_starts_with_the_default_preset_then_the_others_by_name(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list"]) == 0
    headers = [line.split(":")[0] for line in capsys.readouterr().out.splitlines() if line.startswith("preset ")]
    # The image family comes first; the presets of the other families follow under theirs.
    image = sorted(name for name, p in PRESETS.items() if p.corruptions[0].modality is Modality.VISUAL)
    others = [name for name in image if name != DEFAULT_PRESET]
    assert headers[: len(image)] == [f"preset {DEFAULT_PRESET} (default)", *(f"preset {name}" for name in others)]
    # A preset is listed under every other family it has a member of (coco-p-prompts: image and prompt).
    elsewhere = [
        f"preset {name}"
        for name, preset in PRESETS.items()
        for _ in {family_of(c.category) for c in preset.corruptions if c.modality is not Modality.VISUAL}
    ]
    assert sorted(headers[len(image) :]) == sorted(elsewhere)


def test_list_names_prints_one_name_per_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list", "--names", "--preset", "imagenet-c"]) == 0
    assert capsys.readouterr().out.splitlines() == list(PRESETS["imagenet-c"].corruption_names)
    # Every preset: each name once, the default preset's first and in its order.
    assert main(["list", "--names"]) == 0
    names = capsys.readouterr().out.splitlines()
    assert names[: len(PRESETS[DEFAULT_PRESET].corruption_names)] == list(PRESETS[DEFAULT_PRESET].corruption_names)
    assert len(names) == len(set(names)) and {"spatter", "rotate"} <= set(names)
    assert main(["list", "--names", "--preset", "nope"]) == 2
    assert "unknown preset 'nope'" in capsys.readouterr().err


def test_unknown_preset_is_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list", "--preset", "nope"]) == 2
    assert "unknown preset 'nope'" in capsys.readouterr().err


def test_gallery_writes_a_labelled_grid(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    import numpy as np
    from PIL import Image

    from pytest_segrobust.corruptions import REGISTRY

    source = tmp_path / "in.png"
    Image.fromarray(np.random.default_rng(0).integers(0, 256, (60, 90, 3), dtype=np.uint8)).save(source)
    out = tmp_path / "gallery.png"
    assert main(["gallery", str(source), "--out", str(out), "--size", "48"]) == 0
    grid = Image.open(out)
    shown = len(REGISTRY.available("coco-p"))
    assert f"wrote {out}: {shown} corruptions of coco-p at severities 1, 3, 5" in capsys.readouterr().out
    # 48x32 tiles, 4 columns (clean + 3 severities) in each of 2 blocks, one row per corruption pair
    assert grid.height >= (shown // 2) * 32 and grid.width >= 2 * 4 * 48
    first = main(["gallery", str(source), "--out", str(tmp_path / "again.png"), "--size", "48"])
    assert first == 0 and Image.open(tmp_path / "again.png").tobytes() == grid.tobytes()  # deterministic


def test_gallery_of_an_unreadable_image_is_an_error(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.png"
    bad.write_text("not an image")
    assert main(["gallery", str(bad), "--out", str(tmp_path / "g.png")]) == 2
    assert "bad.png: cannot read the image" in capsys.readouterr().err


def test_version_names_the_installed_package_and_torch(capsys: pytest.CaptureFixture[str]) -> None:
    import importlib.metadata

    import torch

    from pytest_segrobust.cli import main

    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    expected = f"segrobust {importlib.metadata.version('pytest-segrobust')} (torch {torch.__version__})"
    assert capsys.readouterr().out.strip() == expected


CALIBRATED = """\
name: noise
dataset: {factory: pytest_segrobust.data.demo:demo_dataset, kwargs: {split: val}}
models: [{name: net, factory: pytest_segrobust.models.demo:tiny_unet}]
corruptions: [rotate]
severities: [3]
limit: 4
batch_size: 2
gate: {margin: {gamma_r: %s, score: %s}}
"""


def test_calibrate_measures_each_cells_noise_and_names_a_margin_below_it(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "suites").mkdir()
    suite = tmp_path / "suites" / "noise.yaml"
    suite.write_text(CALIBRATED % (0.0001, 0.0001))  # next to no room (0 is refused): autocast's bfloat16 moves the numbers more
    assert main(["calibrate", str(suite), "--rootdir", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "noise: cpu, batch 2" in out and "noise: cpu, batch 1" in out and "noise: cpu, batch 4" in out
    rows = {line.split()[0]: line for line in out.splitlines() if line.startswith("  net::")}
    assert sorted(rows) == ["net::clean", "net::rotate::3"]
    noise = float(rows["net::rotate::3"].split()[2])
    assert noise > 0 and "autocast" in rows["net::rotate::3"]
    assert "warning: noise::net::rotate::3: numeric noise" in out and "gate.margin" in out
    # The last line is the verdict, naming each margin the noise reaches, where and by how much.
    last = out.splitlines()[-1]
    assert last.startswith("FAIL · 2 cells: the numeric noise reaches gate.margin.")
    assert "gate.margin.gamma_r 0.0001 in 1 of 1 cell (largest ±" in last and "noise::net::rotate::3)" in last


def test_calibrate_verdict_names_each_margin_the_noise_reaches_or_passes(tmp_path) -> None:
    from pytest_segrobust.engine.calibrate import CellNoise, calibration_verdict
    from pytest_segrobust.store.baselines import CellKey
    from pytest_segrobust.suite.schema import load_suite

    (tmp_path / "noise.yaml").write_text(CALIBRATED % (0.01, 0.5))
    suite = load_suite(tmp_path / "noise.yaml")
    clean = CellNoise(CellKey("noise", "net", "clean", 0), 70.0, None, 0.02, 0.0, "cpu, batch 1")
    rotate = CellNoise(CellKey("noise", "net", "rotate", 3), 60.0, 0.85, 0.7, 0.003, "cpu, batch 8, autocast")
    passed, line = calibration_verdict(suite, [clean, rotate])
    assert not passed
    assert line == (
        "FAIL · 2 cells: the numeric noise reaches gate.margin.score 0.5 in 1 of 2 cells "
        "(largest ±0.7, noise::net::rotate::3); an unchanged model can fail"
    )
    quiet = CellNoise(rotate.key, 60.0, 0.85, 0.1, 0.003, "cpu, batch 1")
    assert calibration_verdict(suite, [clean, quiet]) == (
        True,
        (
            "PASS · 2 cells: every margin stands above the numeric noise: gate.margin.score 0.5 (largest noise ±0.1), "
            "gate.margin.gamma_r 0.01 (largest noise ±0.003)"
        ),
    )
    broken = CellNoise(rotate.key, 60.0, 0.85, 0.1, float("inf"), "cpu, batch 1")  # gamma_r became NaN somewhere
    assert "gate.margin.gamma_r 0.01 in 1 of 1 cell" in calibration_verdict(suite, [clean, broken])[1]


def test_calibrate_refuses_a_severity_out_of_range(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    suite = tmp_path / "noise.yaml"
    suite.write_text(CALIBRATED % (0.01, 1.0))
    assert main(["calibrate", str(suite), "--severities", "7"]) == 2
    assert "--severities: expected severities 1..5, got 7" in capsys.readouterr().err


def _spectrogram_tile(grid, row: int, column: int, width: int = 64, height: int = 40, columns: int = 6):  # type: ignore[no-untyped-def]
    """Tile (row, column) of a one-block gallery: the tiles end at the right edge, below the header."""
    pad, header = 4, max(16, height // 8)
    left = grid.shape[1] - pad - (columns - column) * (width + pad)
    top = header + row * (height + pad)
    return grid[top : top + height, left : left + width]


def test_gallery_of_acoustic_perturbations_draws_the_demo_clips_sound_as_spectrograms(
    tmp_path, capsys: pytest.CaptureFixture[str]
) -> None:
    import numpy as np
    from PIL import Image

    out = tmp_path / "sound.png"
    args = ["gallery", "--preset", "avs-acoustic", "--corruptions", "low_pass", "time_mask", "--size", "64"]
    assert main([*args, "--out", str(out)]) == 0
    said = capsys.readouterr().out
    assert "2 corruptions of avs-acoustic at severities 1, 2, 3, 4, 5: spectrograms of demo-avs/val/0000" in said
    grid = np.asarray(Image.open(out).convert("RGB"))
    tiles = [[_spectrogram_tile(grid, row, column) for column in range(6)] for row in range(2)]
    assert np.array_equal(tiles[0][0], tiles[1][0]) and tiles[0][0].mean() < 200  # the clean sound, in both rows
    for row in tiles:  # clean, then levels 1..5: each level draws another picture than the one before
        assert all(not np.array_equal(a, b) for a, b in itertools.pairwise(row[1:]))
        assert not np.array_equal(row[0], row[5])
    # low_pass: the upper half of the spectrum (high frequencies) darkens as the cutoff falls
    upper = [float(tile[:20].mean()) for tile in tiles[0]]
    assert upper[5] < upper[3] < upper[1]
    # (the same tiles at every call: tests/test_suite_pictures.py, without the demo clip's cost)


def test_gallery_names_an_unknown_perturbation_and_refuses_an_image_for_sound(
    tmp_path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = str(tmp_path / "g.png")
    assert main(["gallery", "--preset", "avs-acoustic", "--corruptions", "gain", "hiss", "--out", out]) == 2
    err = capsys.readouterr().err
    assert "--corruptions: no 'hiss' in preset avs-acoustic; it has audio_gaussian_noise, background_noise" in err
    assert main(["gallery", str(tmp_path / "in.png"), "--preset", "avs-acoustic", "--out", out]) == 2
    assert "act on sound" in capsys.readouterr().err
    assert main(["gallery", "--out", out]) == 2
    assert "IMAGE: the corruptions of coco-p act on images" in capsys.readouterr().err
    assert not (tmp_path / "g.png").exists()
