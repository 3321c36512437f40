"""The pure edits: keyboard typos, grammar rules, nesting of severities."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_segrobust.core.errors import UnknownNameError
from pytest_segrobust.text import (
    TEXT_PERTURBATIONS,
    TextPerturbationRegistry,
    character_missing,
    functional,
    grammar_error,
    mispunctuation,
    severity_of,
)
from pytest_segrobust.text.functional import KEYBOARD_NEIGHBOURS, PUNCTUATION, misspell_word
from pytest_segrobust.text.grammar import grammar_errors
from tests.text.helpers import levenshtein, non_blank_texts, sample_ids, seeds

unit = st.floats(min_value=0.0, max_value=1.0, exclude_max=True)


def _is_subsequence(short: str, long: str) -> bool:
    rest = iter(long)
    return all(char in rest for char in short)


def test_keyboard_neighbours_are_symmetric_and_local() -> None:
    for key, around in KEYBOARD_NEIGHBOURS.items():
        assert key not in around
        for other in around:
            assert key in KEYBOARD_NEIGHBOURS[other], (key, other)
    assert sorted(KEYBOARD_NEIGHBOURS["e"]) == sorted("wrsd34")
    assert sorted(KEYBOARD_NEIGHBOURS["q"]) == sorted("w12a")
    assert sorted(KEYBOARD_NEIGHBOURS["m"]) == sorted("njk")


@given(word=st.text(alphabet="abcdefghijklmnopqrstuvwxyzQWERTYé", min_size=1, max_size=12),
       operation=unit, position=unit, key=unit)
def test_a_typo_is_one_keyboard_slip(word: str, operation: float, position: float, key: float) -> None:
    typo = misspell_word(word, operation, position, key)
    assert typo != word and typo
    distance = levenshtein(word, typo)
    if len(typo) != len(word):  # a doubled or a dropped letter
        assert distance == 1 and abs(len(typo) - len(word)) == 1
    elif distance == 2:  # two neighbouring letters swapped
        at = next(i for i, (a, b) in enumerate(zip(word, typo)) if a != b)
        assert typo[at : at + 2] == word[at + 1] + word[at] and typo[at + 2 :] == word[at + 2 :]
    else:  # a neighbouring key, in the same case
        assert distance == 1
        at = next(i for i, (a, b) in enumerate(zip(word, typo)) if a != b)
        assert typo[at].lower() in KEYBOARD_NEIGHBOURS[word[at].lower()]
        assert typo[at].isupper() == word[at].isupper() or typo[at].isdigit()


@pytest.mark.parametrize(
    ("word", "expected"),
    [
        ("is", ("are", "was", "be")),
        ("The", ("A", "An")),
        ("circles", ("circle",)),
        ("boxes", ("box",)),
        ("berries", ("berry",)),
        ("box", ("boxes",)),
        ("standing", ("standed", "stands")),
        ("dotted", ("dotting", "dotts")),
        ("slowly", ("slow",)),
        ("red", ("reds", "redly")),
        ("AI", ()),
        ("AIM", ("AIMs",)),
        ("of", ()),
        ("glass", ("glasses",)),
    ],
)
def test_grammar_rules(word: str, expected: tuple[str, ...]) -> None:
    assert grammar_errors(word) == expected


@given(text=non_blank_texts, sample_id=sample_ids, seed=seeds)
def test_character_edits_nest_across_severities(text: str, sample_id: str, seed: int) -> None:
    deleted = [character_missing.perturb([text], [sample_id], s, seed)[0] for s in range(6)]
    inserted = [mispunctuation.perturb([text], [sample_id], s, seed)[0] for s in range(6)]
    for lower, higher in zip(range(5), range(1, 6)):
        assert _is_subsequence(deleted[higher], deleted[lower])
        assert _is_subsequence(inserted[lower], inserted[higher])
    assert all(len(inserted[s]) - len(text) == levenshtein(text, inserted[s]) for s in range(6))
    assert set("".join(inserted[5])) <= set(text) | set(PUNCTUATION)


def test_character_missing_keeps_one_visible_character() -> None:
    # Almost every character of a one-letter text goes at severity 5 for some id; it must stay.
    outputs = {character_missing.perturb([" x "], [str(i)], 5, 0)[0] for i in range(200)}
    assert all("x" in out for out in outputs)
    assert len(outputs) > 1  # the spaces do go


def test_levels_name_severities() -> None:
    assert [severity_of(level) for level in ("low", "medium", "high", "MEDIUM", "4", 0, 5)] == [1, 3, 5, 3, 4, 0, 5]
    for bad in ("extreme", 6, -1, "1.5", True):
        with pytest.raises(ValueError, match="level must be 0..5 or one of low, medium, high"):
            severity_of(bad)  # type: ignore[arg-type]


def test_the_registry_holds_r2_benchs_four() -> None:
    assert TEXT_PERTURBATIONS.names() == ["misspelling", "mispunctuation", "grammar_error", "character_missing"]
    assert {p.family for p in TEXT_PERTURBATIONS} == {"text"}
    with pytest.raises(UnknownNameError, match="unknown text perturbation 'typo'; known: character_missing, grammar_error"):
        TEXT_PERTURBATIONS.get("typo")


def test_registries_are_independent_and_names_unique() -> None:
    registry = TextPerturbationRegistry.builtin()
    registry.register(character_missing)  # the same object again: a no-op
    assert len(registry) == 4
    with pytest.raises(ValueError, match="'character_missing' is already registered"):
        registry.register(type(character_missing)("character_missing", "other", character_missing.table))
    with pytest.raises(ValueError, match="cannot contain '\\+'"):
        registry.register(type(character_missing)("a+b", "other", character_missing.table))
    other = TextPerturbationRegistry()
    other.register(type(character_missing)("dropout", "other", character_missing.table))
    assert "dropout" in other and "dropout" not in TEXT_PERTURBATIONS and "dropout" not in registry


def test_a_word_edit_that_would_undo_earlier_ones_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    # Found by search: without the guard, severity 5 edits "a" to "the" next to earlier
    # edits "the" -> "a", realigning with the original and lowering the distance 10 -> 9.
    text, sample_id = "left small circle the a the", "s3985"
    guarded = [grammar_error.perturb([text], [sample_id], s, 0)[0] for s in range(6)]
    distances = [levenshtein(text, out) for out in guarded]
    assert distances == sorted(distances) and distances[5] == 10
    monkeypatch.setattr(functional, "levenshtein", lambda a, b: 0)  # every edit accepted
    unguarded = [grammar_error.perturb([text], [sample_id], s, 0)[0] for s in range(6)]
    assert [levenshtein(text, out) for out in unguarded][4:] == [10, 9]
