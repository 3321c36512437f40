"""A video suite (task vos): static, dynamic and temporal cells from the task's own suite keys, gated by the plugin."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_segrobust.core.errors import SuiteError
from pytest_segrobust.corruptions.dynamic import DynamicMixture
from pytest_segrobust.randomness.seeding import FrameDraws
from pytest_segrobust.run.baseline_writes import suite_cells
from pytest_segrobust.suite.schema import load_suite
from tests.plugin_project import run
from tests.video_fakes import SOURCE

SUITE = """\
name: vos-tiny
task: vos
dataset: {factory: video_fakes:clip_scenes, kwargs: {count: 2, frames: 6}}
models:
  - {name: tracker, factory: video_fakes:colour_tracker, kwargs: {erode: 1}}
corruptions: [gaussian_noise, rotate]
static: {redraw: per_frame}
dynamic: {types: per_frame, levels: [1, 3, 5]}
temporal: [frame_sampling]
severities: [3]
metrics: [vos_jf]
batch_size: 2
"""
CELLS = ("gaussian_noise", "rotate", "dynamic[gaussian_noise,rotate]", "frame_sampling")


def write(root: Path, text: str = SUITE) -> Path:
    (root / "video_fakes.py").write_text(SOURCE)
    (root / "suites").mkdir(exist_ok=True)
    path = root / "suites" / "vos.yaml"
    path.write_text(text)
    return path


@pytest.fixture
def project_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def test_the_video_keys_add_and_shape_the_cells(project_dir: Path) -> None:
    suite = load_suite(write(project_dir))
    assert suite.corruptions == CELLS
    noise, mixture, sampling = (suite.corruption(name) for name in (CELLS[0], CELLS[2], CELLS[3]))
    assert noise.frame_draws is FrameDraws.FRAME and noise.table.describe()[0].endswith("static redraw per_frame")
    assert isinstance(mixture, DynamicMixture) and [p.name for p in mixture.parts] == ["gaussian_noise", "rotate"]
    assert sampling.temporal and sampling.frame_draws is FrameDraws.CLIP
    plain = load_suite(write(project_dir, SUITE.replace("static: {redraw: per_frame}\n", "")))
    assert plain.corruption("gaussian_noise").frame_draws is FrameDraws.CLIP
    assert plain.corruption("gaussian_noise").table.describe() != noise.table.describe()  # baselines tell them apart


def test_the_dynamic_cell_draws_its_own_levels_and_runs_once(project_dir: Path) -> None:
    suite = load_suite(write(project_dir, SUITE.replace("severities: [3]", "severities: [1, 3, 5]")))
    assert suite.cell_severities(CELLS[2]) == (1,)
    assert suite.cell_severities(CELLS[0]) == suite.cell_severities(CELLS[3]) == (1, 3, 5)
    keys = [(key.corruption, key.severity) for key in suite_cells(suite)]
    assert keys.count((CELLS[2], 1)) == 1 and [k for k in keys if k[0] == CELLS[2]] == [(CELLS[2], 1)]
    assert len(keys) == 1 + 3 * 3 + 1


@pytest.mark.parametrize(
    ("old", "new", "field", "message"),
    [
        ("static: {redraw: per_frame}", "static: {redraw: sometimes}", "static.redraw", "per_clip or per_frame"),
        ("static: {redraw: per_frame}", "static: {flicker: yes}", "static.flicker", "unknown option"),
        ("types: per_frame,", "types: per_frame, speed: 2,", "dynamic.speed", "unknown option"),
        ("levels: [1, 3, 5]", "levels: [1, 9]", "dynamic.levels", "severities 1..5"),
        ("dynamic: {", "dynamic: {corruptions: [frame_freeze], ", "dynamic.corruptions[0]", "unknown corruption"),
        (
            "temporal: [frame_sampling]",
            "temporal: [fog]",
            "temporal[0]",
            "unknown corruption 'fog' in preset 'video-temporal'",
        ),
        (
            "task: vos",
            "task: semantic",
            "dynamic",
            "task semantic takes no 'dynamic'; it is a key of task avs, rvos, vos",
        ),
    ],
)
def test_a_wrong_video_key_names_the_suite_file_and_the_field(
    project_dir: Path, old: str, new: str, field: str, message: str
) -> None:
    assert old in SUITE
    with pytest.raises(SuiteError, match="vos.yaml: field '([^']*)'") as raised:
        load_suite(write(project_dir, SUITE.replace(old, new)))
    assert f"field '{field}'" in str(raised.value) and message in str(raised.value), str(raised.value)


def cells_of(root: Path) -> list[tuple]:
    report = json.loads((root / "segrobust-report.json").read_text())
    cells = report["suites"]["vos-tiny"]["models"]["tracker"]["cells"]
    return [(c["corruption"], c["severity"], c["score"], c["details"], c["status"]) for c in cells]


def test_a_vos_suite_records_its_baselines_then_passes_alike_on_two_workers(pytester: pytest.Pytester) -> None:
    write(pytester.path)
    pytester.makeini("[pytest]\npythonpath = .\n")
    cells = 1 + len(CELLS)
    run(pytester, "--segrobust", "--segrobust-update-baselines").assert_outcomes(passed=cells)
    result = run(pytester, "--segrobust", figures=True)
    result.assert_outcomes(passed=cells)
    assert not [line for line in result.outlines if line.startswith("warning:")]  # the report's own warnings
    # A clip is drawn by its middle frame: the gallery and the worst clips are pictures too.
    figures = json.loads((pytester.path / "segrobust-report.json").read_text())["suites"]["vos-tiny"]["figures"]
    assert {"gallery", "worst-tracker"} <= set(figures)
    alone = cells_of(pytester.path)
    assert [c[:2] for c in alone] == [("clean", 0)] + [(name, 3) for name in CELLS]
    assert alone[0][2] < 100.0 and all(c[2] < alone[0][2] for c in alone if c[0] == "gaussian_noise")
    run(pytester, "--segrobust", "-n", "2").assert_outcomes(passed=cells)
    assert cells_of(pytester.path) == alone


RVOS_SUITE = """\
name: rvos-tiny
task: rvos
dataset: {factory: video_fakes:referring_clip_scenes, kwargs: {count: 2, frames: 6}}
models:
  - {name: reader, factory: video_fakes:colour_reader}
