from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from pytest_segrobust.baselines import BaselineFile, CellKey, Check, compare, read_baseline, write_baseline
from pytest_segrobust.errors import BaselineError

CLEAN = CellKey("demo", "m", "clean", 0)
NOISE3 = CellKey("demo", "m", "gaussian_noise", 3)


def test_write_then_lookup_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "b" / "demo.json"
    write_baseline(path, "demo", "miou", [(CLEAN, {"score": 90.0}), (NOISE3, {"score": 60.0, "gamma_r": 2 / 3})], False)
    stored = BaselineFile(path)
    assert stored.lookup(CLEAN) == {"score": 90.0}
    assert stored.lookup(NOISE3) == {"score": 60.0, "gamma_r": 2 / 3}  # floats round-trip exactly
    assert stored.lookup(CellKey("demo", "m", "rotate", 1)) is None
    assert sorted(p.name for p in path.parent.iterdir()) == ["demo.json"]  # no temporary left behind


def test_partial_write_keeps_other_cells(tmp_path: Path) -> None:
    path = tmp_path / "demo.json"
    write_baseline(path, "demo", "miou", [(CLEAN, {"score": 90.0}), (NOISE3, {"score": 60.0})], False)
    write_baseline(path, "demo", "miou", [(NOISE3, {"score": 61.0})], False)
    assert read_baseline(path) == {"m": {"clean": {"score": 90.0}, "gaussian_noise": {"3": {"score": 61.0}}}}


def test_broken_file_is_an_error_that_names_it(tmp_path: Path) -> None:
    path = tmp_path / "demo.json"
    path.write_text("{ not json")
    with pytest.raises(BaselineError, match=rf"{path}: broken baseline file .*--segrobust-update-baselines"):
        BaselineFile(path).lookup(CLEAN)
    path.write_text('{"models": {}}')
    with pytest.raises(BaselineError, match="not a baseline of format 1"):
        read_baseline(path)


def test_replace_all_rewrites_a_broken_file(tmp_path: Path) -> None:
    path = tmp_path / "demo.json"
    path.write_text("{ not json")
    write_baseline(path, "demo", "miou", [(CLEAN, {"score": 1.0})], replace_all=True)
    assert json.loads(path.read_text())["models"] == {"m": {"clean": {"score": 1.0}}}


def test_checks_mark_regressions_and_improvements() -> None:
    checks = compare({"score": 58.5, "gamma_r": 0.80}, {"score": 60.0, "gamma_r": 0.75}, {"score": 1.0, "gamma_r": 0.01})
    by_metric = {c.metric: c for c in checks}
    assert by_metric["score"].regressed and by_metric["score"].delta == pytest.approx(-1.5)
    assert by_metric["gamma_r"].improved and not by_metric["gamma_r"].regressed
    within = Check("score", 59.5, 60.0, 1.0)
    assert not within.regressed and not within.improved


def test_nan_is_always_a_regression() -> None:
    assert Check("score", math.nan, 60.0, 100.0).regressed
