"""``segrobust merge`` takes nothing a shard says on trust: it gates every cell again from the
shard's measurements against the baselines here, checks each file's digest, the model, data and
evaluator its cells were measured with, the names it gives, and the statistics files it read."""

from __future__ import annotations

import json
import shutil
from typing import Any

import pytest

from pytest_segrobust.engine.evaluation import CellResult, EvalResult
from pytest_segrobust.engine.runner import Measurement
from pytest_segrobust.metrics import MetricResult
from pytest_segrobust.store.baselines import Conditions
from pytest_segrobust.store.records import CellRecord, Status
from tests.plugin_project import recorded, run
from tests.test_shards import merge, redigested, report_json, run_shard, shard_file, take_report

ROTATE = ["suites/bands.yaml::binner::rotate[1]", "suites/bands.yaml::binner::rotate[5]"]  # shard 2/2's cells


def everywhere(data: Any, name: str, value: Any) -> Any:
    """``data`` with every field called ``name``, at any depth, set to ``value``."""
    if isinstance(data, dict):
        return {key: value if key == name else everywhere(item, name, value) for key, item in data.items()}
    if isinstance(data, list):
        return [everywhere(item, name, value) for item in data]
    return data


def test_a_measurement_read_back_is_ungated_and_its_record_numbers_are_its_results() -> None:
    result = CellResult(
        EvalResult({"miou": MetricResult(40.0, (40.0,))}, 3, 0.5),
        EvalResult({"miou": MetricResult(50.0, (50.0,))}, 3, 0.5),
    )
    record = CellRecord(
        "s.yaml::m::rotate[1]", "s", "m", "rotate", "geometric", 1, 40.0, 50.0, 0.8, 0.9, [40.0], ["a"], 3, 0.5,
        Status.REGRESSED, baseline={"score": 60.0}, checks=[{"metric": "score"}], model_fingerprint="f",
    )
    conditions = Conditions("semantic", "miou", "coco-c", 0, None, "data")
    written = Measurement(record.nodeid, record, {}, result, conditions, "f", "evaluator", "code").to_json()
    assert written["record"]["status"] == "passed" and written["record"]["checks"] == []  # not the gate's word
    read = Measurement.from_json(everywhere(written, "score", 1.0))
    assert read.record is not None and read.record.status is Status.PASSED and read.record.baseline is None
    # Every score edited to 1.0: the corrupted and the clean results both score 1.0, so does the record.
    assert (read.record.score, read.record.clean_score, read.record.gamma_r) == (1.0, 1.0, 1.0)
    assert read.observed == {"score": 1.0, "gamma_r": 1.0, "gamma_a": 1.0}
    assert (read.model_fingerprint, read.evaluator, read.model_code) == ("f", "evaluator", "code")
    with pytest.raises(ValueError, match="^measurement of format 9, expected 1$"):
        Measurement.from_json({**written, "format": 9})


# The two shard files of the bands suite as its shards write them, by name: they depend on the
# suite alone, so the first test that needs them runs the shards and the others start from a copy
# (each edits its own copy; the two in-process shard runs took about 2.5 CPU-s a test).
_SHARDS: dict[str, bytes] = {}


def shards_of_bands(project: pytest.Pytester) -> None:
    recorded(project)
    if not _SHARDS:
        run_shard(project, "1/2").assert_outcomes(passed=3, deselected=2)
        run_shard(project, "2/2").assert_outcomes(passed=2, deselected=3)
        _SHARDS.update({path.name: path.read_bytes() for path in (shard_file(project, "1/2"), shard_file(project, "2/2"))})
    else:
        for name, data in _SHARDS.items():
            (project.path / name).write_bytes(data)
    assert sorted(json.loads(shard_file(project, "2/2").read_text())["assigned"]) == ROTATE


