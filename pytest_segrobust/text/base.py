"""The text perturbation model: a name, a five-row severity table, one seeded stream per sample.

A text perturbation changes a referring expression the way a person or a channel would
(misspellings, stray punctuation, grammar errors, lost characters). Like an image corruption
(:mod:`pytest_segrobust.corruptions.base`), its severity is data (a
:class:`~pytest_segrobust.corruptions.base.SeverityTable` of five rows) and its randomness is
drawn per sample, so a sample's output is a function of (seed, sample id, perturbation name,
severity, text) alone: identical in any batch, order, worker or process.

Nesting. The stream of a sample is keyed by ``sample_seed(seed, sample_id, name, 0)`` (the
severity slot fixed at 0), so every severity sees the same draws. Each perturbation draws one
uniform number per place it may edit (a character position or a word) and edits that place
when the number is below the severity's rate; how it edits a place comes from further draws
that do not depend on severity. The edits at severity ``s`` are therefore a subset of those at
``s + 1``. For character deletions and insertions that alone makes the edit distance to
the original grow with severity; word replacements could, rarely, bring the text back closer
to the original (``"a the the"`` edited to ``"the an a"``), so the word-level perturbations
add the words new at a severity one at a time and skip one that would lower the distance
(:func:`.functional.edit_words`).

Empty input. An empty or whitespace-only text is returned unchanged at every severity (there
is nothing to perturb, and a perturbation never makes a non-empty text empty); a dataset that
must reject empty expressions does so when it loads them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Generic, TypeVar

import numpy as np

from pytest_segrobust.core.extras import Extra
from pytest_segrobust.core.modality import Category
from pytest_segrobust.corruptions.base import MAX_SEVERITY, SeverityTable
from pytest_segrobust.randomness.seeding import sample_seed

Params = TypeVar("Params")

FAMILY = Category.TEXT.value  # the category its cells are reported under (text.cells.TextCell)

LEVELS: dict[str, int] = {"low": 1, "medium": 3, "high": 5}
"""R2-Bench's named levels and the severities they stand for."""

NESTED_STREAM = 0
"""The severity slot of :func:`sample_seed` for text streams: all severities share one stream."""


def severity_of(level: int | str) -> int:
    """The severity 0..5 that a level names: an int, a digit string, or low / medium / high.

    Raises:
        ValueError: for anything else, listing what is accepted.
    """
    if isinstance(level, str):
        key = level.strip().lower()
        if key in LEVELS:
            return LEVELS[key]
        if key.isdigit():
            level = int(key)
    if isinstance(level, int) and not isinstance(level, bool) and 0 <= level <= MAX_SEVERITY:
        return level
    raise ValueError(f"level must be 0..{MAX_SEVERITY} or one of {', '.join(LEVELS)}, got {level!r}")


def text_generator(seed: int, sample_id: str, name: str) -> np.random.Generator:
    """The random stream of one sample under one text perturbation, shared by all severities."""
    return np.random.Generator(np.random.Philox(key=sample_seed(seed, sample_id, name, NESTED_STREAM)))


def is_blank(text: str) -> bool:
    """True for an empty or whitespace-only text, which every perturbation returns unchanged."""
    return not text.strip()


class TextPerturbation(ABC):
    """A named text perturbation; ``perturb(texts, sample_ids, severity, seed)`` applies it to a batch.

    Attributes:
        name: Registry name, e.g. ``"misspelling"``.
        family: Always ``"text"`` (image corruptions report their category instead).
        description: One line for reports: what it does and where its rates come from.
        requires: The extras whose packages it cannot run without; checked when a suite is loaded.
    """

    family = FAMILY
    requires: tuple[Extra, ...] = ()

    def __init__(self, name: str, description: str) -> None:
        self.name = name
        self.description = description

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"

    def perturb(self, texts: Sequence[str], sample_ids: Sequence[str], severity: int, seed: int) -> list[str]:
        """Perturb a batch of expressions; sample ``i`` depends only on its own id and text.

        Args:
            texts: The expressions.
            sample_ids: One stable id per expression (e.g. ``image/ref/sentence``).
            severity: 0 (identity) to 5; use :func:`severity_of` for low / medium / high.
            seed: The suite's global seed.

        Raises:
            ValueError: for a severity outside 0..5 or a different number of ids and texts.
            TypeError: for a text or id that is not a ``str``.
        """
        if isinstance(texts, str) or isinstance(sample_ids, str):
            raise TypeError(f"{self.name}: texts and sample_ids are sequences of str, not a str")
        if len(texts) != len(sample_ids):
            raise ValueError(f"{self.name}: got {len(sample_ids)} sample ids for {len(texts)} texts")
        if isinstance(severity, bool) or not isinstance(severity, int) or not 0 <= severity <= MAX_SEVERITY:
            raise ValueError(f"{self.name}: severity must be an int 0..{MAX_SEVERITY}, got {severity!r}")
        for index, (text, sample_id) in enumerate(zip(texts, sample_ids)):
            if not isinstance(text, str) or not isinstance(sample_id, str):
                raise TypeError(
                    f"{self.name}: sample {index}: text and sample id must be str, "
                    f"got {type(text).__name__} and {type(sample_id).__name__}"
                )
        return [self._perturb_one(text, sample_id, severity, seed) for text, sample_id in zip(texts, sample_ids)]

    @abstractmethod
    def _perturb_one(self, text: str, sample_id: str, severity: int, seed: int) -> str:
        """Perturb one checked expression."""


class SeededTextPerturbation(TextPerturbation, Generic[Params]):
    """A perturbation computed from a severity table row and the sample's own stream."""

    def __init__(self, name: str, description: str, table: SeverityTable[Params]) -> None:
        super().__init__(name, description)
        self.table = table

    def _perturb_one(self, text: str, sample_id: str, severity: int, seed: int) -> str:
        if severity == 0 or is_blank(text):
            return text
        self.table[severity]  # fails for a severity outside 1..5
        return self.apply(text, severity, text_generator(seed, sample_id, self.name))

    @abstractmethod
    def apply(self, text: str, severity: int, rng: np.random.Generator) -> str:
        """Perturb a non-blank text at severity 1..5, drawing only from ``rng``."""
