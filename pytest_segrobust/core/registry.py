"""Named registries of extension classes (metrics, tasks), open to installed plugins.

Built-in entries register when their module is imported; the modules are listed per
registry and imported on first lookup, so that naming a metric costs nothing until a run
needs it. Installed packages add entries through an entry point group, e.g. in their
``pyproject.toml``::

    [project.entry-points."segrobust.metrics"]
    my_metric = "my_package.metrics:MyMetric"

An entry point names the class itself; it is loaded when a suite names it.
"""

from __future__ import annotations

import importlib
import importlib.metadata
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

from pytest_segrobust.core.errors import UnknownNameError

T = TypeVar("T")


class NamedRegistry(Generic[T]):
    """Classes by their ``name`` attribute.

    Args:
        kind: What the entries are, for messages (``"metric"``).
        group: Entry point group of installed plugins.
        builtins: Modules whose import registers the built-in entries.
        make: Turns what an entry point names into the entry (e.g. a class into its instance).
    """

    def __init__(
        self, kind: str, group: str, builtins: tuple[str, ...], make: Callable[[Any], T] | None = None
    ) -> None:
        self.kind = kind
        self.group = group
        self._builtins = builtins
        self._make = make
        self._entries: dict[str, T] = {}
        self._loaded = False

    def register(self, entry: T) -> T:
        """Add ``entry`` under its ``name``; usable as a class decorator.

        Raises:
            ValueError: when another entry holds the name.
        """
        name = getattr(entry, "name")  # noqa: B009 - T is any registered kind; mypy cannot see its name
        existing = self._entries.get(name)
        # The same definition imported again (a module reloaded, as pytester's in-process runs
        # do) replaces its earlier self; another definition under a taken name is refused.
        if existing is not None and existing is not entry and _where(existing) != _where(entry):
            raise ValueError(f"{self.kind} {name!r} is already registered ({_where(existing)})")
        self._entries[name] = entry
        return entry

    def get(self, name: str) -> T:
        """The entry called ``name``, from the built-ins or an installed plugin.

        Raises:
            UnknownNameError: naming the known entries.
        """
        self._load_builtins()
        if name not in self._entries:
            self._load_entry_point(name)
        if name not in self._entries:
            raise UnknownNameError(f"unknown {self.kind} {name!r}; known: {', '.join(self.names())}")
        return self._entries[name]

    def names(self) -> list[str]:
        """Every registered name, with the installed plugins' names."""
        self._load_builtins()
        plugins = {ep.name for ep in importlib.metadata.entry_points(group=self.group)}
        return sorted(set(self._entries) | plugins)

    def __iter__(self) -> Iterator[T]:
        self._load_builtins()
        return iter(list(self._entries.values()))

    def _load_builtins(self) -> None:
        if not self._loaded:
            self._loaded = True
            for module in self._builtins:
                importlib.import_module(module)

    def _load_entry_point(self, name: str) -> None:
        for entry in load_named(self.group, name, self.kind, "class"):
            self.register(entry if self._make is None else self._make(entry))


class InstanceRegistry(NamedRegistry[T]):
    """Entries that are instances of classes (tasks, model sources), each made with no arguments.

    A class is registered as its instance, whether the code registers it (:meth:`register_class`,
    a class decorator) or an installed plugin's entry point names it.

    Args:
        kind: What the entries are, for messages (``"task"``).
        group: Entry point group of installed plugins.
        builtins: Modules whose import registers the built-in entries.
    """

    def __init__(self, kind: str, group: str, builtins: tuple[str, ...]) -> None:
        super().__init__(kind, group, builtins, make=lambda cls: cls())

    def register_class(self, cls: type[T]) -> type[T]:
        """Register an instance of ``cls`` and return ``cls``, so that it serves as a class decorator.

        Raises:
            ValueError: when another entry holds the name.
        """
        self.register(cls())
        return cls


def load_named(
    group: str, name: str, kind: str, subject: str, make: Callable[[Any], Any] | None = None
) -> Iterator[Any]:
    """The installed entries called ``name`` in entry point ``group``: each loaded, made into its
    entry by ``make`` (``None``: as loaded), and checked to carry that ``name``.

    Args:
        kind: What the entries are, for messages (``"metric"``).
        subject: What must carry the name, for messages (``"class"``).

    Raises:
        UnknownNameError: for an entry point that fails to load (or to be made), or whose entry
            has another name.
    """
    for entry_point in importlib.metadata.entry_points(group=group, name=name):
        try:
            loaded = entry_point.load()
            entry = loaded if make is None else make(loaded)
        except Exception as exc:
            raise UnknownNameError(
                f"{kind} plugin {name!r} ({entry_point.value}) failed to load: {type(exc).__name__}: {exc}"
            ) from exc
        if getattr(entry, "name", None) != name:
            raise UnknownNameError(
                f"{kind} plugin {name!r} ({entry_point.value}) has name {getattr(entry, 'name', None)!r}; "
                f"the entry point and the {subject} must agree"
            )
        yield entry


def _where(entry: object) -> str:
    """``module.QualifiedName`` of a class, or of an instance's class."""
    kind = entry if isinstance(entry, type) else type(entry)
    return f"{kind.__module__}.{kind.__qualname__}"

