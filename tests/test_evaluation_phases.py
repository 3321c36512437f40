"""evaluate()'s phase timer: each phase's time lands in its own slot, and timing changes no number."""

from __future__ import annotations

import time

import torch

from pytest_segrobust.corruptions import REGISTRY
from pytest_segrobust.evaluation import Phases, evaluate
from pytest_segrobust.models import as_segmentation_model
from tests.fakes import BandScenes, RedBinner

PAUSE = 0.1


class SlowBinner(RedBinner):
    """A :class:`RedBinner` that takes at least ``PAUSE`` seconds per forward pass."""

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        time.sleep(PAUSE)
        return super().forward(images)


def test_the_model_s_time_is_charged_to_predict_and_the_corruption_s_to_corrupt() -> None:
    model = as_segmentation_model(SlowBinner())
    dataset = BandScenes(size=6, height=16, width=16)
    phases = Phases()
    evaluate(model, dataset, batch_size=3, phases=phases)
    clean = dict(phases.seconds)
    evaluate(model, dataset, REGISTRY.get("gaussian_noise"), 3, batch_size=3, phases=phases)
    assert phases.images == 12
    assert clean["corrupt"] == 0 and phases.seconds["corrupt"] > 0
    assert clean["predict"] >= 2 * PAUSE and phases.seconds["predict"] >= 4 * PAUSE
    assert all(phases.seconds[name] > 0 for name in ("setup", "read", "collate", "check", "metrics", "results"))
    # Every phase but predict is fast here: the sleeps are not spread over the others.
    assert sum(phases.seconds.values()) - phases.seconds["predict"] < 4 * PAUSE


def test_timed_and_untimed_evaluations_give_the_same_results() -> None:
    model = as_segmentation_model(RedBinner(smoothing=3))
    dataset = BandScenes(size=5, height=16, width=16)
    corruption = REGISTRY.get("rotate")
    timed = evaluate(model, dataset, corruption, 2, batch_size=2, phases=Phases())
    untimed = evaluate(model, dataset, corruption, 2, batch_size=2)
    assert timed.metrics == untimed.metrics
    assert timed.statistics.keys() == untimed.statistics.keys()
    assert all((timed.statistics[k] == untimed.statistics[k]).all() for k in untimed.statistics)
