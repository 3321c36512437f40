"""Text perturbations by name.

A registry maps names to :class:`~.base.TextPerturbation` objects. :data:`TEXT_PERTURBATIONS`
holds the built-in four; a run (or a suite's replay file) registers into its own copy, made
with :meth:`TextPerturbationRegistry.builtin`, or with :meth:`TextPerturbationRegistry.installed`
where installed packages' perturbations may be named too. A package adds one through the
entry point group ``segrobust.text``, naming the perturbation (or its class, called without
arguments)::

    [project.entry-points."segrobust.text"]
    homoglyphs = "my_package.text:homoglyphs"

It is loaded when a suite first names it.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Iterable, Iterator

from pytest_segrobust.core.errors import UnknownNameError
from pytest_segrobust.core.registry import load_named
from pytest_segrobust.corruptions.composition import SEPARATOR
from pytest_segrobust.text.base import TextPerturbation
from pytest_segrobust.text.perturbations import BUILTIN

ENTRY_POINT_GROUP = "segrobust.text"


class TextPerturbationRegistry:
    """Text perturbations by name, in registration order. Registries share no state.

    Args:
        perturbations: The perturbations it starts with.
        group: An entry point group: a name the registry does not hold is looked up there
            (once), and its perturbation registered.
    """

    def __init__(self, perturbations: Iterable[TextPerturbation] = (), group: str | None = None) -> None:
        self._by_name: dict[str, TextPerturbation] = {}
        self._group = group
        self._looked_up: set[str] = set()
        for perturbation in perturbations:
            self.register(perturbation)

    @classmethod
    def builtin(cls) -> TextPerturbationRegistry:
        """A new registry holding the built-in perturbations and nothing else."""
        return cls(BUILTIN)

    @classmethod
    def installed(cls) -> TextPerturbationRegistry:
        """A new registry holding the built-in perturbations, and those of installed packages
        (:data:`ENTRY_POINT_GROUP`) once named."""
        return cls(BUILTIN, group=ENTRY_POINT_GROUP)

    def register(self, perturbation: TextPerturbation) -> TextPerturbation:
        """Add ``perturbation`` under its name; registering the same object again is a no-op.

        Raises:
            ValueError: when another perturbation holds the name, or the name contains the
                composition separator.
        """
        if SEPARATOR in perturbation.name:
            raise ValueError(f"text perturbation names cannot contain {SEPARATOR!r}: {perturbation.name!r}")
        existing = self._by_name.get(perturbation.name)
        if existing is not None and existing is not perturbation:
            raise ValueError(f"text perturbation {perturbation.name!r} is already registered")
        self._by_name[perturbation.name] = perturbation
        return perturbation

    def get(self, name: str) -> TextPerturbation:
        """The perturbation called ``name``.

        Raises:
            UnknownNameError: naming the known perturbations.
        """
        self._look_up(name)
        try:
            return self._by_name[name]
        except KeyError:
            known = ", ".join(sorted(self._by_name)) or "none"
            raise UnknownNameError(f"unknown text perturbation {name!r}; known: {known}") from None

    def names(self) -> list[str]:
        """The registered names, in registration order (an installed package's once it is named)."""
        return list(self._by_name)

    def load_installed(self) -> None:
        """Register every perturbation of the registry's entry point group, not only those named so far
        (what ``segrobust list`` shows); a registry without a group holds what it holds.

        Raises:
            UnknownNameError: for an entry point that fails to load, or whose perturbation has another name.
        """
        if self._group is None:
            return
        for entry_point in importlib.metadata.entry_points(group=self._group):
            self._look_up(entry_point.name)

    def __contains__(self, name: object) -> bool:
        if isinstance(name, str):
            self._look_up(name)
        return name in self._by_name

    def _look_up(self, name: str) -> None:
        """Register the installed perturbation called ``name``, if the group has one (asked once per name).

        Raises:
            UnknownNameError: for an entry point that fails to load, or whose perturbation has another name.
        """
        if self._group is None or name in self._by_name or name in self._looked_up or SEPARATOR in name:
            return
        self._looked_up.add(name)
        instance = lambda loaded: loaded() if isinstance(loaded, type) else loaded
        for perturbation in load_named(self._group, name, "text perturbation", "perturbation", instance):
            self.register(perturbation)

    def __iter__(self) -> Iterator[TextPerturbation]:
        return iter(list(self._by_name.values()))

    def __len__(self) -> int:
        return len(self._by_name)


TEXT_PERTURBATIONS = TextPerturbationRegistry.builtin()
"""The built-in text perturbations. Register into a copy (:meth:`TextPerturbationRegistry.builtin`), not here."""
