from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from pytest_segrobust import __version__
from pytest_segrobust.engine import evaluation
from pytest_segrobust.engine.clean_cache import CleanCache
from pytest_segrobust.engine.evaluation import EvalResult, evaluator_version
from pytest_segrobust.metrics import MetricResult
from pytest_segrobust.metrics.boundary_iou import BoundaryIoU
from pytest_segrobust.metrics.miou import MeanIoU
from pytest_segrobust.suite.schema import load_suite
from pytest_segrobust.tasks import get_task

SUITES = Path(__file__).parent.parent / "suites"


def key_of(*parts: str) -> str:
    """A key of the same task and metrics throughout."""
    return CleanCache.key("instance", ["map", "boundary_iou"], *parts)


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
    compute = lambda: calls.append(1) or RESULT
    key = CleanCache.key("semantic", ["miou"], "model", "data")
    assert cache.get_or_compute(key, compute) == RESULT
    assert CleanCache(tmp_path).get_or_compute(key, compute) == RESULT
    assert len(calls) == 1


def test_a_cached_result_keeps_its_first_images_own_scores(tmp_path: Path) -> None:
    # The report's worst images are picked from them: a clean result read from the cache must have them.
    scored = EvalResult(RESULT.metrics, 3, 0.5, image_scores=(97.5, math.nan, 12.25))
    key = CleanCache.key("semantic", ["miou"], "model", "data", "scored images 16")
    CleanCache(tmp_path).get_or_compute(key, lambda: scored)
    read = CleanCache(tmp_path).get_or_compute(key, lambda: pytest.fail("computed again"))
    assert read.image_scores[0] == 97.5 and math.isnan(read.image_scores[1]) and read.image_scores[2] == 12.25
    older = scored.to_json() | {"format": 2}
    older.pop("image_scores")
    (tmp_path / f"{key}.json").write_text(json.dumps(older))  # a cache written before the scores were kept
    assert CleanCache(tmp_path).get_or_compute(key, lambda: scored) is scored


def test_key_depends_on_every_part() -> None:
    assert key_of("a", "b") != key_of("a", "c")
    assert key_of("ab", "c") != key_of("a", "bc")
    assert CleanCache.key("semantic", ["miou"], "a") != CleanCache.key("instance", ["miou"], "a")
    assert CleanCache.key("semantic", ["miou", "boundary_iou"], "a") != CleanCache.key("semantic", ["miou"], "a")
    # The headline is the first metric: the same metrics in another order are another result.
    assert CleanCache.key("semantic", ["miou", "boundary_iou"], "a") != CleanCache.key("semantic", ["boundary_iou", "miou"], "a")


def test_a_corrupt_entry_is_recomputed(tmp_path: Path) -> None:
    key = key_of("m")
    (tmp_path / f"{key}.json").write_text("{truncated")
    cache = CleanCache(tmp_path)
    assert cache.get_or_compute(key, lambda: RESULT) == RESULT
    assert cache.misses == 1 and cache.hits == 0


def test_every_metric_survives_the_round_trip_in_order(tmp_path: Path) -> None:
    key = key_of("m")
    CleanCache(tmp_path).get_or_compute(key, lambda: RESULT)
    read = CleanCache(tmp_path).get_or_compute(key, lambda: None)  # type: ignore[arg-type,return-value]
    assert read == RESULT and list(read.metrics) == ["map", "boundary_iou"] and read.headline == "map"


def test_an_entry_of_the_old_format_is_recomputed(tmp_path: Path) -> None:
    key = key_of("m")
    old = {"score": 1.0, "per_class": [1.0], "num_images": 1, "seconds": 0.1, "details": {}}
    (tmp_path / f"{key}.json").write_text(json.dumps(old))
    cache = CleanCache(tmp_path)
    assert cache.get_or_compute(key, lambda: RESULT) == RESULT
    assert cache.misses == 1


def test_a_result_with_any_nan_metric_is_not_stored(tmp_path: Path) -> None:
    nan = EvalResult({"miou": MetricResult(50.0, ()), "boundary_iou": MetricResult(math.nan, ())}, 1, 0.1)
    CleanCache(tmp_path).get_or_compute(key_of("m"), lambda: nan)
    assert not list(tmp_path.glob("*.json"))


def test_the_evaluator_version_is_the_packages_the_tasks_and_each_metrics() -> None:
    assert evaluator_version("semantic", ["miou", "boundary_iou"]) == (
        f"pytest-segrobust {__version__}; task semantic 1; metric miou 1; metric boundary_iou 1"
    )


@pytest.mark.parametrize("kind", [MeanIoU, BoundaryIoU, type(get_task("semantic"))])
def test_a_new_version_of_a_metric_or_the_task_changes_the_key(kind: type, monkeypatch: pytest.MonkeyPatch) -> None:
    before = CleanCache.key("semantic", ["miou", "boundary_iou"], "model", "data")
    monkeypatch.setattr(kind, "version", "2")
    assert CleanCache.key("semantic", ["miou", "boundary_iou"], "model", "data") != before


def test_a_new_version_of_a_metric_the_result_did_not_use_keeps_its_key(monkeypatch: pytest.MonkeyPatch) -> None:
    before = CleanCache.key("semantic", ["miou"], "model", "data")
    monkeypatch.setattr(BoundaryIoU, "version", "2")
    assert CleanCache.key("semantic", ["miou"], "model", "data") == before


def test_a_new_package_version_changes_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    before = CleanCache.key("semantic", ["miou"], "model", "data")
    monkeypatch.setattr(evaluation, "__version__", "99.0")
    assert CleanCache.key("semantic", ["miou"], "model", "data") != before


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
