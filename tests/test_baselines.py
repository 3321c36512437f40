from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_segrobust.baselines import (
    BaselineFile,
    CellKey,
    Check,
    Conditions,
    compare,
    read_baseline,
    write_baseline,
)
from pytest_segrobust.errors import BaselineError

CLEAN = CellKey("demo", "m", "clean", 0)
NOISE3 = CellKey("demo", "m", "gaussian_noise", 3)
ROTATE1 = CellKey("demo", "m", "rotate", 1)
CONDITIONS = Conditions(
    task="semantic",
    metric="miou",
    preset="coco-p",
    seed=0,
    limit=None,
    dataset="bands-8",
    severity_tables={"gaussian_noise": ("std=0.08",) * 5, "rotate": ("degrees=20",) * 5},
)


def test_write_then_lookup_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "b" / "demo.json"
    write_baseline(path, "demo", CONDITIONS, [(CLEAN, {"score": 90.0}), (NOISE3, {"score": 60.0, "gamma_r": 2 / 3})], False)
    stored = BaselineFile(path)
    assert stored.lookup(CLEAN, CONDITIONS) == {"score": 90.0}
    assert stored.lookup(NOISE3, CONDITIONS) == {"score": 60.0, "gamma_r": 2 / 3}  # floats round-trip exactly
    assert stored.lookup(ROTATE1, CONDITIONS) is None
    assert sorted(p.name for p in path.parent.iterdir()) == ["demo.json"]  # no temporary left behind
    assert json.loads(path.read_text())["conditions"] == CONDITIONS.to_json()


def test_partial_write_keeps_other_cells(tmp_path: Path) -> None:
    path = tmp_path / "demo.json"
    write_baseline(path, "demo", CONDITIONS, [(CLEAN, {"score": 90.0}), (NOISE3, {"score": 60.0})], False)
    write_baseline(path, "demo", CONDITIONS, [(NOISE3, {"score": 61.0})], False)
    assert read_baseline(path).models == {"m": {"clean": {"score": 90.0}, "gaussian_noise": {"3": {"score": 61.0}}}}


def test_partial_write_under_other_conditions_drops_what_they_invalidate(tmp_path: Path) -> None:
    path = tmp_path / "demo.json"
    cells = [(CLEAN, {"score": 90.0}), (NOISE3, {"score": 60.0}), (ROTATE1, {"score": 70.0})]
    write_baseline(path, "demo", CONDITIONS, cells, False)
    # A new noise table invalidates the stored noise cells only.
    tables = dict(CONDITIONS.severity_tables) | {"gaussian_noise": ("std=0.1",) * 5}
    write_baseline(path, "demo", replace(CONDITIONS, severity_tables=tables), [(CLEAN, {"score": 91.0})], False)
    assert read_baseline(path).models == {"m": {"clean": {"score": 91.0}, "rotate": {"1": {"score": 70.0}}}}
    # A new seed invalidates every stored cell.
    write_baseline(path, "demo", replace(CONDITIONS, seed=1), [(NOISE3, {"score": 59.0})], False)
    assert read_baseline(path).models == {"m": {"gaussian_noise": {"3": {"score": 59.0}}}}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"seed": 1}, "seed: baseline 0, this run 1"),
        ({"metric": "map", "task": "instance"}, "task: baseline 'semantic', this run 'instance'; metric: baseline 'miou'"),
        ({"limit": 4}, "limit: baseline None, this run 4"),
        ({"dataset": "bands-9"}, "dataset: baseline 'bands-8', this run 'bands-9'"),
        ({"preset": "imagenet-c"}, "preset: baseline 'coco-p', this run 'imagenet-c'"),
    ],
)
def test_other_conditions_are_an_error_naming_the_field(tmp_path: Path, change: dict, message: str) -> None:
    path = tmp_path / "demo.json"
    write_baseline(path, "demo", CONDITIONS, [(CLEAN, {"score": 90.0})], False)
    with pytest.raises(BaselineError, match="recorded under other conditions") as error:
        BaselineFile(path).lookup(CLEAN, replace(CONDITIONS, **change))
    assert message in str(error.value) and "--segrobust-update-baselines" in str(error.value)


def test_a_changed_severity_table_fails_only_that_corruptions_cells(tmp_path: Path) -> None:
    path = tmp_path / "demo.json"
    write_baseline(path, "demo", CONDITIONS, [(CLEAN, {"score": 90.0}), (NOISE3, {"score": 60.0}), (ROTATE1, {"score": 1.0})], False)
    tables = dict(CONDITIONS.severity_tables) | {"gaussian_noise": ("std=0.08", "std=0.12", "std=0.2", "std=0.26", "std=0.38")}
    now = replace(CONDITIONS, severity_tables=tables)
    stored = BaselineFile(path)
    assert stored.lookup(CLEAN, now) == {"score": 90.0}
    assert stored.lookup(ROTATE1, now) == {"score": 1.0}
    with pytest.raises(BaselineError, match=r"severity_tables.gaussian_noise: severity 2 was 'std=0.08', this run 'std=0.12'"):
        stored.lookup(NOISE3, now)


