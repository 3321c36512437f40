"""Realised edit rates on many expressions are near the documented ones (binomial, 5 sigma)."""

from __future__ import annotations

import math
import random

import pytest

from pytest_segrobust.text import character_missing, grammar_error, mispunctuation, misspelling
from pytest_segrobust.text.grammar import grammar_errors

VOCABULARY = (
    "circle", "square", "triangle", "striped", "dotted", "plain", "large", "small", "red", "blue", "green",
    "left", "right", "top", "bottom", "the", "a", "is", "are", "shape", "shapes", "corner", "edge", "middle",
    "second"
)


def _corpus(count: int) -> tuple[list[str], list[str]]:
    draw = random.Random(2024)
    texts = [" ".join(draw.choice(VOCABULARY) for _ in range(draw.randint(6, 14))) for _ in range(count)]
    return texts, [f"img{i}/0/{i % 3}" for i in range(count)]


TEXTS, IDS = _corpus(600)


def _assert_near(observed: float, expected: float, trials: int, label: str) -> None:
    tolerance = 5 * math.sqrt(expected * (1 - expected) / trials)
    assert abs(observed - expected) <= tolerance, f"{label}: {observed:.4f} vs {expected:.4f} +- {tolerance:.4f}"


def test_the_vocabulary_is_all_applicable_to_grammar_errors() -> None:
    assert all(grammar_errors(word) for word in VOCABULARY)


@pytest.mark.parametrize("severity", [1, 2, 3, 4, 5])
def test_character_missing_deletes_five_percent_per_severity(severity: int) -> None:
    out = character_missing.perturb(TEXTS, IDS, severity, seed=0)
    total = sum(map(len, TEXTS))
    _assert_near((total - sum(map(len, out))) / total, 0.05 * severity, total, f"severity {severity}")


@pytest.mark.parametrize("severity", [1, 2, 3, 4, 5])
def test_mispunctuation_inserts_at_four_percent_per_severity(severity: int) -> None:
    out = mispunctuation.perturb(TEXTS, IDS, severity, seed=0)
    total = sum(map(len, TEXTS))
    _assert_near((sum(map(len, out)) - total) / total, 0.04 * severity, total, f"severity {severity}")


def _changed_word_fraction(out: list[str]) -> tuple[float, int]:
    pairs = [(a, b) for text, perturbed in zip(TEXTS, out) for a, b in zip(text.split(" "), perturbed.split(" "), strict=True)]
    return sum(a != b for a, b in pairs) / len(pairs), len(pairs)


@pytest.mark.parametrize("severity", [1, 2, 3, 4, 5])
def test_misspelling_changes_ten_percent_of_words_per_severity(severity: int) -> None:
    fraction, words = _changed_word_fraction(misspelling.perturb(TEXTS, IDS, severity, seed=0))
    _assert_near(fraction, 0.10 * severity, words, f"severity {severity}")


@pytest.mark.parametrize("severity", [1, 2, 3, 4, 5])
def test_grammar_error_changes_fifteen_percent_of_applicable_words_per_severity(severity: int) -> None:
    fraction, words = _changed_word_fraction(grammar_error.perturb(TEXTS, IDS, severity, seed=0))
    _assert_near(fraction, 0.15 * severity, words, f"severity {severity}")
