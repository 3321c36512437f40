"""Levenshtein distance (unit-cost insertions, deletions, substitutions), bit-parallel.

Myers' bit-vector algorithm in Hyyrö's formulation for the global distance: one column of
the dynamic-programming table is kept as two bit vectors (the +1 and -1 vertical
differences), so each character of ``b`` costs a handful of integer operations on
``len(a)``-bit Python ints. Fast enough to run inside a perturbation on every expression.
"""

from __future__ import annotations


def levenshtein(a: str, b: str) -> int:
    """The edit distance between ``a`` and ``b``."""
    if not a:
        return len(b)
    if not b:
        return len(a)
    full = (1 << len(a)) - 1
    last = 1 << (len(a) - 1)
    match: dict[str, int] = {}
    for i, char in enumerate(a):
        match[char] = match.get(char, 0) | (1 << i)
    plus, minus, score = full, 0, len(a)
    for char in b:
        eq = match.get(char, 0)
        vertical = eq | minus
        horizontal = (((eq & plus) + plus) ^ plus) | eq
        h_plus = (minus | ~(horizontal | plus)) & full
        h_minus = plus & horizontal
        if h_plus & last:
            score += 1
        elif h_minus & last:
            score -= 1
        # The top row of the table is 0, 1, 2, ...: every horizontal step there is +1.
        h_plus = ((h_plus << 1) | 1) & full
        h_minus = (h_minus << 1) & full
        plus = (h_minus | ~(vertical | h_plus)) & full
        minus = h_plus & vertical
    return score
