"""pytest-segrobust: gate segmentation models on robustness, the way unit tests gate code.

The package's names load on first use: importing the pytest plugin (which pytest does in
every project where the package is installed) must not import torch.

The root holds only this module, the pytest entry point (:mod:`pytest_segrobust.plugin`) and
the ``segrobust`` command (:mod:`pytest_segrobust.cli`); everything else lives in a folder
that names its role, layer by layer from :mod:`pytest_segrobust.core` up to
:mod:`pytest_segrobust.run` (README, "Architecture"). The modules users import by their old
flat names (``pytest_segrobust.types``, ``.seeding``, ``.strategies``, ``.errors``, ``.scores``)
are the same module objects under their new homes.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.metadata
import sys
from types import ModuleType
from typing import Any

try:  # one source of truth: the version pyproject.toml gave the installed distribution
    __version__ = importlib.metadata.version("pytest-segrobust")
except importlib.metadata.PackageNotFoundError:  # run from a source tree that is not installed
    __version__ = "0+unknown"

_LAZY = {
    "REGISTRY": "pytest_segrobust.corruptions",
    "CellResult": "pytest_segrobust.engine.evaluation",
    "EvalResult": "pytest_segrobust.engine.evaluation",
    "evaluate": "pytest_segrobust.engine.evaluation",
    "absolute_robustness": "pytest_segrobust.metrics.robustness",
    "relative_robustness": "pytest_segrobust.metrics.robustness",
}

__all__ = [  # every lazy name, spelled out for the tools that read __all__ as a literal
    "REGISTRY",
    "CellResult",
    "EvalResult",
    "__version__",
    "absolute_robustness",
    "evaluate",
    "relative_robustness",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'pytest_segrobust' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


# Import paths that users write, kept as they were when the package root was flat: each is
# the same module object as its new home (``pytest_segrobust.types is
# pytest_segrobust.core.types``), so isinstance checks and monkeypatching see one module.
MOVED_MODULES = {
    "pytest_segrobust.types": "pytest_segrobust.core.types",
    "pytest_segrobust.errors": "pytest_segrobust.core.errors",
    "pytest_segrobust.seeding": "pytest_segrobust.randomness.seeding",
    "pytest_segrobust.scores": "pytest_segrobust.metrics.robustness",
    "pytest_segrobust.strategies": "pytest_segrobust.testing.strategies",
}


class _MovedModuleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds a moved module under its old name and hands back the module at its new home."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MOVED_MODULES:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = importlib.import_module(MOVED_MODULES[spec.name])
        spec.loader_state = module.__spec__  # importlib replaces it with this spec next
        return module

    def exec_module(self, module: ModuleType) -> None:
        # The module ran under its new name already: give it back its own ``__spec__``, so
        # that it reloads and names itself by its real name.
        module.__spec__ = module.__spec__.loader_state


if not any(isinstance(finder, _MovedModuleFinder) for finder in sys.meta_path):
    sys.meta_path.append(_MovedModuleFinder())
