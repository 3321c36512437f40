"""One suite, four ways to give the same model: a torch module, its ONNX export, a numpy function
described by input/output blocks, and a factory that is handed the run's device."""

from __future__ import annotations

import json
import textwrap
import warnings

import pytest
import torch

from tests.fakes import RedBinner
from tests.plugin_project import SINGLE_PROCESS, run

pytest.importorskip("onnxruntime", reason="ONNX models need the onnx extra (onnxruntime)")
pytest.importorskip("onnx", reason="exporting the test's torch model needs the onnx package")

SUITE = """\
name: sources
dataset: {factory: segrobust_fakes:band_scenes}
models:
  - {name: torch, factory: segrobust_fakes:red_binner}
  - {name: onnx, onnx: nets/binner.onnx}
  - name: numpy
    factory: sources:red_function
    input: {layout: NHWC, dtype: float32, range: [0, 255], batch: false}
    output: {kind: labels}
  - {name: placed, factory: sources:placed_binner}
corruptions: [gaussian_noise, rotate]
severities: [2]
batch_size: 3
"""

SOURCES = """\
import numpy as np
import torch

from segrobust_fakes import CLASS_NAMES, RedBinner

CENTRES = (np.arange(len(CLASS_NAMES)) + 0.5) / len(CLASS_NAMES)


def red_function():
    def labels(image):  # (H, W, 3) in 0..255, one image at a time, as a TFLite interpreter runs
        red = image[..., 0].astype(np.float64) / 255
        return np.abs(red[..., None] - CENTRES).argmin(axis=-1)
    return labels


def placed_binner(device, smoothing=1):
    if not isinstance(device, torch.device):
        raise TypeError(f"expected the run's device, got {device!r}")
    return RedBinner(smoothing=smoothing).to(device)
"""
CELLS = 4 * 3  # 4 models x (clean + 2 corruptions x 1 severity)


@pytest.fixture
def sources(project: pytest.Pytester) -> pytest.Pytester:
    (project.path / "suites" / "bands.yaml").unlink()
    (project.path / "suites" / "sources.yaml").write_text(SUITE)
    project.makepyfile(sources=textwrap.dedent(SOURCES))
    (project.path / "nets").mkdir()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TorchScript exporter announces its deprecation
        torch.onnx.export(
            RedBinner().eval(),
            (torch.rand(2, 3, 32, 32),),
            str(project.path / "nets" / "binner.onnx"),
            input_names=["images"],
            output_names=["logits"],
            dynamic_axes={"images": {0: "batch"}, "logits": {0: "batch"}},
            dynamo=False,
        )
    return project


@SINGLE_PROCESS
def test_every_source_gives_the_torch_models_numbers(sources: pytest.Pytester, dist: list[str]) -> None:
    result = run(sources, "--segrobust", "--segrobust-update-baselines", *dist)
    result.assert_outcomes(passed=CELLS)
    report = json.loads((sources.path / "segrobust-report.json").read_text())
    models = report["suites"]["sources"]["models"]
    scores = {name: {c["corruption"]: c["score"] for c in entry["cells"]} for name, entry in models.items()}
    assert list(scores) == ["torch", "onnx", "numpy", "placed"]
    assert scores["torch"]["clean"] > scores["torch"]["gaussian_noise"] + 10  # noise really hurts it
    for name in ("onnx", "numpy", "placed"):
        assert scores[name] == pytest.approx(scores["torch"], abs=1e-9), name
    assert {c["device"] for entry in models.values() for c in entry["cells"]} == {"cpu"}
    stored = json.loads((sources.path / "baselines" / "sources.json").read_text())["made_with"]["models"]
    # The same module with the same weights is the same model, however it was built.
    assert stored["placed"] == stored["torch"] and len({stored["torch"], stored["onnx"], stored["numpy"]}) == 3


def test_a_missing_onnx_file_fails_its_models_cells_naming_file_and_field(sources: pytest.Pytester) -> None:
    (sources.path / "nets" / "binner.onnx").unlink()
    result = run(sources, "--segrobust", "--segrobust-update-baselines", "-k", "onnx")
    result.assert_outcomes(failed=3, deselected=CELLS - 3)
    result.stdout.fnmatch_lines(["*sources.yaml: field 'models?*?' (onnx): nets/binner.onnx: cannot read the ONNX model (No such file*"] * 3)


def test_a_function_without_a_fingerprint_is_not_cached_across_runs(sources: pytest.Pytester) -> None:
    result = sources.runpytest("--segrobust", "--segrobust-update-baselines", "-k", "numpy and clean")
    result.assert_outcomes(passed=1, deselected=CELLS - 1)
    result.stdout.fnmatch_lines(
        ["clean results: 0 computed, 0 from cache (*); 1 not cacheable (what the model computes cannot be identified*"]
    )


DEMO_SUITE = """\
name: demo-onnx
dataset: {factory: pytest_segrobust.data.demo:demo_dataset, kwargs: {size: 4}}  # 128 x 128 images: the models are the CPU
models:
  - {name: torch, factory: pytest_segrobust.models.demo:tiny_unet}
  - {name: onnx, onnx: nets/tiny_unet.onnx}
corruptions: [defocus_blur, rotate]
severities: [3]
"""


def test_the_demo_model_exported_to_onnx_scores_as_the_torch_one(pytester: pytest.Pytester) -> None:
    from pytest_segrobust.models.demo import tiny_unet

    (pytester.path / "suites").mkdir()
    (pytester.path / "suites" / "demo-onnx.yaml").write_text(DEMO_SUITE)
    (pytester.path / "nets").mkdir()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            tiny_unet(), (torch.rand(2, 3, 128, 128),), str(pytester.path / "nets" / "tiny_unet.onnx"),
            input_names=["images"], output_names=["logits"], dynamic_axes={"images": {0: "batch"}, "logits": {0: "batch"}},
            dynamo=False,
        )  # fmt: skip
    run(pytester, "--segrobust", "--segrobust-update-baselines").assert_outcomes(passed=6)
    models = json.loads((pytester.path / "segrobust-report.json").read_text())["suites"]["demo-onnx"]["models"]
    scores = {name: {c["corruption"]: c["score"] for c in entry["cells"]} for name, entry in models.items()}
    assert scores["torch"]["clean"] > 80  # the trained demo model, not a random one
    # Float rounding may flip a pixel whose two best classes tie to 1e-6: a few pixels, not points.
    assert scores["onnx"] == pytest.approx(scores["torch"], abs=0.05)
