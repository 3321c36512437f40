"""The embedded demo: deterministic scenes, a real trained model, and the suite end to end."""

from __future__ import annotations

import hashlib
import json
import shutil
from importlib import resources
from pathlib import Path

import numpy as np
import pytest
import torch

from pytest_segrobust.corruptions import REGISTRY
from pytest_segrobust.data.demo import GENERATOR_VERSION, DemoScenes, demo_dataset, generate_scene
from pytest_segrobust.engine.evaluation import EvalSettings, evaluate
from pytest_segrobust.metrics.robustness import relative_robustness
from pytest_segrobust.models import as_instance_model, as_segmentation_model
from pytest_segrobust.models.demo import tiny_unet, tiny_unet_instances
from tests.plugin_project import run


def test_scenes_are_deterministic_and_identified_stably() -> None:
    first, second = DemoScenes("val")[7], DemoScenes("val")[7]
    assert torch.equal(first.image, second.image) and torch.equal(first.target.mask, second.target.mask)
    assert first.instances is not None and second.instances is not None
    assert torch.equal(first.instances.masks, second.instances.masks)
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


# (split, index, image size) of the scenes whose digest pins the generator's output.
PINNED_SCENES = [("val", 0, 128), ("val", 1, 128), ("val", 2, 128), ("train", 3, 128), ("val", 5, 37)]


def test_pixels_and_labels_are_those_of_this_generator_version() -> None:
    digest = hashlib.sha256()
    for split, index, image_size in PINNED_SCENES:
        scene = generate_scene(split, index, image_size)
        digest.update(scene.pixels.tobytes())
        digest.update(scene.labels.tobytes())
    # A change here changes every stored demo baseline: bump GENERATOR_VERSION with the digest.
    assert (GENERATOR_VERSION, digest.hexdigest()) == (
        "1",
        "d08d039f7895e88d67d0d926a4d1d9b337fbff39edd68be12f12c49d1cd791ef",
    )


@pytest.mark.parametrize("split", ["val", "train"])
def test_instances_are_the_visible_parts_of_the_objects(split: str) -> None:
    scenes = DemoScenes(split, size=12)
    for sample in scenes:
        instances = sample.instances
        assert instances is not None and len(instances) >= 1
        masks, labels = instances.masks, instances.labels
        assert masks.shape[1:] == sample.image.shape[1:] and masks.flatten(1).any(dim=1).all()
        assert int(masks.sum(dim=0).max()) <= 1  # disjoint
        painted = torch.zeros_like(sample.target.mask)
        for mask, label in zip(masks, labels, strict=True):
            painted[mask] = label
        assert torch.equal(painted, sample.target.mask)
        assert not instances.iscrowd.any() and 1 <= int(labels.min()) and int(labels.max()) < len(scenes.class_names)


def test_categories_number_the_classes_as_coco_labels_do() -> None:
    categories = DemoScenes.categories
    assert [c["id"] for c in categories] == [1, 2, 3, 4]
    assert tuple(c["name"] for c in categories) == DemoScenes.class_names[1:]
    assert [c["supercategory"] for c in categories] == ["pattern", "pattern", "pattern", "plain"]


def test_the_demo_instance_model_finds_the_objects() -> None:
    pytest.importorskip("faster_coco_eval")
    from pytest_segrobust.metrics.coco_map import CocoMAP

    # Half the val split: mask AP about 62 and box AP about 59 there, as on all of it.
    model, val, count = as_instance_model(tiny_unet_instances()), demo_dataset("val"), 32
    metric = CocoMAP(val.categories, ("segm", "bbox"))
    for start in range(0, count, 16):
        samples = [val[index] for index in range(start, min(start + 16, count))]
        images = torch.stack([sample.image for sample in samples]).float() / 255
        for offset, (sample, predictions) in enumerate(zip(samples, model.predict(images), strict=True)):
            assert sample.instances is not None
            metric.update(start + offset, *sample.image.shape[1:], sample.instances, predictions)
    result = metric.compute()
    assert result.ap >= 50 and result.bbox is not None and result.bbox.ap >= 45


