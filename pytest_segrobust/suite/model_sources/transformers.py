"""``transformers: dir``: a Hugging Face segmentation checkpoint (the ``transformers`` extra).

``label_map: {model label: class}`` matches the checkpoint's labels to the dataset's classes
where their names differ; ``allow_download: true`` lets the value be a hub id. transformers is
imported when the model is built, never when the suite is read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pytest_segrobust.core.errors import FieldError
from pytest_segrobust.suite.model_sources import register_model_source
from pytest_segrobust.suite.model_sources.base import (
    EntryContext,
    ModelRequest,
    ModelSource,
    check_fields,
    read_path,
    require,
)

_KEYS = ("name", "transformers", "label_map", "allow_download")
_KIND = "a transformers model"


@dataclass(frozen=True)
class TransformersModel:
    """A checkpoint, its labels' names in the dataset where they differ, and whether it may be downloaded."""

    checkpoint: str
    label_map: Mapping[str, str] | None = None
    allow_download: bool = False


@register_model_source
class TransformersSource(ModelSource):
    """``transformers:`` (and ``label_map``, ``allow_download``)."""

    name = "transformers"
    summary = "a checkpoint directory"
    needs_class_names = True

    def read(self, entry: Mapping[str, Any], context: EntryContext) -> TransformersModel:
        from pytest_segrobust.models import transformers

        require("transformers", _KIND, transformers.REQUIRES)
        check_fields(entry, _KEYS, _KIND)
        checkpoint = read_path(
            entry, "transformers", "expected a checkpoint directory (or, with allow_download, a hub id)"
        )
        label_map = entry.get("label_map")
        if label_map is not None and (
            not isinstance(label_map, dict)
            or not all(isinstance(k, str) and isinstance(v, str) for k, v in label_map.items())
        ):
            raise FieldError("label_map", f"expected a mapping of model label to dataset class name, got {label_map!r}")
        allow = entry.get("allow_download", False)
        if not isinstance(allow, bool):
            raise FieldError("allow_download", f"expected true or false, got {allow!r}")
        return TransformersModel(checkpoint, label_map, allow)

    def build(self, settings: TransformersModel, request: ModelRequest) -> Any:
        from pytest_segrobust.models.transformers import load_transformers

        return load_transformers(
            settings.checkpoint,
            task=request.task,
            device=request.device,
            class_names=request.class_names,
            label_map=settings.label_map,
            allow_download=settings.allow_download,
        )

    def describe(self, settings: TransformersModel) -> str:
        return f"transformers model {settings.checkpoint}"
