"""The gate never lies: each test here is a way a broken model or a wrong baseline used to pass.

NaN and infinity (observed or stored), stale cached clean results, baselines recorded under
other conditions, silently ignored suite keys, crashes at the end of the run, hanging
models, relative paths and factory imports from another working directory.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fakes import WOKE
from tests.plugin_project import CELLS, SINGLE_PROCESS, SUITE, baseline, cached_run, recorded, run, write_suite

ONE_CELL_SUITE = (
    "dataset: {{factory: segrobust_fakes:band_scenes{dataset_kwargs}}}\n"
    "models: [{{name: m, factory: segrobust_fakes:{model}}}]\n"
    "corruptions: [gaussian_noise]\nseverities: [5]\n{extra}"
)


def one_cell_suite(pytester: pytest.Pytester, model: str, extra: str = "", dataset_kwargs: str = "") -> None:
    (pytester.path / "suites" / "bands.yaml").write_text(
        ONE_CELL_SUITE.format(model=model, extra=extra, dataset_kwargs=dataset_kwargs)
    )


def without_pythonpath(pytester: pytest.Pytester) -> None:
    """A project with no pythonpath: the fakes in the rootdir, a model's module beside the suites."""
    from tests.fakes import FAKES_SOURCE

    (pytester.path / "suites").mkdir()
    (pytester.path / "suites" / "suite_models.py").write_text("from segrobust_fakes import red_binner as model\n")
    pytester.makepyfile(segrobust_fakes=FAKES_SOURCE)
    pytester.makeini("[pytest]\n")  # no pythonpath


def report(pytester: pytest.Pytester) -> dict:
    return json.loads((pytester.path / "segrobust-report.json").read_text())


# -- NaN and infinity never pass --------------------------------------------------------------


def test_a_nan_in_the_baseline_fails_instead_of_passing_everything(project: pytest.Pytester) -> None:
    recorded(project)
    path = project.path / "baselines" / "bands.json"
    document = json.loads(path.read_text())
    document["models"]["binner"]["gaussian_noise"]["5"]["gamma_r"] = math.nan
    path.write_text(json.dumps(document))  # Python's json writes NaN, as a hand edit or an old writer might
    write_suite(project, smoothing=1)  # a far less robust model: it must not slip through
    result = run(project, "--segrobust")
    result.assert_outcomes(failed=CELLS)
    result.stdout.fnmatch_lines(["*models.binner.gaussian_noise.5.gamma_r is nan: a baseline stores finite numbers only*"])


def test_a_stored_cell_without_a_gated_number_fails_naming_it_until_an_update_repairs_it(project: pytest.Pytester) -> None:
    recorded(project)
    path = project.path / "baselines" / "bands.json"
    document = json.loads(path.read_text())
    del document["models"]["binner"]["gaussian_noise"]["5"]["gamma_r"]  # removed by hand
    path.write_text(json.dumps(document))
    result = run(project, "--segrobust")  # the same model: only the missing number can fail
    result.assert_outcomes(failed=1, passed=CELLS - 1)
    result.stdout.fnmatch_lines(
        [
            (
                "suites/bands.yaml::binner::gaussian_noise[[]5[]]: baselines/bands.json: models.binner.gaussian_noise.5 has no gamma_r, "
                "which the suite gates*rewrite the cell with pytest --segrobust 'suites/bands.yaml::binner::gaussian_noise[[]5[]]' --segrobust-update-baselines"
            )
        ]
    )
    update = run(project, "--segrobust-update-baselines", "-k", "gaussian_noise and 5")
    update.assert_outcomes(passed=1)
    assert "gamma_r" in baseline(project)["models"]["binner"]["gaussian_noise"]["5"]


