"""evaluate()'s phase timer: each phase's time lands in its own slot, and timing changes no number; the
samples it reads must have unique ids."""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import pytest
import torch

from pytest_segrobust.core.errors import DuplicateSampleError
from pytest_segrobust.corruptions import REGISTRY
from pytest_segrobust.data.sample_cache import SampleCache
from pytest_segrobust.engine import evaluation
from pytest_segrobust.engine.evaluation import EvalHooks, EvalSettings, Phases, evaluate
from pytest_segrobust.models import as_segmentation_model
from tests.fakes import BandScenes, RedBinner, RepeatedIdScenes

PAUSE = 0.1


class Clock:
    """The evaluation's clock: a microsecond per reading, and ``PAUSE`` more per forward pass of
    :class:`SlowBinner`, so that no phase's time depends on how loaded the machine is."""

    def __init__(self) -> None:
        self.now = 0.0
        self.ticks = itertools.count()

    def perf_counter(self) -> float:
        return self.now + next(self.ticks) * 1e-6


class SlowBinner(RedBinner):
    """A :class:`RedBinner` whose forward passes take ``PAUSE`` seconds on its clock."""

    def __init__(self, clock: Clock) -> None:
        super().__init__()
        self.clock = clock

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        self.clock.now += PAUSE
        return super().forward(images)


def test_the_model_s_time_is_charged_to_predict_and_the_corruption_s_to_corrupt(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = Clock()
    monkeypatch.setattr(evaluation, "time", SimpleNamespace(perf_counter=clock.perf_counter))
    model = as_segmentation_model(SlowBinner(clock))
    dataset = BandScenes(size=6, height=16, width=16)
    phases = Phases()
    evaluate(model, dataset, settings=EvalSettings.of(batch_size=3), hooks=EvalHooks(phases=phases))
    clean = dict(phases.seconds)
    evaluate(
        model,
        dataset,
        REGISTRY.get("gaussian_noise"),
        3,
        settings=EvalSettings.of(batch_size=3),
        hooks=EvalHooks(phases=phases),
    )
    assert phases.images == 12
    assert clean["corrupt"] == 0 and phases.seconds["corrupt"] > 0
    assert clean["predict"] >= 2 * PAUSE and phases.seconds["predict"] >= 4 * PAUSE
    assert all(phases.seconds[name] > 0 for name in ("setup", "read", "collate", "check", "metrics", "results"))
    # No forward pass is charged to another phase: what they add up to is the clock's readings.
    assert sum(phases.seconds.values()) - phases.seconds["predict"] < PAUSE


def test_timed_and_untimed_evaluations_give_the_same_results() -> None:
    model = as_segmentation_model(RedBinner(smoothing=3))
    dataset = BandScenes(size=5, height=16, width=16)
    corruption = REGISTRY.get("rotate")
    timed = evaluate(
        model, dataset, corruption, 2, settings=EvalSettings.of(batch_size=2), hooks=EvalHooks(phases=Phases())
    )
    untimed = evaluate(model, dataset, corruption, 2, settings=EvalSettings.of(batch_size=2))
    assert timed.metrics == untimed.metrics
    assert timed.statistics.keys() == untimed.statistics.keys()
    assert all((timed.statistics[k] == untimed.statistics[k]).all() for k in untimed.statistics)


@pytest.mark.parametrize("cache", [None, SampleCache(2**20)], ids=["read", "cached"])
def test_two_samples_with_one_id_are_an_error_naming_the_id_and_both_indices(cache: SampleCache | None) -> None:
    model = as_segmentation_model(RedBinner())
    # Across batches of 2 (samples 2 and 5 are in different ones), clean and corrupted, read or served from memory.
    for corruption, severity in ((None, 0), (REGISTRY.get("rotate"), 2)):
        with pytest.raises(
            DuplicateSampleError,
            match=r"^bands-8-32x32-0: sample_id 'bands/2' is used twice, by the samples at index 2 and 5;",
        ):
            evaluate(
                model,
                RepeatedIdScenes(),
                corruption,
                severity,
                settings=EvalSettings.of(batch_size=2),
                hooks=EvalHooks(sample_cache=cache),
            )
    assert (
        evaluate(model, RepeatedIdScenes(), settings=EvalSettings.of(limit=5)).num_images == 5
    )  # the repeat lies past the limit
