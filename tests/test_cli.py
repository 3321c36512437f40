from __future__ import annotations

import pytest

from pytest_segrobust.cli import main


def test_list_prints_every_corruption_with_category_and_five_rows(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list", "--preset", "coco-p"]) == 0
    out = capsys.readouterr().out
    assert "preset coco-p (default)" in out
    assert "  gaussian_noise  [noise, photometric]" in out
    assert "  rotate  [camera, geometric]" in out
    assert "    s1: std=0.08" in out and "    s5: std=0.38" in out
    assert "    s5: radius=10, alias_blur=0.5" in out
    assert "not implemented yet: impulse_noise" in out


def test_unknown_preset_is_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list", "--preset", "nope"]) == 2
    assert "unknown preset 'nope'" in capsys.readouterr().err