corruptions: [gaussian_noise, misspelling, gaussian_noise+misspelling]
dynamic: {corruptions: [gaussian_noise, rotate], types: per_clip}
severities: [3]
"""


def test_an_rvos_suite_runs_its_text_static_and_dynamic_cells_end_to_end(project_dir: Path) -> None:
    import torch

    from pytest_segrobust.engine.evaluation import EvalSettings, evaluate
    from pytest_segrobust.models import adapt_model
    from pytest_segrobust.suite.model_sources import build_model
    from pytest_segrobust.tasks import get_task

    suite = load_suite(write(project_dir, RVOS_SUITE))
    assert suite.corruptions[-1] == "dynamic[gaussian_noise,rotate;types=per_clip;levels=1,3,5]"
    assert suite.metrics == ("vos_jf", "vos_j", "vos_f")
    task = get_task(suite.task)
    model = adapt_model(build_model(suite.models[0], torch.device("cpu"), task=suite.task), task)
    dataset = suite.dataset.build()
    clean = evaluate(model, dataset, settings=EvalSettings.of(task=task, metrics=suite.metrics, batch_size=4))
    assert clean.score == 100.0
    for name in suite.corruptions:
        corrupted = evaluate(
            model,
            dataset,
            suite.corruption(name),
            3,
            settings=EvalSettings.of(task=task, metrics=suite.metrics, seed=0, batch_size=4),
        )
        # the reader reads the colour word: a misspelt word fails it, noise and motion do too
        assert corrupted.score < clean.score, name