@SINGLE_PROCESS  # under xdist: test_nan_logits_a_hanging_model_and_a_factory_beside_the_suites_in_xdist_workers
def test_nan_logits_fail_their_cells_and_are_never_recorded(project: pytest.Pytester, dist: list[str]) -> None:
    one_cell_suite(project, "nan_binner")
    result = run(project, "--segrobust-update-baselines", *dist)
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*model returned NaN or infinite logits (* of * values) (batch starting at sample bands/0)*"])
    assert not (project.path / "baselines" / "bands.json").exists()
    # Named for what happened, not as a crashed worker.
    errors = report(project)["errors"]
    assert set(errors) == {"suites/bands.yaml::m::clean", "suites/bands.yaml::m::gaussian_noise[5]"}
    assert report(project)["missing"] == []


def test_an_undefined_robustness_fails_and_is_not_recorded(project: pytest.Pytester) -> None:
    one_cell_suite(project, "wrong_class_binner")
    result = run(project, "--segrobust-update-baselines")
    result.assert_outcomes(failed=1, passed=1)  # clean mIoU 0 is a number; gamma_r = x / 0 is not
    result.stdout.fnmatch_lines(
        ["suites/bands.yaml::m::gaussian_noise[[]5[]]: gamma_r is nan (the clean mIoU is 0, so relative robustness is undefined)*"]
    )
    stored = baseline(project)["models"]["m"]
    assert set(stored) == {"clean"}
    assert "nan" not in (project.path / "baselines" / "bands.json").read_text().lower()


# -- stale clean results -------------------------------------------------------------------------

MODEL_MODULE = '''
import torch
from my_helpers import CENTRE_OFFSET


class Binner(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("centres", (torch.arange(4) + CENTRE_OFFSET) / 4)

    def forward(self, images):
        return -((images[:, :1] - self.centres.view(1, -1, 1, 1)) ** 2) * {scale}


def binner():
    return Binner()
'''


def test_edited_model_code_is_never_served_from_the_cache(project: pytest.Pytester) -> None:
    project.makepyfile(my_model=MODEL_MODULE.format(scale=1), my_helpers="CENTRE_OFFSET = 0.5\n")
    one_cell_suite(project, "binner")
    (project.path / "suites" / "bands.yaml").write_text(
        (project.path / "suites" / "bands.yaml").read_text().replace("segrobust_fakes:binner", "my_model:binner")
    )
    # One process builds the model once, for its cells and for the report's pictures alike.
    # Its corrupted cell is cached as its clean result is, and made stale by the same edits.
    measured = ["clean results: 1 computed, 0 from cache*", "corrupted cells: 1 measured, 0 from cache"]
    cached_run(project, "--segrobust-update-baselines").stdout.fnmatch_lines(
        ["clean results: 1 computed, 0 from cache (*); 1 model build", measured[1]]
    )
    cached_run(project).stdout.fnmatch_lines(["clean results: 0 computed, 1 from cache*", "corrupted cells: 0 measured, 1 from cache"])
    # Same weights, same factory call; only the code of forward changed.
    project.makepyfile(my_model=MODEL_MODULE.format(scale=2))
    cached_run(project).stdout.fnmatch_lines(measured)
    # A module the model's module imports is the model's code too.
    project.makepyfile(my_helpers="CENTRE_OFFSET = 0.4\n")
    cached_run(project, "--segrobust-update-baselines").stdout.fnmatch_lines(measured)


# -- baselines made under other conditions ---------------------------------------------------------


def test_a_baseline_from_another_seed_fails_naming_the_field_until_re_recorded(project: pytest.Pytester) -> None:
    recorded(project)
    (project.path / "suites" / "bands.yaml").write_text(SUITE.format(smoothing=5) + "seed: 7\n")
    result = run(project, "--segrobust")
    result.assert_outcomes(failed=CELLS)
    result.stdout.fnmatch_lines(
        ["*bands.json: recorded under other conditions than this run (seed: baseline 0, this run 7)*--segrobust-update-baselines*"]
    )
    run(project, "--segrobust-update-baselines").assert_outcomes(passed=CELLS)
    run(project, "--segrobust").assert_outcomes(passed=CELLS)
    assert baseline(project)["conditions"]["seed"] == 7


