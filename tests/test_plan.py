"""A suite resolved once: the plan's task, metric classes and cells are what the suite names."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_segrobust.core.errors import SuiteError
from pytest_segrobust.corruptions import REGISTRY
from pytest_segrobust.engine.plan import Plan
from pytest_segrobust.metrics import METRICS
from pytest_segrobust.suite.schema import load_suite
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
