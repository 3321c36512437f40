"""Hugging Face checkpoints: tiny random models saved in the test, loaded back as a user would."""

from __future__ import annotations

import builtins
import importlib.util
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from pytest_segrobust.core.errors import SegRobustError
from pytest_segrobust.models.base import InstancePredictions, PanopticPredictions
from tests.fakes import CLASS_NAMES, band_scenes

transformers = pytest.importorskip("transformers", reason="Hugging Face checkpoints need the transformers extra")
pytest.importorskip("scipy", reason="Mask2Former and MaskFormer need scipy (the transformers extra)")

from transformers.models.mask2former.image_processing_pil_mask2former import Mask2FormerImageProcessorPil
from transformers.models.maskformer.image_processing_pil_maskformer import MaskFormerImageProcessorPil
from transformers.models.segformer.image_processing_pil_segformer import SegformerImageProcessorPil

from pytest_segrobust.models.transformers import Preprocessing, load_transformers

CPU = torch.device("cpu")


def labelled(names: tuple[str, ...]) -> dict:
    return {"num_labels": len(names), "id2label": dict(enumerate(names)), "label2id": {n: i for i, n in enumerate(names)}}


def segformer(path: Path, names: tuple[str, ...] = CLASS_NAMES, size: tuple[int, int] = (48, 40), seed: int = 0) -> Path:
    """A two-stage SegFormer of a few thousand weights and its image processor, saved to ``path``."""
    config = transformers.SegformerConfig(
        num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[8, 16], patch_sizes=[3, 3], strides=[2, 2],
        num_attention_heads=[1, 1], mlp_ratios=[2, 2], decoder_hidden_size=16, **labelled(names),
    )  # fmt: skip
    torch.manual_seed(seed)
    transformers.SegformerForSemanticSegmentation(config).save_pretrained(path)
    SegformerImageProcessorPil(size={"height": size[0], "width": size[1]}).save_pretrained(path)
    return path


def swin() -> transformers.SwinConfig:
    return transformers.SwinConfig(
        image_size=32, patch_size=4, embed_dim=8, depths=[1] * 4, num_heads=[1] * 4, window_size=4,
        out_features=["stage1", "stage2", "stage3", "stage4"],
    )  # fmt: skip


def mask2former(path: Path, names: tuple[str, ...] = CLASS_NAMES, confident: int | None = None) -> Path:
    """A tiny Mask2Former; ``confident`` biases every query towards that label, so that post-processing keeps some."""
    config = transformers.Mask2FormerConfig(
        backbone_config=swin(), hidden_dim=32, mask_feature_size=32, feature_size=32, encoder_feedforward_dim=32,
        dim_feedforward=32, encoder_layers=1, decoder_layers=2, num_attention_heads=2, num_queries=6, **labelled(names),
    )  # fmt: skip
    torch.manual_seed(0)
    network = transformers.Mask2FormerForUniversalSegmentation(config)
    if confident is not None:
        with torch.no_grad():
            network.class_predictor.bias[confident] += 8
    network.save_pretrained(path)
    Mask2FormerImageProcessorPil(size={"shortest_edge": 64, "longest_edge": 128}).save_pretrained(path)
    return path


def maskformer(path: Path, names: tuple[str, ...] = CLASS_NAMES) -> Path:
    decoder = transformers.DetrConfig(
        d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2, decoder_attention_heads=2,
        encoder_ffn_dim=32, decoder_ffn_dim=32,
    )  # fmt: skip
    config = transformers.MaskFormerConfig(
        backbone_config=swin(), decoder_config=decoder, fpn_feature_size=32, mask_feature_size=32, num_queries=5, **labelled(names)
    )
    torch.manual_seed(0)
    transformers.MaskFormerForInstanceSegmentation(config).save_pretrained(path)
    MaskFormerImageProcessorPil(size={"shortest_edge": 64, "longest_edge": 128}).save_pretrained(path)
    return path


def load(path: Path, task: str = "semantic", names=CLASS_NAMES, label_map=None, allow_download: bool = False):  # type: ignore[no-untyped-def]
    return load_transformers(
        str(path), task=task, device=CPU, class_names=names, label_map=label_map, allow_download=allow_download
    )


def scenes(count: int = 4) -> torch.Tensor:
    data = band_scenes(size=count)
    return torch.stack([data[i].image for i in range(count)]).float() / 255


