"""Tasks by name: semantic, instance, panoptic, referring, vos, rvos, avs, promptable, and those of installed plugins (``segrobust.tasks``).

Layer 3: imports the layers below and :mod:`pytest_segrobust.models`.
"""

from __future__ import annotations

from pytest_segrobust.core.registry import InstanceRegistry
from pytest_segrobust.tasks.base import Task

ENTRY_POINT_GROUP = "segrobust.tasks"

TASKS: InstanceRegistry[Task] = InstanceRegistry(
    "task",
    ENTRY_POINT_GROUP,
    (
        "pytest_segrobust.tasks.semantic",
        "pytest_segrobust.tasks.instance",
        "pytest_segrobust.tasks.panoptic",
        "pytest_segrobust.tasks.referring",
        "pytest_segrobust.tasks.vos",
        "pytest_segrobust.tasks.rvos",
        "pytest_segrobust.tasks.avs",
        "pytest_segrobust.tasks.promptable",
    ),
)


def register_task(cls: type[Task]) -> type[Task]:
    """Register a task class (its instance is what the engine uses)."""
    return TASKS.register_class(cls)


def get_task(name: str) -> Task:
    """The task called ``name`` (raises :class:`~pytest_segrobust.core.errors.UnknownNameError`)."""
    return TASKS.get(name)


__all__ = ["TASKS", "Task", "get_task", "register_task"]
