"""Hooks that plugins and ``conftest.py`` files can implement."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pytest_segrobust.corruptions import CorruptionRegistry


@pytest.hookspec
def pytest_segrobust_register_corruptions(registry: CorruptionRegistry) -> None:
    """Register custom corruptions before suites are collected.

    Example (in ``conftest.py``)::

        def pytest_segrobust_register_corruptions(registry):
            registry.register(Vignette("vignette", Category.CAMERA, VIGNETTE), presets=("coco-p",))

    Registration is idempotent: registering an equal corruption again is a no-op.
    """