def test_segformer_predicts_the_argmax_of_its_upsampled_logits(tmp_path: Path) -> None:
    model, batch = load(segformer(tmp_path / "seg")), scenes()
    predicted = model.predict(batch)
    assert predicted.shape == (4, 32, 32) and predicted.dtype == torch.int64 and model.device == CPU
    pixels = model.pixel_values(batch)
    assert pixels.shape == (4, 3, 48, 40)  # the processor's size, not the image's
    with torch.no_grad():
        logits = model.network(pixel_values=pixels).logits
    expected = F.interpolate(logits, size=(32, 32), mode="bilinear", align_corners=False).argmax(dim=1)
    assert torch.equal(predicted, expected)
    assert len(predicted.unique()) > 1  # random weights, but not a constant map that anything would equal


def test_preprocessing_matches_the_image_processor(tmp_path: Path) -> None:
    """Our batched torch version against the checkpoint's own processor run on uint8 arrays."""
    batch = scenes(2)
    arrays = [(image * 255).round().byte().permute(1, 2, 0).numpy() for image in batch]
    for path in (segformer(tmp_path / "seg"), mask2former(tmp_path / "m2f")):
        model = load(path)
        theirs = model.processor(images=arrays, return_tensors="pt")["pixel_values"]
        ours = model.pixel_values(batch)
        assert ours.shape == theirs.shape, path.name
        # PIL resizes uint8 and rounds: a half step of 255 over std 0.225 is 0.009.
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), atol=0.03, rtol=0)


@pytest.mark.parametrize(
    ("size", "divisor", "image", "expected"),
    [
        ({"shortest_edge": 64, "longest_edge": 128}, 32, (32, 48), (64, 96)),
        ({"shortest_edge": 64, "longest_edge": 80}, 32, (32, 48), (64, 96)),  # 53x80 rounded up to multiples of 32
        ({"shortest_edge": 20}, 1, (32, 48), (20, 30)),
        ({"height": 24, "width": 16}, 1, (32, 48), (24, 16)),
    ],
)
def test_output_sizes_follow_the_processors_rules(size: dict, divisor: int, image: tuple, expected: tuple) -> None:
    assert Preprocessing(size=size, multiple=divisor).output_size(*image) == expected


def test_a_centre_crop_becomes_a_resize_and_the_channel_flip_is_kept() -> None:
    processor = SegformerImageProcessorPil()  # any processor object: only its attributes are read
    processor.do_center_crop, processor.crop_size, processor.do_flip_channel_order = True, {"height": 16, "width": 8}, True
    processor.do_normalize = False
    steps = Preprocessing.from_processor(processor)
    assert (steps.size, steps.flip_channels, steps.mean) == ({"height": 16, "width": 8}, True, None)
    image = torch.zeros(1, 3, 4, 4)
    image[:, 0] = 1  # red
    pixels = steps(image)
    assert pixels.shape == (1, 3, 16, 8) and torch.allclose(pixels[:, 2], torch.ones(1, 16, 8))  # red is last: BGR


@pytest.mark.parametrize("build", [mask2former, maskformer], ids=["mask2former", "maskformer"])
def test_universal_models_segment_semantically_as_their_post_processing(tmp_path: Path, build) -> None:  # type: ignore[no-untyped-def]
    model, batch = load(build(tmp_path / "m")), scenes()
    predicted = model.predict(batch)
    assert predicted.shape == (4, 32, 32) and predicted.dtype == torch.int64
    with torch.no_grad():
        outputs = model.network(pixel_values=model.pixel_values(batch))
    maps = model.processor.post_process_semantic_segmentation(outputs, target_sizes=[(32, 32)] * 4)
    assert torch.equal(predicted, torch.stack(maps).long())


def test_instances_are_the_post_processings_with_dataset_labels(tmp_path: Path) -> None:
    # The model knows no background: its labels a, b, c are the dataset's classes 1, 2, 3.
    model, batch = load(mask2former(tmp_path / "m2f", names=("a", "b", "c"), confident=1), task="instance"), scenes(2)
    predicted = model.predict(batch)
    assert len(predicted) == 2 and all(isinstance(p, InstancePredictions) for p in predicted)
    with torch.no_grad():
        outputs = model.network(pixel_values=model.pixel_values(batch))
    results = model.processor.post_process_instance_segmentation(
        outputs, threshold=0.0, target_sizes=[(32, 32)] * 2, return_binary_maps=True
    )
    for ours, theirs in zip(predicted, results, strict=True):
        assert len(ours) == len(theirs["segments_info"]) > 0
        assert ours.masks.shape[1:] == (32, 32) and ours.masks.dtype == torch.bool
        assert ours.labels.dtype == torch.int64 and ours.scores.dtype == torch.float32
        assert torch.equal(ours.masks, theirs["segmentation"].bool())
        assert ours.labels.tolist() == [s["label_id"] + 1 for s in theirs["segments_info"]]
        assert ours.scores.tolist() == pytest.approx([s["score"] for s in theirs["segments_info"]])
        assert (ours.labels == 2).any()  # the confident label b


