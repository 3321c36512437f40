from __future__ import annotations

from pathlib import Path

from pytest_segrobust.cache import CleanCache
from pytest_segrobust.evaluation import EvalResult

RESULT = EvalResult(score=81.5, per_class=(90.0, None, 73.0), num_images=2, seconds=0.5, details={"ap50": 90.5})


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
