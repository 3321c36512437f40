"""What a run learned about one cell, in a form that crosses process boundaries."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from enum import Enum
from typing import Any

from pytest_segrobust.core.formats import check_format

# Version of CellRecord.to_json; a record of another version is refused, never half-read.
RECORD_FORMAT = 1


class Status(str, Enum):
    """What became of a cell; the value is what records and reports show."""

    PASSED = "passed"
    IMPROVED = "improved"  # a number got better, and the corrupted score did not fall
    ROSE_AS_CLEAN_FELL = "rose-as-clean-fell"  # passes: gamma_r rose, but only as the clean score fell further
    REGRESSED = "regressed"
    INCONCLUSIVE = "inconclusive"  # fails: the suite's policy is inconclusive: fail
    INCONCLUSIVE_ALLOWED = "inconclusive-allowed"  # passes, under inconclusive: warn or pass
    NEW = "new"
    RECORDED = "recorded"  # no baseline yet, but the suite's requirements are met: passes
    UNMET = "unmet"  # a requirement (release criterion) is not met: fails
    UPDATED = "updated"
    ERROR = "error"


@dataclass
class CellRecord:
    """Everything learned about one cell; JSON-safe so that workers can ship it.

    ``per_class``, ``clean_per_class`` and ``supercategories`` are aligned with
    ``class_names``; ``details`` and ``clean_details`` hold the metric's further numbers
    (AP50, AP75, box AP for ``map``). Each record carries its clean numbers, so that any
    selection of cells can be reported on its own. These fields are the headline metric's;
    ``metrics`` holds every further metric's numbers by name (``score``, ``clean_score``,
    ``gamma_r``, ``gamma_a``, ``per_class``, ``clean_per_class``, ``details``). ``split`` is
    the dataset split of a natural-shift suite's cell. ``model_fingerprint`` and
    ``dataset_fingerprint`` identify what was measured (``None`` where they could not be taken);
    ``device`` is where the model said it ran. ``requirements`` holds the suite's requirements
    decided for the cell (:class:`~pytest_segrobust.store.decisions.RequirementCheck` as JSON).
    ``cached`` says that its numbers were read from the result cache, not measured by this run
    (:mod:`pytest_segrobust.engine.result_cache`); they are gated all the same.
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
    status: Status
    baseline: dict[str, float] | None = None
    checks: list[dict[str, float | str]] = field(default_factory=list)
    clean_per_class: list[float | None] = field(default_factory=list)
    supercategories: list[str | None] = field(default_factory=list)
    details: dict[str, float] = field(default_factory=dict)
    clean_details: dict[str, float] = field(default_factory=dict)
    split: str | None = None
    metrics: dict[str, dict[str, Any]] = field(default_factory=dict)
    model_fingerprint: str | None = None
    dataset_fingerprint: str | None = None
    device: str | None = None
    requirements: list[dict[str, Any]] = field(default_factory=list)
    cached: bool = False

    def to_json(self) -> dict[str, Any]:
        """JSON-safe fields with the format version (statuses as their value)."""
        data = asdict(self)
        data["status"] = Status(self.status).value
        return {"format": RECORD_FORMAT, **data}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CellRecord:
        """Parse :meth:`to_json`'s output.

        Raises:
            ValueError: for another format, a missing or unknown field, or an unknown status.
        """
        check_format(data, RECORD_FORMAT, "cell record")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known - {"format"})
        if unknown:
            raise ValueError(f"cell record with unknown fields {', '.join(unknown)}")
        values = {name: value for name, value in data.items() if name in known}
        values["status"] = Status(values.get("status"))
        try:
            return cls(**values)
        except TypeError as exc:
            raise ValueError(f"cell record: {exc}") from None