def test_weights_ship_in_the_package_and_are_small() -> None:
    weights = resources.files("pytest_segrobust.models") / "weights" / "tiny_unet.pt"
    assert weights.is_file()
    assert len(weights.read_bytes()) <= 2 * 1024 * 1024


# The tests of demo_scores go to one xdist worker (`pytest -n 2 --dist loadgroup`), which computes them once.
ONE_WORKER = pytest.mark.xdist_group("demo_scores")


@pytest.fixture(scope="module")
def demo_scores() -> dict[str, float]:
    """On the first 16 val images, which decide as all 64 do, far from either bound: clean mIoU
    about 93 (all 64: 92.5), gamma_r about 0.01 under noise and 0.3 under blur."""
    model, val = as_segmentation_model(tiny_unet()), demo_dataset("val")
    return {
        "clean": evaluate(model, val, settings=EvalSettings.of(limit=16)).score,
        "gaussian_noise": evaluate(
            model, val, REGISTRY.get("gaussian_noise"), 5, settings=EvalSettings.of(limit=16)
        ).score,
        "defocus_blur": evaluate(model, val, REGISTRY.get("defocus_blur"), 5, settings=EvalSettings.of(limit=16)).score,
    }


@ONE_WORKER
def test_the_demo_model_is_really_trained(demo_scores: dict[str, float]) -> None:
    assert demo_scores["clean"] >= 70


@ONE_WORKER
@pytest.mark.parametrize("corruption", ["gaussian_noise", "defocus_blur"])
def test_the_demo_model_degrades_measurably(demo_scores: dict[str, float], corruption: str) -> None:
    assert relative_robustness(demo_scores["clean"], demo_scores[corruption]) < 0.9


DEMO_SUITE = """\
name: demo-small
dataset: {factory: pytest_segrobust.data.demo:demo_dataset, kwargs: {split: val}}
models: [{name: tiny-unet, factory: pytest_segrobust.models.demo:tiny_unet}]
corruptions: [gaussian_noise, jpeg_compression, rotate]
severities: [5]
limit: 6
batch_size: 4
"""


@pytest.mark.slow
def test_demo_suite_gives_identical_reports_and_baselines_with_and_without_xdist(pytester: pytest.Pytester) -> None:
    """Two recordings from scratch, in one process and on two workers: the same report and the
    same baseline files. (Comparing with stored baselines under xdist: the demo gate itself, and
    test_plugin's test_distributed_run_matches_single_process; the figures under xdist:
    test_shards's test_merged_shards_and_xdist_write_a_single_runs_markdown_byte_for_byte.)
    Four cells (noise, compression, a warp that moves the labels) of 6 images, a full batch and a
    short one: -n 2 cuts the model's cells over both workers."""
    (pytester.path / "suites").mkdir()
    (pytester.path / "suites" / "demo-small.yaml").write_text(DEMO_SUITE)
    reports, recorded = [], []
    for args in ([], ["-n", "2"]):
        run(pytester, "--segrobust-update-baselines", *args).assert_outcomes(passed=4)
        report = json.loads((pytester.path / "segrobust-report.json").read_text())
        for cells in report["suites"]["demo-small"]["models"].values():
            for cell in cells["cells"]:
                cell.pop("seconds")
        report.pop("environment")  # wall time and start differ by run
        reports.append(report)
        recorded.append(recorded_files(pytester.path / "baselines"))
        for written in pytester.path.iterdir():  # the second run starts afresh too, with no report to replace
            if written.name != "suites":
                shutil.rmtree(written) if written.is_dir() else written.unlink()
    assert reports[0] == reports[1]
    assert "demo-small.json" in recorded[0] and recorded[0] == recorded[1]


def recorded_files(folder: Path) -> dict[str, object]:
    """What a run recorded: JSON files as bytes, per-image statistics as arrays (a zip's bytes
    carry the time it was written)."""
    found: dict[str, object] = {}
    for path in sorted(folder.iterdir()):
        if path.suffix == ".npz":
            with np.load(path) as arrays:
                found[path.name] = {
                    name: (arrays[name].dtype.str, arrays[name].shape, arrays[name].tobytes()) for name in arrays
                }
        else:
            found[path.name] = path.read_bytes()
    return found