def test_a_wrongly_shaped_baseline_is_reported_and_repaired_by_an_update(project: pytest.Pytester) -> None:
    recorded(project)
    path = project.path / "baselines" / "bands.json"
    document = json.loads(path.read_text())
    document["models"]["binner"]["clean"]["score"] = "52.9"
    document["models"]["binner"]["rotate"] = [1, 5]
    path.write_text(json.dumps(document))
    result = run(project, "--segrobust")
    result.assert_outcomes(failed=CELLS)
    result.stdout.fnmatch_lines(["*bands.json: models.binner.clean.score: expected a number, got '52.9'; fix it or rewrite it*"])
    assert "Traceback" not in result.stdout.str() and "ValueError" not in result.stdout.str()
    run(project, "--segrobust-update-baselines").assert_outcomes(passed=CELLS)
    run(project, "--segrobust").assert_outcomes(passed=CELLS)


# -- suites that would silently mean something else --------------------------------------------------


def test_two_suite_files_with_one_name_are_a_collection_error(project: pytest.Pytester) -> None:
    (project.path / "suites" / "copy.yaml").write_text(SUITE.format(smoothing=1))  # SUITE names itself bands
    result = run(project, "--segrobust", "--collect-only")
    assert result.ret != pytest.ExitCode.OK
    result.stdout.fnmatch_lines(
        ["*field 'name': suite name 'bands' is also the name of suites/*.yaml; both would share baselines/bands.json*"]
    )


def test_a_suite_from_elsewhere_with_the_name_of_one_in_the_suites_folder_is_a_collection_error(
    project: pytest.Pytester,
) -> None:
    run(project, "--segrobust-update-baselines").assert_outcomes(passed=CELLS)
    stored = (project.path / "baselines" / "bands.json").read_text()
    (project.path / "other").mkdir()
    (project.path / "other" / "s.yaml").write_text(SUITE.format(smoothing=1))  # SUITE names itself bands
    clash = "suite name 'bands' is also the name of {}; both would share baselines/bands.json*"
    # Named alone, the suite in suites/ is not collected, and still counts.
    alone = run(project, "--segrobust-update-baselines", "other/s.yaml")
    assert alone.ret == pytest.ExitCode.INTERRUPTED
    alone.stdout.fnmatch_lines(["*other/s.yaml: field 'name': " + clash.format("suites/bands.yaml")])
    both = run(project, "--segrobust-update-baselines", "suites", "other/s.yaml")
    assert both.ret == pytest.ExitCode.INTERRUPTED
    both.stdout.fnmatch_lines(["*suites/bands.yaml: field 'name': " + clash.format("other/s.yaml")])
    assert (project.path / "baselines" / "bands.json").read_text() == stored


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda s: s.replace("kwargs: {smoothing: 5}", "kwarg: {smoothing: 5}"), "field 'models[0].kwarg': unknown field; expected name or factory or kwargs"),
        (lambda s: s.replace("segrobust_fakes:band_scenes}", "segrobust_fakes:band_scenes, size: 4}"), "field 'dataset.size': unknown field; expected factory or kwargs"),
        (lambda s: s.replace("severities: [1, 5]", "severities: [1, 5, 5]"), "field 'severities[2]': severity 5 is listed twice"),
    ],
    ids=["models-kwarg", "dataset-key", "duplicate-severity"],
)
def test_a_suite_key_that_would_be_dropped_is_a_collection_error(project: pytest.Pytester, edit, message: str) -> None:
    (project.path / "suites" / "bands.yaml").write_text(edit(SUITE.format(smoothing=5)))
    result = run(project, "--segrobust", "--collect-only")
    assert result.ret != pytest.ExitCode.OK
    result.stdout.fnmatch_lines([f"*bands.yaml: {message}*".replace("[", "[[]")])  # [ opens a class in fnmatch


# -- no raw tracebacks, and the end of the run is robust -----------------------------------------------


