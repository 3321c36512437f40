"""A stand-in for the optional compiled kernels' loaders (``functools.cache`` functions that import numba's module)."""

from __future__ import annotations

import functools
from collections.abc import Callable


def counting_loader(loads: list[int]) -> Callable[[], str]:
    """A cached loader returning ``"kernel"`` that appends to ``loads`` each time it really loads."""

    @functools.cache
    def load() -> str:
        loads.append(1)
        return "kernel"

    return load
