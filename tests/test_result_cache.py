from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path
from typing import Any

import pytest
from filelock import FileLock

from pytest_segrobust import __version__
from pytest_segrobust.core.errors import CacheWarning
from pytest_segrobust.engine import evaluation
from pytest_segrobust.engine.evaluation import EvalResult, evaluator_version
from pytest_segrobust.engine.result_cache import Pruned, ResultCache, prune
from pytest_segrobust.metrics import MetricResult
from pytest_segrobust.metrics.boundary_iou import BoundaryIoU
from pytest_segrobust.metrics.miou import MeanIoU
from pytest_segrobust.suite.schema import load_suite
from pytest_segrobust.tasks import get_task

SUITES = Path(__file__).parent.parent / "suites"


def key_of(*parts: str) -> str:
    """A key of the same task and metrics throughout."""
    return ResultCache.key("instance", ["map", "boundary_iou"], *parts)


RESULT = EvalResult(
    {
        "map": MetricResult(81.5, (90.0, None, 73.0), {"ap50": 90.5}),
        "boundary_iou": MetricResult(60.25, (None, 50.0, 70.5)),
    },
    num_images=2,
    seconds=0.5,
)


def test_computes_once_then_reads(tmp_path: Path) -> None:
    cache = ResultCache(tmp_path)
    calls = []
    compute = lambda: calls.append(1) or RESULT
    key = ResultCache.key("semantic", ["miou"], "model", "data")
    assert cache.get_or_compute(key, compute) == RESULT
    assert ResultCache(tmp_path).get_or_compute(key, compute) == RESULT
    assert len(calls) == 1


def test_a_cached_result_keeps_its_first_images_own_scores(tmp_path: Path) -> None:
    # The report's worst images are picked from them: a clean result read from the cache must have them.
    scored = EvalResult(RESULT.metrics, 3, 0.5, image_scores=(97.5, math.nan, 12.25))
    key = ResultCache.key("semantic", ["miou"], "model", "data", "scored images 16")
    ResultCache(tmp_path).get_or_compute(key, lambda: scored)
    read = ResultCache(tmp_path).get_or_compute(key, lambda: pytest.fail("computed again"))
    assert read.image_scores[0] == 97.5 and math.isnan(read.image_scores[1]) and read.image_scores[2] == 12.25
    older = scored.to_json() | {"format": 2}
    older.pop("image_scores")
    (tmp_path / f"{key}.json").write_text(json.dumps(older))  # a cache written before the scores were kept
    with pytest.warns(CacheWarning, match="entry format 2, expected 1"):
        assert ResultCache(tmp_path).get_or_compute(key, lambda: scored) is scored


def test_key_depends_on_every_part() -> None:
    assert key_of("a", "b") != key_of("a", "c")
    assert key_of("ab", "c") != key_of("a", "bc")
    assert ResultCache.key("semantic", ["miou"], "a") != ResultCache.key("instance", ["miou"], "a")
    assert ResultCache.key("semantic", ["miou", "boundary_iou"], "a") != ResultCache.key("semantic", ["miou"], "a")
    # The headline is the first metric: the same metrics in another order are another result.
    assert ResultCache.key("semantic", ["miou", "boundary_iou"], "a") != ResultCache.key("semantic", ["boundary_iou", "miou"], "a")


def test_a_corrupt_entry_is_recomputed_with_a_warning_naming_it(tmp_path: Path) -> None:
    key = key_of("m")
    path = tmp_path / f"{key}.json"
    path.write_text("{truncated")
    cache = ResultCache(tmp_path)
    with pytest.warns(CacheWarning, match=f"entry {path} is not used: not JSON"):
        assert cache.get_or_compute(key, lambda: RESULT) == RESULT
    assert cache.misses["clean"] == 1 and cache.hits["clean"] == 0
    assert ResultCache(tmp_path).get_or_compute(key, lambda: pytest.fail("computed again")) == RESULT


@pytest.mark.parametrize(
    ("edit", "why"),
    [
        (lambda entry: entry["result"].update(num_images=3), "its content does not match its digest"),
        (lambda entry: entry.update(key="another"), "it holds the entry of 'another'"),
        (lambda entry: entry.update(format=0), "entry format 0, expected 1"),
    ],
)
def test_an_entry_that_is_not_what_it_says_is_never_trusted(tmp_path: Path, edit: Any, why: str) -> None:
    key = key_of("m")
    ResultCache(tmp_path).get_or_compute(key, lambda: RESULT, "cell")
    path = tmp_path / f"{key}.json"
    entry = json.loads(path.read_text())
    edit(entry)
    path.write_text(json.dumps(entry))
    cache = ResultCache(tmp_path)
    with pytest.warns(CacheWarning, match=re.escape(why)):
        cache.get_or_compute(key, lambda: RESULT, "cell")
    assert cache.misses == {"clean": 0, "cell": 1}


def test_pruning_removes_the_entries_used_longest_ago_until_the_folder_fits(tmp_path: Path) -> None:
    cache = ResultCache(tmp_path)
    keys = [key_of(name) for name in "abc"]
    for age, key in enumerate(keys):
        cache.get_or_compute(key, lambda: RESULT, "cell")
        os.utime(tmp_path / f"{key}.json", (1_000_000 - age, 1_000_000 - age))  # a is the newest, c the oldest
    cache.get_or_compute(keys[2], lambda: pytest.fail("computed again"), "cell")  # a read: c is the newest now
    size = (tmp_path / f"{keys[0]}.json").stat().st_size
    assert prune(tmp_path, 3 * size) == Pruned(0, 0, 3 * size)
    assert prune(tmp_path, 2 * size) == Pruned(1, size, 2 * size)
    assert sorted(path.stem for path in tmp_path.glob("*.json")) == sorted(keys[::2])
    assert not (tmp_path / f"{keys[1]}.json.lock").exists()
    with FileLock(str(tmp_path / f"{keys[0]}.json.lock")):  # another process holds the oldest: it is kept
        assert prune(tmp_path, 0) == Pruned(1, size, size)
    assert [path.stem for path in tmp_path.glob("*.json")] == [keys[0]]


