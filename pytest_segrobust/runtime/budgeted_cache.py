"""A process's cache within a budget of bytes, spent first come, first served, never given back.

Once the budget is spent, what does not fit is read or computed again each time it is asked
for, and what fits stays: nothing is evicted, so a budget too small for the run costs the
reads it does not save, never a cache that thrashes. The sample cache
(:mod:`pytest_segrobust.data.sample_cache`) and the mask encoding cache
(:mod:`pytest_segrobust.metrics.coco_masks`) are such caches.
"""

from __future__ import annotations

from pytest_segrobust.core.wording import article


class BudgetedCache:
    """What a cache within a budget of bytes shares: the budget, the bytes held, and the rule.

    Args:
        budget: Bytes the cache may hold; 0 keeps nothing.
        holds: What the cache holds, for the message that refuses a negative budget (``sample``).

    Attributes:
        budget: Bytes the cache may hold.
        used: Bytes held.

    Raises:
        ValueError: for a negative budget.
    """

    def __init__(self, budget: int, holds: str) -> None:
        if budget < 0:
            raise ValueError(f"{article(holds)} cache budget is a number of bytes >= 0, got {budget}")
        self.budget = budget
        self.used = 0

    def _spend(self, size: int) -> bool:
        """Count ``size`` bytes as held if they fit what is left of the budget; whether they did."""
        if self.used + size > self.budget:
            return False
        self.used += size
        return True
