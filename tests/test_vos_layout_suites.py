"""Suites over clips in the published layouts: a DAVIS 2017 and a YouTube-VOS copy, run by the plugin."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_segrobust.data.davis import davis
from pytest_segrobust.data.youtube_vos import youtube_vos
from pytest_segrobust.engine.evaluation import EvalSettings, evaluate
from pytest_segrobust.models import adapt_model
from pytest_segrobust.tasks import get_task
from tests.data.vos_layouts import meta_object, moving_objects, write_davis, write_json, write_youtube_clip
from tests.plugin_project import run

MODEL = """\
import torch


class CopyForward(torch.nn.Module):
    '''Each object's mask where it is given, carried to every later frame (a tracker that never looks).'''

    def forward(self, clips, reference):
        out = torch.zeros_like(reference)
        for t in range(reference.shape[1]):
            if t:
                out[:, t] = out[:, t - 1]
            out[:, t] = torch.where(reference[:, t] > 0, reference[:, t], out[:, t])
        return out


def copy_forward():
    return CopyForward()
"""

SUITES = {
    "davis-copy": """\
name: davis-copy
task: vos
dataset: {factory: pytest_segrobust.data.davis:davis, kwargs: {root: data/davis, split: val}}
models: [{name: copy, factory: copy_forward:copy_forward}]
corruptions: [gaussian_noise, rotate]
dynamic: {types: per_frame, levels: [1, 3, 5]}
temporal: [reverse_sampling]
severities: [3]
metrics: [vos_jf, vos_j, vos_f]
batch_size: 2
""",
    "ytvos-copy": """\
name: ytvos-copy
task: vos
dataset:
  factory: pytest_segrobust.data.youtube_vos:youtube_vos
  kwargs: {root: data/ytvos, split: valid, all_frames: false, train_meta: data/ytvos/train/meta.json}
models: [{name: copy, factory: copy_forward:copy_forward}]
corruptions: [rotate]
temporal: [jumble]
severities: [3]
metrics: [youtube_vos_g, vos_jf]
batch_size: 2
""",
}


def write_layouts(root: Path) -> None:
    write_davis(
        root / "data" / "davis",
        {"bear": moving_objects(6, {1: 0, 2: 0}), "swan": moving_objects(6, {1: 0})},
        {"val": ["swan", "bear"]},
    )
    split = root / "data" / "ytvos" / "valid"
    dog = write_youtube_clip(split, "v1", 0, moving_objects(5, {1: 0, 2: 2}))  # a cat enters at the third frame
    write_youtube_clip(split, "v2", 1, moving_objects(5, {1: 0}))
    write_json(
        split / "meta.json",
        {
            "videos": {
                "v1": {"objects": {"1": meta_object("dog", dog), "2": meta_object("cat", dog[2:])}},
                "v2": {"objects": {"1": meta_object("dog", dog)}},
            }
        },
    )
    write_json(
        root / "data" / "ytvos" / "train" / "meta.json",
        {"videos": {"t": {"objects": {"1": meta_object("dog", ["00000"])}}}},  # cats are unseen
    )


def cells(root: Path, suite: str) -> dict[str, dict]:
    report = json.loads((root / "segrobust-report.json").read_text())
    entries = report["suites"][suite]["models"]["copy"]["cells"]
    return {f"{c['corruption']}[{c['severity']}]": c for c in entries}


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    write_layouts(pytester.path)
    (pytester.path / "copy_forward.py").write_text(MODEL)
    (pytester.path / "suites").mkdir()
    for name, text in SUITES.items():
        (pytester.path / "suites" / f"{name}.yaml").write_text(text)
    pytester.makeini("[pytest]\npythonpath = .\n")
    return pytester


def test_davis_and_youtube_vos_layouts_run_as_suites(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    items = (1 + 2 + 1 + 1) + (1 + 1 + 1)
    run(project, "--segrobust", "--segrobust-update-baselines").assert_outcomes(passed=items)
    result = run(project, "--segrobust")
    result.assert_outcomes(passed=items)
    assert not [line for line in result.outlines if line.startswith("warning:")]  # the report's own warnings
    davis_cells, ytvos_cells = cells(project.path, "davis-copy"), cells(project.path, "ytvos-copy")
    assert set(davis_cells) == {
        "clean[0]",
        "gaussian_noise[3]",
        "rotate[3]",
        "dynamic[gaussian_noise,rotate][3]",
        "reverse_sampling[3]",
    }
    assert set(ytvos_cells) == {"clean[0]", "rotate[3]", "jumble[3]"}
    # The clean numbers are those of an evaluation outside the plugin, on the same readers.
    monkeypatch.syspath_prepend(str(project.path))
    monkeypatch.chdir(project.path)
    from copy_forward import copy_forward  # type: ignore[import-not-found]

    model = adapt_model(copy_forward(), get_task("vos"))
    by_hand = evaluate(
        model, davis("data/davis"), settings=EvalSettings.of(task="vos", metrics=["vos_jf", "vos_j", "vos_f"])
    )
    assert davis_cells["clean[0]"]["score"] == pytest.approx(by_hand.score, abs=1e-9)
    assert 0.0 < by_hand.score < 100.0  # the copied masks miss the moving boxes: a number that can move
    assert davis_cells["clean[0]"]["metrics"]["vos_j"]["score"] == pytest.approx(by_hand.metrics["vos_j"].score)
    reader = youtube_vos("data/ytvos", train_meta="data/ytvos/train/meta.json")
    g = evaluate(model, reader, settings=EvalSettings.of(task="vos", metrics=["youtube_vos_g"]))
    assert ytvos_cells["clean[0]"]["score"] == pytest.approx(g.score, abs=1e-9)
    assert any(reader[0].field("objects").unseen)  # the cat is scored as unseen
