"""``onnx: model.onnx``: a model file run by ONNX Runtime (the ``onnx`` extra), a semantic model.

Its ``input:``/``output:`` blocks say what the file does not (see :mod:`pytest_segrobust.models.onnx`);
onnxruntime is imported when the model is built, never when the suite is read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_segrobust.suite.model_sources import register_model_source
from pytest_segrobust.suite.model_sources.base import (
    EntryContext,
    ModelRequest,
    ModelSource,
    check_fields,
    read_array_blocks,
    read_path,
    require,
    semantic_only,
)

_KEYS = ("name", "onnx", "input", "output")
_KIND = "an ONNX model"


@dataclass(frozen=True)
class OnnxModel:
    """An ONNX file and the ``input``/``output`` blocks (validated) that say what it leaves out."""

    path: str
    input: Mapping[str, Any] | None = None
    output: Mapping[str, Any] | None = None


@register_model_source
class OnnxSource(ModelSource):
    """``onnx:`` (and ``input``, ``output``)."""

    name = "onnx"
    summary = "a model file"

    def read(self, entry: Mapping[str, Any], context: EntryContext) -> OnnxModel:
        from pytest_segrobust.models import onnx

        input_spec, output_spec = read_array_blocks(entry)
        check_fields(entry, _KEYS, _KIND)
        path = read_path(entry, "onnx", "expected the path of an .onnx file")
        require("onnx", _KIND, onnx.REQUIRES)
        semantic_only(context.task, _KIND)
        return OnnxModel(path, input_spec, output_spec)

    def build(self, settings: OnnxModel, request: ModelRequest) -> Any:
        from pytest_segrobust.models.onnx import load_onnx

        return load_onnx(Path(settings.path), settings.input, settings.output, request.device)

    def describe(self, settings: OnnxModel) -> str:
        return f"onnx model {settings.path}"
