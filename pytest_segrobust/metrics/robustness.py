"""Robustness scores from the papers.

The papers state them for a percentage where higher is better (mIoU, AP); here the direction
and the scale come from the metric: a degradation is how far the corrupted score moved
towards the metric's worst end, gamma_r divides it by the clean score's distance from that
end and gamma_a by the width of the scale. For mIoU (0..100, higher is better) these are the
papers' formulas exactly. Neither robustness is clipped: a corrupted score better than the
clean one gives a value above 1.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence


def relative_robustness(clean: float, corrupted: float, *, higher_is_better: bool = True, worst: float = 0.0) -> float:
    """gamma_r = 1 - (A_c - A_ps) / A_c (Schiappa et al.), for a metric whose worst value is ``worst``.

    Returns NaN when the clean score is at the worst end, where the ratio has no meaning.
    """
    room = clean - worst if higher_is_better else worst - clean
    if room == 0:
        return math.nan
    return 1.0 - _degradation(clean, corrupted, higher_is_better) / room


def absolute_robustness(clean: float, corrupted: float, *, higher_is_better: bool = True, scale: float = 100.0) -> float:
    """gamma_a = 1 - (A_c - A_ps) / 100 (Schiappa et al.), for a metric on a scale of width ``scale``."""
    return 1.0 - _degradation(clean, corrupted, higher_is_better) / scale


def _degradation(clean: float, corrupted: float, higher_is_better: bool) -> float:
    return clean - corrupted if higher_is_better else corrupted - clean


def mean(values: Iterable[float]) -> float:
    """Arithmetic mean; NaN for no values."""
    items = list(values)
    return math.fsum(items) / len(items) if items else math.nan


def corruption_degradation(errors: Iterable[float], reference_errors: Iterable[float]) -> float:
    """CD_c = sum_s D^f_{s,c} / sum_s D^ref_{s,c} (Kamann & Rother), D = 1 - mIoU.

    Args:
        errors: The model's errors D at the severities summed over.
        reference_errors: The reference model's errors at the same severities.
    """
    total_reference = math.fsum(reference_errors)
    return math.fsum(errors) / total_reference if total_reference else math.nan


def relative_corruption_degradation(
    errors: Iterable[float], clean_error: float, reference_errors: Iterable[float], reference_clean_error: float
) -> float:
    """rCD_c = sum_s (D^f_{s,c} - D^f_clean) / sum_s (D^ref_{s,c} - D^ref_clean) (Kamann & Rother)."""
    reference_total = math.fsum(e - reference_clean_error for e in reference_errors)
    if reference_total == 0:
        return math.nan
    return math.fsum(e - clean_error for e in errors) / reference_total


def error(score: float) -> float:
    """D = 1 - A / 100 for a score A in percent."""
    return 1.0 - score / 100.0


def per_class_relative_robustness(
    clean: Sequence[float | None], corrupted: Sequence[float | None]
) -> list[float | None]:
    """gamma_r of every class from its clean and corrupted per-class metric (Schiappa Table 4).

    A class whose clean or corrupted value is undefined (``None``), or whose clean value is
    0, has no gamma_r (``None``).
    """
    if len(clean) != len(corrupted):
        raise ValueError(f"{len(clean)} clean per-class values against {len(corrupted)} corrupted ones")
    return [
        None if c is None or p is None or c == 0 else relative_robustness(c, p) for c, p in zip(clean, corrupted)
    ]
