"""Plugin behaviour through pytester.

Each scenario runs in one process; what the xdist controller does differently (gathering the
workers' outcomes, writing baselines, the clean cache shared by workers, one merged report and
summary) is checked by two scenarios with ``-n 2`` at the end, each of whose runs serves several
checks: a run with two workers costs ten times one in process.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import textwrap
from pathlib import Path

import pytest
import torch

from pytest_segrobust.report import without_timing
from tests.fakes import write_coco_bands
from tests.plugin_project import (
    BLACKOUT_CONFTEST,
    CELLS,
    SINGLE_PROCESS,
    SUITE,
    baseline,
    cached_run,
    recorded,
    run,
    write_suite,
)


@SINGLE_PROCESS  # under xdist: test_the_xdist_controller_records_compares_and_caches
def test_missing_baseline_is_created_and_fails(project: pytest.Pytester, dist: list[str]) -> None:
    result = run(project, "--segrobust", *dist)
    result.assert_outcomes(failed=CELLS)
    result.stdout.fnmatch_lines(["suites/bands.yaml::binner::gaussian_noise[[]5[]]: no baseline yet in baselines/bands.json*"])
    stored = baseline(project)["models"]["binner"]
    assert set(stored) == {"clean", "gaussian_noise", "rotate"}
    assert set(stored["gaussian_noise"]) == {"1", "5"}
    # The second run compares against what the first one wrote.
    run(project, "--segrobust").assert_outcomes(passed=CELLS)


@SINGLE_PROCESS  # under xdist: test_the_xdist_controller_records_compares_and_caches
def test_passing_suite_writes_report(project: pytest.Pytester, dist: list[str]) -> None:
    run(project, "--segrobust-update-baselines").assert_outcomes(passed=CELLS)
    result = run(project, "--segrobust", *dist)
    result.assert_outcomes(passed=CELLS)
    result.stdout.fnmatch_lines(["*segrobust*", "suite bands:", "*binner*", "wrote *segrobust-report.md"])
    report = json.loads((project.path / "segrobust-report.json").read_text())
    cells = report["suites"]["bands"]["models"]["binner"]["cells"]
    assert [(c["corruption"], c["severity"]) for c in cells] == [
        ("clean", 0), ("gaussian_noise", 1), ("gaussian_noise", 5), ("rotate", 1), ("rotate", 5)
    ]
    noise5 = cells[2]
    assert noise5["gamma_r"] == pytest.approx(1 - (noise5["clean_score"] - noise5["score"]) / noise5["clean_score"])
    assert noise5["gamma_r"] < 0.95  # the fake model really degrades under strong noise
    markdown = (project.path / "segrobust-report.md").read_text()
    assert "### Headline" in markdown and "### Baseline comparison" in markdown


def test_quiet_shortens_the_summary_to_the_verdict_and_the_documents(project: pytest.Pytester) -> None:
    updated = run(project, "--segrobust-update-baselines", "-q", figures=True)
    updated.assert_outcomes(passed=CELLS)
    section = next(i for i, line in enumerate(updated.outlines) if line.startswith("=") and " segrobust " in line)
    lines = updated.outlines[section + 1 :]
    assert f"PASS · {CELLS} cells: {CELLS} written to the baseline" in lines
    assert "baselines/bands.json: 0 cells changed, 5 new, 0 unchanged" in lines
    assert not any(line.startswith("  ") for line in lines)  # no old -> new line per cell, no tables
    assert not any(line.startswith("suite bands") for line in lines)
    documents = [line for line in lines if line.startswith("wrote ")]
    reports = [Path(line.split()[1]) for line in documents if "segrobust-report" in line.split()[1]]
    assert [path.suffix for path in reports[:2]] == [".md", ".json"]
    assert documents[-1].startswith("wrote ") and documents[-1].endswith(" figures to " + str(project.path / "segrobust-report-figures") + os.sep)
    assert not any(line.endswith(".png") for line in lines)
    full = run(project, "--segrobust", figures=True)  # without -q: the tables, every document and one line for the figures
    full.stdout.fnmatch_lines(["suite bands:", "wrote *segrobust-report.md", "wrote * figures to *segrobust-report-figures*"])
    assert not any(line.endswith(".png") for line in full.outlines)


@SINGLE_PROCESS
def test_regressed_model_fails_with_full_message(project: pytest.Pytester, dist: list[str]) -> None:
    recorded(project)
    before = baseline(project)
    write_suite(project, smoothing=1)  # no smoothing: far less robust to noise
    result = run(project, "--segrobust", *dist)
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) >= 1
    result.stdout.fnmatch_lines(
        [
            "suites/bands.yaml::binner::gaussian_noise[[]5[]] regressed:",
            "*gamma_r: observed *, baseline *, delta -*, tolerance 0.0100",
            "*baseline file: baselines/bands.json",
            "*if the new numbers are intended: pytest --segrobust 'suites/bands.yaml::binner::gaussian_noise[[]5[]]' --segrobust-update-baselines",
        ]
    )
    assert baseline(project) == before  # a failing run never rewrites baselines
    report = json.loads((project.path / "segrobust-report.json").read_text())
    statuses = {(c["corruption"], c["severity"]): c["status"] for c in report["suites"]["bands"]["models"]["binner"]["cells"]}
    assert statuses[("gaussian_noise", 5)] == "regressed"


@SINGLE_PROCESS  # an update under xdist: test_xdist_keeps_a_broken_suite_and_a_crash_apart, the lifecycle's
def test_update_flag_accepts_new_numbers(project: pytest.Pytester, dist: list[str]) -> None:
    recorded(project)
    write_suite(project, smoothing=1)
    run(project, "--segrobust-update-baselines", *dist).assert_outcomes(passed=CELLS)
    run(project, "--segrobust", *dist).assert_outcomes(passed=CELLS)


# A partial update under xdist: test_baseline_lifecycle's xdist scenario, and
# test_xdist_scheduling's -k run, whose baselines the next run compares with.
@SINGLE_PROCESS
def test_k_selection_runs_only_matching_cells_and_keeps_other_baselines(project: pytest.Pytester, dist: list[str]) -> None:
    recorded(project)
    before = baseline(project)["models"]["binner"]
    result = run(project, "--segrobust", "--segrobust-update-baselines", "-k", "rotate", *dist)
    result.assert_outcomes(passed=2, deselected=3)
    assert baseline(project)["models"]["binner"] == before


@SINGLE_PROCESS  # under xdist: test_xdist_keeps_a_broken_suite_and_a_crash_apart
def test_malformed_suite_is_a_clear_collection_error(project: pytest.Pytester, dist: list[str]) -> None:
    (project.path / "suites" / "broken.yaml").write_text(
        textwrap.dedent(
            """\
            dataset: {factory: segrobust_fakes:band_scenes}
            models: [{name: binner, factory: segrobust_fakes:red_binner}]
            corruptions: [gaussian_noise, gausian_blur]
            """
        )
    )
    result = run(project, "--segrobust", *dist)
    assert result.ret != pytest.ExitCode.OK  # xdist runs the valid suites and exits 1; pytest alone stops
    expected = (
        "broken.yaml: field 'corruptions[1]': unknown corruption 'gausian_blur' in preset 'coco-p' "
        "(did you mean 'gaussian_noise'?); known: "
    )
    assert expected in result.stdout.str()


def test_invalid_yaml_names_the_line(project: pytest.Pytester) -> None:
    (project.path / "suites" / "broken.yaml").write_text("models: [unclosed\n")
    result = run(project, "--segrobust", "--collect-only")
    result.stdout.fnmatch_lines(["*broken.yaml: invalid YAML at line *"])


def test_without_flag_no_suite_is_collected(project: pytest.Pytester) -> None:
    project.makepyfile(test_plain="def test_ok():\n    assert True\n")
    result = run(project)
    result.assert_outcomes(passed=1)
    assert not (project.path / "segrobust-report.md").exists()


def test_node_ids_and_markers(project: pytest.Pytester) -> None:
    result = run(project, "--segrobust", "--collect-only", "-q", "-m", "segrobust")
    result.stdout.fnmatch_lines(
        ["suites/bands.yaml::binner::clean", "suites/bands.yaml::binner::gaussian_noise[[]1[]]", "*5 tests collected*"]
    )


@SINGLE_PROCESS  # under xdist: test_xdist_keeps_a_broken_suite_and_a_crash_apart
def test_crashing_model_fails_its_items_not_the_session(project: pytest.Pytester, dist: list[str]) -> None:
    write_suite(project, smoothing=5)
    (project.path / "suites" / "crash.yaml").write_text(
        "dataset: {factory: segrobust_fakes:band_scenes}\n"
        "models: [{name: crasher, factory: segrobust_fakes:crashing_model}]\n"
        "corruptions: [gaussian_noise]\nseverities: [1]\n"
    )
    run(project, "--segrobust-update-baselines", "suites/bands.yaml")
    result = run(project, "--segrobust", *dist)
    result.assert_outcomes(passed=CELLS, failed=2)
    result.stdout.fnmatch_lines(["*RuntimeError: CUDA out of memory (simulated)*"])


def test_wrong_model_output_is_named(project: pytest.Pytester) -> None:
    (project.path / "suites" / "bands.yaml").write_text(
        "dataset: {factory: segrobust_fakes:band_scenes}\n"
        "models: [{name: wrong, factory: segrobust_fakes:wrong_shape_model}]\n"
        "corruptions: [rotate]\nseverities: [1]\n"
    )
    result = run(project, "--segrobust")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*model returned predictions of shape (8, 3, 3), expected (8, 32, 32)*"])


def test_broken_baseline_is_reported_not_overwritten(project: pytest.Pytester) -> None:
    (project.path / "baselines").mkdir()
    broken = project.path / "baselines" / "bands.json"
    broken.write_text('{"format": 1, "models": {')
    result = run(project, "--segrobust")
    result.assert_outcomes(failed=CELLS)
    result.stdout.fnmatch_lines(["*bands.json: broken baseline file (invalid JSON at line 1)*"])
    assert broken.read_text() == '{"format": 1, "models": {'
    run(project, "--segrobust-update-baselines").assert_outcomes(passed=CELLS)
    assert baseline(project)["format"] == 2


def test_fixture_evaluates_in_users_tests(project: pytest.Pytester) -> None:
    project.makepyfile(
        test_user="""
        from segrobust_fakes import band_scenes, red_binner

        def test_noise(segrobust):
            result = segrobust.evaluate(red_binner(smoothing=5), band_scenes(), corruption="gaussian_noise", severity=5)
            assert 0 < result.score < result.clean_score
            assert result.gamma_r == 1 - (result.clean_score - result.score) / result.clean_score
            assert result.gamma_a == 1 - (result.clean_score - result.score) / 100
        """
    )
    run(project).assert_outcomes(passed=1)


DIM_CONFTEST = """
from dataclasses import dataclass
from pytest_segrobust.corruptions import Category, PhotometricCorruption, SeverityTable

