from __future__ import annotations

from tests.text.helpers import levenshtein


def test_levenshtein_matches_hand_counts() -> None:
    assert levenshtein("", "") == 0
    assert levenshtein("abc", "") == 3
    assert levenshtein("", "ab") == 2
    assert levenshtein("kitten", "sitting") == 3
    assert levenshtein("ab", "ba") == 2
    assert levenshtein("flaw", "lawn") == 2
