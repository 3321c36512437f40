from __future__ import annotations

import json
import math
from pathlib import Path

from pytest_segrobust.cache import CleanCache
from pytest_segrobust.evaluation import EvalResult
from pytest_segrobust.metrics import MetricResult

RESULT = EvalResult(
    {
        "map": MetricResult(81.5, (90.0, None, 73.0), {"ap50": 90.5}),
        "boundary_iou": MetricResult(60.25, (None, 50.0, 70.5)),
    },
    num_images=2,
    seconds=0.5,
)


def test_computes_once_then_reads(tmp_path: Path) -> None:
    cache = CleanCache(tmp_path)
    calls = []
    compute = lambda: calls.append(1) or RESULT  # noqa: E731
    key = CleanCache.key("model", "data")
    assert cache.get_or_compute(key, compute) == RESULT
    assert CleanCache(tmp_path).get_or_compute(key, compute) == RESULT
    assert len(calls) == 1


def test_key_depends_on_every_part() -> None:
    assert CleanCache.key("a", "b") != CleanCache.key("a", "c")
    assert CleanCache.key("ab", "c") != CleanCache.key("a", "bc")


def test_a_corrupt_entry_is_recomputed(tmp_path: Path) -> None:
    key = CleanCache.key("m")
    (tmp_path / f"{key}.json").write_text("{truncated")
    cache = CleanCache(tmp_path)
    assert cache.get_or_compute(key, lambda: RESULT) == RESULT
    assert cache.misses == 1 and cache.hits == 0


def test_every_metric_survives_the_round_trip_in_order(tmp_path: Path) -> None:
    key = CleanCache.key("m")
    CleanCache(tmp_path).get_or_compute(key, lambda: RESULT)
    read = CleanCache(tmp_path).get_or_compute(key, lambda: None)  # type: ignore[arg-type,return-value]
    assert read == RESULT and list(read.metrics) == ["map", "boundary_iou"] and read.headline == "map"


def test_an_entry_of_the_old_format_is_recomputed(tmp_path: Path) -> None:
    key = CleanCache.key("m")
    old = {"score": 1.0, "per_class": [1.0], "num_images": 1, "seconds": 0.1, "details": {}}
    (tmp_path / f"{key}.json").write_text(json.dumps(old))
    cache = CleanCache(tmp_path)
    assert cache.get_or_compute(key, lambda: RESULT) == RESULT
    assert cache.misses == 1


def test_a_result_with_any_nan_metric_is_not_stored(tmp_path: Path) -> None:
    nan = EvalResult({"miou": MetricResult(50.0, ()), "boundary_iou": MetricResult(math.nan, ())}, 1, 0.1)
    CleanCache(tmp_path).get_or_compute(CleanCache.key("m"), lambda: nan)
    assert not list(tmp_path.glob("*.json"))
