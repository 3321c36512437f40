"""The built-in text perturbations and their severity tables (one line of data per severity).

Rates per severity 1..5:

* ``misspelling``: each word misspelt with probability 0.10 / 0.20 / 0.30 / 0.40 / 0.50
  (keyboard-neighbour substitution, transposition, doubled or dropped letter; see
  :func:`.functional.misspell_word`). Rule-based; R2-Bench used an LLM.
* ``mispunctuation``: a mark inserted after each character with probability 0.04 x severity
  = 0.04 / 0.08 / 0.12 / 0.16 / 0.20 (R2-Bench).
* ``character_missing``: each character deleted with probability 0.05 x severity
  = 0.05 / 0.10 / 0.15 / 0.20 / 0.25 (R2-Bench).
* ``grammar_error``: each applicable word (see :mod:`.grammar`) changed with probability
  0.15 / 0.30 / 0.45 / 0.60 / 0.75. Rule-based; R2-Bench used an LLM.

Severity 0 is the identity; R2-Bench's low / medium / high are severities 1 / 3 / 5.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pytest_segrobust.corruptions.base import SeverityTable
from pytest_segrobust.text import functional
from pytest_segrobust.text.base import SeededTextPerturbation
from pytest_segrobust.text.grammar import grammar_errors


@dataclass(frozen=True)
class CharacterRate:
    """Probability that one character position is edited."""

    rate: float


@dataclass(frozen=True)
class WordFraction:
    """Probability that one (applicable) word is edited."""

    fraction: float


MISSPELLING = SeverityTable(tuple(WordFraction(f) for f in (0.10, 0.20, 0.30, 0.40, 0.50)))  # type: ignore[arg-type]
MISPUNCTUATION = SeverityTable(tuple(CharacterRate(r) for r in (0.04, 0.08, 0.12, 0.16, 0.20)))  # type: ignore[arg-type]
CHARACTER_MISSING = SeverityTable(tuple(CharacterRate(r) for r in (0.05, 0.10, 0.15, 0.20, 0.25)))  # type: ignore[arg-type]
GRAMMAR_ERROR = SeverityTable(tuple(WordFraction(f) for f in (0.15, 0.30, 0.45, 0.60, 0.75)))  # type: ignore[arg-type]


def _fractions(table: SeverityTable[WordFraction], severity: int) -> list[float]:
    return [table[level].fraction for level in range(1, severity + 1)]


class Misspelling(SeededTextPerturbation[WordFraction]):
    """Typos on a fraction of the words (:func:`.functional.misspell`)."""

    def apply(self, text: str, severity: int, rng: np.random.Generator) -> str:
        return functional.misspell(text, _fractions(self.table, severity), rng)


class Mispunctuation(SeededTextPerturbation[CharacterRate]):
    """Punctuation inserted at a fraction of the character positions (:func:`.functional.insert_punctuation`)."""

    def apply(self, text: str, severity: int, rng: np.random.Generator) -> str:
        return functional.insert_punctuation(text, self.table[severity].rate, rng)


class CharacterMissing(SeededTextPerturbation[CharacterRate]):
    """A fraction of the characters deleted (:func:`.functional.delete_characters`)."""

    def apply(self, text: str, severity: int, rng: np.random.Generator) -> str:
        return functional.delete_characters(text, self.table[severity].rate, rng)


class GrammarError(SeededTextPerturbation[WordFraction]):
    """Rule-based grammar errors on a fraction of the applicable words (:mod:`.grammar`)."""

    def apply(self, text: str, severity: int, rng: np.random.Generator) -> str:
        def wrong_form(word: str, draws: np.ndarray) -> str | None:
            forms = grammar_errors(word)
            return forms[min(int(draws[0] * len(forms)), len(forms) - 1)] if forms else None

        return functional.edit_words(text, _fractions(self.table, severity), rng, 1, wrong_form)


misspelling = Misspelling(
    "misspelling", "rule-based typos on 10% x severity of words (R2-Bench: LLM-made)", MISSPELLING
)
mispunctuation = Mispunctuation(
    "mispunctuation", "punctuation inserted at 4% x severity of character positions (R2-Bench)", MISPUNCTUATION
)
character_missing = CharacterMissing(
    "character_missing", "5% x severity of characters deleted (R2-Bench)", CHARACTER_MISSING
)
grammar_error = GrammarError(
    "grammar_error", "rule-based grammar errors on 15% x severity of applicable words (R2-Bench: LLM-made)",
    GRAMMAR_ERROR,
)

BUILTIN = (misspelling, mispunctuation, grammar_error, character_missing)
"""R2-Bench's four text perturbations, in its order."""