def test_an_empty_dataset_is_a_clear_error(project: pytest.Pytester) -> None:
    one_cell_suite(project, "red_binner", dataset_kwargs=", kwargs: {size: 0}")
    result = run(project, "--segrobust")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*bands-0-32x32-0: the dataset has no samples; there is nothing to evaluate*"])
    assert "TypeError" not in result.stdout.str() and "INTERNALERROR" not in result.stdout.str()


@pytest.mark.parametrize("dist", [[]], ids=["no-xdist"])  # a cell's error crosses xdist as any other (tested elsewhere)
def test_duplicate_sample_ids_fail_every_cell_naming_the_dataset_the_id_and_both_indices(
    project: pytest.Pytester, dist: list[str]
) -> None:
    (project.path / "suites" / "bands.yaml").write_text(SUITE.format(smoothing=5).replace(":band_scenes", ":repeated_id_scenes"))
    result = run(project, "--segrobust-update-baselines", *dist)  # an update would accept any number measured
    result.assert_outcomes(failed=CELLS)
    result.stdout.fnmatch_lines(
        [
            (
                "*bands.yaml: field 'dataset': evaluating *: bands-8-32x32-0: sample_id 'bands/2' is used twice, by the samples at "
                "index 2 and 5; sample ids must be unique*"
            )
        ]
    )
    assert not (project.path / "baselines" / "bands.json").exists()


def test_a_model_whose_device_is_a_string_runs(project: pytest.Pytester) -> None:
    one_cell_suite(project, "string_device_binner")
    cached_run(project, "--segrobust-update-baselines").assert_outcomes(passed=2)
    cached_run(project).assert_outcomes(passed=2)


def test_an_unwritable_baseline_folder_fails_the_run_but_keeps_the_report(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pytest_segrobust.core import files

    real_replace = os.replace

    def read_only_baselines(source, target):  # what a read-only folder does to the atomic rename
        if Path(target).parent.name == "baselines":
            raise PermissionError(13, "Permission denied")
        return real_replace(source, target)

    monkeypatch.setattr(files.os, "replace", read_only_baselines)
    result = run(project, "--segrobust")
    result.assert_outcomes(failed=CELLS)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "suites/bands.yaml::binner::clean: no baseline yet in baselines/bands.json*",  # the cells' messages are there
            "*error: baselines not written, the stored ones are unchanged: cannot write *bands.json: Permission denied*",
        ]
    )
    assert "Traceback" not in result.stdout.str()
    assert (project.path / "segrobust-report.md").exists()
    assert list((project.path / "baselines").iterdir()) == []  # nothing half-written left behind


def test_an_unwritable_report_path_is_one_line_and_the_baselines_still_land(project: pytest.Pytester) -> None:
    (project.path / "out").write_text("a file where a folder is expected")
    result = run(project, "--segrobust-update-baselines", "--segrobust-report", "out/robust")
    result.assert_outcomes(passed=CELLS)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*error: cannot write *out/robust.md: *out is a file, not a folder*"])
    assert baseline(project)["models"]["binner"]["clean"]["score"] > 0

    (project.path / "segrobust-report.json").mkdir()
    result = run(project, "--segrobust")
    result.assert_outcomes(passed=CELLS)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*error: cannot write *segrobust-report.json: it is a directory*"])
    assert "### Headline" in (project.path / "segrobust-report.md").read_text()


def test_temporaries_of_a_killed_write_are_removed_by_the_next_run(project: pytest.Pytester) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True)
    (project.path / "baselines").mkdir()
    leftover = project.path / "baselines" / f".bands.json.{dead.stdout.strip()}.0123abcd.tmp"
    leftover.write_text('{"format": 2, "mod')
    live = project.path / "baselines" / f".bands.json.{os.getppid()}.0123abcd.tmp"  # a writer still running
    live.write_text("")
    run(project, "--segrobust-update-baselines").assert_outcomes(passed=CELLS)
    assert not leftover.exists() and live.exists()


