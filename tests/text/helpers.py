"""Shared pieces of the text tests: a plain Levenshtein distance and text strategies."""

from __future__ import annotations

from hypothesis import strategies as st


def levenshtein(a: str, b: str) -> int:
    """Insertions, deletions and substitutions that turn ``a`` into ``b`` (unit costs)."""
    previous = list(range(len(b) + 1))
    for i, char_a in enumerate(a, 1):
        current = [i]
        for j, char_b in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (char_a != char_b)))
        previous = current
    return previous[-1]


# Letters (both cases, a few non-ASCII), digits, spaces and punctuation, as referring expressions have.
ALPHABET = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 ,.;:!?'-éß\t"

texts = st.text(alphabet=ALPHABET, min_size=0, max_size=60)
non_blank_texts = texts.filter(lambda text: text.strip() != "")
sample_ids = st.text(alphabet="abc0123/", min_size=1, max_size=12)
seeds = st.integers(min_value=0, max_value=2**32)