@dataclass(frozen=True)
class DimParams:
    factor: float

class Dim(PhotometricCorruption):
    def corrupt_images(self, images, params, rngs):
        return images * params.factor

DIM = SeverityTable(tuple(DimParams(f) for f in (0.9, 0.8, 0.7, 0.6, 0.5)))

def pytest_segrobust_register_corruptions(registry):
    registry.register(Dim("dim", Category.DIGITAL, DIM), presets=("coco-p",))
"""


@SINGLE_PROCESS  # under xdist: test_xdist_keeps_a_broken_suite_and_a_crash_apart
def test_conftest_hook_registers_a_custom_corruption(project: pytest.Pytester, dist: list[str]) -> None:
    project.makeconftest(DIM_CONFTEST)
    (project.path / "suites" / "bands.yaml").write_text(
        SUITE.format(smoothing=5).replace("[gaussian_noise, rotate]", "[dim]")
    )
    run(project, "--segrobust-update-baselines", *dist).assert_outcomes(passed=3)
    stored = baseline(project)["models"]["binner"]
    assert set(stored["dim"]) == {"1", "5"}


def test_unknown_device_is_a_usage_error(project: pytest.Pytester) -> None:
    result = run(project, "--segrobust", "--segrobust-device", "gpu")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--segrobust-device: expected auto, cpu, mps, cuda or cuda:N, got 'gpu'*"])


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error shown where no GPU is present")
def test_unavailable_device_is_a_usage_error(project: pytest.Pytester) -> None:
    result = run(project, "--segrobust", "--segrobust-device", "cuda:0")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--segrobust-device cuda:0: no CUDA device is available*"])


@SINGLE_PROCESS  # under xdist: test_the_xdist_controller_records_compares_and_caches
def test_clean_results_are_cached_across_runs_and_workers(project: pytest.Pytester, dist: list[str]) -> None:
    recorded(project)
    first = cached_run(project, *dist)
    first.assert_outcomes(passed=CELLS)
    first.stdout.fnmatch_lines(["*segrobust: device cpu; clean results cached in *segrobust-results*", "clean results: 1 computed, * from cache*"])
    second = cached_run(project, *dist)
    second.assert_outcomes(passed=CELLS)
    second.stdout.fnmatch_lines(["clean results: 0 computed, * from cache*"])
    assert "clean results: 0 computed, 0 from cache" not in second.stdout.str()
    fresh = cached_run(project, "--segrobust-no-cache")  # the controller's header line, with or without workers
    fresh.stdout.fnmatch_lines(["*clean results not cached*"])


def test_changed_weights_miss_the_cache(project: pytest.Pytester) -> None:
    weights = project.path / "centres.pt"
    torch.save((torch.arange(4) + 0.5) / 4, weights)
    (project.path / "suites" / "bands.yaml").write_text(
        SUITE.format(smoothing=3).replace(
            "factory: segrobust_fakes:red_binner, kwargs: {smoothing: 3}",
            f"factory: segrobust_fakes:file_binner, kwargs: {{path: '{weights}'}}",
        )
    )
    cached_run(project, "--segrobust-update-baselines").stdout.fnmatch_lines(["clean results: 1 computed, 0 from cache*"])
    cached_run(project).stdout.fnmatch_lines(["clean results: 0 computed, 1 from cache*"])
    torch.save((torch.arange(4) + 0.45) / 4, weights)  # same file name and kwargs, new weights
    cached_run(project, "--segrobust-update-baselines").stdout.fnmatch_lines(
        ["clean results: 1 computed, 0 from cache*", f"corrupted cells: {CELLS - 1} measured, 0 from cache"]
    )


def test_changed_factory_arguments_miss_the_cache(project: pytest.Pytester) -> None:
    cached_run(project, "--segrobust-update-baselines").stdout.fnmatch_lines(["clean results: 1 computed, 0 from cache*"])
    write_suite(project, smoothing=1)  # not a weight: only the factory call differs
    cached_run(project, "--segrobust-update-baselines").stdout.fnmatch_lines(
        ["clean results: 1 computed, 0 from cache*", f"corrupted cells: {CELLS - 1} measured, 0 from cache"]
    )


def test_interrupted_run_lists_cells_without_result(project: pytest.Pytester) -> None:
    write_suite(project, smoothing=5)
    result = run(project, "--segrobust", "-x")  # no baselines: the first cell fails and -x stops
    result.assert_outcomes(failed=1)
    report = json.loads((project.path / "segrobust-report-partial.json").read_text())
    assert len(report["missing"]) == CELLS - 1
    assert f"{CELLS - 1} cells not run: the run stopped after 1 failure (-x)" in (project.path / "segrobust-report-partial.md").read_text()


def test_batch_size_and_loader_workers_do_not_change_numbers(project: pytest.Pytester) -> None:
    run(project, "--segrobust-update-baselines").assert_outcomes(passed=CELLS)
    before = baseline(project)
    run(project, "--segrobust-update-baselines", "--segrobust-batch-size", "5", "--segrobust-loader-workers", "2")
    assert baseline(project) == before


def test_sample_cache_does_not_change_numbers(project: pytest.Pytester) -> None:
    run(project, "--segrobust-update-baselines", "--segrobust-sample-cache", "0").assert_outcomes(passed=CELLS)
    before = baseline(project)
    run(project, "--segrobust-update-baselines").assert_outcomes(passed=CELLS)  # the default: cached
    assert baseline(project) == before
    # Loader processes read what a cell does not find in memory (here: the first cell's samples).
    run(project, "--segrobust-update-baselines", "--segrobust-loader-workers", "2")
    assert baseline(project) == before


def test_bad_batch_size_is_a_usage_error(project: pytest.Pytester) -> None:
    result = run(project, "--segrobust", "--segrobust-batch-size", "0")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--segrobust-batch-size: expected an integer >= 1, got '0'*"])


def test_progress_is_logged_for_live_logging(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    # Through sys.modules: the package attribute may still name a copy an earlier in-process run unloaded.
    workbench = importlib.import_module("pytest_segrobust.engine.workbench")
    monkeypatch.setattr(workbench._ProgressLog, "interval", 0.0)
    result = run(project, "--segrobust-update-baselines", "--log-cli-level=INFO", "-k", "clean")
    result.stdout.fnmatch_lines(["*bands::binner::clean: 8/8 images (* images/s)*"])


def test_an_ade20k_layout_suite_runs_from_yaml(project: pytest.Pytester) -> None:
    """ADE20K stores class k as k + 1 and 0 as 'other' (ignored); the fake model reads red = class."""
    import numpy as np
    from PIL import Image

    from tests.fakes import band_scenes

    images, masks = project.path / "ade" / "images" / "validation", project.path / "ade" / "annotations" / "validation"
    images.mkdir(parents=True)
    masks.mkdir(parents=True)
    for index in range(6):
        sample = band_scenes(size=6)[index]
        # PNG: JPEG's chroma subsampling would bleed the fake's noisy green/blue into the red class code.
        Image.fromarray(sample.image.permute(1, 2, 0).numpy()).save(images / f"ADE_val_{index:08d}.png")
        ade = sample.target.mask.numpy().astype(np.uint8) + 1
        ade[:2] = 0  # a strip of 'other'
        Image.fromarray(ade).save(masks / f"ADE_val_{index:08d}.png")
    (project.path / "suites" / "bands.yaml").write_text(
        "name: ade\n"
        "dataset:\n"
        "  factory: pytest_segrobust.data.semantic_folder:SemanticFolder\n"
        f"  kwargs: {{images_dir: '{images}', masks_dir: '{masks}', layout: ade20k, class_names: [background, a, b, c]}}\n"
        "models: [{name: binner, factory: segrobust_fakes:red_binner, kwargs: {smoothing: 1}}]\n"
        "corruptions: [gaussian_noise]\nseverities: [3]\n"
    )
    run(project, "--segrobust-update-baselines").assert_outcomes(passed=2)
    report = json.loads((project.path / "segrobust-report.json").read_text())
    clean = report["suites"]["ade"]["models"]["binner"]["cells"][0]
    assert clean["num_images"] == 6 and clean["score"] == 100.0  # the red code maps every pixel to its class


def test_a_failing_factory_fails_its_items_naming_file_field_and_target(project: pytest.Pytester) -> None:
    (project.path / "suites" / "bands.yaml").write_text(
        "dataset: {factory: segrobust_fakes:band_scenes}\n"
        "models: [{name: binner, factory: segrobust_fakes:red_binner, kwargs: {nope: 1}}]\n"
        "corruptions: [rotate]\nseverities: [1]\n"
    )
    result = run(project, "--segrobust")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*bands.yaml: field 'models[[]0[]]' (binner): factory segrobust_fakes:red_binner failed: TypeError:*"])


COCO_SUITE = """\
name: coco
task: instance
metric: map
dataset:
  factory: pytest_segrobust.data.coco:CocoInstances
  kwargs: {{images_dir: '{images}', annotation_file: '{annotations}'}}
