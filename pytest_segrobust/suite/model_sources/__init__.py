"""From a suite's model entry to the object its task's adapter receives: model sources by key.

Each model entry of a suite holds exactly one key of a registered :class:`ModelSource`, which
reads the entry and builds the model (as mmengine builds an object by its ``type``):

* ``factory: package.module:callable`` (:mod:`.factory`) calls the callable with the entry's
  ``kwargs``, and with the run's device as ``device=`` when it has a parameter of that name; with
  ``input:``/``output:`` blocks, what it returned is a function of numpy arrays, wrapped as described;
* ``onnx: file`` (:mod:`.onnx`) loads the file with ONNX Runtime;
* ``transformers: dir`` (:mod:`.transformers`) loads a Hugging Face checkpoint, its labels matched
  to the dataset's classes.

A new source is a module with a :class:`ModelSource` class decorated by
:func:`register_model_source` (a built-in one is also listed below), or an installed package's
class named in the entry point group ``segrobust.model_sources``::

    [project.entry-points."segrobust.model_sources"]
    tflite = "my_package.sources:TfliteSource"

It is loaded when a suite names its key.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from pytest_segrobust.core.errors import UnknownNameError
from pytest_segrobust.core.registry import InstanceRegistry
from pytest_segrobust.suite.model_sources.base import EntryContext, FieldError, ModelRequest, ModelSource

ENTRY_POINT_GROUP = "segrobust.model_sources"

MODEL_SOURCES: InstanceRegistry[ModelSource] = InstanceRegistry(
    "model source",
    ENTRY_POINT_GROUP,
    (
        "pytest_segrobust.suite.model_sources.factory",
        "pytest_segrobust.suite.model_sources.onnx",
        "pytest_segrobust.suite.model_sources.transformers",
    ),
)


def register_model_source(cls: type[ModelSource]) -> type[ModelSource]:
    """Register a model source class under its ``name`` (its instance is what suites use)."""
    return MODEL_SOURCES.register_class(cls)


@dataclass(frozen=True)
class ModelSpec:
    """A suite's model: its name, the key of the source that builds it, and what the source read.

    Attributes:
        name: The model's name in the suite.
        kind: The key of its source in the entry (``factory``, ``onnx``, ``transformers``, a plugin's).
        settings: What the source read from the entry (the source's own frozen value).
    """

    name: str
    kind: str
    settings: Any

    @property
    def source(self) -> str:
        """What builds the model, for messages: the factory's target, the ONNX file or the checkpoint."""
        return MODEL_SOURCES.get(self.kind).describe(self.settings)


def build_model(spec: ModelSpec, device: torch.device, task: str = "semantic", class_names: Sequence[str] = ()) -> Any:
    """The object ``spec`` describes, on ``device`` where it can be placed (before adaptation).

    ``task`` and the dataset's ``class_names`` are what a checkpoint's own labels are matched to.
    """
    return MODEL_SOURCES.get(spec.kind).build(spec.settings, ModelRequest(device, task, tuple(class_names)))


def source_keys() -> list[str]:
    """The keys that pick a source in a model entry: the built-ins' and the installed plugins'."""
    return MODEL_SOURCES.names()


def listed_sources() -> str:
    """The sources by key with what each key's value is, for the message of an entry without one:
    ``'factory' (a package.module:callable), 'onnx' (a model file) and 'transformers' (...)``."""
    parts = []
    for key in source_keys():
        try:
            parts.append(f"'{key}' ({MODEL_SOURCES.get(key).summary})")
        except UnknownNameError:  # a plugin that does not load is still a key the entry may hold
            parts.append(f"'{key}'")
    return parts[0] if len(parts) == 1 else f"{', '.join(parts[:-1])} and {parts[-1]}"


__all__ = [
    "ENTRY_POINT_GROUP",
    "MODEL_SOURCES",
    "EntryContext",
    "FieldError",
    "ModelRequest",
    "ModelSource",
    "ModelSpec",
    "build_model",
    "listed_sources",
    "register_model_source",
    "source_keys",
]
