"""Hooks that plugins and ``conftest.py`` files can implement."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pytest_segrobust.corruptions import CorruptionRegistry


@pytest.hookspec(historic=True)
def pytest_segrobust_register_corruptions(registry: CorruptionRegistry) -> None:
    """Register custom corruptions in this run's registry.

    Example (in ``conftest.py``)::

        def pytest_segrobust_register_corruptions(registry):
            registry.register(Vignette("vignette", Category.CAMERA, VIGNETTE), presets=("coco-p",))

    ``vignette`` is then part of ``coco-p``: a suite of that preset that lists no corruptions
    runs it too. The hook is historic: a ``conftest.py`` that pytest loads after the registry
    was built (one in a sub-folder, found during collection) is called when it loads. The
    registry belongs to one run; another run starts from the built-ins again.

    Registration is idempotent: registering an equal corruption again is a no-op.
    """


@pytest.hookspec(firstresult=True)
def pytest_segrobust_adapt_model(obj: object, task: str, device: object, amp: bool) -> object | None:
    """Fit what a suite's model factory (or the fixture's caller) returned to ``task``'s model protocol.

    Asked before the registered adapters (``pytest_segrobust.models.register_adapter``); the
    first answer that is not ``None`` wins and must follow the task's protocol. Return
    ``None`` for objects this implementation does not know.

    Example (in ``conftest.py``)::

        def pytest_segrobust_adapt_model(obj, task, device, amp):
            if task == "semantic" and isinstance(obj, MyOnnxSession):
                return MyOnnxSegmenter(obj, device=device)
            return None

    Args:
        obj: The factory's return value.
        task: The suite's task name (``semantic``, ``instance``, ``panoptic``, ...).
        device: The run's ``torch.device`` (``--segrobust-device``).
        amp: Whether ``--segrobust-amp`` is on.
    """
