"""From a suite's model entry to the object its task's adapter receives.

``factory: package.module:callable`` calls the callable with the entry's ``kwargs``, and with
the run's device as ``device=`` when it has a parameter of that name (so a model that must
be placed at construction, a TensorRT engine or a quantised module, lands where the run
says). ``onnx: file`` loads the file with ONNX Runtime, ``transformers: dir`` a Hugging Face
checkpoint (its labels matched to the dataset's classes). With ``input:``/``output:`` blocks,
what the factory returned is a function of numpy arrays, wrapped as described.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from pytest_segrobust.models.arrays import ArrayInput, ArrayModel, ArrayOutput

if TYPE_CHECKING:
    from pytest_segrobust.suite.schema import ModelSpec


def build_model(spec: ModelSpec, device: torch.device, task: str = "semantic", class_names: Sequence[str] = ()) -> Any:
    """The object ``spec`` describes, on ``device`` where it can be placed (before adaptation).

    ``task`` and the dataset's ``class_names`` are what a checkpoint's own labels are matched to.
    """
    if spec.transformers is not None:
        from pytest_segrobust.models.transformers import load_transformers

        return load_transformers(
            spec.transformers,
            task=task,
            device=device,
            class_names=class_names,
            label_map=spec.label_map,
            allow_download=spec.allow_download,
        )
    if spec.onnx is not None:
        from pytest_segrobust.models.onnx import load_onnx

        return load_onnx(Path(spec.onnx), spec.input, spec.output, device)
    from pytest_segrobust.suite.schema import load_object

    assert spec.factory is not None
    factory = load_object(spec.factory.target)
    kwargs = dict(spec.factory.kwargs)
    if "device" not in kwargs and takes_device(factory):
        kwargs["device"] = device
    built = factory(**kwargs)
    if spec.output is None:
        return built
    identify = getattr(built, "fingerprint", None)
    identity = str(identify()) if callable(identify) else None
    return ArrayModel(built, ArrayInput.from_yaml(spec.input or {}), ArrayOutput.from_yaml(spec.output), identity, device)


def takes_device(factory: Any) -> bool:
    """Whether ``factory`` has a parameter named ``device`` (not merely ``**kwargs``)."""
    try:
        parameters = inspect.signature(factory).parameters
    except (TypeError, ValueError):  # builtins without a signature
        return False
    found = parameters.get("device")
    return found is not None and found.kind in (found.POSITIONAL_OR_KEYWORD, found.KEYWORD_ONLY)
