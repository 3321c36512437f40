"""pytest-segrobust: gate segmentation models on robustness, the way unit tests gate code.

The package's names load on first use: importing the pytest plugin (which pytest does in
every project where the package is installed) must not import torch.
"""

from __future__ import annotations

import importlib
import importlib.metadata
from typing import Any

try:  # one source of truth: the version pyproject.toml gave the installed distribution
    __version__ = importlib.metadata.version("pytest-segrobust")
except importlib.metadata.PackageNotFoundError:  # run from a source tree that is not installed
    __version__ = "0+unknown"

_LAZY = {
    "REGISTRY": "pytest_segrobust.corruptions",
    "CellResult": "pytest_segrobust.evaluation",
    "EvalResult": "pytest_segrobust.evaluation",
    "evaluate": "pytest_segrobust.evaluation",
    "absolute_robustness": "pytest_segrobust.scores",
    "relative_robustness": "pytest_segrobust.scores",
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'pytest_segrobust' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