def test_a_score_edited_in_a_shard_fails_against_the_stored_baseline(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    shards_of_bands(project)
    first, second = shard_file(project, "1/2"), shard_file(project, "2/2")
    edited = everywhere(json.loads(second.read_text()), "score", 1.0)
    # Edited, its digest left as it was: the file is not the one its shard wrote.
    second.write_text(json.dumps(edited))
    status, out = merge(project, capsys, first, second)
    assert status == 2, out
    assert f"{second}: its content is not the one its shard wrote" in out and "run its shard again" in out
    assert not (project.path / "segrobust-report.json").exists()
    # Its digest taken again: the shard's "passed" is its word; the scores are judged against the baselines.
    second.write_text(json.dumps(redigested(edited)))
    status, out = merge(project, capsys, first, second)
    assert status == 1, out
    assert out.splitlines()[-1].startswith("FAIL · 5 cells: 2 regressed, 3 passed"), out
    for nodeid in ROTATE:
        assert f"note: {nodeid}: {second} (shard 2/2) said passed; gated against the baselines here: regressed" in out
    cells = {cell["nodeid"]: cell for cell in report_json(project)["suites"]["bands"]["models"]["binner"]["cells"]}
    for nodeid in ROTATE:
        cell = cells[nodeid]
        assert cell["status"] == "regressed" and cell["score"] == 1.0 and cell["baseline"]["score"] > 1.0, cell
    assert {cells[nodeid]["status"] for nodeid in cells if nodeid not in ROTATE} == {"passed"}


def test_shards_run_with_different_model_code_are_refused_naming_both_identities(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    recorded(project)
    run_shard(project, "1/2").assert_outcomes(passed=3, deselected=2)
    fakes = project.path / "segrobust_fakes.py"
    source = fakes.read_text()
    default = "num_classes: int = len(CLASS_NAMES), smoothing: int = 1) -> None:"  # RedBinner's
    assert source.count(default) == 1
    fakes.write_text(source.replace(default, default.replace("= 1", "= 3")))  # the suite sets it: the same numbers
    run_shard(project, "2/2").assert_outcomes(passed=2, deselected=3)
    first, second = shard_file(project, "1/2"), shard_file(project, "2/2")
    status, out = merge(project, capsys, first, second)
    assert status == 2, out
    assert "the cells of model binner of suite bands were measured with different model code (" in out, out
    prints = [
        {m["model_code"] for r in json.loads(path.read_text())["results"] for m in r["measurements"]}
        for path in (first, second)
    ]
    assert len(prints[0]) == len(prints[1]) == 1 and prints[0] != prints[1]
    for (fingerprint,), path, spec in zip(prints, (first, second), ("1/2", "2/2")):
        assert f"{fingerprint[:19]}… in {path} (shard {spec})" in out, out
    assert not (project.path / "segrobust-report.json").exists()


@pytest.mark.parametrize(
    ("name", "refusal"),
    [
        ("../../../x-out/pwn", "'../../../x-out/pwn' is not a valid name (letters, digits, '_', '.', '+', '-'), which no suite accepts"),
        ("other", "is not of that cell: record model 'other' (the suite's: 'binner')"),
    ],
)
def test_a_shard_whose_model_names_were_edited_is_refused(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str], name: str, refusal: str
) -> None:
    shards_of_bands(project)
    first, second = shard_file(project, "1/2"), shard_file(project, "2/2")
    data = json.loads(second.read_text())
    edited = everywhere(everywhere(data, "model", name), "model_fingerprint", None)
    second.write_text(json.dumps(redigested(edited)))
    status, out = merge(project, capsys, first, second)
    assert status == 2, out
    assert f"{second}" in out and refusal in out, out
    assert "run its shard again" in out
    assert not (project.path / "segrobust-report.json").exists()
    assert not (project.path / "x-out").exists() and not list(project.path.parent.glob("x-out"))


TWO_GATED = """\
name: {name}
dataset: {{factory: segrobust_fakes:band_scenes}}
models: [{{name: binner, factory: segrobust_fakes:red_binner, kwargs: {{smoothing: {smoothing}}}}}]
corruptions: [gaussian_noise]
severities: [1]
gate: {{margin: {{gamma_r: 0.01, score: 1.0}}}}
batch_size: 4
"""


def test_a_statistics_file_swapped_after_the_shards_ran_is_refused(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    suites = project.path / "suites"
    (suites / "bands.yaml").write_text(TWO_GATED.format(name="bands", smoothing=1))
    (suites / "other.yaml").write_text(TWO_GATED.format(name="other", smoothing=3))
    run(project, "--segrobust-update-baselines").assert_outcomes(passed=4)
    for written in project.path.glob("segrobust-report*"):
        written.unlink()
    stats = project.path / "baselines"
    assert (stats / "bands.stats.npz").read_bytes() != (stats / "other.stats.npz").read_bytes()
    for k in (1, 2):
        run_shard(project, f"{k}/2").assert_outcomes(passed=2, deselected=2)
    shutil.copy(stats / "other.stats.npz", stats / "bands.stats.npz")
    status, out = merge(project, capsys, shard_file(project, "1/2"), shard_file(project, "2/2"))
    assert status == 2, out
    assert "baseline file baselines/bands.stats.npz here is not the one the shards read" in out, out
    assert not (project.path / "segrobust-report.json").exists()


def test_a_statistically_gated_suite_merges_to_the_report_of_one_run(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    # The merge pairs each cell's statistics with the baseline's and draws the bootstrap again:
    # the same intervals, checks and verdicts as the run that measured them all.
    (project.path / "suites" / "bands.yaml").write_text(TWO_GATED.format(name="bands", smoothing=1))
    run(project, "--segrobust-update-baselines").assert_outcomes(passed=2)
    take_report(project)
    (project.path / "suites" / "bands.yaml").write_text(TWO_GATED.format(name="bands", smoothing=2))
    run(project, "--segrobust").assert_outcomes(failed=2)
    single = take_report(project)
    for k in (1, 2):
        run_shard(project, f"{k}/2").assert_outcomes(failed=1, deselected=1)
    status, out = merge(project, capsys, shard_file(project, "1/2"), shard_file(project, "2/2"))
    assert status == 1 and "note:" not in out, out
    merged = take_report(project)
    assert merged == single
    checks = [c for m in merged[0]["suites"]["bands"]["models"].values() for cell in m["cells"] for c in cell["checks"]]
    assert checks and all({"low", "high", "margin"} <= set(check) for check in checks)
