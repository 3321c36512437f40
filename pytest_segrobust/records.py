"""What a run learned about one cell, in a form that crosses process boundaries."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class CellRecord:
    """Everything learned about one cell; JSON-safe so that workers can ship it.

    ``per_class``, ``clean_per_class`` and ``supercategories`` are aligned with
    ``class_names``; ``details`` and ``clean_details`` hold the metric's further numbers
    (AP50, AP75, box AP for ``map``). Each record carries its clean numbers, so that any
    selection of cells can be reported on its own. These fields are the headline metric's;
    ``metrics`` holds every further metric's numbers by name (``score``, ``clean_score``,
    ``gamma_r``, ``gamma_a``, ``per_class``, ``clean_per_class``, ``details``). ``split`` is
    the dataset split of a natural-shift suite's cell.
    """

    nodeid: str
    suite: str
    model: str
    corruption: str
    category: str
    severity: int
    score: float
    clean_score: float
    gamma_r: float | None
    gamma_a: float | None
    per_class: list[float | None]
    class_names: list[str]
    num_images: int
    seconds: float
    status: str
    baseline: dict[str, float] | None = None
    checks: list[dict[str, float | str]] = field(default_factory=list)
    clean_per_class: list[float | None] = field(default_factory=list)
    supercategories: list[str | None] = field(default_factory=list)
    details: dict[str, float] = field(default_factory=dict)
    clean_details: dict[str, float] = field(default_factory=dict)
    split: str | None = None
    metrics: dict[str, dict[str, Any]] = field(default_factory=dict)
