"""Text perturbations by name.

A registry maps names to :class:`~.base.TextPerturbation` objects. :data:`TEXT_PERTURBATIONS`
holds the built-in four; a run (or a suite's replay file) registers into its own copy, made
with :meth:`TextPerturbationRegistry.builtin`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from pytest_segrobust.corruptions.composition import SEPARATOR
from pytest_segrobust.errors import UnknownNameError
from pytest_segrobust.text.base import TextPerturbation
from pytest_segrobust.text.perturbations import BUILTIN


class TextPerturbationRegistry:
    """Text perturbations by name, in registration order. Registries share no state."""

    def __init__(self, perturbations: Iterable[TextPerturbation] = ()) -> None:
        self._by_name: dict[str, TextPerturbation] = {}
        for perturbation in perturbations:
            self.register(perturbation)

    @classmethod
    def builtin(cls) -> TextPerturbationRegistry:
        """A new registry holding the built-in perturbations and nothing else."""
        return cls(BUILTIN)

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
        try:
            return self._by_name[name]
        except KeyError:
            known = ", ".join(sorted(self._by_name)) or "none"
            raise UnknownNameError(f"unknown text perturbation {name!r}; known: {known}") from None

    def names(self) -> list[str]:
        """The registered names, in registration order."""
        return list(self._by_name)

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def __iter__(self) -> Iterator[TextPerturbation]:
        return iter(list(self._by_name.values()))

    def __len__(self) -> int:
        return len(self._by_name)


TEXT_PERTURBATIONS = TextPerturbationRegistry.builtin()
"""The built-in text perturbations. Register into a copy (:meth:`TextPerturbationRegistry.builtin`), not here."""