def test_report_and_baselines_keep_the_umasks_mode(project: pytest.Pytester) -> None:
    old = os.umask(0o022)
    try:
        run(project, "--segrobust-update-baselines").assert_outcomes(passed=CELLS)
    finally:
        os.umask(old)
    for path in (project.path / "baselines" / "bands.json", project.path / "segrobust-report.md"):
        assert path.stat().st_mode & 0o777 == 0o644, path


# -- a hanging model ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["suite", "option"])
def test_a_hanging_model_fails_its_cell_at_the_time_limit(project: pytest.Pytester, where: str) -> None:
    one_cell_suite(project, "sleepy_binner", extra="timeout: 0.5\n" if where == "suite" else "")
    option = ["--segrobust-timeout", "0.5"] if where == "option" else []
    result = run(project, "--segrobust", *option)
    assert not (project.path / WOKE).exists()  # the limit interrupted the model's sleep of 60 s
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["suites/bands.yaml::m::clean: stopped after the time limit of 0.5 s (suite field 'timeout' or --segrobust-timeout)*"])


# -- what the user meant -------------------------------------------------------------------------------------


def test_relative_paths_resolve_against_the_rootdir_from_any_folder(project: pytest.Pytester) -> None:
    import numpy as np
    from PIL import Image

    from tests.fakes import band_scenes

    for folder in ("data/images", "data/masks"):
        (project.path / folder).mkdir(parents=True)
    for index, sample in enumerate(band_scenes(size=4)):
        Image.fromarray(sample.image.permute(1, 2, 0).numpy()).save(project.path / "data/images" / f"{index}.png")
        Image.fromarray(sample.target.mask.numpy().astype(np.uint8)).save(project.path / "data/masks" / f"{index}.png")
    (project.path / "suites" / "bands.yaml").write_text(
        "dataset:\n  factory: pytest_segrobust.data.semantic_folder:SemanticFolder\n"
        "  kwargs: {images_dir: data/images, masks_dir: data/masks, class_names: [background, a, b, c]}\n"
        "models: [{name: m, factory: segrobust_fakes:red_binner}]\ncorruptions: [rotate]\nseverities: [1]\n"
    )
    (project.path / "elsewhere").mkdir()
    project.chdir()
    os.chdir(project.path / "elsewhere")
    result = project.runpytest("-p", "no:cacheprovider", "--segrobust-update-baselines")
    result.assert_outcomes(passed=2)
    assert report(project)["suites"]["bands"]["models"]["m"]["cells"][0]["score"] == 100.0
    assert (project.path / "baselines" / "bands.json").exists()


@SINGLE_PROCESS  # under xdist: test_nan_logits_a_hanging_model_and_a_factory_beside_the_suites_in_xdist_workers
def test_a_factory_beside_the_suites_or_in_the_rootdir_needs_no_pythonpath(pytester: pytest.Pytester, dist: list[str]) -> None:
    without_pythonpath(pytester)
    (pytester.path / "suites" / "bands.yaml").write_text(
        "dataset: {factory: segrobust_fakes:band_scenes}\n"
        "models: [{name: m, factory: suite_models:model}]\ncorruptions: [rotate]\nseverities: [1]\n"
    )
    run(pytester, "--segrobust-update-baselines", *dist).assert_outcomes(passed=2)



# -- under xdist -------------------------------------------------------------------------------------------
# The checks above run in one process. What differs with two workers (NaN logits and a time limit
# met in a worker process and sent to the controller, factories imported in the workers with no
# pythonpath) is checked on one project of three suites and one run with -n 2, which serves every
# check: starting xdist's workers costs more CPU than the suites. One test, not one per check:
# `--dist loadgroup` cannot be relied on to keep tests that share a run on one worker.

SHARED_SUITES = {
    "nan": ONE_CELL_SUITE.format(model="nan_binner", extra="", dataset_kwargs=""),
    "sleepy": ONE_CELL_SUITE.format(model="sleepy_binner", extra="timeout: 0.5\n", dataset_kwargs=""),
    "beside": (
        "dataset: {factory: segrobust_fakes:band_scenes}\n"
        "models: [{name: m, factory: suite_models:model}]\ncorruptions: [rotate]\nseverities: [1]\n"
    ),
}


