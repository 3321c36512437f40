"""The embedded demo: deterministic scenes, a real trained model, and the suite end to end."""

from __future__ import annotations

import json
from importlib import resources

import pytest
import torch

from pytest_segrobust.corruptions import REGISTRY
from pytest_segrobust.data.demo import DemoScenes, demo_dataset
from pytest_segrobust.evaluation import evaluate
from pytest_segrobust.models import as_segmentation_model
from pytest_segrobust.models.demo import tiny_unet
from pytest_segrobust.scores import relative_robustness


def test_scenes_are_deterministic_and_identified_stably() -> None:
    first, second = DemoScenes("val")[7], DemoScenes("val")[7]
    assert torch.equal(first.image, second.image) and torch.equal(first.target.mask, second.target.mask)
    assert first.sample_id == "demo/val/00007"
    assert not torch.equal(DemoScenes("train")[7].image, first.image)


def test_val_split_meets_the_demo_contract() -> None:
    val = demo_dataset("val")
    assert len(val) >= 64 and len(val.class_names) >= 5  # background + at least 4 object classes
    sample = val[0]
    assert sample.image.dtype == torch.uint8 and sample.image.shape[0] == 3 and min(sample.image.shape[1:]) >= 128
    seen = torch.cat([val[i].target.mask.unique() for i in range(len(val))]).unique().tolist()
    assert set(range(len(val.class_names))) <= set(seen)
    with pytest.raises(IndexError):
        val[len(val)]


def test_weights_ship_in_the_package_and_are_small() -> None:
    weights = resources.files("pytest_segrobust.models") / "weights" / "tiny_unet.pt"
    assert weights.is_file()
    assert len(weights.read_bytes()) <= 2 * 1024 * 1024


@pytest.fixture(scope="module")
def demo_scores() -> dict[str, float]:
    model, val = as_segmentation_model(tiny_unet()), demo_dataset("val")
    return {
        "clean": evaluate(model, val).score,
        "gaussian_noise": evaluate(model, val, REGISTRY.get("gaussian_noise"), 5).score,
        "defocus_blur": evaluate(model, val, REGISTRY.get("defocus_blur"), 5).score,
    }


def test_the_demo_model_is_really_trained(demo_scores: dict[str, float]) -> None:
    assert demo_scores["clean"] >= 70


@pytest.mark.parametrize("corruption", ["gaussian_noise", "defocus_blur"])
def test_the_demo_model_degrades_measurably(demo_scores: dict[str, float], corruption: str) -> None:
    assert relative_robustness(demo_scores["clean"], demo_scores[corruption]) < 0.9


DEMO_SUITE = """\
name: demo-small
dataset: {factory: pytest_segrobust.data.demo:demo_dataset, kwargs: {split: val}}
models: [{name: tiny-unet, factory: pytest_segrobust.models.demo:tiny_unet}]
corruptions: [gaussian_noise, jpeg_compression, rotate]
severities: [1, 5]
limit: 16
batch_size: 8
"""


def test_demo_suite_gives_identical_reports_with_and_without_xdist(pytester: pytest.Pytester) -> None:
    (pytester.path / "suites").mkdir()
    (pytester.path / "suites" / "demo-small.yaml").write_text(DEMO_SUITE)
    pytester.runpytest("-p", "no:cacheprovider", "--segrobust-update-baselines").assert_outcomes(passed=7)
    reports = []
    for args in (["-n", "0"], ["-n", "2"]):
        pytester.runpytest("-p", "no:cacheprovider", "--segrobust", *args).assert_outcomes(passed=7)
        report = json.loads((pytester.path / "segrobust-report.json").read_text())
        for cells in report["suites"]["demo-small"]["models"].values():
            for cell in cells["cells"]:
                cell.pop("seconds")
        reports.append(report)
    assert reports[0] == reports[1]
