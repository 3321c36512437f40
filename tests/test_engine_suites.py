"""The opened engine from YAML: several metrics per suite, natural-shift splits, a plugin's adapter."""

from __future__ import annotations

import json

import pytest

from tests.plugin_project import SINGLE_PROCESS, run

SHIFT_SUITE = """\
name: shift
dataset: {factory: segrobust_fakes:band_scenes}
shifts:
  reference: near
  splits:
    near: {factory: segrobust_fakes:band_scenes, kwargs: {size: 6}}
    far: {factory: segrobust_fakes:band_scenes, kwargs: {size: 6, seed: 7}}
models:
  - {name: binner, factory: segrobust_fakes:red_binner, kwargs: {smoothing: 5}}
corruptions: [gaussian_noise]
severities: [5]
metrics: [miou, boundary_iou]
tolerance: {gamma_r: 0.01, score: 1.0}
batch_size: 4
"""
SHIFT_CELLS = 4  # 2 splits x (clean + 1 corruption x 1 severity)


@pytest.fixture
def shift_project(project: pytest.Pytester) -> pytest.Pytester:
    (project.path / "suites" / "bands.yaml").unlink()
    (project.path / "suites" / "shift.yaml").write_text(SHIFT_SUITE)
    return project


@SINGLE_PROCESS
def test_a_shift_suite_with_two_metrics_runs_gates_and_reports(shift_project: pytest.Pytester, dist: list[str]) -> None:
    run(shift_project, "--segrobust-update-baselines", *dist).assert_outcomes(passed=SHIFT_CELLS)
    stored = json.loads((shift_project.path / "baselines" / "shift.json").read_text())
    assert stored["conditions"]["metrics"] == ["boundary_iou"] and stored["conditions"]["splits"] == ["near", "far"]
    cells = stored["models"]["binner"]
    assert set(cells) == {"near", "far"}
    assert set(cells["far"]["gaussian_noise"]["5"]) == {
        "score", "gamma_r", "gamma_a", "boundary_iou.score", "boundary_iou.gamma_r", "boundary_iou.gamma_a"
    }
    result = run(shift_project, "--segrobust", *dist)
    result.assert_outcomes(passed=SHIFT_CELLS)
    report = json.loads((shift_project.path / "segrobust-report.json").read_text())["suites"]["shift"]
    assert list(report["models"]) == ["binner @ near", "binner @ far"]
    far = report["models"]["binner @ far"]["cells"]
    stored_boundary = cells["far"]["clean"]["boundary_iou.score"]  # stored to 6 significant digits
    assert far[0]["split"] == "far" and far[0]["metrics"]["boundary_iou"]["score"] == pytest.approx(stored_boundary, rel=1e-5)
    markdown = (shift_project.path / "segrobust-report.md").read_text()
    near, far_score = cells["near"]["clean"]["score"], cells["far"]["clean"]["score"]
    assert f"{(far_score - near) / near * 100:+.2f}" in markdown  # Delta% of the far split
    assert "### Natural distribution shift: clean score per split" in markdown
    assert "| binner @ far | boundary IoU |" in markdown


def test_a_regression_of_a_further_metric_fails_its_cell(shift_project: pytest.Pytester) -> None:
    run(shift_project, "--segrobust-update-baselines").assert_outcomes(passed=SHIFT_CELLS)
    path = shift_project.path / "baselines" / "shift.json"
    stored = json.loads(path.read_text())
    stored["models"]["binner"]["far"]["clean"]["boundary_iou.score"] += 5.0
    path.write_text(json.dumps(stored))
    result = run(shift_project, "--segrobust")
    result.assert_outcomes(passed=SHIFT_CELLS - 1, failed=1)
    result.stdout.fnmatch_lines(["suites/shift.yaml::binner::far::clean regressed:", "*boundary_iou.score: observed *, delta -5.0000*"])


def test_a_stored_split_that_the_suite_does_not_list_is_a_broken_baseline(shift_project: pytest.Pytester) -> None:
    run(shift_project, "--segrobust-update-baselines").assert_outcomes(passed=SHIFT_CELLS)
    path = shift_project.path / "baselines" / "shift.json"
    stored = json.loads(path.read_text())
    stored["models"]["binner"]["faraway"] = stored["models"]["binner"]["far"]
    path.write_text(json.dumps(stored))
    result = run(shift_project, "--segrobust")
    result.assert_outcomes(failed=SHIFT_CELLS)
    result.stdout.fnmatch_lines(["*models.binner.faraway: not one of conditions.splits (near, far)*"])


ADAPTING_CONFTEST = """
import torch
from segrobust_fakes import RedBinner


class Opaque:
    '''A model kind no built-in adapter knows: a function from uint8-free images to label maps.'''

    def __init__(self, smoothing):
        self.binner = RedBinner(smoothing=smoothing)


class OpaqueSegmenter:
    task = "semantic"

    def __init__(self, opaque, device):
        self.opaque, self.device = opaque, device
        ASKED.append(device.type)

    def predict(self, images):
        return self.opaque.binner(images).argmax(dim=1)

    def fingerprint(self):
        return f"opaque-{self.opaque.binner.smoothing}"


ASKED = []


def opaque(smoothing=5):
    return Opaque(smoothing)


def pytest_segrobust_adapt_model(obj, task, device, amp):
    if isinstance(obj, Opaque):
        assert task == "semantic" and amp is False
        return OpaqueSegmenter(obj, device)
    return None
"""


