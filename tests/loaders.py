"""Stand-ins for the optional compiled kernels: their loaders (``functools.cache`` functions that
import numba's module) and the modules themselves, spied on."""

from __future__ import annotations

import functools
from collections.abc import Callable
from types import ModuleType
from typing import Any


def counting_loader(loads: list[int]) -> Callable[[], str]:
    """A cached loader returning ``"kernel"`` that appends to ``loads`` each time it really loads."""

    @functools.cache
    def load() -> str:
        loads.append(1)
        return "kernel"

    return load


class KernelSpy:
    """A kernel module whose functions run as the module's own and append their names to ``calls``."""

    def __init__(self, kernel: ModuleType, calls: list[str]) -> None:
        self._kernel, self._calls = kernel, calls

    def __getattr__(self, name: str) -> Callable[..., Any]:
        function = getattr(self._kernel, name)

        def call(*args: object) -> Any:
            self._calls.append(name)
            return function(*args)

        return call