def test_nan_logits_a_hanging_model_and_a_factory_beside_the_suites_in_xdist_workers(pytester: pytest.Pytester) -> None:
    without_pythonpath(pytester)
    for name, text in SHARED_SUITES.items():
        (pytester.path / "suites" / f"{name}.yaml").write_text(text)
    result = run(pytester, "--segrobust-update-baselines", "-n", "2")
    result.assert_outcomes(failed=4, passed=2)  # nan's and sleepy's cells fail, beside's pass
    assert "crashed" not in result.stdout.str()  # no cell's failure is taken for a crashed worker
    errors = report(pytester)["errors"]
    assert set(errors) == {f"suites/{name}.yaml::m::{cell}" for name in ("nan", "sleepy") for cell in ("clean", "gaussian_noise[5]")}
    assert report(pytester)["missing"] == []
    stored = {path.name for path in (pytester.path / "baselines").iterdir()}

    # NaN logits fail their cells, named for what happened, and are never recorded.
    result.stdout.fnmatch_lines(["*model returned NaN or infinite logits (* of * values) (batch starting at sample bands/0)*"])
    assert all("NaN or infinite logits" in errors[f"suites/nan.yaml::m::{cell}"] for cell in ("clean", "gaussian_noise[5]"))
    assert "nan.json" not in stored

    # The time limit holds in the worker: it interrupted the model's sleep of 60 s.
    assert not (pytester.path / WOKE).exists()
    result.stdout.fnmatch_lines(["*suites/sleepy.yaml::m::clean: stopped after the time limit of 0.5 s*"])
    assert "sleepy.json" not in stored

    # A factory beside the suites (and the fakes in the rootdir) import in the workers with no pythonpath.
    assert stored == {"beside.json"}
    cells = report(pytester)["suites"]["beside"]["models"]["m"]["cells"]
    assert [(c["corruption"], c["severity"]) for c in cells] == [("clean", 0), ("rotate", 1)]


def test_the_cli_stops_quietly_when_its_reader_goes_away() -> None:
    read, write = os.pipe()
    os.close(read)  # like `segrobust list | head` once head has exited
    try:
        done = subprocess.run(
            [sys.executable, "-m", "pytest_segrobust.cli", "list"], stdout=write, stderr=subprocess.PIPE, text=True, timeout=120, check=False
        )
    finally:
        os.close(write)
    assert done.stderr == "" and done.returncode == 141


def test_the_gallery_corrupts_at_full_resolution(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import numpy as np
    from PIL import Image

    from pytest_segrobust import cli
    from pytest_segrobust.corruptions import REGISTRY

    translate = REGISTRY.get("translate")
    monkeypatch.setattr(cli.REGISTRY, "available", lambda preset: [translate])
    pixels = np.zeros((320, 320, 3), dtype=np.uint8)
    pixels[:, 150:170] = 255  # a vertical bar; translate moves it by 20 px at severity 1
    Image.fromarray(pixels).save(tmp_path / "bar.png")
    out = tmp_path / "gallery.png"
    assert cli.main(["gallery", str(tmp_path / "bar.png"), "--out", str(out), "--size", "80", "--severities", "1"]) == 0
    grid = np.asarray(Image.open(out).convert("L"))
    tile_top = grid.shape[0] - 4 - 80  # one row of 80 px tiles under the header, 4 px padding below
    row = grid[tile_top + 12] > 128  # above the label, through the clean tile and the corrupted one
    falls = np.flatnonzero(np.diff(row.astype(np.int8)) == -1)  # white to black: a tile starts, a bar ends
    assert len(falls) == 4, falls
    clean_bar, moved_bar = falls[1] - falls[0], falls[3] - falls[2]
    assert abs(clean_bar - 170 / 4) <= 1
    assert 4 <= abs(int(moved_bar - clean_bar)) <= 6  # 20 px at full size is 5 px at a quarter of it (before: 20 px)
