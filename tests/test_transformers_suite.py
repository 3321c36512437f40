"""A semantic suite whose model is a Hugging Face checkpoint directory, run end to end from YAML."""

from __future__ import annotations

import json

import pytest
import torch

from tests.fakes import CLASS_NAMES
from tests.plugin_project import run

pytest.importorskip("transformers", reason="Hugging Face checkpoints need the transformers extra")

from pytest_segrobust.models.transformers import load_transformers
from tests.models.test_transformers import segformer

SUITE = """\
name: hub
dataset: {factory: segrobust_fakes:band_scenes}
models:
  - name: segformer
    transformers: checkpoints/segformer
    label_map: {void: background}
corruptions: [gaussian_noise]
severities: [1, 3]
batch_size: 4
"""
CELLS = 3  # clean + 1 corruption x 2 severities


def test_a_checkpoint_directory_runs_as_a_suites_model(project: pytest.Pytester) -> None:
    (project.path / "suites" / "bands.yaml").unlink()
    (project.path / "suites" / "hub.yaml").write_text(SUITE)
    checkpoint = segformer(project.path / "checkpoints" / "segformer", names=("Void", *CLASS_NAMES[1:]))
    result = run(project, "--segrobust", "--segrobust-update-baselines")
    result.assert_outcomes(passed=CELLS)
    report = json.loads((project.path / "segrobust-report.json").read_text())
    cells = report["suites"]["hub"]["models"]["segformer"]["cells"]
    assert [(c["corruption"], c["severity"]) for c in cells] == [("clean", 0), ("gaussian_noise", 1), ("gaussian_noise", 3)]
    assert all(c["class_names"] == list(CLASS_NAMES) and 0 <= c["score"] <= 100 for c in cells)
    # The cells were computed by the checkpoint, labels mapped: the fingerprint is the loaded model's.
    model = load_transformers(
        str(checkpoint), task="semantic", device=torch.device("cpu"), class_names=CLASS_NAMES,
        label_map={"void": "background"}, allow_download=False,
    )  # fmt: skip
    assert {c["model_fingerprint"] for c in cells} == {model.fingerprint()} and {c["device"] for c in cells} == {"cpu"}
    stored = json.loads((project.path / "baselines" / "hub.json").read_text())["made_with"]["models"]
    assert set(stored) == {"segformer"}


def test_a_missing_checkpoint_fails_its_cells_saying_how_to_allow_downloads(project: pytest.Pytester) -> None:
    (project.path / "suites" / "bands.yaml").unlink()
    (project.path / "suites" / "hub.yaml").write_text(SUITE)
    result = run(project, "--segrobust", "--segrobust-update-baselines")
    result.assert_outcomes(failed=CELLS)
    result.stdout.fnmatch_lines(["*checkpoints/segformer: no such checkpoint directory*allow_download: true*"])