def test_background_and_unmatched_instances_are_dropped(tmp_path: Path) -> None:
    names = ("background", "a", "b", "c", "wall")
    model, batch = load(mask2former(tmp_path / "m2f", names=names, confident=0), task="instance"), scenes(2)
    assert model.labels.dataset_ids == (-1, 1, 2, 3, -1)
    with torch.no_grad():
        outputs = model.network(pixel_values=model.pixel_values(batch))
    results = model.processor.post_process_instance_segmentation(outputs, threshold=0.0, target_sizes=[(32, 32)] * 2)
    for ours, theirs in zip(model.predict(batch), results, strict=True):
        found = [s["label_id"] for s in theirs["segments_info"]]
        assert 0 in found  # the confident background queries ...
        assert ours.labels.tolist() == [k for k in found if k in (1, 2, 3)]  # ... are gone, as is wall


def test_panoptic_segments_are_the_post_processings_and_unmatched_ones_are_void(tmp_path: Path) -> None:
    names = ("background", "a", "b", "c", "wall")
    model, batch = load(mask2former(tmp_path / "m2f", names=names, confident=2), task="panoptic"), scenes(2)
    predicted = model.predict(batch)
    with torch.no_grad():
        outputs = model.network(pixel_values=model.pixel_values(batch))
    results = model.processor.post_process_panoptic_segmentation(outputs, label_ids_to_fuse=set(), target_sizes=[(32, 32)] * 2)
    for ours, theirs in zip(predicted, results, strict=True):
        assert isinstance(ours, PanopticPredictions)
        assert ours.segments.shape == (32, 32) and ours.segments.dtype == torch.int64
        kept = [s for s in theirs["segments_info"] if s["label_id"] != 4]
        assert kept and ours.ids.tolist() == [s["id"] for s in kept] and ours.labels.tolist() == [s["label_id"] for s in kept]
        expected = theirs["segmentation"].long().clamp(min=0)
        for dropped in (s["id"] for s in theirs["segments_info"] if s["label_id"] == 4):
            expected[expected == dropped] = 0
        assert torch.equal(ours.segments, expected)


def test_a_label_map_renames_labels_case_insensitively(tmp_path: Path) -> None:
    plain = load(segformer(tmp_path / "plain"))
    renamed = segformer(tmp_path / "renamed", names=("Void", "alpha", "B", "gamma"))  # same weights, other names
    mapped = load(renamed, label_map={"void": "background", "ALPHA": "a", "gamma": "C"})
    batch = scenes()
    assert mapped.labels.dataset_ids == (0, 1, 2, 3)
    assert torch.equal(mapped.predict(batch), plain.predict(batch))
    assert mapped.fingerprint() == load(renamed, label_map={"void": "background", "alpha": "a", "gamma": "c"}).fingerprint()


def test_extra_model_classes_never_win_a_pixel(tmp_path: Path) -> None:
    model, batch = load(segformer(tmp_path / "seg", names=(*CLASS_NAMES, "wall", "sky"))), scenes()
    predicted = model.predict(batch)
    with torch.no_grad():
        logits = model.network(pixel_values=model.pixel_values(batch)).logits
    upsampled = F.interpolate(logits, size=(32, 32), mode="bilinear", align_corners=False)
    assert (upsampled.argmax(dim=1) >= 4).any()  # the model does pick them somewhere ...
    assert torch.equal(predicted, upsampled[:, :4].argmax(dim=1))  # ... and there its best dataset class counts


def test_labels_that_do_not_cover_the_dataset_fail_naming_them(tmp_path: Path) -> None:
    path = segformer(tmp_path / "seg", names=("background", "a", "b", "wall", "sky"))
    with pytest.raises(SegRobustError) as failure:
        load(path)
    message = str(failure.value)
    assert "no model label for c" in message and "without a dataset class: wall, sky" in message
    assert "Dataset classes: background, a, b, c" in message and "label_map" in message and str(path) in message
    assert load(path, label_map={"wall": "c"}).labels.dataset_ids == (0, 1, 2, 3, -1)


@pytest.mark.parametrize(
    ("label_map", "message"),
    [
        ({"tree": "a"}, "label_map renames 'tree', which is not one of the model's labels: background, a, b, c"),
        ({"a": "tree"}, "label_map maps 'a' to 'tree', which is not one of the dataset's classes: background, a, b, c"),
    ],
)
def test_a_label_map_naming_nothing_fails(tmp_path: Path, label_map: dict, message: str) -> None:
    with pytest.raises(SegRobustError, match=message):
        load(segformer(tmp_path / "seg"), label_map=label_map)


