"""ONNX models: exported from torch in the test, loaded back as a user would, equal to the torch run."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from pytest_segrobust.core.errors import SegRobustError
from pytest_segrobust.models.torch_module import TorchModuleSegmenter
from tests.fakes import band_scenes

onnxruntime = pytest.importorskip("onnxruntime", reason="ONNX models need the onnx extra (onnxruntime)")
pytest.importorskip("onnx", reason="exporting the test's torch model needs the onnx package")

from pytest_segrobust.models.onnx import load_onnx


class SmallNet(torch.nn.Module):
    """Random weights, 5 classes: enough to tell any difference in inputs or outputs apart."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.body = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(8, 5, 3, padding=1))

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.body(images)


class Uint8Nhwc(torch.nn.Module):
    """The same network behind a uint8 NHWC input, as many exported deployment models take."""

    def __init__(self, net: torch.nn.Module) -> None:
        super().__init__()
        self.net = net

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.net(images.permute(0, 3, 1, 2).float() / 255)


def export(module: torch.nn.Module, example: torch.Tensor, path: Path, dynamic_batch: bool = True) -> Path:
    axes = {"images": {0: "batch"}, "logits": {0: "batch"}} if dynamic_batch else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TorchScript exporter announces its deprecation
        torch.onnx.export(
            module.eval(), (example,), str(path), input_names=["images"], output_names=["logits"], dynamic_axes=axes, dynamo=False
        )
    return path


def scenes(count: int = 6) -> torch.Tensor:
    data = band_scenes(size=count)
    return torch.stack([data[i].image for i in range(count)]).float() / 255


def test_logits_equal_torch_to_1e_4_and_labels_are_identical(tmp_path: Path) -> None:
    net, batch = SmallNet(), scenes()
    path = export(net, batch[:2], tmp_path / "net.onnx")
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (logits,) = session.run(None, {"images": batch.numpy()})
    with torch.no_grad():
        expected = net(batch)
    np.testing.assert_allclose(logits, expected.numpy(), atol=1e-4, rtol=0)
    model = load_onnx(path)
    assert model.device == torch.device("cpu") and model.input.batch and model.input.dtype == "float32"
    assert torch.equal(model.predict(batch), TorchModuleSegmenter(net).predict(batch))


def test_a_fixed_batch_of_one_runs_image_by_image(tmp_path: Path) -> None:
    net, batch = SmallNet(), scenes()
    model = load_onnx(export(net, batch[:1], tmp_path / "fixed.onnx", dynamic_batch=False))
    assert torch.equal(model.predict(batch), TorchModuleSegmenter(net).predict(batch))


def test_layout_dtype_and_size_are_read_from_the_model(tmp_path: Path) -> None:
    net, batch = SmallNet(), scenes()
    example = (batch[:1] * 255).round().to(torch.uint8).permute(0, 2, 3, 1)
    model = load_onnx(export(Uint8Nhwc(net), example, tmp_path / "uint8.onnx", dynamic_batch=False))
    assert (model.input.layout, model.input.dtype, model.input.size) == ("NHWC", "uint8", (32, 32))
    # The band scenes are uint8 already: the model sees exactly the torch network's input.
    assert torch.equal(model.predict(batch), TorchModuleSegmenter(net).predict(batch))


def test_a_fixed_size_model_sees_resized_images_and_answers_at_the_input_size(tmp_path: Path) -> None:
    net = SmallNet()
    model = load_onnx(export(net, torch.rand(1, 3, 16, 16), tmp_path / "small.onnx", dynamic_batch=False))
    assert model.input.size == (16, 16)
    assert model.predict(scenes(2)).shape == (2, 32, 32)


def test_the_suite_may_declare_what_the_model_leaves_open(tmp_path: Path) -> None:
    net, batch = SmallNet(), scenes(2)
    path = export(net, batch[:1], tmp_path / "net.onnx")
    # ImageNet normalisation declared by the suite: the session sees normalised images.
    normalised = load_onnx(path, {"mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]})
    mean, std = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1), torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)
    assert torch.equal(normalised.predict(batch), TorchModuleSegmenter(net).predict((batch - mean) / std))
    assert normalised.fingerprint() != load_onnx(path).fingerprint()


@pytest.mark.parametrize(
    ("input", "message"),
    [
        ({"dtype": "uint8"}, "input.dtype: the suite says uint8, the model's input 'images' is float32"),
        ({"name": "pixels"}, "input.name: the model has no input 'pixels'; it has images"),
    ],
)
def test_a_spec_that_contradicts_the_model_fails_naming_the_field(tmp_path: Path, input: dict, message: str) -> None:
    path = export(SmallNet(), scenes(1), tmp_path / "net.onnx")
    with pytest.raises(SegRobustError, match=message):
        load_onnx(path, input)


def test_unreadable_files_are_named(tmp_path: Path) -> None:
    with pytest.raises(SegRobustError, match=r"missing\.onnx: cannot read the ONNX model"):
        load_onnx(tmp_path / "missing.onnx")
    (tmp_path / "junk.onnx").write_bytes(b"not a model")
    with pytest.raises(SegRobustError, match=r"junk\.onnx: ONNX Runtime cannot load the model"):
        load_onnx(tmp_path / "junk.onnx")


def test_the_fingerprint_is_the_files_digest(tmp_path: Path) -> None:
    first = export(SmallNet(), scenes(1), tmp_path / "a.onnx")
    (tmp_path / "b.onnx").write_bytes(first.read_bytes())
    assert load_onnx(first).fingerprint() == load_onnx(tmp_path / "b.onnx").fingerprint()
    other = SmallNet()
    with torch.no_grad():
        other.body[0].bias.add_(1e-3)
    assert load_onnx(export(other, scenes(1), tmp_path / "c.onnx")).fingerprint() != load_onnx(first).fingerprint()
