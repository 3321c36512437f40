"""What a model source is: the class that reads one key of a suite's model entries and builds
the model it describes, and the checks the built-in sources share.

A source reads its entry when the suite is loaded (every error a :class:`FieldError` naming the
field, which the schema prefixes with the file and the entry) and builds the model when a cell
first needs it, so that what it imports (onnxruntime, transformers) is imported only then.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from pytest_segrobust.core.errors import FieldError
from pytest_segrobust.core.extras import Extra, unmet
from pytest_segrobust.models.arrays import ArrayInput, ArrayOutput, ArraySpecError

__all__ = ["EntryContext", "FieldError", "ModelRequest", "ModelSource"]


@dataclass(frozen=True)
class EntryContext:
    """What a source may need to know of the suite while it reads an entry.

    Attributes:
        task: The suite's task (a source whose models fit some tasks only refuses the others).
        import_factories: Whether modules named by the entry may be imported now; ``False``
            where the suite is read without being run (``segrobust merge``).
    """

    task: str
    import_factories: bool = True


@dataclass(frozen=True)
class ModelRequest:
    """What a build is asked for.

    Attributes:
        device: The run's device; the model is placed there where it can be.
        task: The suite's task.
        class_names: The dataset's class names, for a source that reads them
            (:attr:`ModelSource.needs_class_names`); empty for the others.
    """

    device: torch.device
    task: str = "semantic"
    class_names: Sequence[str] = ()


class ModelSource(ABC):
    """One key of a suite's model entries (``factory``, ``onnx``, ``transformers``, a plugin's):
    how its entries are read and its models built.

    A source is registered under its :attr:`name` with
    :func:`~pytest_segrobust.suite.model_sources.register_model_source`, or installed through the
    entry point group ``segrobust.model_sources`` (naming the class).

    Attributes:
        name: The key that picks this source in a model entry.
        summary: What the key's value is, for the message listing the sources (``a model file``).
        needs_class_names: Whether its builds read the dataset's class names (a checkpoint's
            labels are matched to them); the dataset is built first only for such a source.
    """

    name: ClassVar[str]
    summary: ClassVar[str]
    needs_class_names: ClassVar[bool] = False

    @abstractmethod
    def read(self, entry: Mapping[str, Any], context: EntryContext) -> Any:
        """What ``entry`` (a model entry holding this source's key, and ``name``) says, checked:
        a frozen value, which the model is built from and whose ``repr`` keys its cached clean results.

        Raises:
            FieldError: naming the field at fault, relative to the entry.
        """

    @abstractmethod
    def build(self, settings: Any, request: ModelRequest) -> Any:
        """The model ``settings`` (what :meth:`read` returned) describe, before it is adapted to the task."""

    @abstractmethod
    def describe(self, settings: Any) -> str:
        """What builds the model, for messages: ``onnx model nets/a.onnx``."""

    def code_objects(self, settings: Any, model: Any) -> tuple[Any, ...]:
        """The objects whose code says what the built ``model`` computes, besides the modules and
        files its build read; none, where the model carries its identity (a file's digest)."""
        return ()


def check_fields(entry: Mapping[str, Any], allowed: tuple[str, ...], kind: str) -> None:
    """Refuse a key of ``entry`` that is not ``allowed``; ``kind`` names the model (``an ONNX model``)."""
    unknown = sorted(str(key) for key in entry if key not in allowed)
    if unknown:
        raise FieldError(unknown[0], f"unknown field of {kind}; expected {', '.join(allowed)}")


def read_path(entry: Mapping[str, Any], key: str, expected: str) -> str:
    """The non-empty string of ``entry[key]`` (a file, a directory); ``expected`` says what it should be."""
    path = entry[key]
    if not isinstance(path, str):
        raise FieldError(key, f"expected a string, got {path!r}")
    if not path:
        raise FieldError(key, expected)
    return path


def require(key: str, what: str, extras: Iterable[Extra]) -> None:
    """Refuse ``what`` where the packages of its ``extras`` are not installed, naming the one to install."""
    reason = unmet(what, extras)
    if reason is not None:
        raise FieldError(key, reason)


def read_array_blocks(entry: Mapping[str, Any]) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """A model's ``input:`` and ``output:`` mappings (:mod:`pytest_segrobust.models.arrays`), each
    checked by parsing it, the input first; ``None`` for one the entry leaves out."""
    return _read_array_block(entry, "input", ArrayInput), _read_array_block(entry, "output", ArrayOutput)


def _read_array_block(
    entry: Mapping[str, Any], key: str, spec: type[ArrayInput | ArrayOutput]
) -> dict[str, Any] | None:
    raw = entry.get(key)
    if raw is None:
        return None
    try:
        spec.from_yaml(raw)
    except ArraySpecError as exc:
        raise FieldError(f"{key}.{exc.field}" if exc.field else key, str(exc)) from exc
    return dict(raw)


def semantic_only(task: str, kind: str) -> None:
    """Refuse a model of class ids per pixel (``kind``: ``an ONNX model``) in a suite of another task."""
    if task != "semantic":
        raise FieldError("", f"{kind} predicts class ids per pixel: it fits task semantic, not {task}")