def test_a_conftest_hook_adapts_a_model_kind_the_engine_does_not_know(project: pytest.Pytester) -> None:
    (project.path / "conftest.py").write_text(ADAPTING_CONFTEST)
    suite = (project.path / "suites" / "bands.yaml").read_text().replace("segrobust_fakes:red_binner", "conftest:opaque")
    (project.path / "suites" / "bands.yaml").write_text(suite)
    run(project, "--segrobust-update-baselines").assert_outcomes(passed=5)
    assert json.loads((project.path / "baselines" / "bands.json").read_text())["models"]["binner"]["clean"]["score"] > 50


def test_without_an_adapter_the_error_says_what_was_expected(project: pytest.Pytester) -> None:
    (project.path / "conftest.py").write_text(ADAPTING_CONFTEST.replace("def pytest_segrobust_adapt_model", "def unused"))
    suite = (project.path / "suites" / "bands.yaml").read_text().replace("segrobust_fakes:red_binner", "conftest:opaque")
    (project.path / "suites" / "bands.yaml").write_text(suite)
    result = run(project, "--segrobust")
    result.assert_outcomes(failed=5)
    result.stdout.fnmatch_lines(["*field 'models[[]0[]]' (binner): factory conftest:opaque failed: TypeError: expected a SegmentationModel*got Opaque*"])


@SINGLE_PROCESS
def test_suites_in_subfolders_and_named_files_are_collected(project: pytest.Pytester, dist: list[str]) -> None:
    suites = project.path / "suites"
    (suites / "nightly").mkdir()
    (suites / "bands.yaml").rename(suites / "nightly" / "bands.yaml")
    elsewhere = project.path / "elsewhere"
    elsewhere.mkdir()
    text = (suites / "nightly" / "bands.yaml").read_text().replace("name: bands", "name: other")
    (elsewhere / "other.yaml").write_text(text)
    (elsewhere / "not-a-suite.yaml").write_text("key: value\n")
    run(project, "--segrobust-update-baselines", *dist).assert_outcomes(passed=5)  # the whole suites tree
    result = run(project, "--segrobust-update-baselines", "elsewhere/other.yaml", *dist)
    result.assert_outcomes(passed=5)
    assert (project.path / "baselines" / "other.json").exists()
    # A folder named on the command line is not a suites folder: its YAML files are left alone.
    assert run(project, "--segrobust", "elsewhere", *dist).ret == pytest.ExitCode.NO_TESTS_COLLECTED


def test_two_suites_with_one_name_in_different_subfolders_are_refused(project: pytest.Pytester) -> None:
    suites = project.path / "suites"
    (suites / "a").mkdir()
    (suites / "a" / "copy.yaml").write_text((suites / "bands.yaml").read_text())
    result = run(project, "--segrobust")
    result.stdout.fnmatch_lines(["*field 'name': suite name 'bands' is also the name of suites/a/copy.yaml*"])
    assert result.ret == pytest.ExitCode.INTERRUPTED


PANOPTIC_SUITE = """\
name: panoptic
task: panoptic
dataset: {factory: pytest_segrobust.data.demo:demo_dataset, kwargs: {split: val}}
models:
  - {name: components, factory: pytest_segrobust.models.demo:tiny_unet_panoptic}
corruptions: [rotate]
severities: [5]
metric: pq
limit: 4  # the demo model is most of the test's CPU: four images still give two batches
batch_size: 2
"""


@SINGLE_PROCESS
def test_a_panoptic_suite_runs_from_yaml_and_rotation_moves_the_segments(project: pytest.Pytester, dist: list[str]) -> None:
    (project.path / "suites" / "bands.yaml").unlink()
    (project.path / "suites" / "panoptic.yaml").write_text(PANOPTIC_SUITE)
    run(project, "--segrobust-update-baselines", *dist).assert_outcomes(passed=2)
    run(project, "--segrobust", *dist).assert_outcomes(passed=2)
    cells = json.loads((project.path / "segrobust-report.json").read_text())["suites"]["panoptic"]["models"]["components"]["cells"]
    clean, rotated = cells
    assert 50 < clean["score"] < 100 and {"sq", "rq", "pq_things", "pq_stuff"} <= set(clean["details"])
    # Had the segments stayed put under a 60 degree rotation, PQ would collapse far below this.
    assert rotated["score"] > 0.6 * clean["score"]
    assert "PQ things" in (project.path / "segrobust-report.md").read_text()


def test_a_cell_record_round_trips_and_refuses_what_it_does_not_know() -> None:
    from pytest_segrobust.gate.verdict import Status
    from pytest_segrobust.store.records import CellRecord

    record = CellRecord(
        "n", "s", "m", "rotate", "geometric", 3, 50.0, 60.0, 0.8, 0.9, [1.0, None], ["a", "b"], 4, 0.1,
        Status.REGRESSED, split="hard", metrics={"boundary_iou": {"score": 1.0}},
    )
    data = json.loads(json.dumps(record.to_json()))
    assert data["status"] == "regressed" and data["format"] == 1
    assert CellRecord.from_json(data) == record and CellRecord.from_json(data).status is Status.REGRESSED
    with pytest.raises(ValueError, match="format 2, expected 1"):
        CellRecord.from_json(data | {"format": 2})
    with pytest.raises(ValueError, match="unknown fields colour"):
        CellRecord.from_json(data | {"colour": "red"})
    with pytest.raises(ValueError, match="'lost' is not a valid Status"):
        CellRecord.from_json(data | {"status": "lost"})