def test_nothing_is_downloaded_without_allow_download(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SegRobustError, match=r"nvidia/segformer-b0: no such checkpoint directory.*allow_download: true"):
        load(Path("nvidia/segformer-b0"))
    # Allowed, a directory still loads locally first: the files are there.
    assert load(segformer(tmp_path / "seg"), allow_download=True).labels.dataset_ids == (0, 1, 2, 3)


def test_without_transformers_the_error_says_what_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "transformers", None)
    with pytest.raises(SegRobustError, match=r'pip install "pytest-segrobust\[transformers\]"'):
        load(tmp_path)


BROKEN_TORCHVISION = RuntimeError("operator torchvision::nms does not exist")


def test_a_broken_dependency_at_import_is_reported_as_it_is(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # transformers installed, but a torchvision built for another torch breaks its import.
    real_import = builtins.__import__

    def importing(name: str, *args: object, **kwargs: object) -> object:
        if name == "transformers":
            raise BROKEN_TORCHVISION
        return real_import(name, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(builtins, "__import__", importing)
    with pytest.raises(SegRobustError) as raised:
        load(tmp_path)
    assert "RuntimeError: operator torchvision::nms does not exist" in str(raised.value)
    assert "pytest-segrobust[transformers]" not in str(raised.value)  # installing the extra is not the fix
    assert "pip install torchvision==" in str(raised.value)  # matching it to torch is


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (BROKEN_TORCHVISION, "cannot load its model: RuntimeError: operator torchvision::nms does not exist"),
        (
            ImportError("cannot import name 'nms' from 'torchvision.ops'"),
            "cannot load its model: ImportError: cannot import name 'nms' from 'torchvision.ops'",
        ),
        (
            ModuleNotFoundError("No module named 'scipy'", name="scipy"),
            'cannot load its model: scipy is not installed: pip install "pytest-segrobust[transformers]"',
        ),
    ],
    ids=["runtime-error", "import-error", "not-installed"],
)
def test_a_dependency_that_fails_while_loading_is_blamed_on_the_extra_only_when_it_is_not_installed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: Exception, expected: str
) -> None:
    checkpoint = segformer(tmp_path / "seg")

    def failing(*args: object, **kwargs: object) -> None:
        raise error

    monkeypatch.setattr(transformers.AutoModelForSemanticSegmentation, "from_pretrained", failing)
    if isinstance(error, ModuleNotFoundError):
        find_spec = importlib.util.find_spec
        monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "scipy" else find_spec(name, *a))
    with pytest.raises(SegRobustError) as raised:
        load(checkpoint)
    assert str(raised.value) == f"transformers model {checkpoint}: {expected}"


def test_models_that_do_not_fit_the_task_are_refused(tmp_path: Path) -> None:
    with pytest.raises(SegRobustError, match="predicts a class per pixel and serves semantic suites only, not a panoptic suite"):
        load(segformer(tmp_path / "seg"), task="panoptic")
    with pytest.raises(SegRobustError, match="a segformer model predicts .* only, not an instance suite"):
        load(tmp_path / "seg", task="instance")  # the checkpoint saved just above
    transformers.OneFormerConfig(backbone_config=swin()).save_pretrained(tmp_path / "one")
    with pytest.raises(SegRobustError, match="OneFormer is not supported"):
        load(tmp_path / "one")
    (tmp_path / "empty").mkdir()
    with pytest.raises(SegRobustError, match="empty: cannot load its config"):
        load(tmp_path / "empty")


def test_the_fingerprint_follows_weights_and_label_mapping(tmp_path: Path) -> None:
    path = segformer(tmp_path / "seg", names=(*CLASS_NAMES, "wall"))
    model = load(path)
    assert model.fingerprint() == load(shutil.copytree(path, tmp_path / "moved")).fingerprint()  # where it lies does not count
    assert model.fingerprint() != load(path, label_map={"wall": "background"}).fingerprint()
    with torch.no_grad():
        model.network.decode_head.classifier.bias[0] += 1e-3
    assert model.fingerprint() != load(path).fingerprint()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_the_model_runs_on_the_runs_device(tmp_path: Path) -> None:
    cuda = torch.device("cuda")
    for path, task in ((segformer(tmp_path / "seg"), "semantic"), (mask2former(tmp_path / "m", confident=1), "instance")):
        model = load_transformers(str(path), task=task, device=cuda, class_names=CLASS_NAMES, label_map=None, allow_download=False)
        on_cpu = load(path, task)
        batch = scenes(2)
        predicted, expected = model.predict(batch.to(cuda)), on_cpu.predict(batch)
        assert model.device == cuda and next(model.network.parameters()).is_cuda
        if task == "semantic":
            assert predicted.is_cuda and (predicted.cpu() == expected).float().mean() > 0.99
        else:
            assert all(p.masks.is_cuda for p in predicted) and [len(p) for p in predicted] == [len(p) for p in expected]
