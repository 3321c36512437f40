"""``factory: package.module:callable``: a model a callable returns, with the entry's ``kwargs``.

The callable is handed the run's device as ``device=`` when it has a parameter of that name
(so a model that must be placed at construction, a TensorRT engine or a quantised module,
lands where the run says). With ``input:``/``output:`` blocks, what it returned is a function
of numpy arrays, wrapped as they describe (:mod:`pytest_segrobust.models.arrays`).
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pytest_segrobust.core.errors import FieldError
from pytest_segrobust.models.arrays import ArrayInput, ArrayModel, ArrayOutput
from pytest_segrobust.suite.factories import FactorySpec, load_object, read_factory
from pytest_segrobust.suite.model_sources import register_model_source
from pytest_segrobust.suite.model_sources.base import (
    EntryContext,
    ModelRequest,
    ModelSource,
    read_array_blocks,
    semantic_only,
)

_KEYS = ("name", "factory", "kwargs", "input", "output")


@dataclass(frozen=True)
class FactoryModel:
    """A factory's model: the callable and its arguments, and the ``input``/``output`` blocks
    (validated) of a model that is a function of numpy arrays."""

    factory: FactorySpec
    input: Mapping[str, Any] | None = None
    output: Mapping[str, Any] | None = None


@register_model_source
class FactorySource(ModelSource):
    """``factory:`` (and ``kwargs``, ``input``, ``output``)."""

    name = "factory"
    summary = "a package.module:callable"

    def read(self, entry: Mapping[str, Any], context: EntryContext) -> FactoryModel:
        input_spec, output_spec = read_array_blocks(entry)
        if input_spec is not None and output_spec is None:
            raise FieldError("output", "is required with 'input': what the function returns (kind: logits, ...)")
        factory = read_factory(entry, _KEYS, import_factories=context.import_factories)
        if input_spec is not None or output_spec is not None:
            semantic_only(context.task, "a model described by input/output")
        return FactoryModel(factory, input_spec, output_spec)

    def build(self, settings: FactoryModel, request: ModelRequest) -> Any:
        factory = load_object(settings.factory.target)
        kwargs = dict(settings.factory.kwargs)
        if "device" not in kwargs and takes_device(factory):
            kwargs["device"] = request.device
        built = factory(**kwargs)
        if settings.output is None:
            return built
        identify = getattr(built, "fingerprint", None)
        identity = str(identify()) if callable(identify) else None
        return ArrayModel(
            built,
            ArrayInput.from_yaml(settings.input or {}),
            ArrayOutput.from_yaml(settings.output),
            identity,
            request.device,
        )

    def describe(self, settings: FactoryModel) -> str:
        return f"factory {settings.factory.target}"

    def code_objects(self, settings: FactoryModel, model: Any) -> tuple[Any, ...]:
        # The factory's code says what it builds; the model's, what it computes.
        return (load_object(settings.factory.target), model)


def takes_device(factory: Any) -> bool:
    """Whether ``factory`` has a parameter named ``device`` (not merely ``**kwargs``)."""
    try:
        parameters = inspect.signature(factory).parameters
    except (TypeError, ValueError):  # builtins without a signature
        return False
    found = parameters.get("device")
    return found is not None and found.kind in (found.POSITIONAL_OR_KEYWORD, found.KEYWORD_ONLY)
