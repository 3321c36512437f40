"""Every typed boundary refuses a value of another format version, naming what it is."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pytest

from pytest_segrobust.backends.shard_plan import ShardPlan
from pytest_segrobust.core.formats import check_format
from pytest_segrobust.engine.runner import Measurement
from pytest_segrobust.gate.outcomes import Outcome
from pytest_segrobust.report.coverage import RunCoverage
from pytest_segrobust.store.decisions import ModelOutcome
from pytest_segrobust.store.records import CellRecord

READERS: list[tuple[Callable[[Mapping[str, Any]], object], str]] = [
    (CellRecord.from_json, "cell record"),
    (Outcome.from_json, "outcome"),
    (ModelOutcome.from_json, "model outcome"),
    (RunCoverage.from_json, "run coverage"),
    (ShardPlan.from_json, "shard plan"),
    (Measurement.from_json, "measurement"),
]


@pytest.mark.parametrize(("read", "what"), READERS, ids=[what for _, what in READERS])
def test_another_format_is_refused_by_name(read: Callable[[Mapping[str, Any]], object], what: str) -> None:
    with pytest.raises(ValueError, match=f"^{what} of format 999, expected "):
        read({"format": 999})
    with pytest.raises(ValueError, match=f"^{what} of format None, expected "):
        read({})


def test_the_format_written_passes() -> None:
    check_format({"format": 3}, 3, "thing")
    with pytest.raises(ValueError, match="^thing of format '3', expected 3$"):
        check_format({"format": "3"}, 3, "thing")
