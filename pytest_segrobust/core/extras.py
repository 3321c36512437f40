"""What a component needs beyond the core install: its modules and the extra that installs them.

A component that imports an optional package declares it, as a class attribute of a metric,
a corruption or a text perturbation (``requires = (COCO,)``) or beside a model source
(``REQUIRES`` of :mod:`pytest_segrobust.models.onnx`). A suite is checked against what it
uses when it is loaded, so a missing package is one collection error naming the field and
the command that installs it, instead of a traceback in every cell.

The check finds modules without importing them (:func:`importlib.util.find_spec`): an
installed but broken package (a torchvision built for another torch) passes it, and its own
import error is reported, as it is, when the component is built (:func:`import_failure`).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Extra:
    """An extra of pytest-segrobust (``pyproject.toml``) and the modules a component imports from it."""

    name: str
    modules: tuple[str, ...]

    @property
    def install(self) -> str:
        return f'pip install "pytest-segrobust[{self.name}]"'

    def missing(self) -> tuple[str, ...]:
        """The modules that are not installed."""
        return tuple(module for module in self.modules if not installed(module))


COCO = Extra("coco", ("faster_coco_eval", "pycocotools"))
ONNX = Extra("onnx", ("onnxruntime",))
# scipy is needed by Mask2Former and MaskFormer only, but the extra installs it for every checkpoint.
TRANSFORMERS = Extra("transformers", ("transformers", "scipy"))


def installed(module: str) -> bool:
    """Whether ``module`` can be found (without importing it; a package's parents are imported)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package that is missing, or a module without a spec
        return False


def unmet(what: str, extras: Iterable[Extra]) -> str | None:
    """Why ``what`` cannot run here (``metric 'map' needs faster_coco_eval, ...``), or ``None`` when it can."""
    for extra in extras:
        missing = extra.missing()
        if missing:
            verb = "is" if len(missing) == 1 else "are"
            return f"{what} needs {' and '.join(missing)}, which {verb} not installed: {extra.install}"
    return None


def import_failure(exc: BaseException, extra: Extra) -> str:
    """What a failed import means: a module of ``extra`` that is not installed, and how to install it;
    otherwise the error as it was raised (a broken install, a module outside the extra), and its cause."""
    name = getattr(exc, "name", None) or ""
    top = name.partition(".")[0]
    if isinstance(exc, ModuleNotFoundError) and top in extra.modules and not installed(top):
        return f"{top} is not installed: {extra.install}"
    described = f"{type(exc).__name__}: {exc}"
    cause = exc.__cause__
    if cause is not None and str(cause) not in str(exc):
        described += f" (caused by {type(cause).__name__}: {cause})"
    fix = torchvision_mismatch(exc)
    return described if fix is None else f"{described}; {fix}"


# What torch says when torchvision's compiled operators were built for another torch.
_TORCHVISION_OPERATOR = "operator torchvision::"
TORCHVISION_FIX = (
    "torchvision does not match the installed torch (installed from another index than torch's, or another "
    "version): install torchvision from the same index as torch, at the version that matches it "
    "(pip install torchvision==<match> --index-url <torch's index>), or uninstall it (pip uninstall torchvision) "
    "if nothing you run needs it"
)


def torchvision_mismatch(exc: BaseException) -> str | None:
    """The fix for a torchvision built for another torch (``operator torchvision::nms does not exist``),
    found in ``exc`` or the exceptions it was raised from; ``None`` for any other failure."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if _TORCHVISION_OPERATOR in str(current) and "does not exist" in str(current):
            return TORCHVISION_FIX
        current = current.__cause__ or current.__context__
    return None
