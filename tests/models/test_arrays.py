"""Models that are functions of numpy arrays, described by the suite's input and output blocks."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pytest_segrobust.core.errors import ModelOutputError
from pytest_segrobust.models.arrays import ArrayInput, ArrayModel, ArrayOutput, ArraySpecError
from pytest_segrobust.models.torch_module import TorchModuleSegmenter
from tests.fakes import CLASS_NAMES, RedBinner, band_scenes

K = len(CLASS_NAMES)
CENTRES = (np.arange(K) + 0.5) / K


def images(count: int = 4) -> torch.Tensor:
    data = band_scenes(size=count)
    return torch.stack([data[i].image for i in range(count)]).float() / 255


def red_labels_hwc_uint8(image: np.ndarray) -> np.ndarray:
    """RedBinner's decision on one ``(H, W, 3)`` uint8 image, as a TFLite-style function would."""
    red = image[..., 0].astype(np.float64) / 255
    return np.abs(red[..., None] - CENTRES).argmin(axis=-1).astype(np.int32)


def test_a_per_image_uint8_nhwc_function_decides_as_the_torch_model() -> None:
    spec = ArrayInput.from_yaml({"layout": "NHWC", "dtype": "uint8", "range": [0, 255], "batch": False})
    model = ArrayModel(red_labels_hwc_uint8, spec, ArrayOutput.from_yaml({"kind": "labels"}), identity="red v1")
    batch = images()
    expected = TorchModuleSegmenter(RedBinner()).predict(batch)
    assert torch.equal(model.predict(batch), expected)


def test_the_array_handed_over_follows_the_input_spec() -> None:
    seen: list[np.ndarray] = []

    def record(array: np.ndarray) -> np.ndarray:
        seen.append(array)
        return np.zeros((array.shape[0], 2, 8, 8), dtype=np.float32)

    spec = ArrayInput.from_yaml(
        {"layout": "NHWC", "dtype": "float32", "range": [0, 255], "mean": [10, 20, 30], "std": 2, "channels": "BGR", "size": [8, 8]}
    )
    batch = torch.rand(2, 3, 16, 12)
    labels = ArrayModel(record, spec, ArrayOutput(kind="logits"), identity=None).predict(batch)
    assert labels.shape == (2, 16, 12)  # back at the input size
    (array,) = seen
    assert array.shape == (2, 8, 8, 3) and array.dtype == np.float32
    resized = torch.nn.functional.interpolate(batch, size=(8, 8), mode="bilinear", align_corners=False).clamp(0, 1)
    expected = (resized.flip(1) * 255 - torch.tensor([10.0, 20, 30]).view(1, 3, 1, 1)) / 2
    np.testing.assert_allclose(array, expected.permute(0, 2, 3, 1).numpy(), rtol=1e-6, atol=1e-5)


def test_integer_inputs_are_rounded_and_clipped() -> None:
    seen: list[np.ndarray] = []
    spec = ArrayInput.from_yaml({"dtype": "int8", "range": [-200, 200]})
    model = ArrayModel(lambda a: seen.append(a) or np.zeros((1, 1, 1, 3)), spec, ArrayOutput(kind="logits"), None)
    model.predict(torch.tensor([0.0, 0.5, 0.6, 1.0]).view(1, 1, 1, 4).expand(1, 3, 1, 4)[..., :3])
    assert seen[0].dtype == np.int8 and seen[0][0, 0, 0].tolist() == [-128, 0, 40]


@pytest.mark.parametrize(
    ("output", "returned", "expected"),
    [
        # one foreground probability per pixel: class 1 above the threshold
        ({"kind": "probabilities", "threshold": 0.3}, np.array([[[[0.2, 0.4]]]]), [[[0, 1]]]),
        ({"kind": "probabilities"}, np.array([[[0.2, 0.6]]]), [[[0, 1]]]),  # (N, H, W), threshold 0.5
        ({"kind": "logits"}, np.array([[[[-0.1, 0.1]]]]), [[[0, 1]]]),  # single logit: threshold 0
        ({"kind": "logits", "layout": "NHWC"}, np.array([[[[0.0, 1.0, 0.5], [3.0, 1.0, 0.0]]]]), [[[1, 0]]]),
        ({"kind": "labels"}, np.array([[[[2, 1]]]]), [[[2, 1]]]),  # (N, 1, H, W)
        ({"kind": "labels"}, np.array([[[[2], [1]], [[0], [3]]]]), [[[2, 1], [0, 3]]]),  # (N, H, W, 1)
        ({"kind": "labels", "index": "mask"}, {"scores": np.zeros(1), "mask": np.array([[[3, 0]]])}, [[[3, 0]]]),
        ({"kind": "labels", "index": 1}, (np.zeros(1), torch.tensor([[[1, 2]]])), [[[1, 2]]]),
    ],
)
def test_outputs_become_class_ids(output: dict, returned: object, expected: list) -> None:
    size = tuple(np.asarray(expected).shape[1:])
    labels = ArrayOutput.from_yaml(output).to_labels(returned, 1, size, batched=True)  # type: ignore[arg-type]
    assert labels.dtype == torch.int64 and labels.tolist() == expected


