"""A suite resolved once: the plan's task, metric classes, cells, models and datasets are what the suite names."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_segrobust.core.errors import SuiteError
from pytest_segrobust.corruptions import REGISTRY
from pytest_segrobust.engine.plan import Plan
from pytest_segrobust.engine.workbench import Workbench
from pytest_segrobust.metrics import METRICS
from pytest_segrobust.runtime.options import Options
from pytest_segrobust.suite.model_sources import MODEL_SOURCES
from pytest_segrobust.suite.schema import Suite, load_suite
from pytest_segrobust.tasks import get_task

ROOT = Path(__file__).resolve().parents[1]


def test_a_plan_resolves_the_task_metrics_and_every_cell_once() -> None:
    suite = load_suite(ROOT / "suites" / "demo-referring.yaml")
    plan = Plan.of(suite, REGISTRY)
    assert type(plan.task) is type(get_task("referring"))
    assert list(plan.metrics) == list(suite.metrics) and plan.headline is METRICS.get(suite.metric)
    assert list(plan.cells) == list(suite.corruptions)
    for name in suite.corruptions:  # the same corruption as the suite resolves, resolved once
        assert plan.corruption(name) is plan.cells[name]
        assert plan.corruption(name).name == suite.corruption(name).name
    settings = plan.settings(batch_size=4, loader_workers=1)
    assert (settings.seed, settings.batch_size, settings.limit) == (suite.seed, 4, suite.limit)
    assert settings.statistics == (suite.gate is not None) and settings.metrics == suite.metrics
    assert plan.settings().batch_size == suite.batch_size


def test_a_cell_the_suite_lacks_is_named_with_the_cells_it_has() -> None:
    plan = Plan.of(load_suite(ROOT / "suites" / "demo.yaml"), REGISTRY)
    with pytest.raises(
        SuiteError, match=r"demo.yaml: no cell 'gausian_noise' \(cells: .*did you mean 'gaussian_noise'"
    ):
        plan.corruption("gausian_noise")


def test_a_plan_resolves_each_model_with_its_source_and_each_split_s_dataset_once() -> None:
    suite = load_suite(ROOT / "suites" / "demo-shift.yaml")
    plan = Plan.of(suite, REGISTRY)
    assert list(plan.models) == [spec.name for spec in suite.models]
    for index, spec in enumerate(suite.models):
        planned = plan.model(spec.name)
        assert planned.spec is spec and planned.source is MODEL_SOURCES.get(spec.kind) and planned.index == index
        assert planned.field == f"field 'models[{index}]' ({spec.name})" and planned.described == spec.source
    assert list(plan.datasets) == ["val", "ood-easy", "ood-hard"]
    assert plan.dataset("ood-hard") == suite.dataset_spec("ood-hard")
    with pytest.raises(SuiteError, match=r"demo-shift.yaml: no split 'ood' \(splits: val, ood-easy, ood-hard\)"):
        plan.dataset("ood")
    single = Plan.of(load_suite(ROOT / "suites" / "demo.yaml"), REGISTRY)
    assert dict(single.datasets) == {None: single.suite.dataset}


def test_a_model_the_suite_lacks_is_named_with_the_models_it_has() -> None:
    plan = Plan.of(load_suite(ROOT / "suites" / "demo.yaml"), REGISTRY)
    with pytest.raises(SuiteError, match=r"demo: no model 'tiny-unett' \(models: .*tiny-unet.*\) \(did you mean 'tiny-unet'\?\)"):
        plan.model("tiny-unett")


def test_the_workbench_builds_models_and_datasets_from_its_plan(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    suite = load_suite(ROOT / "suites" / "demo.yaml")
    bench = Workbench(Options(True, False, ROOT / "suites", tmp_path, tmp_path / "report.md"))
    bench.plan(suite)

    def resolved_again(*args: object) -> None:
        raise AssertionError("resolved from the suite, not from the plan")

    monkeypatch.setattr(Suite, "model", resolved_again)
    monkeypatch.setattr(Suite, "dataset_spec", resolved_again)
    assert bench.model(suite, "tiny-unet") is bench.model(suite, "tiny-unet")
    assert len(bench.dataset(suite)) > 0
