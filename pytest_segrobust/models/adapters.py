"""Model adapters: fit what a suite's factory returned to its task's model protocol.

An adapter is registered for a task with a predicate saying which objects it wraps
(``isinstance(obj, torch.nn.Module)``, a Hugging Face model class, an ONNX session); a new
kind of model is one module that registers its adapter. Before the registry, the
``pytest_segrobust_adapt_model`` hook asks plugins and ``conftest.py`` files; after it, an
object that already follows the task's protocol passes through as it is.

An installed package adds adapters through the entry point group ``segrobust.adapters``,
naming a build function decorated with :func:`register_adapter` (loading it imports its module,
which registers it), or an :class:`Adapter`::

    [project.entry-points."segrobust.adapters"]
    keras = "my_package.adapters:keras_semantic"

They are loaded with the built-in ones, the first time a model needs an adapter, and tried
before them.
"""

from __future__ import annotations

import importlib
import importlib.metadata
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from pytest_segrobust.core.errors import SegRobustError
from pytest_segrobust.provenance import reads

if TYPE_CHECKING:
    from pytest_segrobust.tasks.base import Task

ENTRY_POINT_GROUP = "segrobust.adapters"

Build = Callable[..., Any]
# Modules whose import registers the built-in adapters.
_BUILTINS = (
    "pytest_segrobust.models.torch_module",
    "pytest_segrobust.models.video",
    "pytest_segrobust.models.audio_visual",
    "pytest_segrobust.models.promptable_functions",
)


@dataclass(frozen=True)
class Adapter:
    """Wraps objects that ``matches`` accepts into models of ``task`` with ``build(obj, device=, amp=)``."""

    task: str
    name: str
    matches: Callable[[Any], bool]
    build: Build


_ADAPTERS: list[Adapter] = []
_loaded = False


def register_adapter(task: str, matches: Callable[[Any], bool], name: str | None = None) -> Callable[[Build], Build]:
    """Register ``build`` as the adapter of ``task`` for objects ``matches`` accepts (a decorator).

    ``task`` is a task's :attr:`~pytest_segrobust.tasks.base.Task.model_kind`: its name, or a kind of
    model it takes under a suite's setting (``vos-prompts``: a VOS suite's prompt reference).

    Adapters registered later are tried first, so a specific adapter registered by a plugin
    wins over a generic built-in one (``nn.Module``).
    """

    def decorate(build: Build) -> Build:
        _add(Adapter(task, name or getattr(build, "__qualname__", repr(build)), matches, build))
        return build

    return decorate


def _add(adapter: Adapter) -> None:
    # A module imported again (pytester's in-process runs) replaces its adapters, never doubles them.
    _ADAPTERS[:] = [a for a in _ADAPTERS if (a.task, a.name) != (adapter.task, adapter.name)]
    _ADAPTERS.insert(0, adapter)


def load_entry_points(group: str = ENTRY_POINT_GROUP) -> None:
    """Load every ``group`` entry point (installed adapter plugins): a decorated build function
    registered itself when its module was imported; an :class:`Adapter` is registered here.

    Raises:
        SegRobustError: naming a plugin that fails to load.
    """
    for entry_point in importlib.metadata.entry_points(group=group):
        try:
            loaded = entry_point.load()
        except Exception as exc:
            raise SegRobustError(
                f"adapter plugin {entry_point.name!r} ({entry_point.value}) failed to load: {type(exc).__name__}: {exc}"
            ) from exc
        if isinstance(loaded, Adapter):
            _add(loaded)


def adapters(task: str) -> list[Adapter]:
    """The adapters of ``task``, in the order they are tried (installed plugins' before the built-in ones)."""
    global _loaded
    if not _loaded:
        _loaded = True
        # The first model built loads them, but they are not what that model read (its cached
        # clean result is keyed by its reads): entry points are found by scanning sys.path.
        with reads.unrecorded():
            for module in _BUILTINS:
                importlib.import_module(module)
            load_entry_points()
    return [a for a in _ADAPTERS if a.task == task]


def adapt_model(
    obj: Any,
    task: Task,
    device: torch.device | str | None = None,
    amp: bool = False,
    hook: Callable[..., Any] | None = None,
) -> Any:
    """``obj`` as a model of ``task``.

    Args:
        obj: What a factory returned.
        task: The suite's task.
        device: Where adapted modules run (objects that follow the protocol manage their own).
        amp: Run adapted modules under autocast.
        hook: pytest's ``pytest_segrobust_adapt_model`` hook caller, asked first.

    Raises:
        TypeError: when nothing fits ``obj`` to the task, saying what was expected.
    """
    if hook is not None:
        adapted = hook(obj=obj, task=task.name, device=device, amp=amp)
        if adapted is not None:
            return _checked(adapted, task, f"the pytest_segrobust_adapt_model hook for {type(obj).__name__}")
    if task.accepts_model(obj):
        return obj
    for adapter in adapters(task.model_kind):
        if adapter.matches(obj):
            return _checked(adapter.build(obj, device=device, amp=amp), task, f"adapter {adapter.name}")
    why = task.refusal(obj)
    kinds = ", ".join(a.name for a in adapters(task.model_kind))
    raise TypeError(
        f"expected {task.model_description} or an object an adapter wraps ({kinds}), "
        f"got {type(obj).__name__}{why}"
    )


def _checked(model: Any, task: Task, source: str) -> Any:
    if not task.accepts_model(model):
        raise TypeError(f"{source} returned {type(model).__name__}, which is not {task.model_description}")
    return model
