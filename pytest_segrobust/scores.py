"""Robustness scores from the papers; metric values are in percent (0..100).

Neither robustness is clipped: a corrupted score above the clean one gives a value above 1.
"""

from __future__ import annotations

import math
from collections.abc import Iterable


def relative_robustness(clean: float, corrupted: float) -> float:
    """gamma_r = 1 - (A_c - A_ps) / A_c (Schiappa et al.).

    Returns NaN when the clean score is 0, where the ratio has no meaning.
    """
    if clean == 0:
        return math.nan
    return 1.0 - (clean - corrupted) / clean


def absolute_robustness(clean: float, corrupted: float) -> float:
    """gamma_a = 1 - (A_c - A_ps) / 100 (Schiappa et al.)."""
    return 1.0 - (clean - corrupted) / 100.0


def mean(values: Iterable[float]) -> float:
    """Arithmetic mean; NaN for no values."""
    items = list(values)
    return math.fsum(items) / len(items) if items else math.nan