def test_labels_at_another_size_are_resized_by_nearest() -> None:
    labels = ArrayOutput(kind="labels").to_labels(np.array([[[1, 2], [3, 4]]]), 1, (4, 4), batched=True)
    assert labels[0].tolist() == [[1, 1, 2, 2], [1, 1, 2, 2], [3, 3, 4, 4], [3, 3, 4, 4]]


@pytest.mark.parametrize(
    ("output", "returned", "message"),
    [
        ({"kind": "labels"}, np.array([[[0.5, 1.0]]]), "fractional"),
        ({"kind": "logits"}, np.array([[[[np.nan, 1.0]]]]), "NaN or infinite"),
        ({"kind": "logits"}, np.zeros((2, 3, 1, 2)), r"shape \(1, C, H, W\)"),
        ({"kind": "labels", "index": "out"}, {"mask": np.zeros((1, 1, 2))}, "no output 'out'; it has mask"),
        ({"kind": "labels", "index": 2}, [np.zeros((1, 1, 2))], "out of range: the model returned 1 outputs"),
        ({"kind": "labels"}, "not an array", "expected numbers"),
    ],
)
def test_bad_outputs_fail_saying_what_was_wrong(output: dict, returned: object, message: str) -> None:
    with pytest.raises(ModelOutputError, match=message):
        ArrayOutput.from_yaml(output).to_labels(returned, 1, (1, 2), batched=True)


@pytest.mark.parametrize(
    ("block", "raw", "field", "message"),
    [
        (ArrayInput, {"layuot": "NHWC"}, "layuot", "unknown field of input"),
        (ArrayInput, {"layout": "HWC"}, "layout", "expected one of NCHW, NHWC"),
        (ArrayInput, {"range": [255, 0]}, "range", "high > low"),
        (ArrayInput, {"range": [0]}, "range", "list of two numbers"),
        (ArrayInput, {"mean": [0.5, 0.5, 0.5]}, "std", "given together"),
        (ArrayInput, {"mean": [1, 2], "std": [1, 2]}, "mean", "1 or 3 values"),
        (ArrayInput, {"mean": 0, "std": 0}, "std", "positive"),
        (ArrayInput, {"batch": "yes"}, "batch", "true or false"),
        (ArrayInput, {"size": [0, 4]}, "size", "positive"),
        (ArrayInput, {"dtype": "int64"}, "dtype", "expected one of"),
        (ArrayOutput, {"threshold": 0.5}, "kind", "is required"),
        (ArrayOutput, {"kind": "softmax"}, "kind", "expected one of logits, probabilities, labels"),
        (ArrayOutput, {"kind": "labels", "index": -1}, "index", "output position"),
        (ArrayOutput, {"kind": "logits", "threshold": "high"}, "threshold", "a number"),
        (ArrayOutput, ["logits"], "", "expected a mapping"),
    ],
)
def test_a_bad_block_names_its_field(block: type, raw: object, field: str, message: str) -> None:
    with pytest.raises(ArraySpecError, match=message) as caught:
        block.from_yaml(raw)
    assert caught.value.field == field


def test_the_fingerprint_follows_identity_and_specs() -> None:
    def make(identity: str | None, **input: object) -> str:
        return ArrayModel(np.copy, ArrayInput.from_yaml(input), ArrayOutput(kind="labels"), identity).fingerprint()

    assert make("v1") == make("v1")
    assert len({make("v1"), make("v2"), make("v1", layout="NHWC"), make(None)}) == 4


def test_not_a_callable_is_refused() -> None:
    with pytest.raises(TypeError, match="needs a callable model, got int"):
        ArrayModel(3, ArrayInput(), ArrayOutput(), None)  # type: ignore[arg-type]
