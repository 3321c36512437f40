"""R2-Bench's video tables: clean, static, dynamic and temporal rows, drops recomputed from the cells."""

from __future__ import annotations

import json

import pytest

from pytest_segrobust.report.video import mode_of, video_entry, video_tables
from pytest_segrobust.store.records import CellRecord


def record(model: str, corruption: str, category: str, severity: int, j: float, f: float) -> CellRecord:
    clean_j, clean_f = 80.0, 70.0
    details = {"j_mean": j, "j_recall": j / 100, "j_decay": 1.0, "f_mean": f, "f_recall": f / 100, "f_decay": 2.0}
    clean_details = {key: value for key, value in details.items()} | {"j_mean": clean_j, "f_mean": clean_f}
    return CellRecord(
        nodeid=f"v.yaml::{model}::{corruption}::{severity}",
        suite="v",
        model=model,
        corruption=corruption,
        category=category,
        severity=severity,
        score=(j + f) / 2,
        clean_score=(clean_j + clean_f) / 2,
        gamma_r=None,
        gamma_a=None,
        per_class=[],
        class_names=[],
        num_images=3,
        seconds=0.1,
        status="passed",
        details=details,
        clean_details=clean_details,
    )


CELLS = [
    record("m", "clean", "clean", 0, 80.0, 70.0),
    record("m", "gaussian_noise", "noise", 1, 70.0, 60.0),
    record("m", "gaussian_noise", "noise", 5, 40.0, 30.0),
    record("m", "rotate", "camera", 1, 76.0, 64.0),
    record("m", "dynamic[fog,rotate]", "composed", 1, 50.0, 44.0),
    record("m", "jumble", "temporal", 1, 78.0, 69.0),
    record("m", "jumble", "temporal", 5, 60.0, 52.0),
]


def test_each_cell_is_static_dynamic_or_temporal() -> None:
    assert [mode_of(r) for r in CELLS[1:]] == ["static", "static", "static", "dynamic", "temporal", "temporal"]
    assert mode_of(record("m", "misspelling", "text", 1, 1.0, 1.0)) == "text"
    assert mode_of(record("m", "r2bench-mixture", "mixture", 1, 1.0, 1.0)) == "mixture"


def test_the_summary_averages_each_way_per_level_and_recomputes_the_drop() -> None:
    entry = json.loads(json.dumps(video_entry({"m": CELLS}, "vos_jf").to_json()))  # JSON-safe as the report keeps it
    assert entry["headline"] == "vos_jf"
    assert list(entry["columns"])[:2] == ["vos_jf", "j_mean"]
    model = entry["models"]["m"]
    assert model["clean"]["vos_jf"] == 75.0 and model["clean"]["j_mean"] == 80.0
    rows = {(r["mode"], r["severity"]): r for r in model["modes"]}
    assert set(rows) == {("static", 1), ("static", 5), ("dynamic", 1), ("temporal", 1), ("temporal", 5)}
    static = rows[("static", 1)]
    assert static["perturbations"] == 2
    assert static["j_mean"] == pytest.approx((70.0 + 76.0) / 2)
    assert static["vos_jf"] == pytest.approx(((70 + 60) / 2 + (76 + 64) / 2) / 2)
    assert static["drop"] == pytest.approx(75.0 - static["vos_jf"])
    assert rows[("dynamic", 1)]["drop"] == pytest.approx(75.0 - 47.0)
    noise = next(r for r in model["perturbations"] if r["perturbation"] == "gaussian_noise" and r["severity"] == 5)
    assert noise["level"] == "high" and noise["drop"] == pytest.approx(75.0 - 35.0)


def test_the_tables_show_the_rows_and_the_drop_column() -> None:
    summary, detail = video_tables(video_entry({"m": CELLS}, "vos_jf"))
    assert summary.header[:4] == ("model", "way", "level", "J&F") and summary.header[-1] == "drop (J&F)"
    assert summary.rows[0][:4] == ("m", "clean", "–", "75.00") and summary.rows[0][-1] == "–"
    dynamic = next(row for row in summary.rows if row[1] == "dynamic")
    assert dynamic[3] == "47.00" and dynamic[-1] == "+28.00"
    assert len(detail.rows) == len(CELLS) - 1
    assert "recomputed" in summary.note


def test_an_audio_visual_suite_gets_its_acoustic_rows_and_its_further_metrics_as_columns() -> None:
    cells = [record("m", "clean", "clean", 0, 80.0, 70.0), record("m", "low_pass", "acoustic", 5, 60.0, 50.0)]
    for cell, (f, clean_f) in zip(cells, [(66.0, 66.0), (41.0, 66.0)], strict=True):
        cell.metrics = {"vos_f": {"score": f, "clean_score": clean_f}}
    entry = video_entry({"m": cells}, "vos_jf", ["vos_f"]).to_json()
    assert list(entry["columns"])[-1] == "vos_f" and entry["columns"]["vos_f"] == "F"
    model = entry["models"]["m"]
    assert model["clean"]["vos_f"] == 66.0
    (row,) = model["perturbations"]
    assert row["mode"] == "audio" and row["vos_f"] == 41.0 and row["drop"] == pytest.approx(75.0 - 55.0)
