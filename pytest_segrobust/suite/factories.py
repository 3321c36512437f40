"""A suite's ``package.module:callable`` targets: their form, their import, and the entry that names one.

Both a suite's dataset and its ``factory:`` models are given this way; :func:`read_factory`
reads such an entry wherever it stands, so the two are checked, and worded, alike.
"""

from __future__ import annotations

import importlib
import traceback
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_segrobust.core.errors import FieldError


@dataclass(frozen=True)
class FactorySpec:
    """A ``package.module:attribute`` callable and the keyword arguments to call it with."""

    target: str
    kwargs: Mapping[str, Any] = field(default_factory=dict)

    def build(self) -> Any:
        """Import the target and call it."""
        return load_object(self.target)(**self.kwargs)


def read_factory(entry: Mapping[str, Any], keys: tuple[str, ...], *, import_factories: bool = True) -> FactorySpec:
    """The ``factory`` and ``kwargs`` of ``entry``, which may hold no key but ``keys``.

    ``import_factories=False`` checks the target's form without importing its module.

    Raises:
        FieldError: naming the unknown key, the target that does not import, or the kwargs that
            are not a mapping.
    """
    # A misspelt key (kwarg: for kwargs:) would build the model with its defaults: never drop one.
    unknown = sorted(str(key) for key in entry if key not in keys)
    if unknown:
        raise FieldError(unknown[0], f"unknown field; expected {' or '.join(keys)}")
    target = entry["factory"]
    if not isinstance(target, str):
        raise FieldError("factory", f"expected a string, got {target!r}")
    try:
        load_object(target) if import_factories else split_target(target)
    except ValueError as exc:
        raise FieldError("factory", str(exc)) from exc
    kwargs = entry.get("kwargs", {}) or {}
    if not isinstance(kwargs, dict):
        raise FieldError("kwargs", f"expected a mapping, got {kwargs!r}")
    return FactorySpec(target, kwargs)


def split_target(target: str) -> tuple[str, str]:
    """``(module, attribute)`` of ``package.module:attribute``.

    Raises:
        ValueError: for a target of another form.
    """
    module_name, sep, attribute = target.partition(":")
    if not sep or not module_name or not attribute:
        raise ValueError(f"{target!r} is not of the form 'package.module:attribute'")
    return module_name, attribute


def load_object(target: str) -> Any:
    """Import ``package.module:attribute`` (the attribute may be dotted)."""
    module_name, attribute = split_target(target)
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"cannot import module {module_name!r} ({exc})") from exc
    except Exception as exc:  # the module's own code ran: whatever it raised is the user's to see
        raise ValueError(f"importing module {module_name!r} raised {type(exc).__name__}: {_located(exc)}") from exc
    for part in attribute.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"module {module_name!r} has no attribute {attribute!r}")
        obj = getattr(obj, part)
    return obj


def _located(exc: Exception) -> str:
    """``exc``'s message with the file and line it was raised at, as Python words a ``SyntaxError``."""
    if isinstance(exc, SyntaxError):
        return str(exc)  # "invalid syntax (x.py, line 3)"
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return str(exc)
    return f"{exc} ({Path(frames[-1].filename).name}, line {frames[-1].lineno})"
