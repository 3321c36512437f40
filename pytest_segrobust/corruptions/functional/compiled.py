"""numba's compiled loops: loaded on first use, where numba is installed and loading them pays.

Every ``*_kernel`` module of this package is numba code (numba is optional: the ``numba``
extra). Each is imported through a :func:`loader` only, and each caller keeps its numpy,
OpenCV or torch path for installs without numba; the loops compute the same values.
Loading numba costs about 0.7 s of CPU once per process, so a call that would gain less
(a small image) takes its other path until something larger has loaded the loops
(:func:`if_it_pays`).
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from types import ModuleType

Loader = Callable[[], "ModuleType | None"]
"""A cached loader (``functools.cache``): the kernel module, or None where numba is not installed."""


def loader(module: str) -> Loader:
    """The loader of this package's kernel module ``module`` (for example ``"rows_kernel"``)."""

    @functools.cache
    def load() -> ModuleType | None:
        try:
            return importlib.import_module(f"{__package__}.{module}")
        except ImportError:
            return None

    load.__doc__ = f":mod:`.{module}` (numba's compiled loops), or None where numba is not installed."
    return load


def if_it_pays(load: Loader, pays: bool) -> ModuleType | None:
    """``load()`` where loading pays for the call at hand, or the loops are loaded already; None otherwise."""
    if not pays and not load.cache_info().currsize:  # type: ignore[attr-defined]
        return None
    return load()