def test_a_kind_outside_clean_and_cell_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="one of clean, cell, not 'other'"):
        ResultCache(tmp_path).get_or_compute(key_of("m"), lambda: RESULT, "other")


def test_every_metric_survives_the_round_trip_in_order(tmp_path: Path) -> None:
    key = key_of("m")
    ResultCache(tmp_path).get_or_compute(key, lambda: RESULT)
    read = ResultCache(tmp_path).get_or_compute(key, lambda: None)  # type: ignore[arg-type,return-value]
    assert read == RESULT and list(read.metrics) == ["map", "boundary_iou"] and read.headline == "map"


def test_an_entry_of_the_old_format_is_recomputed(tmp_path: Path) -> None:
    key = key_of("m")
    old = {"score": 1.0, "per_class": [1.0], "num_images": 1, "seconds": 0.1, "details": {}}
    (tmp_path / f"{key}.json").write_text(json.dumps(old))
    cache = ResultCache(tmp_path)
    with pytest.warns(CacheWarning, match="entry format None, expected 1"):
        assert cache.get_or_compute(key, lambda: RESULT) == RESULT
    assert cache.misses["clean"] == 1


def test_a_result_with_any_nan_metric_is_not_stored(tmp_path: Path) -> None:
    nan = EvalResult({"miou": MetricResult(50.0, ()), "boundary_iou": MetricResult(math.nan, ())}, 1, 0.1)
    ResultCache(tmp_path).get_or_compute(key_of("m"), lambda: nan)
    assert not list(tmp_path.glob("*.json"))


def test_the_evaluator_version_is_the_packages_the_tasks_and_each_metrics() -> None:
    assert evaluator_version("semantic", ["miou", "boundary_iou"]) == (
        f"pytest-segrobust {__version__}; task semantic 1; metric miou 1; metric boundary_iou 1"
    )


@pytest.mark.parametrize("kind", [MeanIoU, BoundaryIoU, type(get_task("semantic"))])
def test_a_new_version_of_a_metric_or_the_task_changes_the_key(kind: type, monkeypatch: pytest.MonkeyPatch) -> None:
    before = ResultCache.key("semantic", ["miou", "boundary_iou"], "model", "data")
    monkeypatch.setattr(kind, "version", "2")
    assert ResultCache.key("semantic", ["miou", "boundary_iou"], "model", "data") != before


def test_a_new_version_of_a_metric_the_result_did_not_use_keeps_its_key(monkeypatch: pytest.MonkeyPatch) -> None:
    before = ResultCache.key("semantic", ["miou"], "model", "data")
    monkeypatch.setattr(BoundaryIoU, "version", "2")
    assert ResultCache.key("semantic", ["miou"], "model", "data") == before


def test_a_new_package_version_changes_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    before = ResultCache.key("semantic", ["miou"], "model", "data")
    monkeypatch.setattr(evaluation, "__version__", "99.0")
    assert ResultCache.key("semantic", ["miou"], "model", "data") != before


def test_the_workbench_keys_a_clean_result_by_the_metrics_version(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_segrobust.engine.workbench import Workbench
    from pytest_segrobust.runtime.options import Options

    suite = load_suite(SUITES / "demo.yaml")
    bench = Workbench(Options(True, False, SUITES, tmp_path, tmp_path / "report.md", cache_dir=tmp_path / "cache"))
    model = bench.model(suite, "tiny-unet")
    before = bench._fingerprint(suite, "tiny-unet", model, None)
    assert before is not None and bench._fingerprint(suite, "tiny-unet", model, None) == before
    monkeypatch.setattr(MeanIoU, "version", "2")
    assert bench._fingerprint(suite, "tiny-unet", model, None) != before


def test_a_cells_key_is_its_clean_results_and_its_corruptions_severity_and_seed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dataclasses import replace

    from pytest_segrobust.engine.workbench import Workbench
    from pytest_segrobust.runtime.options import Options
    from pytest_segrobust.store.baselines import CellKey

    suite = load_suite(SUITES / "demo.yaml")
    bench = Workbench(Options(True, False, SUITES, tmp_path, tmp_path / "report.md", cache_dir=tmp_path / "cache"))
    name = suite.corruptions[0]
    corruption = bench.plan(suite).corruption(name)
    cell = CellKey(suite.name, "tiny-unet", name, 1, None)
    key = bench._cell_key(suite, cell, corruption)
    assert key is not None and bench._cell_key(suite, cell, corruption) == key
    others = {
        bench._cell_key(suite, replace(cell, severity=2), corruption),
        bench._cell_key(replace(suite, seed=suite.seed + 1), cell, corruption),
        bench._cell_key(suite, cell, type(corruption)(corruption.name, corruption.category, type(corruption.table)(corruption.table.rows[::-1]))),
    }
    assert key not in others and len(others) == 3
    monkeypatch.setattr(MeanIoU, "version", "2")  # what makes the clean result stale makes its cells stale
    bench._clean_keys.clear()
    assert bench._cell_key(suite, cell, corruption) != key
