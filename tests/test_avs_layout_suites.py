"""Suites over clips in AVSBench's published layouts: an S4 and an MS3 copy, run by the plugin.

One project per module: its baselines are recorded, then a second run passes against them,
and the tests read what those two runs left (a module-scoped record of the runs).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# pytester's in-process runs drop the modules a run imported, and numpy.fft's extension (which the
# acoustic filters import) cannot be loaded twice in one process: it is imported once, here.
import numpy.fft  # noqa: F401
import pytest

from pytest_segrobust.data.avsbench import avsbench
from pytest_segrobust.engine.evaluation import EvalSettings, evaluate
from pytest_segrobust.models import adapt_model
from pytest_segrobust.tasks import get_task
from pytest_segrobust.tasks.avs import MIXTURE_CELL
from tests.av_fakes import SOURCE, tone_reader
from tests.data.avs_layouts import write_ms3, write_s4
from tests.plugin_project import run

pytestmark = pytest.mark.xdist_group("avs_layout_suites")  # one worker records the project once

METRICS = ("avs_miou", "avs_f")
S4_CLIPS = {"dogA": "dog_barking", "carB": "race_car", "catC": "cat_meowing", "gunD": "gun_shooting"}
MS3_CLIPS = ("msA", "msB", "msC")
SUITE = """\
name: {name}
task: avs
dataset: {{factory: pytest_segrobust.data.avsbench:avsbench, kwargs: {{root: '{root}', subset: {subset}, split: test}}}}
models: [{{name: reader, factory: av_fakes:tone_reader}}]
corruptions: [gaussian_noise]
dynamic: {{corruptions: [gaussian_noise, rotate], types: per_frame, levels: [1, 3]}}
acoustic: [low_pass, background_noise, time_mask]
mixture: r2bench
severities: [5]
metrics: [avs_miou, avs_f]
batch_size: 2
"""
CELLS = {
    "clean[0]",
    "gaussian_noise[5]",
    "dynamic[gaussian_noise,rotate;types=per_frame;levels=1,3][5]",
    "low_pass[5]",
    "background_noise[5]",
    "time_mask[5]",
    f"{MIXTURE_CELL}[5]",
}
ACOUSTIC = ("low_pass[5]", "background_noise[5]", "time_mask[5]")
VISUAL = ("gaussian_noise[5]", "dynamic[gaussian_noise,rotate;types=per_frame;levels=1,3][5]")
SUITES = {"avs-s4-copy": "s4", "avs-ms3-copy": "ms3"}


@dataclass(frozen=True)
class Runs:
    """What recording the baselines, then gating against them, left."""

    recorded: dict[str, int]
    gated: dict[str, int]
    outlines: list[str]
    report: dict[str, Any]
    baselines: tuple[str, ...]


@pytest.fixture(scope="module")
def layouts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("avsbench")
    write_s4(root / "Single-source", S4_CLIPS)
    write_ms3(root / "Multi-sources", MS3_CLIPS)
    return {"s4": root / "Single-source", "ms3": root / "Multi-sources"}


@pytest.fixture(scope="module")
def _runs_cache() -> dict[str, Runs]:
    return {}


@pytest.fixture
def runs(pytester: pytest.Pytester, layouts: dict[str, Path], _runs_cache: dict[str, Runs]) -> Runs:
    """The module's two runs, made by the first test that asks (pytester itself is per test)."""
    if "runs" not in _runs_cache:
        (pytester.path / "av_fakes.py").write_text(SOURCE)
        (pytester.path / "suites").mkdir()
        for name, subset in SUITES.items():
            text = SUITE.format(name=name, root=layouts[subset].as_posix(), subset=subset)
            (pytester.path / "suites" / f"{name}.yaml").write_text(text)
        pytester.makeini("[pytest]\npythonpath = .\n")
        recorded = run(pytester, "--segrobust", "--segrobust-update-baselines")
        gated = run(pytester, "--segrobust")
        _runs_cache["runs"] = Runs(
            _outcomes(recorded),
            _outcomes(gated),
            gated.outlines,
            json.loads((pytester.path / "segrobust-report.json").read_text()),
            tuple(sorted(path.name for path in (pytester.path / "baselines").iterdir())),
        )
    return _runs_cache["runs"]


def _outcomes(result: pytest.RunResult) -> dict[str, int]:
    """The items' outcomes, without pytest's warnings count (a clean install's pytester warns
    that the plugin was imported before it could rewrite its asserts)."""
    return {k: v for k, v in result.parseoutcomes().items() if k not in ("warnings", "warning")}


def cells(runs: Runs, suite: str) -> dict[str, dict[str, Any]]:
    entries = runs.report["suites"][suite]["models"]["reader"]["cells"]
    return {f"{c['corruption']}[{c['severity']}]": c for c in entries}


def test_the_s4_and_ms3_copies_record_their_baselines_then_pass(runs: Runs) -> None:
    items = len(SUITES) * len(CELLS)
    assert runs.recorded == {"passed": items} and runs.gated == {"passed": items}
    assert runs.baselines == ("avs-ms3-copy.json", "avs-s4-copy.json")
    assert not [line for line in runs.outlines if line.startswith("warning:")]  # the report's own warnings
    assert runs.report["verdict"]["passed"]
    for suite in SUITES:
        assert set(cells(runs, suite)) == CELLS, suite


@pytest.mark.parametrize("suite", list(SUITES))
def test_the_clean_cell_is_an_evaluation_outside_the_plugin(runs: Runs, layouts: dict[str, Path], suite: str) -> None:
    model = adapt_model(tone_reader(), get_task("avs"))
    by_hand = evaluate(
        model, avsbench(layouts[SUITES[suite]], SUITES[suite]), settings=EvalSettings.of(task="avs", metrics=METRICS)
    )
    clean = cells(runs, suite)["clean[0]"]
    assert clean["score"] == pytest.approx(by_hand.metrics["avs_miou"].score, abs=1e-9)  # the primary metric
    assert clean["metrics"]["avs_f"]["score"] == pytest.approx(by_hand.metrics["avs_f"].score, abs=1e-9)
    assert by_hand.score == 100.0  # the reader hears every clip's tone: a number the perturbations can lower


@pytest.mark.parametrize("suite", list(SUITES))
def test_acoustic_visual_and_mixed_cells_each_move_the_listening_model(runs: Runs, suite: str) -> None:
    scores = {name: cell["score"] for name, cell in cells(runs, suite).items()}
    clean = scores["clean[0]"]
    assert any(scores[name] < clean for name in ACOUSTIC), scores
    assert all(scores[name] < clean for name in VISUAL), scores
    assert scores[f"{MIXTURE_CELL}[5]"] < clean, scores