def test_broken_file_is_an_error_that_names_it(tmp_path: Path) -> None:
    path = tmp_path / "demo.json"
    path.write_text("{ not json")
    with pytest.raises(BaselineError, match=rf"{path}: broken baseline file .*--segrobust-update-baselines"):
        BaselineFile(path).lookup(CLEAN, CONDITIONS)
    path.write_text('{"models": {}}')
    with pytest.raises(BaselineError, match="baseline of format None, expected 2"):
        read_baseline(path)


def valid_document() -> dict:
    return {
        "format": 2,
        "suite": "demo",
        "conditions": CONDITIONS.to_json(),
        "models": {"m": {"clean": {"score": 90.0}, "gaussian_noise": {"3": {"score": 60.0, "gamma_r": 0.66}}}},
    }


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d.update(format=1), "format 1, expected 2 (format 1 recorded no conditions"),
        (lambda d: d["models"]["m"]["clean"].update(score="91.2"), "models.m.clean.score: expected a number, got '91.2'"),
        (lambda d: d["models"]["m"]["clean"].update(score=True), "models.m.clean.score: expected a number, got True"),
        (lambda d: d["models"]["m"]["gaussian_noise"]["3"].update(gamma_r=math.nan), "models.m.gaussian_noise.3.gamma_r is nan"),
        (lambda d: d["models"]["m"]["clean"].update(score=math.inf), "models.m.clean.score is inf"),
        (lambda d: d["models"].update(m=[]), "models.m: expected a mapping of corruptions"),
        (lambda d: d["models"]["m"].update(gaussian_noise=[1]), "models.m.gaussian_noise: expected a mapping of severities"),
        (lambda d: d["models"]["m"]["gaussian_noise"].update({"7": {"score": 1.0}}), "expected severities '1'..'5', got '7'"),
        (lambda d: d["models"]["m"].update(clean={}), "models.m.clean: expected a mapping with at least 'score'"),
        (lambda d: d["conditions"].update(seed="0"), "conditions.seed: expected a int, got '0'"),
        (lambda d: d.pop("conditions"), "'conditions' must be a mapping, got None"),
    ],
)
def test_a_wrongly_shaped_file_is_an_error_naming_the_entry(tmp_path: Path, edit, message: str) -> None:
    path = tmp_path / "demo.json"
    document = valid_document()
    edit(document)
    path.write_text(json.dumps(document))  # json writes NaN and Infinity, as a hand edit might
    with pytest.raises(BaselineError) as error:
        read_baseline(path)
    assert message in str(error.value) and str(path) in str(error.value)
    assert "--segrobust-update-baselines" in str(error.value)


def test_replace_all_rewrites_a_broken_file(tmp_path: Path) -> None:
    path = tmp_path / "demo.json"
    path.write_text("{ not json")
    write_baseline(path, "demo", CONDITIONS, [(CLEAN, {"score": 1.0})], replace_all=True)
    assert json.loads(path.read_text())["models"] == {"m": {"clean": {"score": 1.0}}}


def test_a_baseline_never_stores_nan(tmp_path: Path) -> None:
    path = tmp_path / "demo.json"
    with pytest.raises(ValueError, match="refusing to store non-finite values"):
        write_baseline(path, "demo", CONDITIONS, [(CLEAN, {"score": math.nan})], False)
    assert not path.exists()


def test_checks_mark_regressions_and_improvements() -> None:
    checks = compare({"score": 58.5, "gamma_r": 0.80}, {"score": 60.0, "gamma_r": 0.75}, {"score": 1.0, "gamma_r": 0.01})
    by_metric = {c.metric: c for c in checks}
    assert by_metric["score"].regressed and by_metric["score"].delta == pytest.approx(-1.5)
    assert by_metric["gamma_r"].improved and not by_metric["gamma_r"].regressed
    within = Check("score", 59.5, 60.0, 1.0)
    assert not within.regressed and not within.improved


@pytest.mark.parametrize(("observed", "stored"), [(math.nan, 60.0), (60.0, math.nan), (math.inf, 60.0), (60.0, -math.inf)])
def test_a_non_finite_number_on_either_side_is_always_a_regression(observed: float, stored: float) -> None:
    check = Check("score", observed, stored, 100.0)
    assert check.regressed and not check.improved
    assert "not a finite number" in check.problem
