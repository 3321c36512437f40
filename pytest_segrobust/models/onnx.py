"""ONNX models through ONNX Runtime (the ``onnx`` extra): ``onnx: model.onnx`` in a suite.

The file's digest is the model's identity. What the suite's ``input:`` block leaves out is
read from the model: the input's name, element type, layout (``NHWC`` when its last axis has
3 entries and its second does not), fixed spatial size and whether its batch axis is dynamic
(a model with a fixed batch of 1 is run image by image). Outputs are logits in ``NCHW``
unless ``output:`` says otherwise. The session uses CUDA when the run's device is a GPU and
ONNX Runtime has the CUDA provider; otherwise the CPU, and the model says so through its
``device``. Its CPU pool has as many threads as torch (the run's ``--segrobust-threads``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from pytest_segrobust.core.errors import SegRobustError
from pytest_segrobust.core.extras import ONNX, import_failure
from pytest_segrobust.models.arrays import ArrayInput, ArrayModel, ArrayOutput
from pytest_segrobust.runtime import threads

REQUIRES = (ONNX,)
"""What ``onnx: file`` models need installed; a suite with one is checked when it is loaded."""

# ONNX Runtime's element types and the numpy dtypes an input spec can name.
_ELEMENT_TYPES = {
    "tensor(float)": "float32",
    "tensor(float16)": "float16",
    "tensor(double)": "float64",
    "tensor(uint8)": "uint8",
    "tensor(int8)": "int8",
}


def load_onnx(
    path: Path, input: Mapping[str, Any] | None = None, output: Mapping[str, Any] | None = None, device: torch.device | str = "cpu"
) -> ArrayModel:
    """An ONNX file as a semantic model of the harness.

    Args:
        path: The ``.onnx`` file.
        input: The suite's ``input:`` block; what it leaves out is read from the model.
        output: The suite's ``output:`` block (default: logits, ``NCHW``).
        device: The run's device; a GPU uses ONNX Runtime's CUDA provider when it has one.

    Raises:
        SegRobustError: when onnxruntime is not installed, the file cannot be read, or the
            input spec contradicts the model.
    """
    try:
        import onnxruntime
    except ImportError as exc:
        raise SegRobustError(f"ONNX models need onnxruntime: {import_failure(exc, ONNX)}") from exc
    try:
        content = path.read_bytes()
    except OSError as exc:
        raise SegRobustError(f"{path}: cannot read the ONNX model ({exc.strerror})") from exc
    device = torch.device(device)
    providers = ["CPUExecutionProvider"]
    if device.type == "cuda" and "CUDAExecutionProvider" in onnxruntime.get_available_providers():
        providers.insert(0, ("CUDAExecutionProvider", {"device_id": device.index or 0}))  # type: ignore[arg-type]
    try:
        choices = onnxruntime.SessionOptions()
        choices.intra_op_num_threads = threads.count()  # the run's count (--segrobust-threads), not a pool per core
        session = onnxruntime.InferenceSession(content, choices, providers=providers)
    except Exception as exc:
        raise SegRobustError(f"{path}: ONNX Runtime cannot load the model: {type(exc).__name__}: {exc}") from exc
    runs_on = torch.device(device) if session.get_providers()[0] == "CUDAExecutionProvider" else torch.device("cpu")
    inputs = {i.name: i for i in session.get_inputs()}
    chosen = dict(input or {})
    name = chosen.get("name") or next(iter(inputs))
    if name not in inputs:
        raise SegRobustError(f"{path}: input.name: the model has no input {name!r}; it has {', '.join(inputs)}")
    described = inputs[name]
    spec = ArrayInput.from_yaml({**_read_input(described), **chosen, "name": name, "batch": True})
    declared = _ELEMENT_TYPES.get(described.type)
    if declared is not None and declared != spec.dtype:
        raise SegRobustError(f"{path}: input.dtype: the suite says {spec.dtype}, the model's input {name!r} is {declared}")
    run = _Runner(session, name, [o.name for o in session.get_outputs()], _fixed_batch(described.shape))
    identity = f"onnx:{hashlib.sha256(content).hexdigest()}:onnxruntime {onnxruntime.__version__}"
    return ArrayModel(run, spec, ArrayOutput.from_yaml(dict(output or {"kind": "logits"})), identity, runs_on)


class _Runner:
    """Runs the session on a batch, image by image when the model's batch axis is fixed."""

    def __init__(self, session: Any, input_name: str, output_names: list[str], fixed_batch: int | None) -> None:
        self.session = session
        self.input_name = input_name
        self.output_names = output_names
        self.fixed_batch = fixed_batch

    def __call__(self, array: np.ndarray) -> dict[str, np.ndarray]:
        if self.fixed_batch is None or self.fixed_batch == len(array):
            return dict(zip(self.output_names, self.session.run(None, {self.input_name: array}), strict=True))
        if self.fixed_batch != 1:
            raise SegRobustError(f"the ONNX model takes batches of exactly {self.fixed_batch}; set the suite's batch_size to it")
        parts = [self.session.run(None, {self.input_name: array[i : i + 1]}) for i in range(len(array))]
        return {name: np.concatenate([p[k] for p in parts]) for k, name in enumerate(self.output_names)}


def _read_input(described: Any) -> dict[str, Any]:
    """What the model's input declares: element type, layout and fixed spatial size."""
    read: dict[str, Any] = {}
    if described.type in _ELEMENT_TYPES:
        read["dtype"] = _ELEMENT_TYPES[described.type]
    shape = list(described.shape)
    if len(shape) == 4:
        nhwc = shape[3] == 3 and shape[1] != 3
        read["layout"] = "NHWC" if nhwc else "NCHW"
        height, width = (shape[1], shape[2]) if nhwc else (shape[2], shape[3])
        if isinstance(height, int) and isinstance(width, int) and height > 0 and width > 0:
            read["size"] = [height, width]
    return read


def _fixed_batch(shape: list[Any]) -> int | None:
    first = shape[0] if shape else None
    return first if isinstance(first, int) and first > 0 else None