models:
  - {{name: binner, factory: segrobust_fakes:instance_binner, kwargs: {{smoothing: 1}}}}
corruptions: [gaussian_noise, rotate]
severities: [1, 5]
batch_size: 4
"""


@SINGLE_PROCESS
def test_a_coco_format_instance_suite_runs_from_yaml(project: pytest.Pytester, dist: list[str]) -> None:
    """COCO json + PNGs with crowd, an empty image and sparse category ids, scored by mask AP."""
    images, annotations = write_coco_bands(project.path / "coco")
    (project.path / "suites" / "bands.yaml").write_text(COCO_SUITE.format(images=images, annotations=annotations))
    run(project, "--segrobust", *dist).assert_outcomes(failed=CELLS)  # no baseline yet: recorded
    run(project, "--segrobust", *dist).assert_outcomes(passed=CELLS)  # and then the gate holds

    stored = json.loads((project.path / "baselines" / "coco.json").read_text())
    assert stored["conditions"]["metric"] == "map" and set(stored["models"]["binner"]) == {"clean", "gaussian_noise", "rotate"}
    report = json.loads((project.path / "segrobust-report.json").read_text())["suites"]["coco"]
    assert report["task"] == "instance"
    cells = {(c["corruption"], c["severity"]): c for c in report["models"]["binner"]["cells"]}
    clean = cells[("clean", 0)]
    # The red code gives every instance exactly; the crowd region and the empty image cost nothing.
    assert clean["score"] == 100.0 and clean["details"]["ap50"] == 100.0 and clean["details"]["bbox_ap"] == 100.0
    assert clean["class_names"] == ["background", "a", "b", "c"] and clean["per_class"][0] is None
    assert clean["supercategories"] == [None, "vowel", "consonant", "consonant"]
    assert cells[("gaussian_noise", 5)]["score"] < cells[("gaussian_noise", 1)]["score"] <= 100.0
    assert cells[("rotate", 5)]["gamma_r"] == pytest.approx(cells[("rotate", 5)]["score"] / 100.0)
    summary = report["models"]["binner"]["summary"]
    assert set(summary["supercategory_gamma_r"]) == {"vowel", "consonant"}
    markdown = (project.path / "segrobust-report.md").read_text()
    for title in ("mask AP and its companions", "γr per supercategory", "Per class: clean score and γr"):
        assert title in markdown, title


def test_an_instance_suite_needs_instance_annotations(project: pytest.Pytester) -> None:
    (project.path / "suites" / "bands.yaml").write_text(
        "task: instance\ndataset: {factory: segrobust_fakes:band_scenes}\n"
        "models: [{name: binner, factory: segrobust_fakes:instance_binner}]\ncorruptions: [rotate]\nseverities: [1]\n"
    )
    result = run(project, "--segrobust")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*sample bands/0 has no instance annotations*"])


def test_an_instance_suite_rejects_a_semantic_model(project: pytest.Pytester) -> None:
    images, annotations = write_coco_bands(project.path / "coco")
    suite = COCO_SUITE.format(images=images, annotations=annotations).replace("instance_binner", "red_binner")
    (project.path / "suites" / "bands.yaml").write_text(suite)
    result = run(project, "--segrobust")
    result.assert_outcomes(failed=CELLS)
    result.stdout.fnmatch_lines(["*expected a list of 4 per-image instance predictions*got Tensor; *ComponentInstances*"])


def test_fixture_evaluates_instance_models_by_mask_ap(project: pytest.Pytester) -> None:
    images, annotations = write_coco_bands(project.path / "coco")
    project.makepyfile(
        test_user=f"""
        from pytest_segrobust.data.coco import CocoInstances
        from segrobust_fakes import instance_binner

        def test_rotation(segrobust):
            dataset = CocoInstances({str(images)!r}, {str(annotations)!r})
            result = segrobust.evaluate(instance_binner(), dataset, corruption="rotate", severity=5, metric="map")
            assert result.clean_score == 100.0 and 0 < result.score < 100.0
            assert set(result.corrupted.details) == {{"ap50", "ap75", "bbox_ap", "bbox_ap50", "bbox_ap75"}}
        """
    )
    run(project).assert_outcomes(passed=1)


def test_plain_pytest_never_imports_torch(pytester: pytest.Pytester) -> None:
    """Installed, the plugin loads in every project: without --segrobust it must cost nothing."""
    pytester.makepyfile(test_plain="import sys\n\ndef test_no_torch():\n    assert 'torch' not in sys.modules\n")
    pytester.runpytest_subprocess("-p", "no:cacheprovider").assert_outcomes(passed=1)


@pytest.mark.skipif(importlib.util.find_spec("ray") is not None, reason="Ray is installed here")
def test_the_ray_backend_without_ray_says_how_to_install_it(project: pytest.Pytester) -> None:
    result = run(project, "--segrobust", "--segrobust-backend", "ray")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(['*--segrobust-backend ray needs Ray, which is not installed: pip install "pytest-segrobust?ray?"*'])


def test_the_fixture_starts_the_engine_on_first_use(project: pytest.Pytester) -> None:
    project.makeconftest(BLACKOUT_CONFTEST)  # the registration hook runs when the fixture starts
    project.makepyfile(
        test_user="""
        from segrobust_fakes import band_scenes, red_binner

        def test_blackout(segrobust):
            result = segrobust.evaluate(red_binner(), band_scenes(), corruption="blackout", severity=5)
            assert result.score < result.clean_score
        """
    )
    run(project).assert_outcomes(passed=1)


def test_a_registered_corruption_joins_its_presets_default_list(project: pytest.Pytester) -> None:
    project.makeconftest(BLACKOUT_CONFTEST)
    (project.path / "suites" / "bands.yaml").write_text(
        "dataset: {factory: segrobust_fakes:band_scenes}\n"
        "models: [{name: binner, factory: segrobust_fakes:red_binner}]\n"
        "severities: [1]\n"  # no corruptions: the whole preset
    )
    result = run(project, "--segrobust", "--collect-only", "-q")
    cells = [line for line in result.outlines if line.startswith("suites/bands.yaml::")]
    assert len(cells) == 1 + 17 + 1  # clean, coco-p in the paper's order, then what was registered
    assert cells[1] == "suites/bands.yaml::binner::gaussian_noise[1]"
    assert cells[-1] == "suites/bands.yaml::binner::blackout[1]"


@pytest.mark.parametrize("dist_args", [[], ["-n", "0"]], ids=["no-xdist", "n0"])
def test_a_conftest_loaded_during_collection_registers_too(project: pytest.Pytester, dist_args: list[str]) -> None:
    # suites/conftest.py is not an initial conftest: pytest imports it while collecting the
    # suites folder, after the registry was built; the historic hook still reaches it.
    # Not with -n 2: the controller, which never collects, reads the suite files too.
    (project.path / "suites" / "conftest.py").write_text(BLACKOUT_CONFTEST)
    (project.path / "suites" / "bands.yaml").write_text(
        SUITE.format(smoothing=5).replace("[gaussian_noise, rotate]", "[blackout]")
    )
    run(project, "--segrobust-update-baselines", *dist_args).assert_outcomes(passed=3)
    assert set(baseline(project)["models"]["binner"]["blackout"]) == {"1", "5"}


def test_registrations_do_not_leak_into_the_next_run(project: pytest.Pytester) -> None:
    from pytest_segrobust.corruptions import REGISTRY

    conftest = project.makeconftest(BLACKOUT_CONFTEST)
    (project.path / "suites" / "bands.yaml").write_text(
        SUITE.format(smoothing=5).replace("[gaussian_noise, rotate]", "[blackout]")
    )
    project.runpytest_inprocess("-p", "no:cacheprovider", "--segrobust-update-baselines").assert_outcomes(passed=3)
    conftest.unlink()
    second = project.runpytest_inprocess("-p", "no:cacheprovider", "--segrobust")
    assert second.ret != pytest.ExitCode.OK
    second.stdout.fnmatch_lines(["*field 'corruptions[[]0[]]': unknown corruption 'blackout' in preset 'coco-p'*"])
    assert "blackout" not in REGISTRY.definition("coco-p").corruption_names  # nor into this process


def test_the_ray_header_counts_each_actors_resources_in_the_singular_or_plural() -> None:
    from types import SimpleNamespace

    from pytest_segrobust.backends.ray import RayBackend, RaySettings

    runner = SimpleNamespace(options=SimpleNamespace(threads="auto"))  # the header reads the thread choice

    def header(cpus: float, gpus: float) -> str:
        return RayBackend(None, runner, RaySettings(None, cpus, gpus, None)).header()[0]  # type: ignore[arg-type]

    assert "one actor per suite and model (1 CPU, 0 GPUs each)" in header(1.0, 0.0)
    assert "(0.5 CPUs, 1 GPU each)" in header(0.5, 1.0)


@SINGLE_PROCESS  # under xdist: test_the_xdist_controller_records_compares_and_caches
def test_the_terminal_summary_ends_with_the_verdict_after_every_written_file(
    project: pytest.Pytester, dist: list[str]
) -> None:
    run(project, "--segrobust-update-baselines").assert_outcomes(passed=CELLS)  # the summary under test is the next run's
    write_suite(project, smoothing=1)  # less robust to noise: some cells regress
    result = run(project, "--segrobust", *dist)
    start = next(i for i, line in enumerate(result.outlines) if line.startswith("=") and " segrobust " in line)
    end = next(i for i, line in enumerate(result.outlines) if i > start and line.startswith("="))
    section = result.outlines[start + 1 : end]
    report = json.loads((project.path / "segrobust-report.json").read_text())
    assert section[-1] == report["verdict"]["line"] and section[-1].startswith("FAIL · 5 cells: ")
    assert any(line.startswith("wrote ") for line in section[:-1])


# -- under xdist -----------------------------------------------------------------------------------
# Each scenario above runs in one process. These two run what the xdist controller does
# differently, with two workers, and let each run serve every check that needs one.


def test_the_xdist_controller_records_compares_and_caches(project: pytest.Pytester) -> None:
    # No baselines yet: every cell fails, and the controller writes what the workers measured.
    first = cached_run(project, "-n", "2")
    first.assert_outcomes(failed=CELLS)
    first.stdout.fnmatch_lines(
        [
            "*segrobust: device cpu; clean results cached in *segrobust-results*",
            "suites/bands.yaml::binner::gaussian_noise[[]5[]]: no baseline yet in baselines/bands.json*",
            "clean results: 1 computed, * from cache*",
        ]
    )
    stored = baseline(project)["models"]["binner"]
    assert set(stored) == {"clean", "gaussian_noise", "rotate"} and set(stored["gaussian_noise"]) == {"1", "5"}
    # The summary ends with the verdict, after every file written.
    start = next(i for i, line in enumerate(first.outlines) if line.startswith("=") and " segrobust " in line)
    end = next(i for i, line in enumerate(first.outlines) if i > start and line.startswith("="))
    section = first.outlines[start + 1 : end]
    verdict = json.loads((project.path / "segrobust-report.json").read_text())["verdict"]["line"]
    assert section[-1] == verdict and section[-1].startswith(f"FAIL · {CELLS} cells: "), section
    assert any(line.startswith("wrote ") for line in section[:-1]), section

    # The next run compares with them and passes; the workers read the clean results from the cache.
    second = cached_run(project, "-n", "2", figures=True)
    second.assert_outcomes(passed=CELLS)
    second.stdout.fnmatch_lines(
        ["*segrobust*", "suite bands:", "*binner*", "clean results: 0 computed, * from cache*", "wrote *segrobust-report.md"]
    )
    assert "clean results: 0 computed, 0 from cache" not in second.stdout.str()
    report = json.loads((project.path / "segrobust-report.json").read_text())
    cells = report["suites"]["bands"]["models"]["binner"]["cells"]
    assert [(c["corruption"], c["severity"]) for c in cells] == [
        ("clean", 0), ("gaussian_noise", 1), ("gaussian_noise", 5), ("rotate", 1), ("rotate", 5)
    ]
    noise5 = cells[2]
    assert noise5["gamma_r"] == pytest.approx(1 - (noise5["clean_score"] - noise5["score"]) / noise5["clean_score"])
    assert noise5["gamma_r"] < 0.95  # the fake model really degrades under strong noise
    markdown = (project.path / "segrobust-report.md").read_text()
    assert "### Headline" in markdown and "### Baseline comparison" in markdown
    # The worst images are measured again after the cells, by the controller.
    worst = report["suites"]["bands"]["worst_images"]["binner"]
    assert (worst["corruption"], worst["severity"], worst["considered"]) == ("gaussian_noise", 5, 8)
    assert (project.path / report["suites"]["bands"]["figures"][worst["figure"]]).is_file()

    # One process (-n 0), without the cache, writes the same report.
    single = cached_run(project, "-n", "0", "--segrobust-no-cache", figures=True)
    single.assert_outcomes(passed=CELLS)
    single.stdout.fnmatch_lines(["*clean results not cached*"])  # the controller's header line, as without workers
    assert without_timing(json.loads((project.path / "segrobust-report.json").read_text())) == without_timing(report)


def test_xdist_keeps_a_broken_suite_and_a_crash_apart(project: pytest.Pytester) -> None:
    # One run with two workers: a suite that does not load, a model that crashes in every cell,
    # and a suite of a corruption a conftest registers (in the controller and in each worker).
    project.makeconftest(DIM_CONFTEST)
    (project.path / "suites" / "bands.yaml").write_text(SUITE.format(smoothing=5).replace("[gaussian_noise, rotate]", "[dim]"))
    (project.path / "suites" / "crash.yaml").write_text(
        "dataset: {factory: segrobust_fakes:band_scenes}\n"
        "models: [{name: crasher, factory: segrobust_fakes:crashing_model}]\n"
        "corruptions: [gaussian_noise]\nseverities: [1]\n"
    )
    (project.path / "suites" / "broken.yaml").write_text(
        "dataset: {factory: segrobust_fakes:band_scenes}\n"
        "models: [{name: binner, factory: segrobust_fakes:red_binner}]\n"
        "corruptions: [gaussian_noise, gausian_blur]\n"
    )
    result = run(project, "--segrobust-update-baselines", "-n", "2")
    assert result.ret != pytest.ExitCode.OK  # xdist runs the valid suites and exits 1
    expected = (
        "broken.yaml: field 'corruptions[1]': unknown corruption 'gausian_blur' in preset 'coco-p' "
        "(did you mean 'gaussian_noise'?); known: "
    )
    assert expected in result.stdout.str()
    result.assert_outcomes(passed=3, failed=2, errors=1)  # the crasher's two cells fail, the dim suite's three pass
    result.stdout.fnmatch_lines(["*RuntimeError: CUDA out of memory (simulated)*"])
    assert set(baseline(project)["models"]["binner"]["dim"]) == {"1", "5"}
